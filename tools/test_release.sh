#!/usr/bin/env bash
# Test of `make release`: the learner copy is a complete product that grades itself.
#  1. It holds no solution (no lab-owned engine file, no solution block) and no tests/; its README
#     shows the copy's set-up and hides the full repository's.
#  2. As shipped (every lab a skeleton) ./check fails cleanly with "not implemented yet", the TODO's
#     contract (from the shipped lab_todos.json) and the command that prints the task's hint, which
#     works (every lab has its HINTS.md), and ./check --solution is refused in one line; the
#     prediction templates ship, not filled in.
#  2b. lab01 alone, then lab01 and lab02 done: ./check prints the summary lines labs/README.md quotes.
#  3. A learner who did only lab03: lab03's own scenarios pass; the ones that need lab01/lab02 code
#     say NEEDS and name it; make demo says in one line that the labs are not finished.
#  3b. The same learner also did lab05: its own scenarios pass, the Llama layer's say NEEDS lab01.
#  4. The same learner with the instructor's prebuilt solutions (solutions/): lab03 and lab05 pass
#     alone, ./check --solution works. 4b: with only lab00-lab02's solutions released (released.json)
#     lab03 and lab05 still pass, lab04 (unreleased, a skeleton) stops at its TODOs needing no other
#     lab, and --solution is refused for lab03 and works for lab02.
#  5. A perfect learner (the engine's solutions typed into labs/): ./check --all passes every run and
#     the demo's TP+SP run equals the reference, for the GPT-2 and the Llama block.
# Built at -O0 (the quickest build). Usage: test_release.sh SOLUTIONS_LIB (make solutions-lib's archive)
set -euo pipefail
solutions_lib=$(realpath "${1:?usage: test_release.sh SOLUTIONS_LIB}")
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
# The copy compiles with the same flags as the full build (RelWithDebInfo), so with ccache
# (CMakeLists.txt: TPSP_CCACHE) its engine files are cache hits of the full build's.
work=$(mktemp -d /tmp/tpsp-release-XXXXXX)
trap 'rm -rf "$work"' EXIT
fail() { echo "FAIL: $*"; exit 1; }
cd "$top"
tools/make_release.sh "$work/tpsp" >/dev/null
lab_files=$(/usr/bin/python3 tools/strip_solutions.py --lab-files)
copy_solutions() {  # copy_solutions LAB...: the engine's solution files of those labs into the copy's labs/
  for lab in "$@"; do
    while read -r l engine skeleton; do
      [ "$l" = "$lab" ] && cp "$top/$engine" "$work/tpsp/$skeleton"
    done <<<"$lab_files"
  done
  return 0
}
cd "$work/tpsp"

echo "== 1. what the copy holds"
test -f RELEASE || fail "no RELEASE marker"
! grep -rqE '^[[:space:]]*// (BEGIN|END) SOLUTION[[:space:]]*$' --include='*.cpp' --include='*.h' . || fail "solution block"
while read -r _ engine _; do [ ! -e "$engine" ] || fail "$engine (a solution) is in the copy"; done <<<"$lab_files"
[ ! -e tests ] && [ ! -e checkers/mutants ] || fail "tests/ or checkers/mutants/ shipped"
! grep -q '<!--' README.md || fail "README keeps a full-repo/learner-copy marker"
! grep -q 'make test' README.md || fail "README of the copy mentions make test"
grep -q 'learner copy' README.md || fail "README does not say it is a learner copy"

echo "== 2. as shipped"
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPSP_WITH_CUDA=OFF >/dev/null
set +e
out=$(./check lab03 --tp 2 --seed 3 2>&1); code=$?
set -e
printf '%s\n' "$out" | tail -n 5
[ "$code" -eq 1 ] || fail "./check of the skeletons: expected exit 1, got $code"
grep -q 'not implemented yet: lab03' <<<"$out" || fail "no 'not implemented yet' guidance"
# The TODO's contract is quoted from the shipped checkers/lab_todos.json (the skeleton names the task only).
grep -Eq 'not implemented yet: lab03 [^:]+: .{40,} \(labs/lab03_sequence_parallel/' <<<"$out" ||
  fail "the TODO's contract is not quoted"
