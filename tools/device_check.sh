#!/usr/bin/env bash
# tools/device_check.sh — the GPU backend's check on a machine lent with a GPU (issue 12), in one go:
#   1. configure a CUDA build (sm_90 unless CUDA_ARCHS says otherwise; ccache when installed),
#   2. build what the later steps run: test_gpu (the engine, the GPU backend tpsp_cuda, the tests),
#      tpsp-train-cuda, ./check's programs (tpsp-check, tpsp-run, the rank programs' GPU builds:
#      labs-cuda), bench_gpu_gemm and bench_gpt_mfu,
#   3. run the GPU ctests (gpu/*: each CUDA op against its CPU op, dropout masks bit for bit, tensor
#      round trips, host-staged collectives over Gloo, NCCL at world 1, the whole GPT training step on
#      the GPU against the CPU with f32 and bf16 parameters),
#   4. train 3 steps at tp=1 on the GPU over NCCL (tpsp-train-cuda --device cuda --backend nccl),
#   5. bench_gpu_gemm (the engine's bf16 GEMM against cuBLAS and the peak, docs/performance.md, GPU),
#   6. bench_gpt_mfu at h=4096, s=2048, tp=1, bf16 (the training step's MFU),
#   7. ./check --all --solution --device cuda (every lab's checks with cuda tensors; the ranks share the
#      GPU through the host-staged transport),
#   8. write a summary (and every step's log) to $OUT when it is set, else to the build directory.
# Steps 4-7 each get a log and a summary line; a step whose program was not built is skipped with a
# line; one that finds the budget spent is not run, and that counts as a failure (nothing was checked).
# Where no device exists (a build machine, CI) steps 1-3 still run: the tests then skip, each
# with one line, and the script ends with "no CUDA device ... skipped" and exit 0: the build is what
# is checked, and steps 4-7 are skipped.
# Budget: BUDGET_S seconds for the whole script (default 450, inside the device machine's 8 minutes
# per call); every step runs under `timeout` with min(its own cap, what is left), and a step that
# finds less than 10 s left is not run (a failure, above). Cold (no ccache), the build of these
# targets costs about 580 CPU-seconds (measured on the 2-core build machine: 484 s user + 95 s system),
# so one to two minutes on 16 cores; steps 3-6 are expected to take seconds to a minute each and
# ./check gets what is left, at most 4 minutes (estimates: nothing has run on a GPU yet).
#
# Env:    BUILD_DIR    build directory (default build-device in the repository)
#         CUDA_ARCHS   CMAKE_CUDA_ARCHITECTURES (default 90: H100/H200)
#         OUT          where the summary and logs go (the device machine sets it)
#         JOBS         parallel build jobs (default: the number of cores)
#         BUDGET_S     seconds for the whole script (default 450)
# Exit:   0 the build succeeded and no step failed (passed, or skipped for want of a device or of a
#           program)
#         1 configure or build failed, or a step failed or ran out of time (the summary names them)
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build-device}
archs=${CUDA_ARCHS:-90}
jobs=${JOBS:-$(nproc)}
budget=${BUDGET_S:-450}
logs=${OUT:-$build}/device_check
mkdir -p "$logs" "$build"
summary=$logs/summary.txt
: >"$summary"
failed=()

say() { echo "device_check: $*" | tee -a "$summary"; }
elapsed() { echo $((SECONDS - $1)); }

# cap_for CAP: prints min(CAP, seconds left of the budget); fails when less than 10 s are left.
cap_for() {
  local left=$((budget - SECONDS))
  ((left >= 10)) || return 1
  echo $(($1 < left ? $1 : left))
}

# run_step NAME CAP LOG CMD...: runs CMD under timeout (min(CAP, what is left)) with its output in LOG;
# sets step_rc (124: timed out) and step_s. Returns 1 without running when the budget is spent.
run_step() {
  local name=$1 cap log=$3 t0=$SECONDS
  if ! cap=$(cap_for "$2"); then
    say "NOT RUN: $name: less than 10 s left of the ${budget} s budget"
    failed+=("$name (not run: out of time)")
    return 1
  fi
  shift 3
  timeout -k 10 "$cap" "$@" >"$log" 2>&1
  step_rc=$?
  step_s=$(elapsed "$t0")
  ((step_rc == 124)) && echo "device_check: stopped after the step's limit of $cap s" >>"$log"
  return 0
}

# verdict NAME LOG WHAT: the summary line of a finished step (step_rc, step_s), WHAT its result.
verdict() {
  if ((step_rc == 0)); then
    say "OK: $1 ($step_s s): $3"
  else
    tail -15 "$2" | sed 's/^/  | /' | tee -a "$summary"
    say "FAILED: $1 (exit $step_rc$( ((step_rc == 124)) && echo ', timed out'), $step_s s): $3; see $2"
    failed+=("$1")
  fi
}

say "repository $top ($(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo 'no git')), build $build, archs $archs, $jobs jobs, budget $budget s"
if command -v nvidia-smi >/dev/null 2>&1; then
  nvidia-smi >"$logs/nvidia-smi.txt" 2>&1 || true
  say "device: $(nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader 2>/dev/null | head -1)"
else
  say "device: nvidia-smi not found"
fi

launcher=()
if command -v ccache >/dev/null 2>&1; then
  export CCACHE_DIR=${CCACHE_DIR:-/tmp/tpsp-ccache} CCACHE_BASEDIR=$top CCACHE_NOHASHDIR=1
  launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
fi

# 1. configure
t0=$SECONDS
if ! timeout "$(cap_for 120 || echo 10)" cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DTPSP_WITH_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$archs" "${launcher[@]}" >"$logs/configure.log" 2>&1; then
  say "FAILED: configure ($(elapsed $t0) s); see $logs/configure.log"
  tail -20 "$logs/configure.log"
  exit 1
