// tpsp-lab-ranks[-labNN]: runs checker scenarios on one rank and dumps what each produced. Started
// by ./check (tpsp-check) through the launcher; links the learner's files (or, for tpsp-lab-ranks,
// the engine's own solution). World = dp × tp ranks (--tp; TP ranks contiguous). `--scenario ID
// --out DIR` may be repeated (pairwise, with one --sp per scenario or one for all): the scenarios then
// run one after the other, each in a child
// forked from this process before any learner code ran (a batch: ./check saves an exec and the
// libraries' start per scenario, and each scenario still starts from a fresh process's state). Under
// each DIR/rank<w>/:
//   <output>.npy   every output tensor of the scenario (this rank's local tensor)
//   result.json    {"status": "ok" | "todo" | "error", "message", "seconds",
//                   "calls": [...], "compute": [...]   the recorder's records with their phases, in
//                                  engine/trace/record_json.h's schema (seconds, one clock)
//                   "host_code": true   only for a scenario that ran on the host (RunContext::run_on_host)}
//   trace.json     the same calls and compute spans as a Chrome trace (Perfetto; tools/plot_timeline.py),
//                  also when the scenario raised (the calls up to the error)
// It exits 0 when every scenario was ok; at the first one that is not, it stops there and exits 3 (a
// TODO is not implemented yet) or 1 (an error), the later scenarios left without a result.json.
// Stopped by SIGTERM (the launcher's budget), it prints where its main thread was before it exits.
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "checkers/rank/relay_inputs.h"
#include "checkers/rank/where.h"
#include "checkers/run_context.h"
#include "engine/comm/env.h"
#include "engine/comm/relay/relay_backend.h"
#include "engine/error.h"
#include "engine/io/npy.h"
#include "engine/lab_todo.h"
#include "engine/parallel_state.h"
#include "engine/runtime/device_runtime.h"
#include "engine/trace/record_json.h"
#include "engine/trace/span.h"

