// lab04 scenarios, shared by the ranks and the grader: the linear layers with tp_comm_overlap on
// integer-valued inputs (exact in any summation order), a two-layer MLP under an emulated 2 GB/s link
// on random inputs (the overlap figure), and the aliasing hazard of issue #11 with its exact numbers.
#pragma once

#include <string>

#include "checkers/inputs.h"

namespace tpsp::checkers::lab04 {

// The layer scenarios: ColumnParallelLinear [OUT, IN], RowParallelLinear [IN, OUT] (its input is
// the column layer's output width), every split size divisible by tp = 1 … 4.
constexpr int64_t S = 12, B = 2, IN = 8, OUT = 12;

/// An integer-valued (multiples of 1/4) tensor of the layer scenarios, as `d` gives it (checkers/inputs.h:
/// whole, or `d.split(k)`: a rank's chunk of dim k, the grader's whole of it).
inline Tensor exact(const Shape& shape, const InputDraw& d, const std::string& name) {
  return d({"lab04." + name, shape, 1, true});
}

// The overlap scenario: fc1 = ColumnParallelLinear [FFN, H], fc2 = RowParallelLinear [H, FFN], tp=2,
// SP, TPSP_LINK=2GB/s. Narrow h, wide ffn: a ring chunk [s/2, b, h] is 128·2·128·4 B = 128 KiB
// (≈ 75 µs on the emulated link), while a chunk's GEMM is 134 M multiply-adds (a few ms on one core).
// The bytes stay small on purpose: on a laptop the loopback transfer itself needs a CPU core, which
// the GEMMs of both ranks occupy; the right code then still hides nearly all of the communication.
constexpr int64_t OS = 256, OB = 2, OH = 128, OFFN = 8192;
constexpr const char* kLink = "2GB/s";
/// Fraction of the communication time that must run while a GEMM computes (the best rank and repeat,
/// checkers/grader/timeline.h). On a 2-core laptop at load average 4–6 (other builds running) the
/// solution passed 12 runs of 12 (4 of them under ASan), while one rank's own best repeat fell as low
/// as 0.29 when it waited for a late peer — hence the best rank; code that waits before it computes
/// measures 0 (mutant everything_waited_at_once).
constexpr double kMinOverlap = 0.3;
/// The step runs this many times (phases forward.i / backward.i); each rank's best repeat counts, so
/// one stalled by other processes on a loaded machine does not fail the learner. Code that waits
/// before it computes measures ≈ 0 in every repeat.
constexpr int kRepeats = 3;
inline std::string phase_name(const char* what, int i) {
  return std::string(what) + "." + std::to_string(i);
}
/// A random tensor of the overlap scenario (N(0,1)·scale), split along dim `split` (a rank's chunk; the
/// grader's whole): every input of that scenario is sharded.
inline Tensor random(const Shape& shape, const InputDraw& d, int split, const std::string& name,
                     float scale) {
  return d.split(split)({"lab04.overlap." + name, shape, scale, false});
}

// The aliasing hazard (issue #11): two stacked ColumnParallelLinear layers at tp=2 with SP, X1 as
// below, X2 = X1 + 1, dY1 = ones(4, 2): dW1 = dY1ᵀ·X1 = [[4, 2], [4, 2]]; a saved activation that
// aliases a gather buffer the second layer reuses gives the column sums of X2, [[8, 6], [8, 6]].
inline Tensor alias_x1() {
  return Tensor::from({4, 1, 2}, {1, 0, 0, 1, 1, 1, 2, 0});
}
inline Tensor alias_x2() {
  return Tensor::from({4, 1, 2}, {2, 1, 1, 2, 2, 2, 3, 1});
}
inline Tensor alias_w1() {
  return Tensor::from({2, 2}, {1, 2, 3, 4});
}
inline Tensor alias_w2() {
  return Tensor::from({2, 2}, {2, 1, 1, 2});
}

}  // namespace tpsp::checkers::lab04