fi
if ! grep -q "tpsp: GPU backend ON" "$logs/configure.log"; then
  say "FAILED: the GPU backend is off in this configuration (nvcc not found?); see $logs/configure.log"
  exit 1
fi
say "configure: $(elapsed $t0) s"

# 2. build
targets=(test_gpu tpsp-train-cuda tpsp-check tpsp-run labs-cuda bench_gpu_gemm bench_gpt_mfu)
t0=$SECONDS
build_cap=$((budget - SECONDS - 60))  # a minute is kept for the steps after it
((build_cap >= 10)) || build_cap=10
if ! timeout "$build_cap" cmake --build "$build" -j"$jobs" --target "${targets[@]}" >"$logs/build.log" 2>&1; then
  say "FAILED: build of ${targets[*]} ($(elapsed $t0) s, limit $build_cap s); see $logs/build.log"
  grep -E "error|Error" "$logs/build.log" | head -20
  exit 1
fi
say "build (${targets[*]}): $(elapsed $t0) s"

# 3. the GPU ctests; they tell whether a device exists
if run_step "GPU tests" 90 "$logs/ctest.log" ctest --test-dir "$build" -R '^gpu/' --output-on-failure -V; then
  # doctest's last line: "[doctest] test cases: 16 | 16 passed | 0 failed | 0 skipped"
  cases=$(grep -o "test cases: *[0-9]* | *[0-9]* passed | *[0-9]* failed" "$logs/ctest.log" | tail -1)
  reason=$(grep -m1 -o "SKIPPED: .*" "$logs/ctest.log")
  if [[ $step_rc -eq 0 && -n "$reason" ]] && grep -qE "Test +#[0-9]+: gpu/.*Skipped" "$logs/ctest.log"; then
    say "SKIPPED on this machine: ${reason#SKIPPED: }; the CUDA build succeeded and the GPU tests were skipped ($step_s s); tpsp-train over NCCL, the GPU benchmarks and ./check --device cuda were not run"
    exit 0
  fi
  if ((step_rc != 0)); then
    grep -E "ERROR|FATAL|TEST CASE|Test +#[0-9]+: gpu/" "$logs/ctest.log" | head -40 | tee -a "$summary"
  fi
  verdict "GPU tests" "$logs/ctest.log" "${cases:-no doctest summary}"
fi

# 4. three training steps on the GPU over NCCL at world 1 (one rank, one GPU)
train=$build/bin/tpsp-train-cuda
if [[ ! -x $train ]]; then
  say "SKIPPED tpsp-train over NCCL: $train was not built"
elif rm -rf "$logs/train_nccl" && run_step "tpsp-train over NCCL" 60 "$logs/train_nccl.log" "$train" --device cuda --backend nccl --tp 1 \
  --steps 3 --out "$logs/train_nccl"; then
  # report.json holds "losses": [l1, l2, l3] and "wall_s"
  report=
  [[ -f $logs/train_nccl/report.json ]] && report=$(tr -d ' \n' <"$logs/train_nccl/report.json")
  losses=$(grep -o '"losses":\[[^]]*\]' <<<"$report")
  wall=$(grep -o '"wall_s":[0-9.e+-]*' <<<"$report")
  verdict "tpsp-train over NCCL" "$logs/train_nccl.log" "${losses:-no report.json} ${wall}"
fi

# 5. the engine's bf16 GEMM against cuBLAS and the peak
gemm=$build/bench/gpu/bench_gpu_gemm
if [[ ! -x $gemm ]]; then
  say "SKIPPED bench_gpu_gemm: $gemm was not built"
elif run_step "bench_gpu_gemm" 90 "$logs/bench_gpu_gemm.log" "$gemm"; then
  grep -E "^(bench_gpu_gemm|gemm bf16)" "$logs/bench_gpu_gemm.log" | sed 's/^/  /' | tee -a "$summary"
  verdict "bench_gpu_gemm" "$logs/bench_gpu_gemm.log" "$(grep -c '^gemm bf16' "$logs/bench_gpu_gemm.log") shapes"
fi

# 6. the GPT training step's MFU at h=4096, s=2048, tp=1, bf16
gpt=$build/bench/bench_gpt_mfu
if [[ ! -x $gpt ]]; then
  say "SKIPPED bench_gpt_mfu: $gpt was not built"
elif run_step "bench_gpt_mfu" 120 "$logs/bench_gpt_mfu.log" "$gpt" --device cuda --hidden 4096 --seq 2048 --tp 1 \
  --dtype bf16; then
  verdict "bench_gpt_mfu" "$logs/bench_gpt_mfu.log" "$(grep -v '^ *$' "$logs/bench_gpt_mfu.log" | tail -1)"
fi

# 7. every lab's checks on the engine's solution with cuda tensors (host-staged: the ranks share the GPU)
if [[ ! -x $build/bin/tpsp-check ]]; then
  say "SKIPPED ./check --device cuda: $build/bin/tpsp-check was not built"
elif run_step "./check --all --solution --device cuda" 255 "$logs/check_cuda.log" \
  env BUILD="$build" "$top/check" --all --solution --device cuda --no-build; then
  # tpsp-check's last line: "N passed, N failed"
  verdict "./check --all --solution --device cuda" "$logs/check_cuda.log" "$(tail -1 "$logs/check_cuda.log")"
fi

if ((${#failed[@]} > 0)); then
  say "FAILED: $(printf '%s; ' "${failed[@]}")$SECONDS s in all; logs in $logs"
  exit 1
fi
say "OK: every step that ran passed ($SECONDS s in all); logs in $logs"
exit 0
