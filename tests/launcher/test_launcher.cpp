// End-to-end tests of tpsp-run: each case starts the real launcher binary on one of the helper programs
// (helpers/rank_*.cpp) and checks its output, exit code and timing. Every wait has a deadline.
#include <doctest/doctest.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <map>
#include <regex>
#include <set>
#include <string>
#include <vector>

#include "launch/env.h"
#include "subprocess.h"

using namespace tpsp::test;

namespace {

const std::string kRun = TPSP_RUN_BIN;

// Path of helper program `name` (built next to each other).
std::string helper(const std::string& name) {
  return std::string(TPSP_LAUNCHER_HELPER_DIR) + "/" + name;
}

// The launcher command line: tpsp-run ARGS... -- PROG PROG_ARGS...
std::vector<std::string> launcher(std::vector<std::string> args, const std::string& prog,
                                  const std::vector<std::string>& prog_args = {}) {
  args.insert(args.begin(), kRun);
  args.push_back("--");
  args.push_back(helper(prog));
  args.insert(args.end(), prog_args.begin(), prog_args.end());
  return args;
}

// Parses "[rank R] KEY=VALUE" lines of rank_env into rank -> (key -> value).
std::map<int, std::map<std::string, std::string>> parse_env_output(const std::string& out) {
  static const std::regex line_re(R"(^\[rank (\d+)\] ([A-Z_]+)=(.*)$)");
  std::map<int, std::map<std::string, std::string>> ranks;
  for (const auto& line : split_lines(out)) {
    std::smatch m;
    if (std::regex_match(line, m, line_re)) ranks[std::stoi(m[1])][m[2]] = m[3];
  }
  return ranks;
}

// True when `dir` exists.
bool dir_exists(const std::string& dir) {
  struct stat st {};
  return stat(dir.c_str(), &st) == 0;
}

// Removes a test's temporary directory.
void remove_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
}

// Describes a result for failure messages.
std::string show(const RunResult& r) {
  return "exited=" + std::to_string(r.exited) + " code=" + std::to_string(r.code) +
         " seconds=" + std::to_string(r.seconds) + " timed_out=" + std::to_string(r.timed_out) +
         "\n--- stdout ---\n" + r.out.substr(0, 3000) + "\n--- stderr ---\n" + r.err.substr(0, 3000);
}

}  // namespace

TEST_CASE("ranks get distinct RANK, one WORLD_SIZE and one fresh store dir, removed at exit") {
  const std::string tmp = make_temp_dir();
  const RunResult r = run(launcher({"-n", "4"}, "rank_env"), {{"TMPDIR", tmp}});
  INFO(show(r));
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.exited);
  CHECK(r.code == 0);
  CHECK(r.err.empty());  // quiet when everything works
  const auto ranks = parse_env_output(r.out);
  REQUIRE(ranks.size() == 4);
  std::set<std::string> stores;
  for (const auto& [rank, env] : ranks) {
    CHECK(env.at("RANK") == std::to_string(rank));
    CHECK(env.at("LOCAL_RANK") == std::to_string(rank));
    CHECK(env.at("WORLD_SIZE") == "4");
    CHECK(env.at("LOCAL_WORLD_SIZE") == "4");
    CHECK(env.at("STORE_EXISTS") == "1");
    stores.insert(env.at("TPSP_STORE_DIR"));
  }
  REQUIRE(stores.size() == 1);
  const std::string store = *stores.begin();
  CHECK(store.rfind(tmp + "/tpsp-run.", 0) == 0);  // made under $TMPDIR
  CHECK_FALSE(dir_exists(store));                  // and gone after the run
  CHECK(std::filesystem::is_empty(tmp));
  remove_dir(tmp);
}

