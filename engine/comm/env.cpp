#include "engine/comm/env.h"

#include <fcntl.h>
#include <gloo/common/error.h>
#include <gloo/common/logging.h>
#include <gloo/common/string.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>
#include <poll.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <cstdlib>
#include <string>
#include <thread>

#include "engine/comm/gloo/gloo_backend.h"
#include "engine/comm/relay/relay_backend.h"
#include "engine/comm/tcp_store.h"
#include "engine/error.h"

namespace tpsp::comm {

namespace {

const char* env(const char* name) {
  const char* v = std::getenv(name);
  return v && *v ? v : nullptr;
}

/// Integer value of the first set variable among `names`, or `fallback`. ShapeError if not an integer.
int env_int(std::initializer_list<const char*> names, int fallback) {
  for (const char* name : names) {
    const char* v = env(name);
    if (!v) continue;
    int out = 0;
    const char* end = v + std::char_traits<char>::length(v);
    const auto [p, ec] = std::from_chars(v, end, out);
    TPSP_CHECK(ec == std::errc() && p == end, name, "='", v, "' is not an integer");
    return out;
  }
  return fallback;
}

/// Each init_from_env call in a process uses its own store prefix, so a second world can rendezvous
/// in the same store directory (the FileStore reuse trap). Ranks call init the same number of times.
std::atomic<int> g_init_count{0};

/// Gloo's FileStore, whose wait() sleeps 10 ms between looks at the directory: a run's rendezvous (the
/// world, then each group) waits for several keys in turn, so each costs up to 10 ms of sleeping. This
/// one sleeps on inotify instead: a key is published by a rename into the directory, which wakes the
/// waiter at once. It still looks every 10 ms, for a directory whose writers inotify does not see (a
/// network file system shared by ranks on several hosts), and when inotify is unavailable.
class NotifiedFileStore final : public gloo::rendezvous::FileStore {
 public:
  explicit NotifiedFileStore(const std::string& dir) : FileStore(dir) {
    fd_ = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (fd_ >= 0 && inotify_add_watch(fd_, basePath_.c_str(), IN_MOVED_TO) < 0) {
      ::close(fd_);
      fd_ = -1;
    }
  }
  ~NotifiedFileStore() override {
    if (fd_ >= 0) ::close(fd_);
  }
  NotifiedFileStore(const NotifiedFileStore&) = delete;
  NotifiedFileStore& operator=(const NotifiedFileStore&) = delete;

  using FileStore::wait;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override {
    constexpr auto kLook = std::chrono::milliseconds(10);
    const auto start = std::chrono::steady_clock::now();
    while (!check(keys)) {
      const auto waited = std::chrono::steady_clock::now() - start;
      if (timeout != gloo::kNoTimeout && waited > timeout)
        GLOO_THROW_IO_EXCEPTION("Wait timeout for key(s): ", ::gloo::MakeString(keys));
      if (fd_ < 0) {
        std::this_thread::sleep_for(kLook);
        continue;
      }
      pollfd p{fd_, POLLIN, 0};
      if (::poll(&p, 1, static_cast<int>(kLook.count())) > 0) {
        char events[4096];  // drained only to clear the readiness; check() decides
        while (::read(fd_, events, sizeof events) > 0) {
        }
      }
    }
  }

