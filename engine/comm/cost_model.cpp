#include "engine/comm/cost_model.h"

namespace tpsp::comm {

namespace {

/// ceil(log2(n)) for n >= 1.
int log2_ceil(int n) {
  int d = 0;
  while ((1 << d) < n) ++d;
  return d;
}

/// Number of children `rank` has in Gloo's binomial broadcast tree rooted at `root`
/// (gloo/broadcast.cc: virtual rank v = (rank - root) mod n sends to v + 2^i at iteration i while
/// v < 2^i and v + 2^i < n).
int binomial_children(int n, int rank, int root) {
  const int v = ((rank - root) % n + n) % n;
  int children = 0;
  for (int i = 0; i < log2_ceil(n); ++i) {
    const int bit = 1 << i;
    if (v < bit && v + bit < n) ++children;
  }
  return children;
}

}  // namespace

uint64_t wire_bytes(OpKind op, int n, uint64_t S, int rank, int root) {
  if (n <= 1) return 0;
  const uint64_t un = static_cast<uint64_t>(n);
  switch (op) {
    case OpKind::all_reduce:
      return 2 * (un - 1) * S / un;
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      return (un - 1) * S / un;
    case OpKind::broadcast:
      return static_cast<uint64_t>(binomial_children(n, rank, root)) * S;
    case OpKind::send:
      return S;
    case OpKind::recv:
    case OpKind::barrier:
    case OpKind::new_group:
      return 0;
  }
  return 0;
}

int wire_steps(OpKind op, int n) {
  if (n <= 1) return 0;
  switch (op) {
    case OpKind::all_reduce:
      return 2 * (n - 1);
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      return n - 1;
    case OpKind::broadcast:
    case OpKind::barrier:
      return log2_ceil(n);
    case OpKind::send:
    case OpKind::recv:
      return 1;
    case OpKind::new_group:
      return 0;
  }
  return 0;
}

double busbw_factor(OpKind op, int n) {
  if (n <= 1) return 0.0;
  const double dn = n;
  switch (op) {
    case OpKind::all_reduce:
      return 2.0 * (dn - 1) / dn;
    case OpKind::all_gather:
    case OpKind::reduce_scatter:
    case OpKind::all_to_all:
      return (dn - 1) / dn;
    case OpKind::broadcast:
    case OpKind::send:
    case OpKind::recv:
      return 1.0;
    case OpKind::barrier:
    case OpKind::new_group:
      return 0.0;
  }
  return 0.0;
}

}  // namespace tpsp::comm
