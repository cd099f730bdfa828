#!/usr/bin/env bash
# tests/grade/test_grade_class.sh KIT CCACHE [--slurm] — ./grade over the small synthetic class
# (tests/grade/class/make_class.py --size small: the solution, the skeletons, a build error, a mutant,
# the issue's attacks (a)-(g) of tests/grade/class/ATTACKS.md, a memory hog and a thread bomb) gives
# every (submission, lab) the verdict its expected.json names (tests/grade/check_verdicts.py), locally
# in parallel or, with --slurm (6 of them and lab01 only: one per verdict), through a private one-node
# Slurm cluster (tools/slurm/start_slurm.sh). Labs lab01 and lab03 at tp 2 without the dp
# run (CI time); the grading seed comes from a file and must not leak. Locally, the attacks that the
# forbidden-symbol rule refuses are also graded without it (--allow-any-symbol) and must still fail.
# Needs root (./grade does).
set -euo pipefail
cd "$(dirname "$0")/../.."
kit=$1 ccache=$2 mode=${3:-}
if [[ "$(id -u)" != 0 ]]; then
  echo "FAIL: ./grade needs root (namespaces, other uids for the ranks); run ctest as root" >&2
  exit 1
fi
W=$(mktemp -d /tmp/tpsp-grade-class.XXXXXX)
cleanup() { [[ -n "${slurm_dir:-}" ]] && tools/slurm/stop_slurm.sh "$slurm_dir"; rm -rf "$W" "${slurm_dir:-}"; }
trap cleanup EXIT
extra=()
if [[ "$mode" == --slurm ]]; then
  source tests/grade/slurm_env.sh
  slurm_dir=$(mktemp -d /tmp/tpsp-grade-slurm.XXXXXX)
  eval "$(tools/slurm/start_slurm.sh "$slurm_dir")"
  extra=(--slurm)
fi
/usr/bin/python3 -B tests/grade/class/make_class.py "$W" --size small
if [[ "$mode" == --slurm ]]; then  # through Slurm, one submission per verdict (CI time; locally: all 16)
  /usr/bin/python3 - "$W" solution skeleton mutant-lab01-g-missing does-not-compile attack-include-solution \
    fault-memory-hog <<'PY'
import json, shutil, sys
from pathlib import Path
w, keep = Path(sys.argv[1]), set(sys.argv[2:])
expected = json.loads((w / "expected.json").read_text())
for name in [n for n in expected if n not in keep]:
    del expected[name]
    shutil.rmtree(w / "SUBMISSIONS" / name)
(w / "expected.json").write_text(json.dumps(expected))
PY
fi
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/seed"
labs=lab01,lab03
[[ "$mode" == --slurm ]] && labs=lab01  # every verdict kind occurs in lab01 among the six
t0=$(date +%s.%N)
./grade "$W/SUBMISSIONS" --labs $labs --out "$W/RESULTS" --kit "$kit" --ccache "$ccache" --tp 2 --no-dp \
  --seed-file "$W/seed" "${extra[@]}"
echo "./grade ${extra[*]}: $(awk -v a="$t0" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s"
/usr/bin/python3 -B tests/grade/check_verdicts.py "$W/expected.json" "$W/RESULTS" $labs "$(cat "$W/seed")"
[[ "$mode" == --slurm ]] && exit 0
# The layers under the forbidden-symbol rule: the attacks that it refuses, built without it, still fail
# (the solution's program out of reach, other runs' folders closed, the grading seed never inside).
mkdir "$W/LAYERS"
for name in $(/usr/bin/python3 -c 'import json, sys; print(" ".join(n for n, e in json.load(open(sys.argv[1])).items() if "without_symbol_rule" in e))' "$W/expected.json"); do
  cp -r "$W/SUBMISSIONS/$name" "$W/LAYERS/"
done
./grade "$W/LAYERS" --labs lab01 --out "$W/RESULTS-LAYERS" --kit "$kit" --ccache "$ccache" --tp 1,2 --no-dp \
  --seed-file "$W/seed" --allow-any-symbol
/usr/bin/python3 -B tests/grade/check_verdicts.py "$W/expected.json" "$W/RESULTS-LAYERS" lab01 "$(cat "$W/seed")" \
  --without-symbol-rule
