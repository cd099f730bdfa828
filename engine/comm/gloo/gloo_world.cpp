#include "engine/comm/gloo/gloo_world.h"

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

#include <thread>

#include "engine/comm/comm_error.h"
#include "engine/comm/gloo/gloo_backend.h"
#include "engine/comm/tcp_store.h"
#include "engine/error.h"

namespace tpsp::comm {

namespace {

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

std::unique_ptr<Backend> gloo_world(int rank, int size, const GlooRendezvous& where,
                                    const std::string& prefix, std::chrono::milliseconds timeout) {
  std::shared_ptr<gloo::rendezvous::Store> store;
  try {
    if (!where.store_dir.empty()) {
      struct stat st {};
      TPSP_CHECK(::stat(where.store_dir.c_str(), &st) == 0 && S_ISDIR(st.st_mode),
                 "TPSP_STORE_DIR=", where.store_dir,
                 " is not an existing directory (the launcher creates a fresh one per run)");
      store = std::make_shared<NotifiedFileStore>(where.store_dir);
    } else if (!where.master_addr.empty()) {
      TPSP_CHECK(where.master_port > 0 && where.master_port < 65536, "MASTER_PORT=", where.master_port,
                 " is not a TCP port");
      store = std::make_shared<TcpStore>(where.master_addr, where.master_port, rank == 0, timeout);
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
  if (!where.ifname.empty()) {
    attr.iface = where.ifname;
  } else {
    attr.hostname = where.hostname.empty() ? "127.0.0.1" : where.hostname;
  }
  std::shared_ptr<gloo::transport::Device> device;
  try {
    device = gloo::transport::tcp::CreateDevice(attr);
  } catch (const std::exception& e) {  // gloo::Exception or gloo::EnforceNotMet
    throw CommError("rank " + std::to_string(rank) + ": cannot create the Gloo tcp device on '" +
                    (attr.iface.empty() ? attr.hostname : attr.iface) + "': " + e.what());
  }
  return GlooBackend::connect_world(rank, size, std::move(store), std::move(device), prefix, timeout);
}

}  // namespace tpsp::comm