TEST_CASE("two launches at once get different store dirs") {
  Child a(launcher({"-n", "2"}, "rank_env", {"0.8"}));
  Child b(launcher({"-n", "2"}, "rank_env", {"0.8"}));
  const RunResult ra = a.wait(15), rb = b.wait(15);
  INFO(show(ra));
  INFO(show(rb));
  REQUIRE(ra.code == 0);
  REQUIRE(rb.code == 0);
  const auto ea = parse_env_output(ra.out), eb = parse_env_output(rb.out);
  REQUIRE(ea.size() == 2);
  REQUIRE(eb.size() == 2);
  CHECK(ea.at(0).at("TPSP_STORE_DIR") == ea.at(1).at("TPSP_STORE_DIR"));
  CHECK(eb.at(0).at("TPSP_STORE_DIR") == eb.at(1).at("TPSP_STORE_DIR"));
  CHECK(ea.at(0).at("TPSP_STORE_DIR") != eb.at(0).at("TPSP_STORE_DIR"));
}

TEST_CASE("output lines carry their rank and never interleave mid-line") {
  constexpr int kLines = 3000;
  const RunResult r = run(launcher({"-n", "4"}, "rank_lines", {std::to_string(kLines)}));
  INFO(show(r));
  REQUIRE(r.code == 0);
  static const std::regex line_re(R"(^\[rank (\d)\] r=(\d) i=(\d+) ([a-z]+)$)");
  for (const auto* text : {&r.out, &r.err}) {
    const bool is_err = text == &r.err;
    std::map<int, int> next;  // per rank: the next index expected on this stream
    std::size_t bad = 0;
    for (const auto& line : split_lines(*text)) {
      std::smatch m;
      if (!std::regex_match(line, m, line_re) || m[1] != m[2]) {
        if (bad++ < 3) FAIL_CHECK("malformed line: " << line);
        continue;
      }
      const int rank = std::stoi(m[1]);
      int& expected = next[rank];
      while (expected % 10 == 9 ? !is_err : is_err) ++expected;  // skip lines of the other stream
      const int index = std::stoi(m[3]);
      CHECK(index == expected);
      CHECK(m[4].str() ==
            std::string(static_cast<std::size_t>(40 + index % 50), static_cast<char>('a' + rank)));
      expected = index + 1;
    }
    CHECK(bad == 0);
    CHECK(next.size() == 4);
  }
  CHECK(split_lines(r.out).size() == 4 * kLines * 9 / 10);
  CHECK(split_lines(r.err).size() == 4 * kLines / 10);
}

TEST_CASE("a rank exiting 3 stops the others promptly and is named with its last lines") {
  const RunResult r = run(launcher({"-n", "4", "--tail", "5"}, "rank_exit", {"2", "3"}));
  INFO(show(r));
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.exited);
  CHECK(r.code == 3);
  CHECK(r.seconds < 5.0);  // the other ranks would sleep 60 s
  CHECK(r.err.find("job failed: rank 2 exited with code 3") != std::string::npos);
  CHECK(r.err.find("last 5 lines of rank 2:") != std::string::npos);
  CHECK(r.err.find("  [rank 2] last words of rank 2\n") != std::string::npos);
  CHECK(r.err.find("  [rank 2] about to fail\n") != std::string::npos);
  CHECK(r.err.find("working line 29") != std::string::npos);
  CHECK(r.err.find("working line 25") == std::string::npos);  // only the last 5 lines
  CHECK(r.err.find("stopped the other ranks: rank 0 (killed by SIGTERM), rank 1 (killed by SIGTERM), rank 3 "
                   "(killed by SIGTERM)") != std::string::npos);
  CHECK(r.err.find("exit code 3") != std::string::npos);
}

TEST_CASE("ranks that fail a little after the first one end on their own, and are not reported as stopped") {
  // Every rank meets the same error 0.1 s apart: the launcher lets the others end (kPeerLinger) before it
  // stops anyone, so each rank's own exit is reported, not a SIGTERM that reads like a hang.
  const RunResult r = run(launcher({"-n", "3"}, "rank_exit", {"-1", "3"}));
  INFO(show(r));
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.code == 3);
  CHECK(r.err.find("job failed: rank 0 exited with code 3") != std::string::npos);
  CHECK(r.err.find("killed by SIGTERM") == std::string::npos);
}

