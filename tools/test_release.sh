#!/usr/bin/env bash
# Test of `make release`: the learner copy holds no solution body, builds, and its check of a lab
# fails cleanly with "not implemented yet" (not a crash of the checker). Usage: test_release.sh
set -euo pipefail
top=$(git -C "$(dirname "$0")" rev-parse --show-toplevel)
work=$(mktemp -d /tmp/tpsp-release-XXXXXX)
trap 'rm -rf "$work"' EXIT
cd "$top"
tools/make_release.sh "$work/tpsp"
cd "$work/tpsp"
test -f RELEASE
! grep -rqE '^[[:space:]]*// (BEGIN|END) SOLUTION[[:space:]]*$' --include='*.cpp' --include='*.h' .
cmake -S . -B build -DCMAKE_BUILD_TYPE=Debug -DTPSP_WITH_CUDA=OFF >/dev/null  # -O0: the quickest build
cmake --build build -j "$(nproc)" --target lab03 >/dev/null
set +e
out=$(./check lab03 --tp 2 --seed 3 2>&1)
code=$?
set -e
printf '%s\n' "$out"
[ "$code" -eq 1 ] || { echo "expected ./check to fail (exit 1), got $code"; exit 1; }
grep -q 'not implemented yet: lab03' <<<"$out" || { echo "no 'not implemented yet' guidance"; exit 1; }
grep -Eq '^0 passed, [1-9][0-9]* failed' <<<"$out" || { echo "no summary line"; exit 1; }
echo "learner copy: builds, no solution bodies, checks fail cleanly"
