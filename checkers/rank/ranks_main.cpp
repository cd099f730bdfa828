// tpsp-lab-ranks[-labNN]: runs one checker scenario on one rank and dumps what it produced. Started
// by ./check (tpsp-check) through the launcher; links the learner's files (or, for tpsp-lab-ranks,
// the engine's own solution). World = dp × tp ranks (--tp; TP ranks contiguous). Under DIR/rank<w>/:
//   <output>.npy   every output tensor of the scenario (this rank's local tensor)
//   result.json    {"status": "ok" | "todo" | "error", "message",
//                   "calls": [{phase, op, group, dim, shape, tensor_bytes, bytes, label, seq, async,
//                              waited, peer, reduce, t_issue, t_start, t_end, t_waited}, ...],
//                   "compute": [{phase, name, label, t_start, t_end}, ...]}   (seconds, one clock)
//   trace.json     the same calls and compute spans as a Chrome trace (Perfetto; tools/plot_timeline.py)
// and exits 0 (ok), 3 (a TODO is not implemented yet) or 1 (an error). Stopped by SIGTERM (the
// launcher's budget), it prints where its main thread was before it exits.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include "checkers/rank/where.h"
#include "checkers/run_context.h"
#include "engine/comm/env.h"
#include "engine/io/npy.h"
#include "engine/lab_todo.h"
#include "engine/parallel_state.h"
#include "engine/trace.h"

namespace {

using namespace tpsp;
using nlohmann::json;

json call_json(const comm::CommRecord& r, const std::string& phase) {
  return {{"phase", phase},
          {"op", comm::op_name(r.op)},
          {"group", r.group},
          {"dim", r.dim},
          {"shape", r.shape},
          {"tensor_bytes", r.tensor_bytes},
          {"bytes", r.bytes},
          {"label", r.label},
          {"seq", r.seq},
          {"async", r.async},
          {"waited", r.waited},
          {"peer", r.peer},
          {"reduce", comm::reduce_op_name(r.reduce)},
          {"t_issue", r.t_issue},
          {"t_start", r.t_start},
          {"t_end", r.t_end},
          {"t_waited", r.t_waited}};
}

}  // namespace

int main(int argc, char** argv) {
  checkers::report_where_on_sigterm();  // before any thread starts
  CLI::App app{"tpsp-lab-ranks: one rank of a checker scenario (started by ./check through tpsp-run)"};
  std::string id, out_dir;
  bool sp = false, list = false;
  int tp_size = 0;
  uint64_t seed = 0;
  app.add_option("--scenario", id, "labNN/name");
  app.add_option("--tp", tp_size, "tensor-parallel size (default: the world size)");
  app.add_option("--sp", sp, "sequence parallelism (0 or 1)");
  app.add_option("--seed", seed, "seed of the inputs");
  app.add_option("--out", out_dir, "dump directory");
  app.add_flag("--list", list, "print the scenario ids this program can run, then exit");
  CLI11_PARSE(app, argc, argv);
  if (list) {
    for (const auto& [name, run] : checkers::all_runs()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (id.empty() || out_dir.empty()) {
    std::fprintf(stderr, "tpsp-lab-ranks: --scenario and --out are required\n");
    return 2;
  }

  json result = {{"status", "ok"}, {"message", ""}, {"calls", json::array()}, {"compute", json::array()}};
  int rank = 0, code = 0;
  std::string dir;
  try {
    auto world = comm::init_from_env();
    trace::install(world->recorder_ptr());  // compute spans beside the communication records
    rank = world->rank();
    checkers::set_where_rank(rank);
    dir = out_dir + "/rank" + std::to_string(rank);
    std::filesystem::create_directories(dir);
    ParallelState ps(world, tp_size > 0 ? tp_size : world->size());
    const auto it = checkers::all_runs().find(id);
    if (it == checkers::all_runs().end()) throw std::invalid_argument("unknown scenario '" + id + "'");
    checkers::RunContext ctx;
    ctx.tp = &ps.tp();
    ctx.ps = &ps;
    ctx.sp = sp;
    ctx.seed = seed;
    // Calls are filed under the phase in which they were ISSUED (an async call may complete later);
    // calls still pending at the end (in flight, or never waited and never completed) are listed too.
    comm::Recorder& rec = world->recorder();
    rec.clear();
    std::vector<std::pair<double, std::string>> phases{{-1.0, "setup"}};
    ctx.begin_phase = [&](const std::string& next) { phases.emplace_back(rec.now(), next); };
    auto flush = [&] {
      auto phase_of = [&](double t) {
        std::string p = phases.front().second;
        for (const auto& [start, name] : phases)
          if (start <= t) p = name;
        return p;
      };
      std::vector<comm::CommRecord> calls = rec.records();
      for (comm::CommRecord r : rec.pending()) {
        r.waited = false;
        calls.push_back(r);
      }
      std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      for (const comm::CommRecord& r : calls) result["calls"].push_back(call_json(r, phase_of(r.t_issue)));
      for (const comm::ComputeRecord& s : rec.compute_records())
        result["compute"].push_back({{"phase", phase_of(s.t_start)},
                                     {"name", s.name},
                                     {"label", s.label},
                                     {"t_start", s.t_start},
                                     {"t_end", s.t_end}});
    };
    checkers::RankOutputs outputs;
    try {
      outputs = it->second(ctx);
    } catch (...) {
      flush();
      throw;
    }
    flush();
    rec.write_chrome_trace(dir + "/trace.json");
    for (const auto& [name, t] : outputs) io::save_npy(dir + "/" + name + ".npy", t);
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
