# tpsp — the two commands a newcomer needs are `make demo` and `make test`.
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
CMAKE_FLAGS ?=

.PHONY: all deps full-repo build build-asan test test-plain test-asan demo labs lab00 lab01 lab02 lab03 release format clean

all: build

## make deps: install the missing Debian packages (silent when all are there; TPSP_SKIP_DEPS=1 skips it).
## Every target that runs cmake depends on it, so one make call checks once.
deps:
	@tools/install_deps.sh

build: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) -- --no-print-directory

build-asan: deps
	cmake -S . -B $(ASAN_BUILD) -DCMAKE_BUILD_TYPE=Debug -DTPSP_SANITIZE=ON $(CMAKE_FLAGS) >/dev/null
	cmake --build $(ASAN_BUILD) -j $(JOBS) -- --no-print-directory

## make test: build plain and ASan+UBSan configurations and run every test in both.
test: test-plain test-asan

## A learner copy (make release) ships no tests/: say so instead of passing on nothing.
full-repo:
	@if [ -f RELEASE ]; then echo "make test: this learner copy holds no project tests (tests/ is not shipped); grade your labs with ./check --all"; exit 2; fi

test-plain: full-repo build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: full-repo build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

## make demo: build, then train the TP+SP GPT and the single-process reference on Genesis and compare.
demo: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target tpsp-demo tpsp-train tpsp-run -- --no-print-directory
	$(BUILD)/bin/tpsp-demo $(DEMO_ARGS)

## make labNN: build your code for lab NN (labs/labNN_*/) into the checker; then run ./check labNN.
lab00 lab01 lab02 lab03: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target $@ -- --no-print-directory

labs: lab00 lab01 lab02 lab03

## make release: write a learner copy (solutions stripped to the skeletons) to $(RELEASE_DIR).
RELEASE_DIR ?= out/release/tpsp
release: full-repo
	tools/make_release.sh $(RELEASE_DIR)

format:
	find engine reference checkers tests tools bench -name '*.h' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