namespace {

using namespace tpsp;
using nlohmann::json;

/// Keeps a communication group open until the process ends. Closing Gloo's pairs one by one waits for
/// a round of its event loop per pair (tens of milliseconds per run, for nothing: when the process
/// exits the kernel closes the sockets). Nothing else changes: the results are written and main
/// returns as before, so the exit handlers still run and a crash in one still fails the run.
void keep_open_until_exit(std::shared_ptr<void> group) {
  static auto* kept = new std::vector<std::shared_ptr<void>>;  // never destroyed, on purpose
  kept->push_back(std::move(group));
}

/// The seeds a rank program is given: the models' (always) and the inputs' (only without a relay: under
/// one, the ranks ask the relay for their inputs and never see this seed; checkers/inputs.h).
struct Seeds {
  std::optional<uint64_t> inputs;
  uint64_t model = 0;
};

/// Files `result` as DIR/rank<rank>/result.json; prints its message when the status is not "ok".
void write_result(const std::string& out_dir, int rank, const json& result) {
  const std::string dir = out_dir + "/rank" + std::to_string(rank);
  std::filesystem::create_directories(dir);
  std::ofstream(dir + "/result.json") << result.dump(1, ' ', false, json::error_handler_t::replace) << "\n";
  if (result["status"] != "ok") std::fprintf(stderr, "%s\n", result["message"].get<std::string>().c_str());
}

/// Runs scenario `id` on this rank with the groups of `ps` and dumps it under OUT/rank<w>/ (see the
/// top of this file). Returns the exit code it stands for: 0 ok, 3 todo, 1 error.
int run_scenario(const std::string& id, const std::string& out_dir, ParallelState& ps, Device device, bool sp,
                 const Seeds& seeds) {
  const auto t0 = std::chrono::steady_clock::now();
  json result = {{"status", "ok"}, {"message", ""}, {"calls", json::array()}, {"compute", json::array()}};
  const int rank = ps.world().rank();
  int code = 0;
  try {
    const std::string dir = out_dir + "/rank" + std::to_string(rank);
    std::filesystem::create_directories(dir);
    const auto it = checkers::all_runs().find(id);
    if (it == checkers::all_runs().end()) throw std::invalid_argument("unknown scenario '" + id + "'");
    // Under a relay the phase is also marked there, so that the witness files calls by phase itself.
    comm::RelayBackend* relay = nullptr;  // under a device's staging layer when the run is on a device
    for (comm::Backend* b = &ps.world().backend(); b && !relay; b = b->inner())
      relay = dynamic_cast<comm::RelayBackend*>(b);
    checkers::RunContext ctx;
    ctx.tp = &ps.tp();
    ctx.ps = &ps;
    ctx.sp = sp;
    ctx.model_seed = seeds.model;
    ctx.device = device;
    if (seeds.inputs)
      ctx.in =
          checkers::InputDraw(checkers::seeded_rank_source(*seeds.inputs, ps.tp().rank(), ps.tp().size()));
    else if (relay)
      ctx.in = checkers::InputDraw(
          checkers::relay_rank_source(*relay, ps.tp().rank(), ps.tp().size(), ps.world().options().timeout));
    else
      throw std::invalid_argument("no inputs: give --seed, or run under ./check's relay (TPSP_RELAY_FD)");
    // Calls are filed under the phase in which they were ISSUED (an async call may complete later);
    // calls still pending at the end (in flight, or never waited and never completed) are listed too.
    trace::Recorder& rec = ps.world().recorder();
    rec.clear();
    std::vector<std::pair<double, std::string>> phases{{-1.0, "setup"}};
    ctx.begin_phase = [&](const std::string& next) {
      if (relay) relay->mark(next, ps.world().options().timeout);
      phases.emplace_back(rec.now(), next);
    };
    auto flush = [&] {
      auto phase_of = [&](double t) {
        std::string p = phases.front().second;
        for (const auto& [start, name] : phases)
          if (start <= t) p = name;
        return p;
      };
      std::vector<trace::CommRecord> calls = rec.records();
      for (trace::CommRecord r : rec.pending()) {
        r.waited = false;
        calls.push_back(r);
      }
      std::sort(calls.begin(), calls.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
      for (const trace::CommRecord& r : calls)
        result["calls"].push_back(trace::to_json(trace::PhasedCall{phase_of(r.t_issue), r}));
      for (const trace::ComputeRecord& s : rec.compute_records())
        result["compute"].push_back(trace::to_json(trace::PhasedSpan{phase_of(s.t_start), s}));
    };
    checkers::RankOutputs outputs;
    try {
      outputs = it->second(ctx);
    } catch (...) {
      if (ctx.host_code) result["host_code"] = true;
      flush();
      try {  // the trace up to the failure, for ./check --verbose's timeline; its lack is no new error
        rec.write_chrome_trace(dir + "/trace.json");
      } catch (const std::exception&) {
      }
      throw;
    }
    flush();
    rec.write_chrome_trace(dir + "/trace.json");
    // A scenario of host code by design (RunContext::run_on_host) keeps its tensors on the CPU.
    const Device home = ctx.host_code ? Device::cpu : device;
    if (ctx.host_code) result["host_code"] = true;
    for (const auto& [name, t] : outputs) {
      // On a device every result must stay there: one on the host means a layer moved it (or read it).
      TPSP_CHECK(!t.defined() || t.device() == home, "output '", name, "' is on ", device_name(t.device()),
                 "; with --device ", runtime::device_choice_name(runtime::device_from_env()),
                 " the scenario's tensors live on ", device_name(home),
                 ctx.host_code ? " (host code by design)" : "", " and its results must stay there");
      io::save_npy(dir + "/" + name + ".npy", t.defined() ? t.to(Device::cpu) : t);
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
  result["seconds"] = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  write_result(out_dir, rank, result);
  return code;
}

/// Joins the world (init_from_env), runs scenario `id` on this rank and dumps it under OUT/rank<w>/;
/// returns the exit code (0 ok, 3 todo, 1 error). A failure to join is filed as the scenario's result.
int run_alone(const std::string& id, const std::string& out_dir, int tp_size, bool sp, const Seeds& seeds) {
  std::shared_ptr<ParallelState> state;
  Device device = Device::cpu;
  int rank = 0;
  try {
    const runtime::DeviceChoice choice = runtime::device_from_env();
    device = runtime::activate(choice);
    auto world = runtime::init_world(choice, runtime::backend_from_env());
    keep_open_until_exit(world);
    trace::install(world->recorder_ptr());  // compute spans beside the communication records
    rank = world->rank();
    checkers::set_where_rank(rank);
    state = std::make_shared<ParallelState>(world, tp_size > 0 ? tp_size : world->size());
    keep_open_until_exit(state);
  } catch (const std::exception& e) {
    const bool todo = dynamic_cast<const NotImplemented*>(&e) != nullptr;
    write_result(out_dir, rank,
                 {{"status", todo ? "todo" : "error"}, {"message", e.what()}, {"calls", json::array()}});
    return todo ? 3 : 1;
  }
  return run_scenario(id, out_dir, *state, device, sp, seeds);
}

}  // namespace

int main(int argc, char** argv) {
  checkers::report_where_on_sigterm();  // before any thread starts
  CLI::App app{"tpsp-lab-ranks: one rank of checker scenarios (started by ./check through tpsp-run)"};
  std::vector<std::string> ids, out_dirs;
  std::vector<std::string> sps;  // "0" or "1": per scenario, or one for all
  bool list = false;
  int tp_size = 0;
  Seeds seeds;
  std::optional<uint64_t> model_seed;
  app.add_option("--scenario", ids, "labNN/name (repeat it, with --out, to run several in turn)");
  app.add_option("--tp", tp_size, "tensor-parallel size (default: the world size)");
  app.add_option("--sp", sps,
                 "sequence parallelism, 0 or 1 (once for every scenario, or once per --scenario)")
      ->check(CLI::IsMember({"0", "1"}));
  app.add_option("--seed", seeds.inputs,
                 "seed of the inputs (without it, they are asked of the relay: ./check's default)");
  app.add_option("--model-seed", model_seed,
                 "seed of the models the scenarios build (default: derived from --seed, as the grader does)");
  app.add_option("--out", out_dirs, "dump directory (one per --scenario, in the same order)");
  app.add_flag("--list", list, "print the scenario ids this program can run, then exit");
  std::string probe;
  app.add_option(
      "--probe-device", probe,
      "make DEVICE usable (cpu, cuda, cuda-emulated) and exit: 0, or 1 with the reason (./check asks "
      "once before a device run)");
  CLI11_PARSE(app, argc, argv);
  if (!probe.empty()) {
    try {
      runtime::activate(runtime::parse_device(probe));
      return 0;
    } catch (const std::exception& e) {
      std::printf("%s\n", e.what());
      return 1;
    }
  }
  if (list) {
    for (const auto& [name, run] : checkers::all_runs()) std::printf("%s\n", name.c_str());
    return 0;
  }
  if (ids.empty() || ids.size() != out_dirs.size()) {
    std::fprintf(stderr, "tpsp-lab-ranks: give one --out per --scenario (got %zu --scenario, %zu --out)\n",
                 ids.size(), out_dirs.size());
    return 2;
  }
  if (sps.size() > 1 && sps.size() != ids.size()) {
    std::fprintf(
        stderr,
        "tpsp-lab-ranks: give one --sp for all, or one per --scenario (got %zu --sp, %zu --scenario)\n",
        sps.size(), ids.size());
    return 2;
  }
  if (!seeds.inputs && !model_seed) {
    std::fprintf(stderr, "tpsp-lab-ranks: give --seed, or --model-seed under a relay\n");
    return 2;
  }
  seeds.model = model_seed ? *model_seed : checkers::model_seed_of(*seeds.inputs);
  auto sp_of = [&sps](std::size_t i) { return !sps.empty() && sps[sps.size() == 1 ? 0 : i] == "1"; };
  if (ids.size() == 1) return run_alone(ids[0], out_dirs[0], tp_size, sp_of(0), seeds);
  // A batch: each scenario in a child forked from this process, which has run no learner code (only
  // the static initializers any fresh process runs), so every scenario starts from the state of a
  // fresh process, as when it runs alone — learner code that behaves differently on its first call
  // gets the same verdict in a batch. The fork saves the exec, the dynamic link and the libraries'
  // start; each child does its own rendezvous, under TPSP_STORE_DIR/s<i>.
  const char* store = std::getenv("TPSP_STORE_DIR");
  for (std::size_t i = 0; i < ids.size(); ++i) {
    std::string sub;
    if (store != nullptr) {
      sub = std::string(store) + "/s" + std::to_string(i);
      std::error_code ec;
      std::filesystem::create_directories(sub, ec);
    }
    std::fflush(nullptr);
    const pid_t pid = ::fork();
    if (pid < 0) return 1;
    if (pid == 0) {
      if (!sub.empty()) ::setenv("TPSP_STORE_DIR", sub.c_str(), 1);
      std::exit(run_alone(ids[i], out_dirs[i], tp_size, sp_of(i), seeds));
    }
    int st = 0;
    while (::waitpid(pid, &st, 0) < 0 && errno == EINTR) {
    }
    const int code = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
    if (code != 0) return code;  // the grader runs this scenario, and the later ones, alone
  }
  return 0;
}
