// tpsp-run: rank environment values (see env.h).
#include "launch/env.h"

#include <sched.h>
#include <unistd.h>

#include <cerrno>
#include <climits>
#include <cstdlib>
#include <set>
#include <thread>

extern char** environ;

namespace tpsp::run {

std::optional<std::string> get_env(const char* name) {
  const char* value = std::getenv(name);
  if (value == nullptr) return std::nullopt;
  return std::string(value);
}

bool env_nonempty(const char* name) {
  const char* value = std::getenv(name);
  return value != nullptr && value[0] != '\0';
}

bool slurm_detected() {
  return get_env("SLURM_PROCID").has_value() && get_env("SLURM_NTASKS").has_value();
}

std::optional<int> parse_int(const std::string& text) {
  if (text.empty()) return std::nullopt;
  errno = 0;
  char* end = nullptr;
  const long value = std::strtol(text.c_str(), &end, 10);
  if (errno != 0 || end != text.c_str() + text.size() || value < INT_MIN || value > INT_MAX) {
    return std::nullopt;
  }
  return static_cast<int>(value);
}

std::vector<int> expand_tasks_per_node(const std::string& text) {
  std::vector<int> counts;
  std::size_t pos = 0;
  while (pos < text.size()) {
    std::size_t comma = text.find(',', pos);
    if (comma == std::string::npos) comma = text.size();
    const std::string item = text.substr(pos, comma - pos);
    int repeat = 1;
    std::string count_text = item;
    const std::size_t paren = item.find('(');
    if (paren != std::string::npos) {
      // "4(x2)": count 4, repeated twice.
      if (item.size() < paren + 4 || item.compare(paren, 2, "(x") != 0 || item.back() != ')') return {};
      const auto times = parse_int(item.substr(paren + 2, item.size() - paren - 3));
      if (!times || *times < 1) return {};
      repeat = *times;
      count_text = item.substr(0, paren);
    }
    const auto count = parse_int(count_text);
    if (!count || *count < 0) return {};
    counts.insert(counts.end(), static_cast<std::size_t>(repeat), *count);
    pos = comma + 1;
  }
  return counts;
}

namespace {

// Reads integer variable `name` into *out. Returns false and fills *error when it is missing or junk.
bool read_int_var(const char* name, int* out, std::string* error) {
  const auto text = get_env(name);
  if (!text) {
    *error = std::string(name) + " is not set";
    return false;
  }
  const auto value = parse_int(*text);
  if (!value) {
    *error = std::string(name) + "='" + *text + "' is not an integer";
    return false;
  }
  *out = *value;
  return true;
}

// This node's entry of a tasks-per-node list variable, or nullopt when unset/malformed/out of range.
std::optional<int> tasks_on_this_node(const char* list_var, int node_id) {
  const auto text = get_env(list_var);
  if (!text) return std::nullopt;
  const std::vector<int> counts = expand_tasks_per_node(*text);
  if (node_id < 0 || static_cast<std::size_t>(node_id) >= counts.size()) return std::nullopt;
  if (counts[static_cast<std::size_t>(node_id)] < 1) return std::nullopt;
  return counts[static_cast<std::size_t>(node_id)];
}

}  // namespace

std::optional<SlurmTask> read_slurm_task(std::string* error) {
  SlurmTask task;
  if (!read_int_var("SLURM_PROCID", &task.rank, error)) return std::nullopt;
  if (!read_int_var("SLURM_NTASKS", &task.world_size, error)) return std::nullopt;
  if (task.world_size < 1 || task.rank < 0 || task.rank >= task.world_size) {
    *error = "SLURM_PROCID=" + std::to_string(task.rank) +
             " is not in [0, SLURM_NTASKS=" + std::to_string(task.world_size) + ")";
    return std::nullopt;
  }
  if (get_env("SLURM_LOCALID")) {
    if (!read_int_var("SLURM_LOCALID", &task.local_rank, error)) return std::nullopt;
  } else {
    task.local_rank = 0;
  }

  int node_id = 0;
  if (const auto text = get_env("SLURM_NODEID")) node_id = parse_int(*text).value_or(0);
  std::optional<int> local_world;
  if (const auto text = get_env("SLURM_NTASKS_PER_NODE")) {
    const auto value = parse_int(*text);
    if (value && *value >= 1) local_world = *value;
  }
  if (!local_world) local_world = tasks_on_this_node("SLURM_STEP_TASKS_PER_NODE", node_id);
  if (!local_world) local_world = tasks_on_this_node("SLURM_TASKS_PER_NODE", node_id);
  if (!local_world) {
    const auto nodes_text =
        get_env("SLURM_STEP_NUM_NODES") ? get_env("SLURM_STEP_NUM_NODES") : get_env("SLURM_NNODES");
    const auto nodes = nodes_text ? parse_int(*nodes_text) : std::nullopt;
    if (nodes && *nodes >= 1) local_world = (task.world_size + *nodes - 1) / *nodes;
  }
  task.local_world_size = local_world.value_or(task.world_size);
  if (task.local_rank < 0 || task.local_rank >= task.local_world_size) {
    *error = "SLURM_LOCALID=" + std::to_string(task.local_rank) + " is not in [0, local world size " +
             std::to_string(task.local_world_size) + ")";
    return std::nullopt;
  }

  auto job = get_env("SLURM_JOB_ID");
  if (!job) job = get_env("SLURM_JOBID");
  if (!job || job->empty()) {
    *error = "SLURM_JOB_ID is not set (needed to name the shared store directory)";
    return std::nullopt;
  }
  task.job_id = *job;
  auto step = get_env("SLURM_STEP_ID");
  if (!step) step = get_env("SLURM_STEPID");
  task.step_id = step && !step->empty() ? *step : "nostep";
  task.cluster = get_env("SLURM_CLUSTER_NAME").value_or("");
  task.srun_port = get_env("SLURM_SRUN_COMM_PORT").value_or("");
  if (const auto text = get_env("SLURM_CPUS_PER_TASK")) {
    const auto value = parse_int(*text);
    if (value && *value >= 1) task.cpus_per_task = *value;
  }
  return task;
}

int usable_cpus() {
#ifdef __linux__
  cpu_set_t mask;
  CPU_ZERO(&mask);
  if (sched_getaffinity(0, sizeof(mask), &mask) == 0) {
    const int count = CPU_COUNT(&mask);
    if (count >= 1) return count;
  }
#endif
  const unsigned hw = std::thread::hardware_concurrency();
  return hw >= 1 ? static_cast<int>(hw) : 1;
}

int online_cpus() {
  const long count = sysconf(_SC_NPROCESSORS_ONLN);
  return count >= 1 ? static_cast<int>(count) : 1;
}

int default_blas_threads(int cpus, int local_ranks) {
  if (local_ranks < 1) local_ranks = 1;
  const int threads = cpus / local_ranks;
  return threads >= 1 ? threads : 1;
}

std::vector<std::string> build_environment(const std::map<std::string, std::string>& set,
                                           const std::vector<std::string>& unset) {
  std::set<std::string> drop(unset.begin(), unset.end());
  std::vector<std::string> env;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string item(*entry);
    const std::size_t eq = item.find('=');
    const std::string name = eq == std::string::npos ? item : item.substr(0, eq);
    if (drop.count(name) != 0 || set.count(name) != 0) continue;
    env.push_back(item);
  }
  for (const auto& [name, value] : set) env.push_back(name + "=" + value);
  return env;
}

}  // namespace tpsp::run
