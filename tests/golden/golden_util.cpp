#include "tests/golden/golden_util.h"

#include <doctest/doctest.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "engine/error.h"
#include "engine/io/npy.h"

namespace tpsp::golden {

std::string data_dir() {
  return std::string(TPSP_SOURCE_DIR) + "/tests/golden/data";
}

const nlohmann::json& manifest() {
  static const nlohmann::json m = [] {
    const std::string path = data_dir() + "/MANIFEST.json";
    std::ifstream in(path);
    if (!in) throw std::runtime_error(path + ": cannot open (run /usr/bin/python3 tools/make_goldens.py)");
    return nlohmann::json::parse(in);
  }();
  return m;
}

const nlohmann::json& case_params(const std::string& case_name) {
  const auto& cases = manifest().at("cases");
  if (!cases.contains(case_name)) throw std::runtime_error("MANIFEST.json has no case '" + case_name + "'");
  return cases.at(case_name).at("params");
}

Tensor load(const std::string& case_name, const std::string& name) {
  return io::load_npy(data_dir() + "/" + case_name + "/" + name + ".npy");
}

std::vector<int64_t> load_ints(const std::string& case_name, const std::string& name) {
  return io::load_npy_int(data_dir() + "/" + case_name + "/" + name + ".npy");
}

TokenBatch load_tokens(const std::string& case_name, const std::string& name) {
  Shape shape;
  TokenBatch t;
  t.ids = io::load_npy_int(data_dir() + "/" + case_name + "/" + name + ".npy", &shape);
  TPSP_CHECK(shape.size() == 2, case_name, "/", name, ": token ids must be [b, s], got ", shape_str(shape));
  t.b = shape[0];
  t.s = shape[1];
  return t;
}

namespace {
/// "[i, j, k]" multi-index of a flat row-major index.
std::string index_str(const Shape& shape, int64_t flat) {
  Shape idx(shape.size());
  for (std::size_t d = shape.size(); d-- > 0;) {
    idx[d] = flat % shape[d];
    flat /= shape[d];
  }
  return shape_str(idx);
}
}  // namespace

Comparison compare(const std::string& label, const Tensor& got, const Tensor& want, Tol tol,
                   const Tensor& extra) {
  Comparison c;
  std::ostringstream os;
  os.precision(9);
  if (!got.defined() || got.shape() != want.shape()) {
    os << label << ": shape " << (got.defined() ? shape_str(got.shape()) : "undefined")
       << " but the golden is " << shape_str(want.shape());
    c.report = os.str();
    c.n_bad = want.numel();
    return c;
  }
  TPSP_CHECK(!extra.defined() || extra.shape() == want.shape(), label, ": allowance shape ",
             shape_str(extra.shape()), " differs from ", shape_str(want.shape()));
  for (int64_t i = 0; i < want.numel(); ++i) c.max_want = std::fmax(c.max_want, std::fabs(want.data()[i]));
  const double atol = tol.atol + tol.atol_rel * c.max_want;
  double worst_ratio = -1;
  for (int64_t i = 0; i < want.numel(); ++i) {
    const double g = got.data()[i], w = want.data()[i];
    const double diff = std::fabs(g - w);
    const double allowed = atol + tol.rtol * std::fabs(w) + (extra.defined() ? extra.data()[i] : 0.0);
    double ratio = diff == 0 ? 0.0 : diff / allowed;  // diff / 0 = inf for an exact tolerance
    if (!std::isfinite(diff)) ratio = INFINITY;       // NaN or inf in got
    if (!(ratio <= 1.0)) ++c.n_bad;
    if (std::isfinite(diff) && diff > c.max_abs_diff) c.max_abs_diff = diff;
    if (ratio > worst_ratio) {
      worst_ratio = ratio;
      c.worst = i;
    }
  }
  c.max_ratio = worst_ratio < 0 ? 0 : worst_ratio;
  c.ok = c.n_bad == 0;
  if (c.worst < 0) c.worst = 0;
  os << label << ": " << c.n_bad << " of " << want.numel() << " elements outside |got-want| <= " << atol
     << " + " << tol.rtol << "*|want|" << (extra.defined() ? " + allowance" : "");
  if (want.numel() > 0) {
    os << "; worst at " << index_str(want.shape(), c.worst) << " got " << got.data()[c.worst] << " want "
       << want.data()[c.worst];
  }
  os << "; max |delta| = " << c.max_abs_diff << " (" << 100.0 * c.max_ratio << "% of tolerance at worst)";
  c.report = os.str();
  return c;
}

void check_close(const std::string& label, const Tensor& got, const Tensor& want, Tol tol,
                 const Tensor& extra) {
  const Comparison c = compare(label, got, want, tol, extra);
  std::printf("[golden] %-62s max|d| %.3e  max|want| %.3e  max|d|/max|want| %.1e  tol used %6.2f%%%s\n",
              label.c_str(), c.max_abs_diff, c.max_want, c.max_want > 0 ? c.max_abs_diff / c.max_want : 0.0,
              100.0 * c.max_ratio, c.ok ? "" : "  FAIL");
  std::fflush(stdout);
  CHECK_MESSAGE(c.ok, c.report);
}

void check_close(const std::string& label, float got, float want, Tol tol) {
  check_close(label, Tensor::full({}, got), Tensor::full({}, want), tol);
}

}  // namespace tpsp::golden