TEST_CASE("a segfaulting rank is reported as SIGSEGV with exit 139") {
  const RunResult r = run(launcher({"-n", "3"}, "rank_segv"));
  INFO(show(r));
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.exited);
  CHECK(r.code == 139);
  CHECK(r.seconds < 5.0);
  CHECK(r.err.find("job failed: rank 1 was killed by SIGSEGV") != std::string::npos);
  CHECK(r.err.find("  [rank 1] rank 1 writes through a bad pointer") != std::string::npos);
}

TEST_CASE("--timeout ends a hung job with exit 124 and names the hung rank") {
  const RunResult r = run(launcher({"-n", "2", "--timeout", "2"}, "rank_loop"));
  INFO(show(r));
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.exited);
  CHECK(r.code == 124);
  CHECK(r.seconds >= 1.9);
  CHECK(r.seconds < 6.0);
  CHECK(r.err.find("timed out after 2 s; ranks still running: 1 ") != std::string::npos);
  CHECK(r.err.find("  [rank 1] rank 1 enters an endless loop") != std::string::npos);
}

TEST_CASE("a rank that ignores SIGTERM is SIGKILLed after the grace period") {
  const RunResult r =
      run(launcher({"-n", "2", "--grace", "0.5"}, "rank_sleep", {"60", "ignore-term=1", "exit=0:5"}));
  INFO(show(r));
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.code == 5);
  CHECK(r.seconds < 4.0);
  CHECK(r.err.find("rank 1 (killed by SIGKILL after ignoring SIGTERM)") != std::string::npos);
}

TEST_CASE("SIGTERM to the launcher is forwarded and no process or store dir outlives it") {
  Child child(launcher({"-n", "2"}, "rank_sleep", {"60", "grandchild"}));
  REQUIRE(child.wait_for_output("ready pid=", 2, 10));
  static const std::regex ready_re(R"(ready pid=(\d+) grandchild=(\d+) store=(\S+))");
  std::vector<pid_t> pids;
  std::string store;
  for (const auto& line : split_lines(child.out())) {
    std::smatch m;
    if (!std::regex_search(line, m, ready_re)) continue;
    pids.push_back(std::stoi(m[1]));
    pids.push_back(std::stoi(m[2]));
    store = m[3];
  }
  REQUIRE(pids.size() == 4);
  CHECK(dir_exists(store));
  const double t0 = now_s();
  REQUIRE(kill(child.pid(), SIGTERM) == 0);
  const RunResult r = child.wait(10);
  INFO(show(r));
  CHECK(r.code == 128 + SIGTERM);
  CHECK(now_s() - t0 < 4.0);
  CHECK(r.err.find("received SIGTERM") != std::string::npos);
  CHECK_FALSE(dir_exists(store));
  // Grandchildren are reparented and reaped by init; give that a moment.
  const double until = now_s() + 3.0;
  for (pid_t pid : pids) {
    while (process_alive(pid) && now_s() < until) usleep(20000);
    CHECK_MESSAGE(!process_alive(pid), "process " << pid << " outlived the launcher");
  }
}

TEST_CASE("a process that escaped its rank's process group is killed when the job ends") {
  const RunResult r = run(launcher({"-n", "1"}, "rank_sleep", {"60", "escape", "exit=0:0"}));
  INFO(show(r));
  REQUIRE_FALSE(r.timed_out);
  CHECK(r.code == 0);
  CHECK(r.seconds < 3.0);
  static const std::regex escaped_re(R"(escaped=(\d+))");
  std::smatch m;
  REQUIRE(std::regex_search(r.out, m, escaped_re));
  const pid_t escaped = std::stoi(m[1]);
#ifdef __linux__
  CHECK(r.err.find("killed 1 process(es) that outlived their rank") != std::string::npos);
  CHECK_FALSE(process_alive(escaped));
#else
  kill(escaped, SIGKILL);  // no subreaper outside Linux: clean up after ourselves
#endif
}

