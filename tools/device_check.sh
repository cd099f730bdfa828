#!/usr/bin/env bash
# tools/device_check.sh — the GPU backend's check on a machine lent with a GPU (issue 12), in one go:
#   1. configure a CUDA build (sm_90 unless CUDA_ARCHS says otherwise; ccache when installed),
#   2. build what the GPU tests need (test_gpu: the engine, the GPU backend tpsp_cuda, the tests),
#   3. run the GPU ctests (gpu/*: each CUDA op against its CPU op, dropout masks bit for bit, tensor
#      round trips, host-staged collectives over Gloo),
#   4. write a summary (and every log) to $OUT when it is set, else to the build directory.
# Where no device exists (a build machine, CI) steps 1–3 still run: the tests then skip, each with one
# line, and the script ends with "no CUDA device ... skipped" and exit 0: the build is what is checked.
# Budget: about 3 minutes of build on 16 cores from a cold cache, seconds of tests (the device
# machine's limit is 8 minutes per call; a step that runs over TIMEOUT_S seconds is stopped).
#
# Env:    BUILD_DIR    build directory (default build-device in the repository)
#         CUDA_ARCHS   CMAKE_CUDA_ARCHITECTURES (default 90: H100/H200)
#         OUT          where the summary and logs go (the device machine sets it)
#         JOBS         parallel build jobs (default: the number of cores)
#         TIMEOUT_S    limit of each step in seconds (default 420)
# Exit:   0 the build succeeded and no GPU test failed (passed, or skipped for want of a device)
#         1 configure or build failed, or a GPU test failed (the summary names them)
set -uo pipefail

top=$(cd "$(dirname "$0")/.." && pwd)
build=${BUILD_DIR:-$top/build-device}
archs=${CUDA_ARCHS:-90}
jobs=${JOBS:-$(nproc)}
limit=${TIMEOUT_S:-420}
logs=${OUT:-$build}/device_check
mkdir -p "$logs" "$build"
summary=$logs/summary.txt
: >"$summary"

say() { echo "device_check: $*" | tee -a "$summary"; }
elapsed() { echo $((SECONDS - $1)); }

say "repository $top ($(git -C "$top" rev-parse --short HEAD 2>/dev/null || echo 'no git')), build $build, archs $archs, $jobs jobs"
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

t0=$SECONDS
if ! timeout "$limit" cmake -S "$top" -B "$build" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTPSP_WITH_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES="$archs" "${launcher[@]}" >"$logs/configure.log" 2>&1; then
  say "FAILED: configure ($(elapsed $t0) s); see $logs/configure.log"
  tail -20 "$logs/configure.log"
  exit 1
fi
if ! grep -q "tpsp: GPU backend ON" "$logs/configure.log"; then
  say "FAILED: the GPU backend is off in this configuration (nvcc not found?); see $logs/configure.log"
  exit 1
fi
say "configure: $(elapsed $t0) s"

t0=$SECONDS
if ! timeout "$limit" cmake --build "$build" -j"$jobs" --target test_gpu >"$logs/build.log" 2>&1; then
  say "FAILED: build of test_gpu ($(elapsed $t0) s); see $logs/build.log"
  grep -E "error|Error" "$logs/build.log" | head -20
  exit 1
fi
say "build (tpsp_cuda + test_gpu): $(elapsed $t0) s"

t0=$SECONDS
(cd "$build" && timeout "$limit" ctest -R '^gpu/' --output-on-failure -V) >"$logs/ctest.log" 2>&1
rc=$?
# doctest's last line: "[doctest] test cases: 16 | 16 passed | 0 failed | 0 skipped"
cases=$(grep -o "test cases: *[0-9]* | *[0-9]* passed | *[0-9]* failed" "$logs/ctest.log" | tail -1)
reason=$(grep -m1 -o "SKIPPED: .*" "$logs/ctest.log")
if [[ $rc -eq 0 && -n "$reason" ]] && grep -qE "Test +#[0-9]+: gpu/.*Skipped" "$logs/ctest.log"; then
  say "SKIPPED on this machine: ${reason#SKIPPED: }; the CUDA build succeeded and the GPU tests were skipped ($(elapsed $t0) s)"
  exit 0
fi
if [[ $rc -ne 0 ]]; then
  grep -E "ERROR|FATAL|TEST CASE|Test +#[0-9]+: gpu/" "$logs/ctest.log" | head -40 | tee -a "$summary"
  say "FAILED: GPU tests (${cases:-no doctest summary}, $(elapsed $t0) s); see $logs/ctest.log"
  exit 1
fi
say "OK: GPU tests passed (${cases:-?}, $(elapsed $t0) s)"
exit 0
