// A small TCP key-value store for rendezvous when there is no shared directory (MASTER_ADDR /
// MASTER_PORT, as torchrun sets them). This Gloo snapshot has no TCPStore, so this implements
// gloo::rendezvous::Store's set/get/wait (c10d TCPStore's role) over a plain socket protocol:
//   request  'S' <u32 key length> <key> <u32 value length> <value>   reply 'K'
//   request  'G' <u32 key length> <key>                            reply 'Y' <u32 length> <value> | 'N'
// (lengths in network byte order). Rank 0 serves; every rank, rank 0 included, is a client.
#pragma once

#include <gloo/rendezvous/store.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

namespace tpsp::comm {

/// The server side: a map from key to bytes, served on `port` of every local address until destroyed.
class TcpStoreServer {
 public:
  /// Listens on `port` (0 picks a free port). Throws std::runtime_error naming the port on failure.
  explicit TcpStoreServer(int port);
  ~TcpStoreServer();
  TcpStoreServer(const TcpStoreServer&) = delete;
  TcpStoreServer& operator=(const TcpStoreServer&) = delete;
  /// The port actually listened on.
  int port() const { return port_; }

 private:
  void accept_loop();
  void serve(int fd);

  int listen_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::mutex mu_;
  std::unordered_map<std::string, std::vector<char>> data_;
  std::vector<int> conn_fds_;
  std::vector<std::thread> conn_threads_;
  std::thread accept_thread_;
};

/// The client side, a gloo::rendezvous::Store. Thread-safe (one request at a time).
class TcpStore : public gloo::rendezvous::Store {
 public:
  /// Connects to host:port, retrying until `timeout` (the server may start later). With `serve`
  /// (rank 0) it first starts a TcpStoreServer on `port` and keeps it alive as long as this store.
  /// Throws gloo::IoException (turned into CommError by the caller) if it cannot connect in time.
  TcpStore(const std::string& host, int port, bool serve, std::chrono::milliseconds timeout);
  ~TcpStore() override;

  void set(const std::string& key, const std::vector<char>& data) override;
  /// Waits (up to the store's timeout) for the key, then returns its value.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys, const std::chrono::milliseconds& timeout) override;

 private:
  /// One 'G' round trip; false if the key is not there yet.
  bool try_get(const std::string& key, std::vector<char>* value);

  std::unique_ptr<TcpStoreServer> server_;
  std::chrono::milliseconds timeout_;
  std::mutex mu_;
  int fd_ = -1;
};

}  // namespace tpsp::comm
