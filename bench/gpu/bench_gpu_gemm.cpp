// bench_gpu_gemm: the engine's bf16 GEMM on the GPU against cuBLAS called directly, and against the
// device's peak (issue 12: "cuBLAS bf16 GEMM TFLOP/s against the device's peak").
//
// Engine: tpsp::ops::matmul_forward on cuda bf16 tensors (Y = X·Wᵀ, X [M, K], W [N, K]), i.e. what
// the engine runs in a layer: engine/ops/dispatch.cpp → CudaOps::matmul_forward → cublasGemmEx with
// bf16 operands, f32 output and CUBLAS_COMPUTE_32F (engine/ops/cuda/gemm.cpp), then the f32 result
// rounded to a fresh bf16 tensor (one cast kernel); the op allocates its results with cudaMalloc and
// frees the f32 one with cudaFree, and that is timed too. Baseline in the same run: the same
// cublasGemmEx call (same operands, transposes, types and algorithm choice) on a preallocated f32
// output, nothing else. The two alternate, one call each per round, so clocks and heat hit both alike.
//
// Each call is timed with CUDA events on the legacy default stream (where the engine runs everything)
// and synchronised; `--warmup` untimed rounds first, then `--iters` timed rounds; the figure is the
// median, with the fastest and slowest round. FLOPs of a GEMM: 2·M·N·K (one multiply and one add per
// term). Peak: dense bf16 tensor-core TFLOP/s from the table below by device name, or --peak-tflops.
//
// Output, one line per shape:
//   gemm bf16 M×N×K engine X TFLOP/s (min–max), cublas Y TFLOP/s, engine/cublas r, engine/peak R,
//   cublas/peak R'  [what]
// Without a CUDA device: one line "bench_gpu_gemm: no CUDA device (<reason>); nothing measured", exit 0.
// Exit 1 on a CUDA/cuBLAS error (named) or when the engine's result disagrees with cuBLAS's.
#include <cublas_v2.h>
#include <fmt/core.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <exception>
#include <limits>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "engine/ops/cuda/cuda_check.h"
#include "engine/ops/cuda/cuda_ops.h"
#include "engine/ops/matmul.h"
#include "engine/tensor.h"

