#include "engine/comm/fingerprint.h"

#include <cstring>
#include <vector>

#include "engine/comm/comm_error.h"

namespace tpsp::comm {

Fingerprint make_fingerprint(OpKind op, uint64_t seq, const Shape& shape, DType dtype, int64_t arg,
                             ReduceOp reduce, const std::string& group) {
  Fingerprint fp;
  fp.seq = seq;
  fp.count = static_cast<uint64_t>(shape_numel(shape));
  fp.arg = arg;
  fp.ndim = static_cast<uint32_t>(shape.size());
  for (std::size_t i = 0; i < shape.size() && i < Fingerprint::kMaxDims; ++i) fp.shape[i] = shape[i];
  fp.op = static_cast<uint8_t>(op);
  fp.dtype = static_cast<uint8_t>(dtype);
  fp.reduce = static_cast<uint8_t>(reduce);
  std::strncpy(fp.group, group.c_str(), sizeof(fp.group) - 1);
  return fp;
}

std::string describe(const Fingerprint& fp, bool with_shape) {
  const auto op = static_cast<OpKind>(fp.op);
  std::string s = std::string(op_name(op)) + " #" + std::to_string(fp.seq) + " (";
  if (op == OpKind::new_group) {
    s += std::to_string(fp.count) + " ranks, ranks hash " + std::to_string(fp.arg);
  } else if (op == OpKind::all_to_all && fp.arg == 1) {  // uneven: rows differ, a row's shape must agree
    std::string row = "*";
    for (uint32_t i = 1; i < fp.ndim && i < Fingerprint::kMaxDims; ++i)
      row += ", " + std::to_string(fp.shape[i]);
    s += "rows [" + row + "] " + dtype_name(static_cast<DType>(fp.dtype)) + ", split sizes";
  } else if (op != OpKind::barrier) {
    s += std::to_string(fp.count) + " " + dtype_name(static_cast<DType>(fp.dtype));
    if (with_shape) {
      Shape shape;
      for (uint32_t i = 0; i < fp.ndim && i < Fingerprint::kMaxDims; ++i) shape.push_back(fp.shape[i]);
      s += " " + shape_str(shape);
    }
    if ((op == OpKind::all_gather || op == OpKind::reduce_scatter) && fp.arg != 0)
      s += ", dim " + std::to_string(fp.arg);
    if (op == OpKind::broadcast) s += ", root " + std::to_string(fp.arg);
    if ((op == OpKind::all_reduce || op == OpKind::reduce_scatter) && fp.reduce != 0)
      s += std::string(", ") + reduce_op_name(static_cast<ReduceOp>(fp.reduce));
  } else {
    s += "no data";
  }
  return s + ", group " + std::string(fp.group, strnlen(fp.group, sizeof(fp.group))) + ")";
}

void check_fingerprints(Backend& backend, const Fingerprint& mine, uint32_t tag,
                        std::chrono::milliseconds timeout) {
  const int n = backend.size();
  std::vector<Fingerprint> all(static_cast<std::size_t>(n));
  backend.all_gather(&mine, all.data(), sizeof(Fingerprint), {tag, timeout});

  const Fingerprint& ref = all[0];
  std::string msg;
  for (int r = 1; r < n; ++r) {
    const Fingerprint& fp = all[static_cast<std::size_t>(r)];
    if (std::memcmp(&fp, &ref, sizeof(Fingerprint)) == 0) continue;
    const bool shapes_only = fp.seq == ref.seq && fp.op == ref.op && fp.count == ref.count &&
                             fp.arg == ref.arg && fp.dtype == ref.dtype && fp.reduce == ref.reduce;
    msg += msg.empty() ? "" : "; ";
    msg += "rank " + std::to_string(r) + " called " + describe(fp, shapes_only) + " where rank 0 called " +
           describe(ref, shapes_only);
  }
  if (!msg.empty()) {
    throw CollectiveMismatchError("collective mismatch in group " +
                                  std::string(ref.group, strnlen(ref.group, sizeof(ref.group))) + ": " + msg +
                                  " (seen by rank " + std::to_string(backend.rank()) + ")");
  }
}

void check_split_sizes(Backend& backend, const std::vector<uint64_t>& send_bytes,
                       const std::vector<uint64_t>& recv_bytes, uint64_t row_bytes, const std::string& what,
                       uint32_t tag, std::chrono::milliseconds timeout) {
  const auto n = static_cast<std::size_t>(backend.size());
  std::vector<uint64_t> mine(send_bytes);
  mine.insert(mine.end(), recv_bytes.begin(), recv_bytes.end());
  std::vector<uint64_t> all(2 * n * n);
  backend.all_gather(mine.data(), all.data(), 2 * n * sizeof(uint64_t), {tag, timeout});
  auto rows = [&](uint64_t bytes) {
    const uint64_t k = row_bytes == 0 ? bytes : bytes / row_bytes;
    return std::to_string(k) + (row_bytes == 0 ? " byte" : " row") + (k == 1 ? "" : "s");
  };
  std::string msg;
  for (std::size_t i = 0; i < n; ++i)
    for (std::size_t j = 0; j < n; ++j) {
      const uint64_t sent = all[2 * n * i + j], expected = all[2 * n * j + n + i];
      if (sent == expected) continue;
      msg += msg.empty() ? "" : "; ";
      msg += "rank " + std::to_string(i) + " sends " + rows(sent) + " to rank " + std::to_string(j) +
             ", which expects " + rows(expected) + " from rank " + std::to_string(i);
    }
  if (!msg.empty())
    throw CollectiveMismatchError("split sizes disagree in " + what + ": " + msg + " (seen by rank " +
                                  std::to_string(backend.rank()) + ")");
}

}  // namespace tpsp::comm
