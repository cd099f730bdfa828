// What each lab's prediction step (checkers/labNN/predict.cpp) is written with: the sizes several steps
// share and the builders of a step's calls. Closed forms only, no lab code (the predict library links
// into the grader).
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "checkers/predict/predict.h"

namespace tpsp::checkers::predict {

inline constexpr uint64_t kF32 = 4;

/// The MLP step's sizes (lab01, lab03, lab04): s=512, b=2, h=256, ffn=4h, tp=2, f32.
inline constexpr int64_t S = 512, B = 2, H = 256, FFN = 4 * H, TP = 2;
inline constexpr uint64_t kSbh = S * B * H * kF32;  // 1 MiB
/// The MLP step's sizes by the names a prediction may use.
const std::map<std::string, int64_t>& mlp_sizes();

/// "[512, 2, 256] f32 (1 MiB)".
std::string tensor(const std::vector<int64_t>& shape, uint64_t bytes);

/// One call of a step on rank 0 (dim −1: none; peer −1: none).
Call call(const char* phase, comm::OpKind op, const char* group, uint64_t bytes, int64_t dim = -1,
          int peer = -1, comm::ReduceOp reduce = comm::ReduceOp::sum);

/// Each lab's step, defined beside its scenarios (checkers/labNN/predict.cpp).
Step lab00_step();
Step lab01_step();
Step lab02_step();
Step lab03_step();
Step lab04_step();
Step lab05_step();
Step lab06_step();

}  // namespace tpsp::checkers::predict
