// TPSP_VECTOR_CLONES: on x86-64 Linux with GCC or Clang, compile a function twice — for AVX2 and for
// the baseline (SSE2) — and pick the clone when the program loads (target_clones, an ifunc that tests
// the CPU's AVX2 feature bit), so a vectorised loop uses 8-wide vectors where the CPU has them and
// still runs on any x86-64. Elsewhere it expands to nothing. The clones compute the same IEEE
// operations in the same order: the same results bit for bit.
//
// TPSP_TARGET_AVX2_FMA + cpu_has_avx2_fma(): for loops that call std::fma, where AVX2 + FMA makes it one
// vfmadd instruction instead of a call to libm's fmaf, with the same exact result. The caller compiles
// the loop twice (once in a function marked TPSP_TARGET_AVX2_FMA) and branches on cpu_has_avx2_fma().
// Not target_clones("arch=haswell"): GCC's resolver for an arch= clone tests the CPU *model*
// (__builtin_cpu_is("haswell")), so that clone ran on Haswell cores only — never on AMD's or on later
// Intel ones, which all got the baseline loop and a libm call per element.
#pragma once

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define TPSP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define TPSP_TARGET_AVX2_FMA __attribute__((target("avx2,fma")))
#else
#define TPSP_VECTOR_CLONES
#define TPSP_TARGET_AVX2_FMA
#endif

namespace tpsp::ops::cpu {

/// Whether this CPU runs AVX2 and FMA instructions (CPUID feature bits, read once), i.e. whether a
/// TPSP_TARGET_AVX2_FMA function may be called. Always false off x86-64 Linux.
inline bool cpu_has_avx2_fma() {
#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
  }();
  return has;
#else
  return false;
#endif
}

}  // namespace tpsp::ops::cpu
