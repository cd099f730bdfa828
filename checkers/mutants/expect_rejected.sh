#!/usr/bin/env bash
# Runs ./check on a known-wrong implementation and passes only if the check rejects it, and (when a
# signature is given) names that signature. Usage: expect_rejected.sh SIGNATURE -- CHECK ARGS...
set -u
signature=$1
shift 2
out=$("$@" 2>&1)
code=$?
printf '%s\n' "$out"
if [ "$code" -eq 0 ]; then
  echo "MUTANT ACCEPTED: ./check passed a known-wrong implementation"
  exit 1
fi
if ! printf '%s\n' "$out" | grep -Eq '^[0-9]+ passed, [0-9]+ failed'; then
  echo "MUTANT NOT GRADED: ./check did not end with its summary line"
  exit 1
fi
if [ -n "$signature" ] && ! printf '%s\n' "$out" | grep -Fq -- "$signature"; then
  echo "MUTANT REJECTED WITHOUT ITS SIGNATURE: expected the report to say: $signature"
  exit 1
fi
echo "mutant rejected as expected"
