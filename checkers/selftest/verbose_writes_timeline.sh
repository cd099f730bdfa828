#!/usr/bin/env bash
# ./check --verbose writes each run's Chrome traces and its timeline picture and prints their paths;
# where the plotting Python has no matplotlib it prints one line saying so and the traces are still
# written. Usage: verbose_writes_timeline.sh TPSP_CHECK SCRATCH_DIR [with|without]
#   with     /usr/bin/python3 (skipped, exit 77, when it has no matplotlib): the PNG must exist
#   without  TPSP_PLOT_PYTHON=/bin/false (a Python that cannot draw): the one line, no PNG, traces kept
set -u
check="$1" scratch="$2" mode="${3:-with}"
rm -rf "$scratch" && mkdir -p "$scratch"
if [ "$mode" = with ]; then
  /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || { echo "skipped: /usr/bin/python3 has no matplotlib"; exit 77; }
  unset TPSP_PLOT_PYTHON
else
  export TPSP_PLOT_PYTHON=/bin/false
fi
out=$(TMPDIR="$scratch" "$check" lab01 --solution --only column_linear --tp 2 --verbose --seed 3 2>&1)
code=$?
echo "$out"
fail() { echo "FAILED: $*"; rm -rf "$scratch"; exit 1; }
[ "$code" = 0 ] || fail "tpsp-check exited $code"
runs=$(echo "$out" | grep -c '^ *PASS ')
traces=$(echo "$out" | sed -n 's/^ *traces: \(.*\)\/rank<r>\/trace.json.*/\1/p')
[ "$runs" -ge 2 ] || fail "want at least 2 runs (tp=2, sp off and on), got $runs"
[ "$(echo "$traces" | grep -c .)" = "$runs" ] || fail "want the traces of each of the $runs runs printed"
for d in $traces; do
  for r in 0 1; do
    grep -q '"cat":"comm"' "$d/rank$r/trace.json" || fail "$d/rank$r/trace.json has no communication event"
  done
done
missing=$(echo "$out" | grep -c 'no timeline pictures: .* has no matplotlib')
if [ "$mode" = with ]; then
  [ "$missing" = 0 ] || fail "said matplotlib is missing"
  pngs=$(echo "$out" | sed -n 's/^ *timeline: //p')
  [ "$(echo "$pngs" | grep -c .)" = "$runs" ] || fail "want $runs timeline paths printed"
  for p in $pngs; do
    [ "$(head -c 8 "$p" | od -An -tx1 | tr -d ' \n')" = 89504e470d0a1a0a ] || fail "$p is not a PNG"
  done
else
  [ "$missing" = 1 ] || fail "want exactly one line saying matplotlib is missing"
  echo "$out" | grep -q '^ *timeline: ' && fail "printed a timeline path without matplotlib"
  ls "$scratch"/*/*/timeline.png 2>/dev/null && fail "a timeline.png was written without matplotlib"
fi
rm -rf "$scratch"
echo "ok ($mode matplotlib)"