grep -q 'stuck? ./check lab03 --hint ' <<<"$out" || fail "no pointer to the task's hint"
for d in labs/lab[0-9][0-9]_*/; do [ -f "$d/HINTS.md" ] || fail "$d has no HINTS.md"; done
hint=$(./check lab03 --hint seq 2>&1) && grep -q 'hint for "lab03 sequence_parallel grads"' <<<"$hint" ||
  fail "./check lab03 --hint seq in the copy: $hint"
grep -Eq '^0 passed, [0-9]+ failed, [1-9][0-9]* not implemented yet' <<<"$out" || fail "no summary line"
grep -q '^prediction lab03: not filled in yet' <<<"$out" || fail "no line on lab03's prediction template"
set +e
out=$(./check lab01 --predict 2>&1); code=$?  # the templates ship; a prediction runs no code
set -e
[ "$code" -eq 1 ] && grep -q '^prediction lab01: not filled in yet$' <<<"$out" || fail "./check lab01 --predict: $out"
set +e
out=$(./check lab01 --solution 2>&1); code=$?
set -e
[ "$code" -eq 2 ] && grep -q 'does not hold' <<<"$out" || fail "--solution not refused in one line: $out"

echo "== 2b. lab01, then lab01 and lab02 done: the summaries labs/README.md quotes, exactly"
# labs/README.md's table row "| lab01 | \`./check lab01\` | \`48 passed, 0 failed\` |" is what the copy
# prints: a count that drifts from the checker fails here. Both pass whole with no later lab written: a
# lab's runs need only its own and earlier labs' code.
cp -r labs "$work/skeletons"
documented() { grep -E "^\| $1 \| \`./check $2\`" labs/README.md | sed -E 's/.*\| `([^`]*)` \|$/\1/'; }
copy_solutions lab01
out=$(./check lab01 --seed 4 2>&1) || fail "./check lab01 with lab01 alone: $(tail -n 3 <<<"$out")"
want=$(documented lab01 lab01)
grep -qxF "$want" <<<"$out" || fail "./check lab01 alone: labs/README.md says '$want', the copy: $(tail -n 1 <<<"$out")"
copy_solutions lab02
out=$(./check lab02 --seed 4 2>&1) || fail "./check lab02 without lab03: $(tail -n 3 <<<"$out")"
want=$(documented "lab01, lab02" lab02)
grep -qxF "$want" <<<"$out" || fail "./check lab02 without lab03: labs/README.md says '$want', the copy: $(tail -n 1 <<<"$out")"
echo "lab02: $want"
rm -rf labs && cp -r "$work/skeletons" labs

echo "== 3. only lab03 done"
copy_solutions lab03
set +e
out=$(./check lab03 --seed 4 2>&1); code=$?
set -e
printf '%s\n' "$out" | grep -E 'NEEDS|needs|passed' | head -n 8
[ "$code" -eq 1 ] || fail "expected exit 1 (runs need other labs), got $code"
want=$(documented lab03 lab03)
grep -qxF "$want" <<<"$out" || fail "./check lab03 alone: labs/README.md says '$want', the copy: $(tail -n 1 <<<"$out")"
grep -q 'needs lab0[12] ' <<<"$out" || fail "no 'needs labNN' line"
! grep -q 'FAIL' <<<"$out" || fail "a run failed instead of saying NEEDS"
set +e
out=$(cmake --build build --target tpsp-demo tpsp-train >/dev/null && build/bin/tpsp-demo --steps 2 --out "$work/demo" 2>&1); code=$?
set -e
[ "$code" -eq 2 ] && grep -q 'not finished yet' <<<"$out" || fail "demo with unfinished labs: exit $code: $(tail -n 3 <<<"$out")"

echo "== 3b. lab03 and lab05 done: the Llama layer needs lab01's linear layers"
copy_solutions lab05
set +e
out=$(./check lab05 --seed 4 2>&1); code=$?
set -e
printf '%s\n' "$out" | tail -n 1
[ "$code" -eq 1 ] || fail "./check lab05 without lab01: expected exit 1, got $code"
grep -Eq '^[1-9][0-9]* passed, 0 failed, [1-9][0-9]* need another lab.s code' <<<"$out" || fail "lab05's own scenarios"
grep -q 'needs lab01 ' <<<"$out" || fail "no 'needs lab01' line for the Llama layer"
! grep -q 'FAIL' <<<"$out" || fail "a lab05 run failed instead of saying NEEDS"

