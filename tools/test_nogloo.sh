#!/usr/bin/env bash
# make test-nogloo's checks of a build configured with -DTPSP_WITH_GLOO=OFF (tools/test_nogloo.sh BUILD):
# tpsp-run, tpsp-train and tpsp-demo neither link Gloo nor reference one of its symbols, tpsp-run's
# default transport is the relay, and the demo trains tp=2 + SP through it and prints MATCH.
set -euo pipefail
build=${1:?usage: tools/test_nogloo.sh BUILD}
fail() { echo "test-nogloo: FAIL: $*" >&2; exit 1; }

for prog in tpsp-run tpsp-train tpsp-demo; do
  bin="$build/bin/$prog"
  [ -x "$bin" ] || fail "$bin was not built"
  if ldd "$bin" | grep -qi gloo; then fail "$prog links a Gloo library: $(ldd "$bin" | grep -i gloo)"; fi
  if nm -C "$bin" | grep -q 'gloo::'; then fail "$prog references Gloo's symbols: $(nm -C "$bin" | grep -m 3 'gloo::')"; fi
done
"$build/bin/tpsp-run" --help | grep -q 'TEXT:{gloo,relay}=relay' || fail "tpsp-run's default --backend is not relay"

out_dir=$(mktemp -d)
trap 'rm -rf "$out_dir"' EXIT
out=$("$build/bin/tpsp-demo" --steps 10 --out "$out_dir/demo" 2>&1) || fail "the demo failed: $(tail -n 8 <<<"$out")"
grep -q -- '--backend relay -- ' <<<"$out" || fail "the demo did not start its ranks through the relay: $(grep -m1 running <<<"$out")"
grep -q '^verdict: MATCH' <<<"$out" || fail "the demo did not print MATCH: $(tail -n 4 <<<"$out")"
echo "test-nogloo: no Gloo in tpsp-run, tpsp-train, tpsp-demo; $(grep '^verdict:' <<<"$out")"
