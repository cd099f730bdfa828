#!/usr/bin/env bash
# bench/bench_grade.sh [LABS] — `make bench-grade`: ./grade over the full synthetic class (33 submissions:
# tests/grade/class/make_class.py --size full) after the kit is built, every verdict checked
# (tests/grade/check_verdicts.py), and the time printed: the class's wall time, and per (submission,
# lab) task against the issue's target of 20 s once the engine is built. Runs twice: a cold compiler
# cache (every distinct file compiled once) and a warm one (a regrade). Needs root (./grade does).
set -euo pipefail
cd "$(dirname "$0")/.."
labs=${1:-lab01,lab03}
build=${BUILD:-build}
kit="$PWD/$build/grade-kit"
[[ -f "$kit/kit.json" ]] || { echo "bench_grade: $kit is not built (make build)" >&2; exit 2; }
W=$(mktemp -d /tmp/tpsp-bench-grade.XXXXXX)
trap 'rm -rf "$W"' EXIT
/usr/bin/python3 -B tests/grade/class/make_class.py "$W" --size full >/dev/null
head -c 16 /dev/urandom | od -An -tx1 | tr -d ' \n' > "$W/seed"
n_subs=$(find "$W/SUBMISSIONS" -mindepth 1 -maxdepth 1 | wc -l)
n_labs=$(tr ',' '\n' <<<"$labs" | wc -l)
for pass in cold warm; do
  [[ $pass == cold ]] && rm -rf "$W/ccache"
  rm -rf "$W/RESULTS"
  t0=$(date +%s.%N)
  ./grade "$W/SUBMISSIONS" --labs "$labs" --out "$W/RESULTS" --kit "$kit" --ccache "$W/ccache" \
    --seed-file "$W/seed" --task-timeout 60 >"$W/grade-$pass.log"
  t1=$(date +%s.%N)
  /usr/bin/python3 -B tests/grade/check_verdicts.py "$W/expected.json" "$W/RESULTS" "$labs" "$(cat "$W/seed")" || true
  awk -v a="$t0" -v b="$t1" -v s="$n_subs" -v l="$n_labs" -v p="$pass" -v j="$(nproc)" 'BEGIN {
    w = b - a; t = w * j / (s * l)
    printf "grade %d submissions x %d labs (%s compiler cache): wall %.0f s; per task %.1f s of a core; per task / 20 s target %.2f\n", s, l, p, w, t, t / 20 }'
done