echo "== 4. only lab03 (and lab05) done, with the prebuilt solutions"
mkdir -p solutions && cp "$solutions_lib" solutions/libtpsp_lab_solutions.a
cmake -S . -B build >/dev/null
set +e
out=$(./check lab03 --seed 4 2>&1); code=$?
set -e
printf '%s\n' "$out" | tail -n 1
[ "$code" -eq 0 ] && grep -Eq '^[1-9][0-9]* passed, 0 failed$' <<<"$out" || fail "lab03 with prebuilt solutions"
out=$(./check lab05 --seed 4 2>&1) || fail "lab05 with prebuilt solutions: $(tail -n 5 <<<"$out")"
out=$(./check lab01 --solution --tp 2 --no-dp --seed 4 2>&1) || fail "--solution with prebuilt solutions: $out"
rm -rf solutions

echo "== 4b. the same learner at lab03's deadline: only lab00-lab02's solutions released"
# make solutions-lib LABS=lab00,lab01,lab02 writes such an archive; here its members are taken from the
# full one (the same objects) so that the test needs no second configuration of the full repository.
mkdir -p solutions "$work/ar" && (cd "$work/ar" && ar x "$solutions_lib")
members=()
while read -r l engine skeleton; do
  case $l in lab00 | lab01 | lab02) members+=("$work/ar/$(basename "$engine").o") ;; esac
done <<<"$lab_files"
ar rcs solutions/libtpsp_lab_solutions.a "${members[@]}"
echo '{"labs": ["lab00", "lab01", "lab02"]}' >solutions/released.json
cmake -S . -B build >/dev/null
out=$(./check lab03 --seed 4 2>&1) || fail "lab03 with lab00-lab02 released: $(tail -n 5 <<<"$out")"
grep -Eq '^[1-9][0-9]* passed, 0 failed$' <<<"$out" || fail "lab03 with lab00-lab02 released: $(tail -n 1 <<<"$out")"
out=$(./check lab05 --seed 4 2>&1) || fail "lab05 with lab00-lab02 released: $(tail -n 5 <<<"$out")"
set +e
out=$(./check lab04 --seed 4 --tp 2 --no-dp 2>&1); code=$?
set -e
printf '%s\n' "$out" | tail -n 1
[ "$code" -eq 1 ] && grep -Eq '^0 passed, 0 failed, [1-9][0-9]* not implemented yet$' <<<"$out" ||
  fail "lab04 (a skeleton, not released) must stop at its TODOs and need no other lab: $(tail -n 1 <<<"$out")"
set +e
out=$(./check lab03 --solution 2>&1); code=$?
set -e
[ "$code" -eq 2 ] && grep -q "lab03's solution is not released yet" <<<"$out" ||
  fail "./check lab03 --solution with lab03 unreleased: exit $code: $out"
out=$(./check lab02 --solution --tp 2 --no-dp --seed 4 2>&1) || fail "--solution of a released lab: $(tail -n 5 <<<"$out")"
rm -rf solutions
cmake -S . -B build >/dev/null

echo "== 5. a perfect learner"
copy_solutions $(awk '{print $1}' <<<"$lab_files" | sort -u)
set +e
out=$(./check --all --seed 5 2>&1); code=$?
set -e
printf '%s\n' "$out" | tail -n 2
[ "$code" -eq 0 ] && grep -Eq '^[1-9][0-9]* passed, 0 failed$' <<<"$out" || fail "./check --all of the perfect learner"
want=$(documented all --all)
grep -qxF "$want" <<<"$out" || fail "./check --all: labs/README.md says '$want', the copy: $(tail -n 1 <<<"$out")"
cmake --build build --target tpsp-demo tpsp-train >/dev/null
out=$(build/bin/tpsp-demo --steps 3 --out "$work/demo" 2>&1) || fail "demo: $(tail -n 5 <<<"$out")"
grep -q 'verdict: MATCH' <<<"$out" || fail "demo verdict"
out=$(build/bin/tpsp-demo --model llama --steps 3 --out "$work/demo-llama" 2>&1) || fail "llama demo: $(tail -n 5 <<<"$out")"
grep -q 'verdict: MATCH' <<<"$out" || fail "llama demo verdict"
echo "learner copy: no solutions, grades itself (skeletons, lab03 only, lab05 without lab01, with prebuilt solutions, every lab), demo works (GPT-2 and Llama blocks)"