TEST_CASE("Slurm mode (emulated) maps SLURM_* to the rank env and a deterministic store dir") {
  const std::string base = make_temp_dir();
  const std::string job = std::to_string(getpid()) + "77";
  const EnvChanges env = {{"SLURM_PROCID", "2"},
                          {"SLURM_NTASKS", "4"},
                          {"SLURM_LOCALID", "2"},
                          {"SLURM_JOB_ID", job},
                          {"SLURM_STEP_ID", "5"}};
  const std::string expected_store = base + "/tpsp-slurm-" + job + ".5/store";
  for (int attempt = 0; attempt < 2; ++attempt) {  // the same directory every time
    const RunResult r = run(launcher({"--store-base", base}, "rank_env"), env);
    INFO(show(r));
    REQUIRE(r.code == 0);
    const auto ranks = parse_env_output(r.out);
    REQUIRE(ranks.size() == 1);
    REQUIRE(ranks.count(2) == 1);  // prefixed with the Slurm rank
    const auto& e = ranks.at(2);
    CHECK(e.at("RANK") == "2");
    CHECK(e.at("WORLD_SIZE") == "4");
    CHECK(e.at("LOCAL_RANK") == "2");
    CHECK(e.at("LOCAL_WORLD_SIZE") == "4");
    CHECK(e.at("TPSP_STORE_DIR") == expected_store);
    CHECK(e.at("STORE_EXISTS") == "1");
  }
  // Only one of four tasks finished: the directory stays for the others.
  CHECK(dir_exists(expected_store));

  // All four tasks of a step (one node, SLURM_NTASKS_PER_NODE=4): the last one out removes the directory.
  std::vector<std::unique_ptr<Child>> tasks;
  for (int rank = 0; rank < 4; ++rank) {
    tasks.push_back(std::make_unique<Child>(launcher({"--store-base", base}, "rank_env", {"0.3"}),
                                            EnvChanges{{"SLURM_PROCID", std::to_string(rank)},
                                                       {"SLURM_NTASKS", "4"},
                                                       {"SLURM_LOCALID", std::to_string(rank)},
                                                       {"SLURM_NTASKS_PER_NODE", "4"},
                                                       {"SLURM_JOB_ID", job},
                                                       {"SLURM_STEP_ID", "6"},
                                                       {"SLURM_CLUSTER_NAME", "emu"},
                                                       {"SLURM_SRUN_COMM_PORT", "4242"}}));
  }
  std::set<std::string> stores;
  for (auto& task : tasks) {
    const RunResult r = task->wait(15);
    INFO(show(r));
    REQUIRE(r.code == 0);
    const auto ranks = parse_env_output(r.out);
    REQUIRE(ranks.size() == 1);
    stores.insert(ranks.begin()->second.at("TPSP_STORE_DIR"));
    CHECK(ranks.begin()->second.at("LOCAL_WORLD_SIZE") == "4");
  }
  const std::string step_root = base + "/tpsp-slurm-emu-" + job + ".6-p4242";
  CHECK(stores == std::set<std::string>{step_root + "/store"});
  CHECK_FALSE(dir_exists(step_root));
  remove_dir(base);
}

