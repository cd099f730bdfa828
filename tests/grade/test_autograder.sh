#!/usr/bin/env bash
# tests/grade/test_autograder.sh KIT — the Gradescope autograder (make autograder) for lab01 with
# lab00's solution released, run as Gradescope runs it, in a scratch folder laid out as /autograder:
#  - the zip holds run_autograder, setup.sh, a learner copy with no lab's solution, and lab00's solution
#    only (not lab01's, not a later lab's);
#  - in a container without namespaces (TPSP_AUTOGRADER_NO_NAMESPACES=1): the solution of lab01 uploaded
#    as two bare files scores full marks, the skeletons 0, two attacks of tests/grade/class (an #include
#    of the engine's solution, g forged from an all_gather) 0, a mutant (g missing) less than full, and
#    results.json says which defences were off;
#  - where namespaces work: the solution scores full marks through ./grade's sandbox.
# The grading kit is the build's (TPSP_AUTOGRADER_KIT): setup.sh's cmake build of the copy is not run
# here (CI time); its commands are those of the learner-copy test. Needs root.
set -euo pipefail
cd "$(dirname "$0")/../.."
kit=$(realpath "$1")
[[ "$(id -u)" == 0 ]] || { echo "FAIL: the autograder runs as root (Gradescope's does)"; exit 1; }
W=$(mktemp -d /tmp/tpsp-autograder-test.XXXXXX)
trap 'rm -rf "$W"' EXIT
# The compiler cache of these runs: the builds run as nobody, so it and the path to it must be theirs to
# use (a build tree's cache may sit under a folder nobody can enter, as a fresh CI clone's does).
chmod 755 "$W" && mkdir "$W/ccache" && chown 65534:65534 "$W/ccache"
ccache=$W/ccache
fail() { echo "FAIL: $*"; exit 1; }
tools/make_autograder.sh lab01 lab00 "$W/lab01.zip"
mkdir -p "$W/ag/source"
/usr/bin/python3 -c 'import sys, zipfile
with zipfile.ZipFile(sys.argv[1]) as z:
    for m in z.infolist():
        z.extract(m, sys.argv[2])
        import os; os.chmod(os.path.join(sys.argv[2], m.filename), (m.external_attr >> 16) & 0o777 or 0o644)' \
  "$W/lab01.zip" "$W/ag/source"
src=$W/ag/source
[ -x "$src/run_autograder" ] && [ -x "$src/setup.sh" ] || fail "run_autograder and setup.sh must be executable"
bash -n "$src/setup.sh" && bash -n "$src/run_autograder"
# The instructor's knob for the runs' sizes: tp = 2 without the dp run (CI time; the default is every layout).
/usr/bin/python3 -c 'import json, sys; p = sys.argv[1]; c = json.load(open(p)); c.update(tp="2", no_dp=True)
json.dump(c, open(p, "w"))' "$src/autograder.json"
[ "$(cd "$src/released" && find . -type f | sort)" = "./lab00_collectives/ring_collectives.cpp" ] ||
  fail "released/ must hold lab00's solution only: $(cd "$src/released" && find . -type f)"
! grep -rlE '^[[:space:]]*// (BEGIN|END) SOLUTION' "$src/tpsp" --include='*.cpp' || fail "a solution in the copy"
for f in $(/usr/bin/python3 tools/strip_solutions.py --lab-files | awk '{print $2}'); do
  [ ! -e "$src/tpsp/$f" ] || fail "the copy holds the engine's $f"
done
# The run_autograder of the zip, with the paths of this scratch root.
sed -e "s| /autograder/source/| $W/ag/source/|" -e "s|--root /autograder|--root $W/ag|" "$src/run_autograder" >"$W/run_autograder" && chmod +x "$W/run_autograder"
/usr/bin/python3 -B tests/grade/class/make_class.py "$W/class" --size small >/dev/null
grade() {  # grade NAME MODE: run_autograder on submission folder $W/subs/NAME; prints the score
  rm -rf "$W/ag/submission" "$W/ag/results" && cp -r "$W/subs/$1" "$W/ag/submission"
  TPSP_AUTOGRADER_KIT=$kit TPSP_AUTOGRADER_CCACHE=$ccache TPSP_AUTOGRADER_NO_NAMESPACES=$2 \
    "$W/run_autograder" >"$W/$1.$2.log" 2>&1 || fail "run_autograder $1: $(tail -n 5 "$W/$1.$2.log")"
  /usr/bin/python3 -c 'import json, sys; r = json.load(open(sys.argv[1])); print("%g %g" % (r["score"], sum(t["max_score"] for t in r["tests"])))' \
    "$W/ag/results/results.json"
}
mkdir -p "$W/subs/solution-bare"
cp engine/tensor_parallel/mappings_tp.cpp engine/tensor_parallel/layers.cpp "$W/subs/solution-bare/"
for name in skeleton attack-include-solution attack-forged-all-reduce mutant-lab01-g-missing; do
  cp -r "$W/class/SUBMISSIONS/$name" "$W/subs/"
done
read -r got most < <(grade solution-bare 1)
echo "solution (two bare files), no namespaces: $got/$most"
[ "$got" = "$most" ] && [ "$most" != 0 ] || fail "the solution scored $got of $most"
grep -q "these defences were off" "$W/ag/results/results.json" || fail "results.json does not say which defences were off"
grep -q "the released solutions beneath it: lab00" "$W/ag/results/results.json" || fail "results.json does not name the released labs"
for name in skeleton attack-include-solution attack-forged-all-reduce; do
  read -r got most < <(grade "$name" 1)
  echo "$name, no namespaces: $got/$most"
  [ "$got" = 0 ] || fail "$name scored $got of $most"
done
read -r got most < <(grade mutant-lab01-g-missing 1)
echo "mutant-lab01-g-missing, no namespaces: $got/$most"
/usr/bin/python3 -c 'import sys; g, m = map(float, sys.argv[1:]); sys.exit(0 if 0 < g < m or g == 0 else 1)' "$got" "$most" ||
  fail "the mutant scored $got of $most"
[ "$got" != "$most" ] || fail "the mutant scored full marks"
read -r got most < <(grade solution-bare 0)
echo "solution, with namespaces (./grade's sandbox): $got/$most"
[ "$got" = "$most" ] || fail "the solution scored $got of $most in the sandbox"
! grep -q "these defences were off" "$W/ag/results/results.json" || fail "the sandboxed run says defences were off"
echo "autograder: solution full, skeleton and attacks 0, mutant partial, with and without namespaces"
