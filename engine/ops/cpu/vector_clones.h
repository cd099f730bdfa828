// TPSP_VECTOR_CLONES: on x86-64 Linux with GCC or Clang, compile a function twice — for AVX2 and for
// the baseline (SSE2) — and pick the clone when the program loads (target_clones, an ifunc), so a
// vectorised loop uses 8-wide vectors where the CPU has them and still runs on any x86-64. Elsewhere
// it expands to nothing. The clones compute the same IEEE operations in the same order: the same
// results bit for bit.
#pragma once

//
// TPSP_VECTOR_CLONES_FMA: the same with a Haswell clone (AVX2 and FMA), for loops that call std::fma:
// there it is one vfmadd instruction instead of a call to libm's fmaf, with the same exact result.

#if defined(__x86_64__) && defined(__linux__) && (defined(__GNUC__) || defined(__clang__))
#define TPSP_VECTOR_CLONES __attribute__((target_clones("avx2", "default")))
#define TPSP_VECTOR_CLONES_FMA __attribute__((target_clones("arch=haswell", "default")))
#else
#define TPSP_VECTOR_CLONES
#define TPSP_VECTOR_CLONES_FMA
#endif