TEST_CASE("OPENBLAS_NUM_THREADS is cores / local ranks unless the user set it") {
  const int cpus = tpsp::run::usable_cpus();
  for (int n : {1, 2, 3}) {
    const RunResult r = run(launcher({"-n", std::to_string(n)}, "rank_env"));
    REQUIRE(r.code == 0);
    const auto ranks = parse_env_output(r.out);
    REQUIRE(ranks.size() == static_cast<std::size_t>(n));
    for (const auto& [rank, env] : ranks) {
      CHECK(env.at("OPENBLAS_NUM_THREADS") == std::to_string(std::max(1, cpus / n)));
    }
  }
  const RunResult user = run(launcher({"-n", "2"}, "rank_env"), {{"OPENBLAS_NUM_THREADS", "7"}});
  REQUIRE(user.code == 0);
  for (const auto& [rank, env] : parse_env_output(user.out)) CHECK(env.at("OPENBLAS_NUM_THREADS") == "7");
  const RunResult empty = run(launcher({"-n", "1"}, "rank_env"), {{"OPENBLAS_NUM_THREADS", ""}});
  REQUIRE(empty.code == 0);  // an empty value means "unset" to OpenBLAS: the launcher fills it in
  for (const auto& [rank, env] : parse_env_output(empty.out)) {
    CHECK(env.at("OPENBLAS_NUM_THREADS") == std::to_string(std::max(1, cpus)));
  }
  const RunResult flag =
      run(launcher({"-n", "2", "--blas-threads", "3"}, "rank_env"), {{"OPENBLAS_NUM_THREADS", "7"}});
  REQUIRE(flag.code == 0);
  for (const auto& [rank, env] : parse_env_output(flag.out)) CHECK(env.at("OPENBLAS_NUM_THREADS") == "3");
}

TEST_CASE("--no-file-store leaves TPSP_STORE_DIR unset for a TCP rendezvous") {
  const RunResult r =
      run(launcher({"-n", "2", "--no-file-store"}, "rank_env"),
          {{"MASTER_ADDR", "127.0.0.1"}, {"MASTER_PORT", "29511"}, {"TPSP_STORE_DIR", "/stale"}});
  INFO(show(r));
  REQUIRE(r.code == 0);
  for (const auto& [rank, env] : parse_env_output(r.out)) {
    CHECK(env.at("TPSP_STORE_DIR") == "<unset>");
    CHECK(env.at("MASTER_ADDR") == "127.0.0.1");
    CHECK(env.at("MASTER_PORT") == "29511");
  }
}

TEST_CASE("bad usage exits 2 with a clear message") {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{kRun}, "no program given"},
      {{kRun, "-n", "2"}, "no program given"},
      {{kRun, "-n", "2", "--"}, "no program given"},
      {{kRun, "-n", "0", "--", "true"}, "-n must be at least 1"},
      {{kRun, "-n", "-3", "--", "true"}, "-n must be at least 1"},
      {{kRun, "--", "true"}, "-n N is required"},
      {{kRun, "-n", "2", "--bogus", "true"}, "unknown option '--bogus'"},
      {{kRun, "-n", "two", "--", "true"}, "error:"},
      {{kRun, "-n", "2", "--timeout", "-1", "--", "true"}, "--timeout must be >= 0"},
      {{kRun, "-n", "2", "--no-file-store", "--", "true"}, "needs MASTER_ADDR and MASTER_PORT"},
      {{kRun, "-n", "2", "--slurm", "--", "true"}, "exclude each other"},
      {{kRun, "--slurm", "--", "true"}, "SLURM_PROCID is not set"},
  };
  for (const auto& [argv, message] : cases) {
    const RunResult r = run(argv);
    INFO(show(r));
    CHECK(r.exited);
    CHECK(r.code == 2);
    CHECK(r.err.find(message) != std::string::npos);
  }
  const RunResult help = run({kRun, "--help"});
  CHECK(help.code == 0);
  CHECK(help.out.find("--timeout") != std::string::npos);
}

TEST_CASE("a program that cannot be executed fails loudly with 127") {
  const RunResult r = run({kRun, "-n", "2", "--", "/nonexistent/tpsp-no-such-program"});
  INFO(show(r));
  CHECK(r.code == 127);
  CHECK(r.err.find("cannot execute '/nonexistent/tpsp-no-such-program'") != std::string::npos);
  CHECK(r.err.find("exited with code 127 (command not found?)") != std::string::npos);
}

TEST_CASE("the program's arguments pass through untouched, options included") {
  const RunResult r = run({kRun, "-n", "1", "--", "/bin/sh", "-c", "echo \"$0|$1|$RANK\"", "-n", "--tail"});
  INFO(show(r));
  CHECK(r.code == 0);
  CHECK(r.out == "[rank 0] -n|--tail|0\n");
}
