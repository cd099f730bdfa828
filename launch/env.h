// tpsp-run: the environment contract between the launcher and the ranks.
//
// Every rank is started with RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE, TPSP_STORE_DIR (unless the
// TCP store or the relay was asked for: the relay's ranks get TPSP_RELAY_FD=3) and OPENBLAS_NUM_THREADS. This
// file computes those values: from the command line in local mode, from SLURM_* variables under srun, and the
// BLAS thread count from the CPUs this process may run on. It touches no process state except reading the
// environment.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

namespace tpsp::run {

// Where one task of a Slurm step sits, read from the SLURM_* variables that srun sets.
struct SlurmTask {
  int rank = 0;                      // SLURM_PROCID
  int world_size = 1;                // SLURM_NTASKS
  int local_rank = 0;                // SLURM_LOCALID
  int local_world_size = 1;          // SLURM_NTASKS_PER_NODE, else derived (see read_slurm_task)
  std::string job_id;                // SLURM_JOB_ID (SLURM_JOBID for old releases)
  std::string step_id;               // SLURM_STEP_ID (SLURM_STEPID), "nostep" when absent
  std::string cluster;               // SLURM_CLUSTER_NAME, empty when unset
  std::string srun_port;             // SLURM_SRUN_COMM_PORT (srun's port: one per running srun), or empty
  std::optional<int> cpus_per_task;  // SLURM_CPUS_PER_TASK when set
};

// Returns the value of environment variable `name`, or nullopt when it is unset. An empty value counts
// as set. No errors.
std::optional<std::string> get_env(const char* name);

// True when environment variable `name` is set to a non-empty value (the engine and OpenBLAS treat an
// empty value as unset, so the launcher does too).
bool env_nonempty(const char* name);

// True when this process looks like one task of a Slurm step: SLURM_PROCID and SLURM_NTASKS are both set.
bool slurm_detected();

// Reads this task's placement from the SLURM_* variables. LOCAL_WORLD_SIZE comes from
// SLURM_NTASKS_PER_NODE when set, else from this node's entry (SLURM_NODEID) of SLURM_STEP_TASKS_PER_NODE
// or SLURM_TASKS_PER_NODE (format "4(x2),3"), else ceil(SLURM_NTASKS / SLURM_NNODES), else SLURM_NTASKS.
// Errors: returns nullopt and sets *error to a one-line reason when a required variable is missing or
// not a number, or when the values are inconsistent (rank outside [0, world size)).
std::optional<SlurmTask> read_slurm_task(std::string* error);

// Expands a Slurm tasks-per-node list such as "4(x2),3" into {4, 4, 3}. Returns an empty vector when the
// text is malformed. No other errors.
std::vector<int> expand_tasks_per_node(const std::string& text);

// Number of CPUs this process may run on: the size of its sched_getaffinity mask on Linux, else
// std::thread::hardware_concurrency(); at least 1.
int usable_cpus();

// Number of CPUs online on the machine (sysconf), at least 1. Used to tell whether Slurm has bound this
// task to a subset of the machine.
int online_cpus();

// The default OPENBLAS_NUM_THREADS for a rank: max(1, cpus / local_ranks). `cpus` is a CPU count,
// `local_ranks` the number of ranks sharing them (values < 1 are treated as 1).
int default_blas_threads(int cpus, int local_ranks);

// Parses a whole string as a decimal int. Returns nullopt on any junk, overflow or empty input.
std::optional<int> parse_int(const std::string& text);

// Builds a complete environment ("KEY=VALUE" strings) from this process's environment: variables in
// `set` replace or add, names in `unset` are dropped. Order of the inherited variables is kept.
std::vector<std::string> build_environment(const std::map<std::string, std::string>& set,
                                           const std::vector<std::string>& unset);

}  // namespace tpsp::run
