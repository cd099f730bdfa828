#include "launch/relay_arithmetic.h"

#include <fmt/format.h>

#include <algorithm>
#include <cstring>

#include "engine/comm/relay/protocol.h"

namespace tpsp::run {

namespace {

using comm::OpKind;
using comm::ReduceOp;

/// Element-wise reduction of float32 bytes [off, off + len) of every input, in rank order.
Bytes reduce(const std::vector<const Bytes*>& in, std::size_t off, std::size_t len, ReduceOp op) {
  std::vector<float> acc(len / 4);
  std::memcpy(acc.data(), in[0]->data() + off, len);
  for (std::size_t i = 1; i < in.size(); ++i) {
    const unsigned char* v = in[i]->data() + off;
    for (std::size_t k = 0; k < acc.size(); ++k) {
      float x;
      std::memcpy(&x, v + 4 * k, 4);
      acc[k] = op == ReduceOp::sum ? acc[k] + x : std::max(acc[k], x);
    }
  }
  Bytes out(len);
  std::memcpy(out.data(), acc.data(), len);
  return out;
}

CollectiveResult to_every_rank(Bytes bytes, std::size_t n) {
  const auto shared = std::make_shared<const Bytes>(std::move(bytes));
  return {"", std::vector<std::shared_ptr<const Bytes>>(n, shared)};
}

/// Why a result cannot travel back: one reply frame carries at most kMaxPayload bytes.
std::string too_large(std::size_t rank, uint64_t bytes) {
  return fmt::format("rank {} would receive {} bytes, more than one relay frame carries ({} bytes)", rank,
                     bytes, comm::relay::kMaxPayload);
}

/// all_to_all over split headers (comm/relay/protocol.h): each rank's pieces, checked pairwise.
CollectiveResult all_to_all(const std::vector<const Bytes*>& in) {
  const std::size_t n = in.size();
  const std::size_t head = comm::relay::split_header_bytes(n);
  std::vector<SplitHeader> h(n);
  for (std::size_t i = 0; i < n; ++i) {
    std::string error = read_header(*in[i], n, h[i]);
    if (!error.empty()) return {fmt::format("rank {}'s split header: {}", i, error), {}};
  }
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j)
      if (h[i].send[j] != h[j].recv[i])
        return {fmt::format("rank {} sends {} bytes to rank {}, which expects {} bytes from rank {}", i,
                            h[i].send[j], j, h[j].recv[i], i),
                {}};
  for (std::size_t j = 0; j < n; ++j) {
    uint64_t total = 0;  // each count is at most kMaxPayload (read_header): no overflow
    for (std::size_t i = 0; i < n; ++i) total += h[j].recv[i];
    if (total > comm::relay::kMaxPayload) return {too_large(j, total), {}};
  }
  CollectiveResult res;
  for (std::size_t j = 0; j < n; ++j) {
    Bytes out;
    for (std::size_t i = 0; i < n; ++i) {
      const auto from = in[i]->begin() + static_cast<std::ptrdiff_t>(head + h[i].offset[j]);
      out.insert(out.end(), from, from + static_cast<std::ptrdiff_t>(h[i].send[j]));
    }
    res.out.push_back(std::make_shared<const Bytes>(std::move(out)));
  }
  return res;
}

}  // namespace

std::string read_header(const Bytes& payload, std::size_t n, SplitHeader& h) {
  const std::size_t head = comm::relay::split_header_bytes(n);
  if (payload.size() < head)
    return fmt::format("a payload of {} bytes cannot hold the {} bytes of a split header for {} ranks",
                       payload.size(), head, n);
  std::vector<uint64_t> v(2 * n);
  std::memcpy(v.data(), payload.data(), head);
  h.send.assign(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(n));
  h.recv.assign(v.begin() + static_cast<std::ptrdiff_t>(n), v.end());
  h.offset.assign(n, 0);
  uint64_t total = 0;
  for (std::size_t j = 0; j < n; ++j) {
    if (h.send[j] > comm::relay::kMaxPayload || h.recv[j] > comm::relay::kMaxPayload)
      return "a count larger than a frame's payload";
    h.offset[j] = total;
    total += h.send[j];
  }
  if (total != payload.size() - head)
    return fmt::format("the counts add up to {} bytes, the payload carries {}", total, payload.size() - head);
  return "";
}

CollectiveResult carry_collective(OpKind op, ReduceOp reduce_op, int root,
                                  const std::vector<const Bytes*>& in) {
  const std::size_t n = in.size();
  if (n == 0) return {"no inputs", {}};
  const std::size_t bytes = in[0]->size();
  CollectiveResult res;
  switch (op) {
    case OpKind::all_reduce:
      if (bytes % 4) return {"a float32 buffer of a byte count not divisible by 4", {}};
      return to_every_rank(reduce(in, 0, bytes, reduce_op), n);
    case OpKind::reduce_scatter:
      if (bytes % (4 * n)) return {"an input not divisible into float32 chunks, one per rank", {}};
      for (std::size_t i = 0; i < n; ++i)
        res.out.push_back(std::make_shared<const Bytes>(reduce(in, i * (bytes / n), bytes / n, reduce_op)));
      return res;
    case OpKind::all_gather: {
      if (bytes * n > comm::relay::kMaxPayload) return {too_large(0, bytes * n), {}};
      Bytes out;
      for (const Bytes* b : in) out.insert(out.end(), b->begin(), b->end());
      return to_every_rank(std::move(out), n);
    }
    case OpKind::all_to_all:
      return all_to_all(in);
    case OpKind::broadcast:
      if (root < 0 || root >= static_cast<int>(n)) return {"a root outside the group", {}};
      return to_every_rank(*in[static_cast<std::size_t>(root)], n);
    case OpKind::barrier:
      return to_every_rank({}, n);
    default:
      return {"not a collective", {}};
  }
}

}  // namespace tpsp::run
