#!/usr/bin/env bash
# make_autograder.sh LAB RELEASED OUT.zip [WEIGHTS.json] — the Gradescope autograder of one lab
# (`make autograder LAB=lab02`). The zip holds:
#   setup.sh         installs the Debian packages (tools/install_deps.sh) and builds the grading kit
#   run_autograder   grades /autograder/submission (tools/grade/autograder.py) into
#                    /autograder/results/results.json
#   autograder.json  the lab, the released labs, the weights
#   tpsp/            a learner copy (make release): the engine without any lab's solution, the skeletons
#   released/        the solutions of the RELEASED labs (comma-separated; "-" for none, "before" for every
#                    lab before LAB), linked beneath the graded lab: never the graded lab's own
# Run from the full repository. $TPSP_AUTOGRADER_TP (e.g. "1,2") and $TPSP_AUTOGRADER_NO_DP=1 (make's TP and
# NO_DP) set fewer layouts per run.
set -euo pipefail
lab=${1:?usage: make_autograder.sh LAB RELEASED OUT.zip [WEIGHTS.json]}
released=${2:?usage: make_autograder.sh LAB RELEASED OUT.zip [WEIGHTS.json]}
out=${3:?usage: make_autograder.sh LAB RELEASED OUT.zip [WEIGHTS.json]}
weights=${4:-}
cd "$(dirname "$0")/.."
[ -f RELEASE ] && { echo "make autograder: run it in the full repository (this is a learner copy)" >&2; exit 2; }
[ "$released" = "-" ] && released=""
if [ -n "$(git status --porcelain --untracked-files=no)" ]; then
  echo "make autograder: warning: the checkout has uncommitted changes; the zip holds the files as they are now" >&2
fi
work=$(mktemp -d /tmp/tpsp-autograder-XXXXXX)
trap 'rm -rf "$work"' EXIT
/usr/bin/python3 - "$lab" "$released" "$work" "$weights" <<'PY'
import json, os, shutil, sys
from pathlib import Path
lab, released, work, weights = sys.argv[1], [x for x in sys.argv[2].split(",") if x], Path(sys.argv[3]), sys.argv[4]
labs = json.loads(Path("labs/labs.json").read_text())["labs"]
ids = [x["id"] for x in labs]
if lab not in ids:
    sys.exit(f"make autograder: LAB={lab} is not a lab of labs/labs.json ({', '.join(ids)})")
if released == ["before"]:  # the default: every lab before the graded one (its deadline's release)
    released = ids[:ids.index(lab)]
(work / "released.txt").write_text(",".join(released))
for x in released:
    if x not in ids:
        sys.exit(f"make autograder: RELEASED names {x}, which is not a lab ({', '.join(ids)})")
    if x == lab:
        sys.exit(f"make autograder: RELEASED names {lab} itself: the graded lab is always the student's own code")
for entry in labs:
    if entry["id"] in released:
        dest = work / "released" / Path(entry["dir"]).name
        dest.mkdir(parents=True)
        for f in entry["files"]:
            shutil.copyfile(f, dest / Path(f).name)
config = {"lab": lab, "released": released}
if os.environ.get("TPSP_AUTOGRADER_TP"):
    config["tp"] = os.environ["TPSP_AUTOGRADER_TP"]
if os.environ.get("TPSP_AUTOGRADER_NO_DP") == "1":
    config["no_dp"] = True
if weights:
    config["weights"] = json.loads(Path(weights).read_text())
(work / "autograder.json").write_text(json.dumps(config, indent=1) + "\n")
PY
released=$(cat "$work/released.txt") && rm "$work/released.txt"
tools/make_release.sh "$work/tpsp" >/dev/null
cat >"$work/setup.sh" <<'SH'
#!/usr/bin/env bash
# Gradescope's image set-up: the Debian packages, then the grading kit (no lab's solution is in it).
set -euo pipefail
cd /autograder/source/tpsp
tools/install_deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo
cmake --build build -j "$(nproc)" --target grade-kit
SH
cat >"$work/run_autograder" <<'SH'
#!/usr/bin/env bash
# Grades /autograder/submission into /autograder/results/results.json (tools/grade/autograder.py).
exec /usr/bin/python3 -B /autograder/source/tpsp/tools/grade/autograder.py --root /autograder
SH
chmod +x "$work/setup.sh" "$work/run_autograder"
mkdir -p "$(dirname "$out")"
rm -f "$out"
/usr/bin/python3 - "$work" "$(realpath -m "$out")" <<'PY'
import os, sys, zipfile
work, out = sys.argv[1], sys.argv[2]
with zipfile.ZipFile(out, "w", zipfile.ZIP_DEFLATED) as z:
    for top, dirs, files in os.walk(work):
        dirs.sort()
        for f in sorted(files):
            path = os.path.join(top, f)
            z.write(path, os.path.relpath(path, work))  # keeps the mode bits (setup.sh, run_autograder)
PY
echo "make autograder: $out (lab $lab; released solutions: ${released:-none})"
