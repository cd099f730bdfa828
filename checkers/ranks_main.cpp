// tpsp-lab-ranks[-labNN]: runs one checker scenario on one rank and dumps what it produced.
// Started by tpsp-check through the launcher; links the learner's files for labNN (or the engine's
// own solution for tpsp-lab-ranks). It writes, under DIR/rank<r>/:
//   <output>.npy   every output tensor of the scenario (this rank's local tensor)
//   result.json    {"status": "ok" | "todo" | "error", "message", "outputs": {name: split_dim},
//                   "calls": [{phase, op, group, dim, shape, tensor_bytes, bytes, label}, ...]}
// and exits 0 (ok), 3 (a TODO is not implemented yet) or 1 (an error).
#include <CLI/CLI.hpp>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkers/scenario.h"
#include "engine/comm/env.h"
#include "engine/io/npy.h"
#include "engine/lab_todo.h"
#include "engine/parallel_state.h"

namespace {

using namespace tpsp;
using nlohmann::json;

json call_json(const comm::CommRecord& r, const std::string& phase) {
  return {{"phase", phase},   {"op", comm::op_name(r.op)},      {"group", r.group}, {"dim", r.dim},
          {"shape", r.shape}, {"tensor_bytes", r.tensor_bytes}, {"bytes", r.bytes}, {"label", r.label}};
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"tpsp-lab-ranks: one rank of a checker scenario (started by ./check through tpsp-run)"};
  std::string id, out_dir;
  bool sp = false;
  uint64_t seed = 0;
  app.add_option("--scenario", id, "labNN/name")->required();
  app.add_option("--sp", sp, "sequence parallelism (0 or 1)");
  app.add_option("--seed", seed, "seed of the inputs")->required();
  app.add_option("--out", out_dir, "dump directory")->required();
  CLI11_PARSE(app, argc, argv);

  json result = {{"status", "ok"}, {"message", ""}, {"calls", json::array()}, {"outputs", json::object()}};
  int rank = 0, code = 0;
  std::string dir;
  try {
    auto world = comm::init_from_env();
    rank = world->rank();
    dir = out_dir + "/rank" + std::to_string(rank);
    std::filesystem::create_directories(dir);
    ParallelState ps(world, world->size());
    const checkers::Scenario& sc = checkers::find_scenario(id);
    checkers::RunContext ctx;
    ctx.tp = &ps.tp();
    ctx.ps = &ps;
    ctx.sp = sp;
    ctx.seed = seed;
    std::string phase = "setup";
    comm::Recorder& rec = world->recorder();
    auto flush = [&] {
      for (const comm::CommRecord& r : rec.records()) result["calls"].push_back(call_json(r, phase));
      rec.clear();
    };
    rec.clear();
    ctx.begin_phase = [&](const std::string& next) {
      flush();
      phase = next;
    };
    checkers::Outputs outputs;
    try {
      outputs = sc.run(ctx);
    } catch (...) {
      flush();
      throw;
    }
    flush();
    for (const auto& [name, o] : outputs) {
      io::save_npy(dir + "/" + name + ".npy", o.local);
      result["outputs"][name] = o.split_dim;
    }
  } catch (const NotImplemented& e) {
    result["status"] = "todo";
    result["message"] = e.what();
    code = 3;
  } catch (const std::exception& e) {
    result["status"] = "error";
    result["message"] = e.what();
    code = 1;
  }
  if (dir.empty()) dir = out_dir + "/rank" + std::to_string(rank);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/result.json") << result.dump(1) << "\n";
  if (code != 0) std::fprintf(stderr, "%s\n", result["message"].get<std::string>().c_str());
  return code;
}
