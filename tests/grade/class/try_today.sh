#!/usr/bin/env bash
# try_today.sh CLASS NAME LAB [./check args] — grades submission NAME of a class written by
# make_class.py the way docs/grading.md grades today (no sandbox): its files of LAB copied into labs/
# of THIS checkout, the lab's rank program rebuilt, `./check LAB`; labs/ restored afterwards with
# git checkout. Prints ./check's output. BUILD=dir selects the build directory (default build).
# Never give it an unbounded fault (make_class.py --bounded): nothing here limits it.
set -u
class=$1 name=$2 lab=$3
shift 3
here="$(cd "$(dirname "$0")/../../.." && pwd)"
build="${BUILD:-$here/build}"
dir=$(/usr/bin/python3 -c "import json,sys; print(next(l['dir'] for l in json.load(open('$here/labs/labs.json'))['labs'] if l['id']=='$lab'))")
trap 'git -C "$here" checkout -- "$dir"' EXIT
cp "$class/SUBMISSIONS/$name/$(basename "$dir")"/* "$here/$dir/"
if ! cmake --build "$build" -j2 --target "tpsp-lab-ranks-$lab" tpsp-check tpsp-run > "$build/try_today.log" 2>&1; then
  grep -E 'error|Error' "$build/try_today.log" | head -20
  echo "try_today: $name $lab does not build"
  exit 2
fi
cd "$here" && BUILD="$build" ./check "$lab" --no-build "$@"
