#include "checkers/scenario.h"

#include <cmath>
#include <stdexcept>

#include "engine/comm/env.h"
#include "engine/random/init.h"

namespace tpsp::checkers {

const std::vector<Scenario>& all_scenarios() {
  static const std::vector<Scenario> all = [] {
    std::vector<Scenario> v;
    register_lab00(v);
    register_lab01(v);
    register_lab02(v);
    register_lab03(v);
    return v;
  }();
  return all;
}

const Scenario& find_scenario(const std::string& id) {
  std::string known;
  for (const Scenario& s : all_scenarios()) {
    if (s.lab + "/" + s.name == id) return s;
    known += " " + s.lab + "/" + s.name;
  }
  throw std::invalid_argument("unknown scenario '" + id + "'; known:" + known);
}

Tensor input_tensor(const Shape& shape, uint64_t seed, const std::string& name, float scale, bool integer) {
  Tensor t(shape);
  random::init_normal(t, seed, "check." + name, scale);
  if (integer)
    for (int64_t i = 0; i < t.numel(); ++i)
      t.at(i) = std::fmax(-8.f, std::fmin(8.f, std::round(t.at(i) * 3.f)));
  return t;
}

Outputs run_single_process(const Scenario& sc, uint64_t seed, bool sp) {
  static std::shared_ptr<comm::ProcessGroup> single = [] {
    for (const char* v :
         {"RANK", "WORLD_SIZE", "TPSP_STORE_DIR", "MASTER_ADDR", "SLURM_PROCID", "SLURM_NTASKS"})
      unsetenv(v);
    return comm::init_from_env();
  }();
  static ParallelState ps(single, 1);
  RunContext ctx;
  ctx.tp = &ps.tp();
  ctx.ps = &ps;
  ctx.sp = sp;
  ctx.seed = seed;
  return sc.run(ctx);
}

Tensor pad_dim(const Tensor& t, int d, int64_t size) {
  if (t.size(d) == size) return t;
  Shape s = t.shape();
  s[static_cast<std::size_t>(d)] = size - t.size(d);
  return cat({t, Tensor(s)}, d);
}

Tensor chunk(const Tensor& whole, int d, int r, int n) {
  const int64_t c = whole.size(d) / n;
  return d == 0 ? whole.slice0(r * c, (r + 1) * c).clone() : whole.narrow_copy(d, r * c, c);
}

}  // namespace tpsp::checkers
