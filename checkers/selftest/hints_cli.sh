#!/usr/bin/env bash
# ./check labNN --hint: the listing, a section by exact name, by prefix and by word prefixes (any
# case), the errors (exit 2, naming the valid tasks), and that every TODO of every lab's skeletons is
# found by tpsp-check's own HINTS.md parser (tools/check_hints.py checks the same with its own).
# Also that tools/check_hints.py rejects a HINTS.md that lost a section or names no TODO.
# Usage: hints_cli.sh TPSP_CHECK SOURCE_DIR
set -u
check=$1
src=$2
fail() { echo "FAIL: $*"; exit 1; }
run() { out=$("$check" "$@" 2>&1); code=$?; }

run lab01 --hint
[ "$code" -eq 0 ] || fail "--hint (the listing) exited $code: $out"
for name in 'f forward' 'g backward' 'scatter forward' 'ColumnParallelLinear forward' 'RowParallelLinear backward'; do
  grep -q "^  $name  *TODO at labs/lab01_tp_layers/" <<<"$out" || fail "the listing lacks '$name' as a TODO: $out"
done

run lab01 --hint 'ColumnParallelLinear forward'
[ "$code" -eq 0 ] && grep -q 'hint for "lab01 ColumnParallelLinear forward"' <<<"$out" || fail "exact name: $code $out"
grep -q 'ColumnParallelLinear backward' <<<"$out" && fail "exact name printed another section too: $out"
run lab01 --hint column f          # word prefixes, two arguments
[ "$code" -eq 0 ] && grep -q 'hint for "lab01 ColumnParallelLinear forward"' <<<"$out" || fail "'column f': $code $out"
run --hint 'ROWPARALLELLINEAR B' lab01   # any case, the lab after the name
[ "$code" -eq 0 ] && grep -q 'hint for "lab01 RowParallelLinear backward"' <<<"$out" || fail "'ROWPARALLELLINEAR B': $code $out"

run lab01 --hint column            # two tasks start with it
[ "$code" -eq 2 ] || fail "an ambiguous name exited $code"
grep -q "matches 2 tasks" <<<"$out" && grep -q 'ColumnParallelLinear backward' <<<"$out" || fail "ambiguous: $out"
run lab01 --hint nonsense
[ "$code" -eq 2 ] || fail "an unknown name exited $code"
grep -q "no task named 'nonsense'" <<<"$out" && grep -q '^  f forward$' <<<"$out" &&
  grep -q '^  RowParallelLinear backward$' <<<"$out" || fail "unknown name without the valid ones: $out"
run --hint f forward
[ "$code" -eq 2 ] || fail "--hint without a lab exited $code"

# Every TODO of every skeleton is listed by tpsp-check's own HINTS.md parser, and its status is TODO.
n=0
while IFS=: read -r lab name; do
  [ "${listed_lab:-}" = "$lab" ] || { run "$lab" --hint; listed_lab=$lab; listing=$out; }
  grep -qE "^  $name +TODO at labs/" <<<"$listing" || fail "$lab --hint does not list '$name' as a TODO: $listing"
  n=$((n + 1))
done < <(grep -ho 'TPSP_LAB_TODO("lab[0-9][0-9] [^:"]*' "$src"/labs/*/*.cpp | sed 's/TPSP_LAB_TODO("\(lab[0-9][0-9]\) /\1:/')
[ "$n" -ge 30 ] || fail "only $n TODOs found in the skeletons"
run lab03 --hint 'reduce_scatter_to_sequence_parallel_region backward'  # the longest name, exactly
[ "$code" -eq 0 ] && grep -qF 'hint for "lab03 reduce_scatter_to_sequence_parallel_region backward"' <<<"$out" ||
  fail "lab03 exact long name: $code $out"

# The drift check rejects a lost section and a section that names no TODO.
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/labs" "$tmp/engine"
cp -r "$src"/labs/. "$tmp/labs/"
/usr/bin/python3 - "$tmp/labs/lab03_sequence_parallel/HINTS.md" <<'PY'
import re, sys
p = sys.argv[1]
s = open(p).read()
s = re.sub(r"## sequence_parallel grads\n.*", "## sequence parallel grads\n\ntext\n", s, flags=re.S)
open(p, "w").write(s)
PY
out=$(/usr/bin/python3 "$src/tools/check_hints.py" "$tmp" 2>&1); code=$?
[ "$code" -eq 1 ] || fail "check_hints.py accepted a drifted HINTS.md: $out"
grep -q "no section '## sequence_parallel grads'" <<<"$out" &&
  grep -q "'## sequence parallel grads' names no TODO" <<<"$out" || fail "check_hints.py: $out"
echo "ok: $n hints found by name; the listing, prefixes and errors behave"
