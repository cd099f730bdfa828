// Helpers shared by the golden tests: loading PyTorch goldens written by tools/make_goldens.py and
// comparing a C++ float32 result with them element-wise under the policy of docs/tolerances.md.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "engine/tensor.h"
#include "engine/tokens.h"

namespace tpsp::golden {

/// Element-wise tolerance: an element passes when
///   |got − want| <= atol + atol_rel·max|want| + rtol·|want|  (+ a per-element allowance, if given),
/// with max|want| taken over the whole golden tensor: atol_rel is an absolute tolerance relative to
/// the tensor's scale, for tensors (GPT gradients) whose magnitude is far from 1.
struct Tol {
  double rtol;
  double atol;
  double atol_rel = 0;
};

/// Outcome of one comparison. `report` is a one-line summary (counts, worst element, max |Δ|).
struct Comparison {
  bool ok = false;
  int64_t n_bad = 0;        ///< elements outside tolerance (NaN/inf count as outside)
  int64_t worst = -1;       ///< flat index with the largest |Δ| / allowed |Δ|
  double max_abs_diff = 0;  ///< max |Δ| over all elements
  double max_ratio = 0;     ///< max |Δ| / allowed |Δ|: the fraction of the tolerance used
  double max_want = 0;      ///< max |want| over all elements
  std::string report;
};

/// Directory of the goldens: TPSP_SOURCE_DIR/tests/golden/data.
std::string data_dir();
/// The parsed MANIFEST.json (loaded once). Throws std::runtime_error if it is missing.
const nlohmann::json& manifest();
/// manifest()["cases"][case_name]["params"]: the case's scalar parameters.
const nlohmann::json& case_params(const std::string& case_name);
/// Loads data/<case>/<name>.npy as a float32 tensor (engine/io/npy.h).
Tensor load(const std::string& case_name, const std::string& name);
/// Loads data/<case>/<name>.npy ('<i8', shape [b, s]) as a TokenBatch.
TokenBatch load_tokens(const std::string& case_name, const std::string& name);
/// Loads data/<case>/<name>.npy as int64 values (any shape).
std::vector<int64_t> load_ints(const std::string& case_name, const std::string& name);

/// Compares got with want (same shape required) under tol. `extra`, when defined, has want's shape
/// and adds a per-element absolute allowance. Pure: no doctest, no printing.
Comparison compare(const std::string& label, const Tensor& got, const Tensor& want, Tol tol,
                   const Tensor& extra = Tensor());

/// compare(), then prints "[golden] <label> max|Δ| ..." to stdout (the numbers docs/tolerances.md
/// quotes) and records a doctest CHECK that fails with the report when an element is out of tolerance.
void check_close(const std::string& label, const Tensor& got, const Tensor& want, Tol tol,
                 const Tensor& extra = Tensor());
/// check_close for a scalar: got against want, both wrapped as 0-d tensors.
void check_close(const std::string& label, float got, float want, Tol tol);

}  // namespace tpsp::golden
