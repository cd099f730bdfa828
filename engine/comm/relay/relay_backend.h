// RelayBackend: a rank's transport through a relay process (launch/relay_server.h) over one socket
// (protocol.h), which moves the bytes between the ranks itself: ./check's default, ./grade's only one
// (there the relay also writes each call down where the rank cannot reach it, so the grader compares the
// rank's own Recorder with what really crossed: a record forged in the rank's memory no longer passes),
// `tpsp-run --backend relay`'s for any program, and the only transport of a build configured with
// -DTPSP_WITH_GLOO=OFF. Slower than Gloo for large tensors (every byte goes through one process).
//
// Chosen by init_from_env (env.h) when TPSP_RELAY_FD names an open descriptor. One connection serves the
// world and every subgroup (each a relay group id). Errors: CommTimeoutError when the relay did not
// answer within the call's timeout (peers that never came), CommError with the relay's words for a
// mismatch between the ranks' calls, and when the connection is gone.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "engine/comm/backend.h"

namespace tpsp::comm {

class RelayConnection;  // the socket, its reader thread and the requests waiting for replies

class RelayBackend final : public Backend {
 public:
  /// Joins the world `rank` of `size` through the relay on descriptor `fd` (the world's name `key`,
  /// unique per init). Throws CommTimeoutError when the other ranks did not join within `timeout`,
  /// CommError when the relay refused or the descriptor is not a relay socket.
  static std::unique_ptr<RelayBackend> connect_world(int fd, int rank, int size, const std::string& key,
                                                     std::chrono::milliseconds timeout);

  const char* name() const override { return "relay"; }
  int rank() const override { return rank_; }
  int size() const override { return size_; }
  bool accepts(Device device) const override { return device == Device::cpu; }
  void all_reduce(float* buf, std::size_t count, ReduceOp op, const TransportCall& c) override;
  void all_gather(const void* in, void* out, std::size_t bytes, const TransportCall& c) override;
  void reduce_scatter(const float* in, float* out, std::size_t count, ReduceOp op,
                      const TransportCall& c) override;
  void all_to_all(const void* in, void* out, std::size_t bytes, const TransportCall& c) override;
  void all_to_all_v(const void* in, const std::vector<std::size_t>& send_bytes, void* out,
                    const std::vector<std::size_t>& recv_bytes, const TransportCall& c) override;
  void broadcast(void* buf, std::size_t bytes, int root, const TransportCall& c) override;
  void barrier(const TransportCall& c) override;
  std::unique_ptr<PendingP2P> send(const void* buf, std::size_t bytes, int dst) override;
  std::unique_ptr<PendingP2P> recv(void* buf, std::size_t bytes, int src) override;
  std::unique_ptr<Backend> new_group(const std::vector<int>& members, const std::string& key,
                                     std::chrono::milliseconds timeout) override;
  void abort() noexcept override;

  /// Tells the relay that this rank's scenario enters phase `phase` ("forward", "backward", ...), so that
  /// the witness files each later call under it (ranks_main.cpp's begin_phase). Waits for the relay's
  /// acknowledgement: every call issued before it returns was sent before the mark. Throws like a call.
  void mark(const std::string& phase, std::chrono::milliseconds timeout);
  /// Asks the relay for a checker scenario's input (checkers/input_server.h: the relay draws it and
  /// decides which part this rank may have) and copies its `out_bytes` bytes of float32 into `out`.
  /// `spec` is the request's JSON. Throws CommError with the relay's words when it refuses the request
  /// and when the reply is not `out_bytes` long, CommTimeoutError past `timeout`.
  void input(const std::string& spec, void* out, std::size_t out_bytes, std::chrono::milliseconds timeout);

 private:
  RelayBackend(std::shared_ptr<RelayConnection> conn, uint32_t group, int rank, int size);
  /// Sends one collective (`in`, `in_bytes`) and copies the reply into out[out_bytes].
  void collective(OpKind op, ReduceOp reduce, int arg, const void* in, std::size_t in_bytes, void* out,
                  std::size_t out_bytes, const TransportCall& c);

  std::shared_ptr<RelayConnection> conn_;
  uint32_t group_;
  int rank_;
  int size_;
};

}  // namespace tpsp::comm