namespace {

using tpsp::Device;
using tpsp::DType;
using tpsp::Tensor;
using tpsp::cuda::check_cuda;

/// One GEMM Y[M, N] = X[M, K]·W[N, K]ᵀ and what it stands for.
struct GemmShape {
  int64_t m, n, k;
  std::string what;
};

/// Square sizes, then the forward GEMMs of one GPT layer at h = 4096, s = 2048, b = 1, tp = 1
/// (the MFU benchmark's configuration): n = s·b = 2048 tokens.
std::vector<GemmShape> default_shapes() {
  return {{4096, 4096, 4096, "square"},
          {8192, 8192, 8192, "square"},
          {2048, 12288, 4096, "linear_qkv forward, h=4096 s=2048"},
          {2048, 4096, 4096, "linear_proj forward, h=4096 s=2048"},
          {2048, 16384, 4096, "linear_fc1 forward, h=4096 s=2048"},
          {2048, 4096, 16384, "linear_fc2 forward, h=4096 s=2048"}};
}

/// "MxNxK" (x or ×) with positive integers within cuBLAS's int range; nullopt otherwise.
std::optional<GemmShape> parse_shape(const std::string& s) {
  static const std::regex re(R"(^([0-9]{1,10})(?:x|×)([0-9]{1,10})(?:x|×)([0-9]{1,10})$)");
  std::smatch m;
  if (!std::regex_match(s, m, re)) return std::nullopt;
  GemmShape g{std::stoll(m[1]), std::stoll(m[2]), std::stoll(m[3]), "--shape"};
  const int64_t max = std::numeric_limits<int>::max();
  if (g.m < 1 || g.n < 1 || g.k < 1 || g.m > max || g.n > max || g.k > max) return std::nullopt;
  return g;
}

/// Dense bf16 tensor-core peak (FP32 accumulate, no sparsity) of a device, by its CUDA name.
struct Peak {
  double tflops = 0;   ///< 0: unknown
  std::string source;  ///< where the figure comes from
};
Peak peak_for(const std::string& name) {
  const auto has = [&](const char* s) { return name.find(s) != std::string::npos; };
  // NVIDIA H100 Tensor Core GPU datasheet and architecture whitepaper: H100 SXM5 BF16 tensor
  // 1,979 TFLOP/s with 2:4 sparsity, 989.4 dense. CUDA names the SXM part "NVIDIA H100 80GB HBM3".
  if (has("H100") && (has("SXM") || has("HBM3")))
    return {989.4, "H100 SXM5 dense bf16, NVIDIA H100 datasheet/whitepaper"};
  // NVIDIA H200 datasheet: H200 SXM BF16 tensor 1,979 TFLOP/s with sparsity (same SMs and clocks as
  // H100 SXM), 989.4 dense. The H200 NVL (lower power limit) has a lower figure and is not listed.
  if (has("H200") && !has("NVL")) return {989.4, "H200 SXM dense bf16, NVIDIA H200 datasheet"};
  return {};
}

/// Times one call on the default stream with CUDA events; returns milliseconds.
class EventTimer {
 public:
  EventTimer() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventTimer() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventTimer(const EventTimer&) = delete;
  EventTimer& operator=(const EventTimer&) = delete;
  template <class F>
  double ms(F&& fn) {
    check_cuda(cudaEventRecord(start_, 0), "cudaEventRecord");
    fn();
    check_cuda(cudaEventRecord(stop_, 0), "cudaEventRecord");
    check_cuda(cudaEventSynchronize(stop_), "cudaEventSynchronize");
    float t = 0.f;
    check_cuda(cudaEventElapsedTime(&t, start_, stop_), "cudaEventElapsedTime");
    return static_cast<double>(t);
  }

 private:
  cudaEvent_t start_ = nullptr, stop_ = nullptr;
};

/// The baseline: a cuBLAS handle of its own and cublasGemmEx exactly as engine/ops/cuda/gemm.cpp
/// calls it for Y = X·Wᵀ (row-major, so the column-major Yᵀ = W·Xᵀ: W transposed, X not).
class RawCublas {
 public:
  RawCublas() { check("cublasCreate", cublasCreate(&h_)); }
  ~RawCublas() { cublasDestroy(h_); }
  RawCublas(const RawCublas&) = delete;
  RawCublas& operator=(const RawCublas&) = delete;
  /// y [M, N] f32 = x [M, K] bf16 · w [N, K]ᵀ bf16, all device pointers.
  void gemm(const GemmShape& g, const void* x, const void* w, float* y) {
    const float alpha = 1.f, beta = 0.f;
    const int m = static_cast<int>(g.m), n = static_cast<int>(g.n), k = static_cast<int>(g.k);
    check("cublasGemmEx",
          cublasGemmEx(h_, CUBLAS_OP_T, CUBLAS_OP_N, n, m, k, &alpha, w, CUDA_R_16BF, k, x, CUDA_R_16BF, k,
                       &beta, y, CUDA_R_32F, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT));
  }