 private:
  int fd_ = -1;
};

}  // namespace

GroupOptions options_from_env() {
  GroupOptions o;
  if (const char* t = env("TPSP_COMM_TIMEOUT")) {
    char* end = nullptr;
    const double s = std::strtod(t, &end);
    TPSP_CHECK(end && *end == '\0' && s > 0, "TPSP_COMM_TIMEOUT='", t,
               "' is not a positive number of seconds");
    o.timeout = std::chrono::milliseconds(static_cast<int64_t>(s * 1000.0 + 0.5));
    if (o.timeout.count() < 1) o.timeout = std::chrono::milliseconds(1);
  }
  if (const char* f = env("TPSP_COMM_FINGERPRINT")) {
    const std::string v = f;
    o.fingerprints = !(v == "0" || v == "off" || v == "false" || v == "no");
  }
  if (const char* l = env("TPSP_LINK")) o.link = LinkModel::parse(l);
  if (const char* b = env("TPSP_COMM_CHECK_BUFFERS")) {
    const std::string v = b;
    o.check_buffers = v == "1" || v == "on" || v == "true" || v == "yes";
  }
  return o;
}

int local_rank() {
  return env_int({"LOCAL_RANK", "SLURM_LOCALID"}, 0);
}
int local_world_size() {
  return env_int({"LOCAL_WORLD_SIZE"}, 1);
}

std::shared_ptr<ProcessGroup> init_from_env() {
  return init_from_env(options_from_env());
}

std::shared_ptr<ProcessGroup> init_from_env(const GroupOptions& options) {
  return ProcessGroup::create_world(cpu_backend_from_env(options), options);
}

std::unique_ptr<Backend> cpu_backend_from_env(const GroupOptions& options) {
  const int size = env_int({"WORLD_SIZE", "SLURM_NTASKS"}, 1);
  const int rank = env_int({"RANK", "SLURM_PROCID"}, 0);
  TPSP_CHECK(size >= 1, "WORLD_SIZE=", size, " must be at least 1");
  TPSP_CHECK(rank >= 0 && rank < size, "RANK=", rank, " is not in [0, WORLD_SIZE=", size, ")");
  const std::string prefix = "tpsp" + std::to_string(g_init_count++);

  // Under ./grade: every byte through the grader's witness relay on the descriptor it handed over.
  if (const char* fd = env("TPSP_RELAY_FD")) {
    const int n = env_int({"TPSP_RELAY_FD"}, -1);
    TPSP_CHECK(n >= 0 && ::fcntl(n, F_GETFD) != -1, "TPSP_RELAY_FD=", fd,
               " is not an open file descriptor (the grader's launcher hands the relay's socket over)");
    return RelayBackend::connect_world(n, rank, size, prefix, options.timeout);
  }

  std::shared_ptr<gloo::rendezvous::Store> store;
  try {
    if (const char* dir = env("TPSP_STORE_DIR")) {
      struct stat st {};
      TPSP_CHECK(::stat(dir, &st) == 0 && S_ISDIR(st.st_mode), "TPSP_STORE_DIR=", dir,
                 " is not an existing directory (the launcher creates a fresh one per run)");
      store = std::make_shared<NotifiedFileStore>(dir);
    } else if (env("MASTER_ADDR") && env("MASTER_PORT")) {
      const int port = env_int({"MASTER_PORT"}, 0);
      TPSP_CHECK(port > 0 && port < 65536, "MASTER_PORT=", port, " is not a TCP port");
      store = std::make_shared<TcpStore>(env("MASTER_ADDR"), port, rank == 0, options.timeout);
    } else {
      TPSP_CHECK(
          size == 1, "WORLD_SIZE=", size,
          " needs a rendezvous: set TPSP_STORE_DIR (a shared directory) or MASTER_ADDR and MASTER_PORT");
      store = std::make_shared<gloo::rendezvous::HashStore>();
    }
  } catch (const ShapeError&) {
    throw;
  } catch (const std::exception& e) {  // gloo::Exception, gloo::EnforceNotMet, a busy port, ...
    const std::string msg =
        "rank " + std::to_string(rank) + ": cannot set up the rendezvous store: " + e.what();
    if (dynamic_cast<const gloo::IoException*>(&e)) throw CommTimeoutError(msg);
    throw CommError(msg);
  }

  gloo::transport::tcp::attr attr;
  if (const char* ifname = env("TPSP_GLOO_IFNAME")) {
    attr.iface = ifname;
  } else {
    attr.hostname = env("TPSP_GLOO_HOSTNAME") ? env("TPSP_GLOO_HOSTNAME") : "127.0.0.1";
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {  // gloo::Exception or gloo::EnforceNotMet
    throw CommError("rank " + std::to_string(rank) + ": cannot create the Gloo tcp device on '" +
                    (attr.iface.empty() ? attr.hostname : attr.iface) + "': " + e.what());
  }
  return GlooBackend::connect_world(rank, size, std::move(store), std::move(device), prefix, options.timeout);
}

}  // namespace tpsp::comm
