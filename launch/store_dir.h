// tpsp-run: the FileStore rendezvous directory handed to the ranks as TPSP_STORE_DIR.
//
// Local mode: one fresh private directory per launch (mkdtemp), removed when the launch ends, so two
// launches on one machine never share keys. Slurm mode: every task of a step must agree on the directory
// without talking to each other, so its name is derived from SLURM_JOB_ID and SLURM_STEP_ID under a base
// that all tasks share; the last task to finish removes it.
#pragma once

#include <optional>
#include <string>

namespace tpsp::run {

// Creates a fresh, empty, mode-0700 directory "<base>/tpsp-run.XXXXXX" where base is $TMPDIR (when set
// and non-empty) or /tmp. Returns its absolute path, or nullopt with *error set (errno text) on failure.
std::optional<std::string> make_private_store_dir(std::string* error);

// Removes directory `path` and everything under it. Best effort: errors are ignored (a directory that is
// already gone is fine).
void remove_tree(const std::string& path);

// The layout shared by all tasks of one Slurm step, with NAME =
// tpsp-slurm-[<cluster>-]<job>.<step>[-p<port>]:
//   <base>/NAME/store      -> TPSP_STORE_DIR (only the engine's FileStore writes here)
//   <base>/NAME/done/<r>   -> written by task r when it finishes (for cleanup)
// Job ids restart at 1 in a fresh cluster, so the cluster name and srun's port (unique among the sruns
// running on one host at a time) are part of the name when Slurm provides them.
struct SlurmStoreLayout {
  std::string root;
  std::string store;
  std::string done;
};

// Computes the layout under `base` (no filesystem access); `cluster` and `srun_port` are left out of
// the name when empty. Characters other than [A-Za-z0-9._-] in the parts are replaced by '_' so the
// name is always one path component.
SlurmStoreLayout slurm_store_layout(const std::string& base, const std::string& job_id,
                                    const std::string& step_id, const std::string& cluster = "",
                                    const std::string& srun_port = "");

// Creates root, store and done (mode 0700, existing ones are fine: the other tasks create them too).
// Returns false with *error set when a directory cannot be created or `base` does not exist.
bool create_slurm_store(const SlurmStoreLayout& layout, std::string* error);

// Marks task `rank` finished and, when all `world_size` tasks have marked themselves, removes the root.
// Whichever task finishes last removes the directory; a task killed before this call leaves it behind.
// Returns true when this call removed the directory. Errors are ignored (best effort).
bool release_slurm_store(const SlurmStoreLayout& layout, int rank, int world_size);

}  // namespace tpsp::run