 private:
  static void check(const char* what, cublasStatus_t s) {
    if (s != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error(std::string(what) + ": " + cublasGetStatusName(s) + " (" +
                               cublasGetStatusString(s) + ")");
  }
  cublasHandle_t h_ = nullptr;
};

/// A cuda bf16 tensor of values uniform in [−1, 1), drawn on the host by splitmix64 (Steele, Lea,
/// Flood 2014) from `seed`: a few ns per element, where engine/random/init.h's normals cost ~250 ns
/// and would take minutes for the ~4·10⁸ elements of the default shapes. Timing does not depend on
/// the values beyond their not being zero.
Tensor device_rand(const tpsp::Shape& shape, uint64_t seed) {
  Tensor t = Tensor::empty(shape);  // every element is written below
  float* p = t.data();
  uint64_t state = seed;
  for (int64_t i = 0; i < t.numel(); ++i) {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    z ^= z >> 31;
    p[i] = static_cast<float>(z >> 40) * 0x1p-23f - 1.f;  // 24 random bits → [−1, 1)
  }
  return t.to(DType::bf16).to(Device::cuda);
}

/// TFLOP/s of a GEMM of shape g that took `ms` milliseconds.
double tflops(const GemmShape& g, double ms) {
  return 2.0 * static_cast<double>(g.m) * static_cast<double>(g.n) * static_cast<double>(g.k) / (ms * 1e-3) /
         1e12;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// A sanity check that both sides computed the same product (not a test: tests/gpu holds those).
/// The engine's bf16 Y is cuBLAS's f32 Y rounded once: within 2⁻⁸ of |Y| when both calls picked the
/// same algorithm; if they did not (another handle, a split-K variant), the two f32 sums of K
/// products of values uniform in [−1, 1) (|Y| ~ √K/3) also differ by about u·K/3 (√K roundings of
/// partial sums of size ~√K/3; u = 2⁻²⁴), 3e-4 at K = 16384, which the allowance 1e-4·√K covers
/// 40×. Returns the
/// worst element's |Δ| / allowance (≤ 1 passes; NaN counts as infinite) and describes that element.
double compare(const Tensor& engine_y, const float* cublas_y, const GemmShape& g, std::string* worst_msg) {
  const Tensor got = engine_y.to(Device::cpu).to(DType::f32);
  std::vector<float> want(static_cast<std::size_t>(g.m * g.n));
  check_cuda(cudaMemcpy(want.data(), cublas_y, want.size() * sizeof(float), cudaMemcpyDeviceToHost),
             "cudaMemcpy to host");
  const double atol = 1e-4 * std::sqrt(static_cast<double>(g.k)), rtol = 1.0 / 256;
  double worst = 0;
  for (std::size_t i = 0; i < want.size(); ++i) {
    const double d = std::fabs(static_cast<double>(got.data()[i]) - want[i]);
    const double ratio = d / (atol + rtol * std::fabs(static_cast<double>(want[i])));
    if (!(ratio <= worst)) {  // also catches NaN
      worst = std::isnan(ratio) ? INFINITY : ratio;
      *worst_msg = fmt::format("element {}: engine {} against cuBLAS {}", i, got.data()[i], want[i]);
    }
  }
  return worst;
}

struct Options {
  int warmup = 5, iters = 20;
  double peak = 0;
  std::vector<std::string> shapes;
};

/// Measures one shape and prints its line; returns false when the results disagree.
bool run_shape(const GemmShape& g, const Options& o, const Peak& peak, RawCublas& raw, EventTimer& timer) {
  const Tensor x = device_rand({g.m, g.k}, 1), w = device_rand({g.n, g.k}, 2);
  // The baseline's output: an f32 cuda tensor (freed with it), written through its device pointer.
  Tensor y_raw = Tensor::empty({g.m, g.n}, DType::f32, Device::cuda);
  auto* y_raw_ptr = static_cast<float*>(y_raw.raw_data());
  std::vector<double> t_engine, t_raw;
  Tensor y;
  for (int r = 0; r < o.warmup + o.iters; ++r) {
    y = Tensor();  // the previous result is freed outside the timed call
    const double te = timer.ms([&] { y = tpsp::ops::matmul_forward(x, w); });
    const double tr = timer.ms([&] { raw.gemm(g, x.raw_data(), w.raw_data(), y_raw_ptr); });
    if (r < o.warmup) continue;
    t_engine.push_back(te);
    t_raw.push_back(tr);
  }
  std::string worst_msg;
  const double worst = compare(y, y_raw_ptr, g, &worst_msg);

  const double e = tflops(g, median(t_engine)), c = tflops(g, median(t_raw));
  const double e_min = tflops(g, *std::max_element(t_engine.begin(), t_engine.end()));
  const double e_max = tflops(g, *std::min_element(t_engine.begin(), t_engine.end()));
  const auto vs_peak = [&](double v) {
    return peak.tflops > 0 ? fmt::format("{:.3f}", v / peak.tflops) : std::string("unknown");
  };
  fmt::print(
      "gemm bf16 {}×{}×{} engine {:.1f} TFLOP/s ({:.1f}–{:.1f}), cublas {:.1f} TFLOP/s, "
      "engine/cublas {:.3f}, engine/peak {}, cublas/peak {}  [{}]\n",
      g.m, g.n, g.k, e, e_min, e_max, c, e / c, vs_peak(e), vs_peak(c), g.what);
  std::fflush(stdout);
  if (worst > 1.0) {
    fmt::print(stderr,
               "bench_gpu_gemm: {}×{}×{}: the engine's result disagrees with cuBLAS's beyond one bf16 "
               "rounding ({}; {:.1f}× the bound)\n",
               g.m, g.n, g.k, worst_msg, worst);
    return false;
  }
  return true;
}

int run(const Options& o) {
  std::string why;
  if (tpsp::cuda::device_count(&why) == 0) {
    fmt::print("bench_gpu_gemm: no CUDA device ({}); nothing measured\n", why);
    return 0;
  }
  std::vector<GemmShape> shapes = default_shapes();
  if (!o.shapes.empty()) {
    shapes.clear();
    for (const std::string& s : o.shapes) shapes.push_back(*parse_shape(s));  // validated by CLI11
  }
  tpsp::cuda::register_backend(0);
  tpsp::cuda::use_process_device();
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties(0)");
  Peak peak = peak_for(prop.name);
  if (o.peak > 0) peak = {o.peak, "--peak-tflops"};
  fmt::print("bench_gpu_gemm: device 0 {} (sm_{}{}, {} SMs); ", prop.name, prop.major, prop.minor,
             prop.multiProcessorCount);
  if (peak.tflops > 0)
    fmt::print("peak {:.1f} TFLOP/s ({})", peak.tflops, peak.source);
  else
    fmt::print("peak unknown for this device (give --peak-tflops): engine/peak not computed");
  fmt::print("; {} warm-up and {} timed rounds per shape, median (slowest–fastest)\n", o.warmup, o.iters);
  std::fflush(stdout);

  RawCublas raw;
  EventTimer timer;
  bool ok = true;
  for (const GemmShape& g : shapes) ok = run_shape(g, o, peak, raw, timer) && ok;
  return ok ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  Options o;
  CLI::App app{
      "bench_gpu_gemm: the engine's bf16 GEMM (ops::matmul_forward on cuda tensors) against cublasGemmEx "
      "and the device's peak, in TFLOP/s"};
  app.add_option("--warmup", o.warmup, "untimed rounds per shape")->check(CLI::Range(0, 1000));
  app.add_option("--iters", o.iters, "timed rounds per shape (median reported)")->check(CLI::Range(1, 10000));
  app.add_option("--peak-tflops", o.peak, "the device's dense bf16 peak in TFLOP/s (overrides the table)")
      ->check(CLI::Range(1e-3, 1e6));
  app.add_option("--shape", o.shapes, "MxNxK of Y[M,N] = X[M,K]·W[N,K]ᵀ, repeatable (replaces the defaults)")
      ->check([](const std::string& s) {
        return parse_shape(s)
                   ? std::string()
                   : "'" + s + "' is not MxNxK with three integers in [1, 2147483647], e.g. 4096x4096x4096";
      });
  CLI11_PARSE(app, argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    fmt::print(stderr, "bench_gpu_gemm: error: {}\n", e.what());
    return 1;
  }
}
