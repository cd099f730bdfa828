#!/usr/bin/env bash
# The grader's cross-check of where the ranks ran the learner's code (checkers/grader/grade.cpp): a rank
# result.json whose "host_code" disagrees with the scenario's Scenario::host_code fails the run. The rank
# program is the engine's solution behind a wrapper that edits each rank's result.json after the run:
# forging "host_code": true on a device scenario, or dropping it from a host-code one, must be rejected;
# the wrapper left alone must pass (so a rejection is the edit's, not the wrapper's).
# Usage: host_code_declaration.sh TPSP-CHECK TPSP-LAB-RANKS
set -u
check=$1
ranks=$2
work=$(mktemp -d /tmp/tpsp-host-code-XXXXXX)
trap 'rm -rf "$work"' EXIT
cat >"$work/rank" <<WRAP
#!/usr/bin/env bash
# Runs the real rank program, then applies \$HOST_CODE_EDIT (a sed script) to this rank's result.json.
"$ranks" "\$@"
code=\$?
outs=()
while [ \$# -gt 0 ]; do
  [ "\$1" = --out ] && outs+=("\$2")
  shift
done
for o in "\${outs[@]}"; do
  f="\$o/rank\${RANK:-0}/result.json"
  [ -n "\${HOST_CODE_EDIT:-}" ] && [ -f "\$f" ] && sed -i -e "\$HOST_CODE_EDIT" "\$f"
done
exit \$code
WRAP
chmod +x "$work/rank"
fail=0
# expect CODE TEXT LAB SCENARIO: runs ./check on one scenario (tp=2) and wants its exit code and text.
expect() {
  local want=$1 text=$2 lab=$3 only=$4 out code
  out=$("$check" "$lab" --binary "$work/rank" --only "$only" --tp 2 --no-dp --seed 3 2>&1)
  code=$?
  if [ "$code" -ne "$want" ] || ! printf '%s\n' "$out" | grep -Fq -- "$text"; then
    printf '%s\n' "$out"
    echo "FAILED: $lab/$only with edit '${HOST_CODE_EDIT:-}': wanted exit $want and '$text', got exit $code"
    fail=1
  fi
}
HOST_CODE_EDIT='' expect 0 "1 passed, 0 failed" lab00 ring_all_gather
HOST_CODE_EDIT='' expect 0 "1 passed, 0 failed" lab01 column_linear
HOST_CODE_EDIT='/"host_code"/d' expect 1 \
  "did not declare the scenario host code (RunContext::run_on_host), but checkers/lab00/expected.cpp does" \
  lab00 ring_all_gather
HOST_CODE_EDIT='s/^{/{"host_code": true,/' expect 1 \
  "declared the scenario host code (RunContext::run_on_host), but checkers/lab01/expected.cpp does not" \
  lab01 column_linear
[ "$fail" = 0 ] && echo "host-code declarations cross-checked as expected"
exit "$fail"
