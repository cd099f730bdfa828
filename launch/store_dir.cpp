// tpsp-run: FileStore rendezvous directories (see store_dir.h).
#include "launch/store_dir.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <vector>

namespace tpsp::run {

std::optional<std::string> make_private_store_dir(std::string* error) {
  std::string base = "/tmp";
  if (const char* tmpdir = std::getenv("TMPDIR"); tmpdir != nullptr && tmpdir[0] != '\0') base = tmpdir;
  while (base.size() > 1 && base.back() == '/') base.pop_back();
  std::string templ = base + "/tpsp-run.XXXXXX";
  std::vector<char> buffer(templ.begin(), templ.end());
  buffer.push_back('\0');
  if (mkdtemp(buffer.data()) == nullptr) {
    *error = "cannot create a store directory from '" + templ + "': " + std::strerror(errno);
    return std::nullopt;
  }
  std::error_code ec;
  const std::filesystem::path absolute = std::filesystem::absolute(buffer.data(), ec);
  return ec ? std::string(buffer.data()) : absolute.string();
}

void remove_tree(const std::string& path) {
  if (path.empty()) return;
  std::error_code ec;
  std::filesystem::remove_all(path, ec);
}

namespace {

// Replaces every character outside [A-Za-z0-9._-] with '_' (and an empty id by "_").
std::string sanitize_component(const std::string& text) {
  std::string out = text.empty() ? "_" : text;
  for (char& c : out) {
    const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                    c == '_' || c == '-';
    if (!ok) c = '_';
  }
  if (out == "." || out == "..") out = "_";
  return out;
}

// mkdir that accepts an existing directory. Returns false with *error set otherwise.
bool ensure_dir(const std::string& path, std::string* error) {
  if (mkdir(path.c_str(), 0700) == 0) return true;
  const int err = errno;
  struct stat st {};
  if (err == EEXIST && stat(path.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) return true;
  *error = "cannot create directory '" + path + "': " + std::strerror(err);
  return false;
}

}  // namespace

SlurmStoreLayout slurm_store_layout(const std::string& base, const std::string& job_id,
                                    const std::string& step_id, const std::string& cluster,
                                    const std::string& srun_port) {
  std::string trimmed = base.empty() ? "/tmp" : base;
  while (trimmed.size() > 1 && trimmed.back() == '/') trimmed.pop_back();
  SlurmStoreLayout layout;
  std::string name = "tpsp-slurm-";
  if (!cluster.empty()) name += sanitize_component(cluster) + "-";
  name += sanitize_component(job_id) + "." + sanitize_component(step_id);
  if (!srun_port.empty()) name += "-p" + sanitize_component(srun_port);
  layout.root = trimmed + "/" + name;
  layout.store = layout.root + "/store";
  layout.done = layout.root + "/done";
  return layout;
}

bool create_slurm_store(const SlurmStoreLayout& layout, std::string* error) {
  return ensure_dir(layout.root, error) && ensure_dir(layout.store, error) && ensure_dir(layout.done, error);
}

bool release_slurm_store(const SlurmStoreLayout& layout, int rank, int world_size) {
  const std::string marker = layout.done + "/" + std::to_string(rank);
  const int fd = open(marker.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return false;
  fsync(fd);
  close(fd);
  // Count the markers: the task that sees all of them is (one of) the last; removing twice is harmless.
  std::error_code ec;
  int seen = 0;
  for (std::filesystem::directory_iterator it(layout.done, ec), end; !ec && it != end; it.increment(ec)) {
    ++seen;
  }
  if (ec || seen < world_size) return false;
  remove_tree(layout.root);
  return true;
}

}  // namespace tpsp::run
