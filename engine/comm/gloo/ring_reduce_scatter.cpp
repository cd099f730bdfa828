#include "engine/comm/gloo/ring_reduce_scatter.h"

#include <gloo/common/error.h>
#include <gloo/transport/unbound_buffer.h>
#include <gloo/types.h>

#include <algorithm>
#include <cstring>
#include <vector>

namespace tpsp::comm {

namespace {

/// Slot prefix of our ring reduce-scatter; Gloo's own collectives use 0x01..0x08 (gloo/types.h).
constexpr uint8_t kRingReduceScatterSlotPrefix = 0x30;

/// acc[i] = op(acc[i], x[i]).
void accumulate(float* acc, const float* x, std::size_t n, ReduceOp op) {
  if (op == ReduceOp::sum) {
    for (std::size_t i = 0; i < n; ++i) acc[i] += x[i];
  } else {
    for (std::size_t i = 0; i < n; ++i) acc[i] = std::max(acc[i], x[i]);
  }
}

void wait_or_throw(bool completed, const char* what) {
  if (!completed) throw gloo::IoException(std::string("ring reduce_scatter: ") + what + " was aborted");
}

}  // namespace

void ring_reduce_scatter(const std::shared_ptr<gloo::Context>& ctx, const float* in, float* out,
                         std::size_t chunk, ReduceOp op, uint32_t tag, std::chrono::milliseconds timeout) {
  const int n = ctx->size;
  const int r = ctx->rank;
  const std::size_t chunk_bytes = chunk * sizeof(float);
  if (n == 1 || chunk == 0) {
    if (chunk) std::memcpy(out, in, chunk_bytes);
    return;
  }
  const int right = (r + 1) % n;
  const int left = (r + n - 1) % n;
  auto mod = [n](int x) { return ((x % n) + n) % n; };

  // The input is only ever a send source, so it is registered as is (zero copy).
  auto in_buf = ctx->createUnboundBuffer(const_cast<float*>(in), chunk_bytes * static_cast<std::size_t>(n));
  std::vector<float> scratch[2];
  std::unique_ptr<gloo::transport::UnboundBuffer> tmp_buf[2];
  if (n > 2) {
    for (int i = 0; i < 2; ++i) {
      scratch[i].resize(chunk);
      tmp_buf[i] = ctx->createUnboundBuffer(scratch[i].data(), chunk_bytes);
    }
  }
  auto out_buf = ctx->createUnboundBuffer(out, chunk_bytes);
  const uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);

  for (int s = 0; s <= n - 2; ++s) {
    const bool last = s == n - 2;
    const int send_chunk = mod(r - s - 1);
    const int recv_chunk = mod(r - s - 2);
    const uint64_t step = static_cast<uint64_t>(s % 256);  // 8 bits per collective (gloo/types.h)
    // Receive the left neighbour's partial sum (into `out` on the last step).
    gloo::transport::UnboundBuffer* rbuf = last ? out_buf.get() : tmp_buf[s % 2].get();
    float* racc = last ? out : scratch[s % 2].data();
    rbuf->recv(left, slot + step, 0, chunk_bytes);
    // Send our partial sum of send_chunk: our own input chunk at step 0, else last step's result.
    if (s == 0) {
      in_buf->send(right, slot + step, static_cast<std::size_t>(send_chunk) * chunk_bytes, chunk_bytes);
    } else {
      tmp_buf[(s - 1) % 2]->send(right, slot + step, 0, chunk_bytes);
    }
    wait_or_throw(rbuf->waitRecv(timeout), "a receive");
    accumulate(racc, in + static_cast<std::size_t>(recv_chunk) * chunk, chunk, op);
    // The buffer sent now is the receive buffer of the next step but one: wait for it here.
    wait_or_throw(s == 0 ? in_buf->waitSend(timeout) : tmp_buf[(s - 1) % 2]->waitSend(timeout), "a send");
  }
}

}  // namespace tpsp::comm
