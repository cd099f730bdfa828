# tpsp — the two commands a newcomer needs are `make demo` and `make test`.
JOBS ?= $(shell nproc)
BUILD ?= build
ASAN_BUILD ?= build-asan
NOGLOO_BUILD ?= build-nogloo
CMAKE_FLAGS ?=

.PHONY: all deps full-repo solutions-lib autograder build build-asan test test-plain test-asan test-nogloo demo bench bench-grade compare-etp docs timeline release format clean

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

## make test: first the build without Gloo (test-nogloo), then plain and ASan+UBSan configurations with
## every test run in both (the last lines are ctest's summary).
test: test-nogloo test-plain test-asan

## A learner copy (make release) ships no tests/: say so instead of passing on nothing.
full-repo:
	@if [ -f RELEASE ]; then echo "make test: this learner copy holds no project tests (tests/ is not shipped); grade your labs with ./check --all"; exit 2; fi

test-plain: full-repo build
	cd $(BUILD) && ctest --output-on-failure -j $(JOBS)

test-asan: full-repo build-asan
	cd $(ASAN_BUILD) && ASAN_OPTIONS=detect_leaks=0 UBSAN_OPTIONS=print_stacktrace=1 ctest --output-on-failure -j $(JOBS)

## make test-nogloo: a build configured without Gloo (-DTPSP_WITH_GLOO=OFF, in $(NOGLOO_BUILD)), where
## tpsp-run, tpsp-train and the demo carry the ranks through the relay: no binary may reference Gloo,
## and the demo must print MATCH (tools/test_nogloo.sh).
test-nogloo: full-repo deps
	cmake -S . -B $(NOGLOO_BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPSP_WITH_GLOO=OFF $(CMAKE_FLAGS) >/dev/null
	cmake --build $(NOGLOO_BUILD) -j $(JOBS) --target tpsp-demo tpsp-train tpsp-run -- --no-print-directory
	tools/test_nogloo.sh $(NOGLOO_BUILD)

## make demo: build, then train the TP+SP GPT and the single-process reference on Genesis and compare.
## DEVICE=cuda trains the parallel run on the GPU (a build where nvcc is found; the ranks share one GPU
## through host memory unless DEMO_ARGS="--backend nccl"), DEVICE=cuda-emulated on the GPU code paths
## without a GPU. MODEL=llama trains the Llama block (RMSNorm, SwiGLU, RoPE, grouped-query attention with
## heads/2 key/value groups; DEMO_ARGS="--query-groups 1" for fewer groups than tp). MODEL=moe: the Llama block
## with MoE layers (4 experts, top-2) whose experts are split by expert parallelism over the same ranks (--ep 2).
demo: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target tpsp-demo tpsp-train tpsp-run $(if $(filter cuda,$(DEVICE)),tpsp-train-cuda) -- --no-print-directory
	$(BUILD)/bin/tpsp-demo $(if $(DEVICE),--device $(DEVICE)) $(if $(MODEL),--model $(MODEL)) $(DEMO_ARGS)

## make bench: build the benchmarks and run bench/run_bench.py: the engine against its PyTorch peers
## (MLP step, GPT step, Llama step), tp=2/tp=1 scaling, collective bandwidth (docs/performance.md; 13 minutes on 2
## idle cores, 22–30 on loaded ones). Not part of make test. BENCH_ARGS=--quick for a smoke run, --json FILE for the raw results.
bench: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target bench_mlp_step bench_gpt_step bench_collectives bench_overlap -- --no-print-directory
	/usr/bin/python3 bench/run_bench.py --build $(BUILD) $(BENCH_ARGS)

## make bench-grade: ./grade over the 30-submission synthetic class (root; bench/bench_grade.sh).
bench-grade: build
	bench/bench_grade.sh $(BENCH_LABS)

## make docs: every figure of the lessons, into docs/lessons/figures/ (needs /usr/bin/python3 with
## python3-matplotlib): lesson 03's activation memory per rank and one layer's communication bytes
## against tp, SP on and off (tpsp-capacity → tools/plot_capacity.py); the shard layouts of one layer's
## weights and activations at tp=2 and of the Llama block at tp=4 with 2 key/value groups (tpsp-shards →
## tools/plot_shards.py); and the timelines of make timeline.
FIGURES ?= docs/lessons/figures
## make compare-etp: lab06's comparison, one MoE layer at ETP = 1 against ETP = 2 on 4 forked ranks (bench/bench_moe_etp.cpp:
## 8 experts, top-2, h=4096, expert ffn=1408): bytes per rank of each collective, the expert GEMMs' [M, N, K] and their
## time here. In a learner copy it runs the learner's lab06 code. COMPARE_ARGS adds options (--help lists them).
compare-etp: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target bench_moe_etp -- --no-print-directory
	OPENBLAS_NUM_THREADS=1 $(BUILD)/bench/bench_moe_etp $(COMPARE_ARGS)

docs: timeline
	cmake --build $(BUILD) -j $(JOBS) --target tpsp-capacity tpsp-shards -- --no-print-directory
	/usr/bin/python3 tools/plot_capacity.py $(BUILD)/bin/tpsp-capacity $(FIGURES)
	/usr/bin/python3 tools/plot_shards.py $(BUILD)/bin/tpsp-shards $(FIGURES)
	/usr/bin/python3 tools/plot_moe_etp.py $(BUILD)/bin/tpsp-capacity $(FIGURES)

## make timeline: timelines drawn by tools/plot_timeline.py from the recorder's Chrome traces (one lane
## per rank for compute and for communication):
##  lab04_timeline.png       one step of a TP+SP linear pair at TPSP_LINK=2GB/s, serial and with
##                           tp_comm_overlap (bench_overlap --trace);
##  layer_timeline_tp2.png   one training step of a one-layer GPT at tp=2 (h=512, 8 heads, s=512, V=1024),
##                           TP and TP+SP (bench_gpt_step --trace), the transformer layer's forward and
##                           backward framed.
TIMELINE_PNG ?= $(FIGURES)/lab04_timeline.png
LAYER_TIMELINE_PNG ?= $(FIGURES)/layer_timeline_tp2.png
LAYER_STEP = --tp 2 --layers 1 --hidden 512 --heads 8 --seq 512 --vocab 1024 --steps 1 --warmup 1 --span-steps 0 --no-gemm
timeline: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target bench_overlap bench_gpt_step -- --no-print-directory
	rm -rf $(BUILD)/timeline
	$(BUILD)/bench/bench_overlap --steps 3 --trace $(BUILD)/timeline
	mkdir -p $(dir $(TIMELINE_PNG)) $(dir $(LAYER_TIMELINE_PNG))
	/usr/bin/python3 tools/plot_timeline.py $(TIMELINE_PNG) "serial (tp_comm_overlap off)=$(BUILD)/timeline/serial" \
		"overlapped (tp_comm_overlap on)=$(BUILD)/timeline/overlap"
	$(BUILD)/bench/bench_gpt_step $(LAYER_STEP) --trace $(BUILD)/timeline/layer-tp
	$(BUILD)/bench/bench_gpt_step $(LAYER_STEP) --sp --trace $(BUILD)/timeline/layer-tpsp
	/usr/bin/python3 tools/plot_timeline.py $(LAYER_TIMELINE_PNG) \
		"TP, tp=2 (sequence_parallel off)=$(BUILD)/timeline/layer-tp/step" \
		"TP+SP, tp=2 (sequence_parallel on)=$(BUILD)/timeline/layer-tpsp/step"

## make labNN: build your code for lab NN (labs/labNN_*/) into the checker; then run ./check labNN
## (./check rebuilds by itself). make labs: every lab of the registry labs/labs.json.
lab%: deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target $@ -- --no-print-directory

## make release: write a learner copy (solutions stripped to the skeletons) to $(RELEASE_DIR).
## With SOLUTIONS_LIB=1 the copy also gets the prebuilt solutions of the labs LABS names, every lab without
## it (make solutions-lib):
## a learner can then do any lab alone; without it the labs build on each other.
RELEASE_DIR ?= out/release/tpsp
release: full-repo $(if $(SOLUTIONS_LIB),solutions-lib)
	tools/make_release.sh $(RELEASE_DIR) $(if $(SOLUTIONS_LIB),--with-solutions-lib out/solutions/libtpsp_lab_solutions.a)

## make autograder LAB=lab02 [RELEASED=lab00,lab01] [WEIGHTS=weights.json] [TP=1,2] [NO_DP=1]: the
## Gradescope autograder of one lab, out/autograder/LAB.zip (docs/grading.md, "Gradescope"); RELEASED:
## the labs whose solutions are linked beneath it (default: every lab before LAB; "-" for none); TP and
## NO_DP: fewer layouts per run (default: tp = 1 … 4 and the dp = 2 × tp = 2 run).
autograder: full-repo
	$(if $(LAB),,$(error make autograder needs LAB=labNN))
	TPSP_AUTOGRADER_TP=$(TP) TPSP_AUTOGRADER_NO_DP=$(NO_DP) \
	  tools/make_autograder.sh $(LAB) $(or $(RELEASED),before) out/autograder/$(LAB).zip $(WEIGHTS)

## make solutions-lib [LABS=lab00,lab01]: the solutions of the labs you release (every lab without LABS)
## compiled into out/solutions/libtpsp_lab_solutions.a, with out/solutions/released.json naming them (for
## a learner copy: it takes those labs from there and the others from the learner's files; the archive
## links only with the same compiler and library versions, e.g. a course's Debian 12).
solutions-lib: full-repo deps
	cmake -S . -B $(BUILD) -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPSP_SOLUTIONS_LIB_LABS=$(LABS) $(CMAKE_FLAGS) >/dev/null
	cmake --build $(BUILD) -j $(JOBS) --target tpsp_lab_solutions -- --no-print-directory
	rm -rf out/solutions && mkdir -p out/solutions
	cp $(BUILD)/libtpsp_lab_solutions.a $(BUILD)/released.json out/solutions/
	@echo "out/solutions: the solutions of $$(/usr/bin/python3 -c 'import json; print(", ".join(json.load(open("out/solutions/released.json"))["labs"]))')"

format:
	find engine reference checkers tests tools bench -name '*.h' -o -name '*.cpp' | xargs clang-format -i

clean:
	rm -rf $(BUILD) $(ASAN_BUILD)
