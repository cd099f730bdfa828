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
/// Elements per pipelined segment (1 MiB of floats, Gloo's kMaxSegmentSize). At most 4096 segments
/// per chunk and 4096 steps fit in the 24 bits below the tag (slot + step * 4096 + segment).
constexpr std::size_t kSegmentElems = 256 * 1024;

/// acc[i] = op(acc[i], x[i]). The buffers never overlap (`__restrict`), so the loops vectorise at -O2
/// without a runtime alias check; the sum is element-wise, so the result does not depend on it.
void accumulate(float* __restrict acc, const float* __restrict x, std::size_t n, ReduceOp op) {
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

  // Each step moves one chunk in segments, each with its own buffer and slot, so the reduction of
  // segment j overlaps the arrival of segment j+1 (Gloo's ring all-reduce pipelines the same way).
  const std::size_t seg = std::min(chunk, std::max(kSegmentElems, (chunk + 4095) / 4096));
  const std::size_t nseg = (chunk + seg - 1) / seg;
  std::vector<float> scratch[2];  // partial sums in flight (n > 2 only)
  if (n > 2)
    for (auto& v : scratch) v.resize(chunk);
  const uint64_t slot = gloo::Slot::build(kRingReduceScatterSlotPrefix, tag);
  std::vector<std::unique_ptr<gloo::transport::UnboundBuffer>> rbufs(nseg), sbufs(nseg);

  for (int s = 0; s <= n - 2; ++s) {
    const bool last = s == n - 2;
    const int send_chunk = mod(r - s - 1);
    const int recv_chunk = mod(r - s - 2);
    // Receive the left neighbour's partial sum of recv_chunk (into `out` on the last step); send
    // ours of send_chunk: our own input chunk, read in place, at step 0, else last step's result.
    float* racc = last ? out : scratch[s % 2].data();
    const float* src =
        s == 0 ? in + static_cast<std::size_t>(send_chunk) * chunk : scratch[(s - 1) % 2].data();
    const float* own = in + static_cast<std::size_t>(recv_chunk) * chunk;
    for (std::size_t j = 0; j < nseg; ++j) {
      const std::size_t off = j * seg, len = std::min(seg, chunk - off);
      const uint64_t sl = slot + (static_cast<uint64_t>(s % 4096) << 12) + j;  // below the tag bits
      rbufs[j] = ctx->createUnboundBuffer(racc + off, len * sizeof(float));
      rbufs[j]->recv(left, sl);
      sbufs[j] = ctx->createUnboundBuffer(const_cast<float*>(src + off), len * sizeof(float));
      sbufs[j]->send(right, sl);
    }
    for (std::size_t j = 0; j < nseg; ++j) {
      const std::size_t off = j * seg, len = std::min(seg, chunk - off);
      wait_or_throw(rbufs[j]->waitRecv(timeout), "a receive");
      accumulate(racc + off, own + off, len, op);
    }
    // What was sent is the receive buffer of the next step but one: all sends end here.
    for (auto& b : sbufs) wait_or_throw(b->waitSend(timeout), "a send");
  }
}

}  // namespace tpsp::comm
