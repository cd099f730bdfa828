#!/usr/bin/env bash
# tpsp-lab-ranks takes --sp once for every --scenario or once per --scenario (a batch of ./check mixes
# SP on and off): any other count, or a value other than 0 or 1, is refused with a line naming the rule,
# before any scenario runs. Usage: ranks_sp_arguments.sh RANK_PROGRAM
set -uo pipefail
ranks=$1
out=$(mktemp -d)
trap 'rm -rf "$out"' EXIT
fail=0
expect_refused() {  # WHAT PATTERN ARGS...: a non-zero exit, PATTERN in the output, no dump written
  local what=$1 pattern=$2
  shift 2
  local text code
  text=$("$ranks" "$@" 2>&1)
  code=$?
  if [ "$code" -eq 0 ] || ! grep -q -- "$pattern" <<<"$text" || [ -n "$(ls -A "$out")" ]; then
    echo "FAIL: $what: exit $code, output: $text"
    fail=1
  else
    echo "ok: $what refused (exit $code): $(head -1 <<<"$text")"
  fi
}
expect_refused "3 --sp for 2 --scenario" "one --sp for all, or one per --scenario" \
  --scenario lab01/f_g --sp 0 --out "$out/a" --scenario lab01/f_g --sp 1 --out "$out/b" --sp 1
expect_refused "--sp 2" "not in {0,1}" --scenario lab01/f_g --sp 2 --out "$out/a"
exit $fail
