#include "tests/support/all_to_all_cases.h"

#include <stdexcept>
#include <string>
#include <vector>

namespace tpsp::testing {

namespace {

constexpr int64_t kWidth = 3;

void require(bool ok, const std::string& what) {
  if (!ok) throw std::runtime_error("uneven all_to_all: " + what);
}

}  // namespace

int64_t rows_between(int from, int to, int n) {
  if (n > 1 && from == n - 1) return 0;
  return (2 * from + to + 1) % 3;
}

void check_uneven_all_to_all(comm::ProcessGroup& pg, Device device) {
  const int r = pg.rank(), n = pg.size();
  std::vector<int64_t> in_splits, out_splits;
  int64_t in_rows = 0, out_rows = 0;
  for (int j = 0; j < n; ++j) {
    in_splits.push_back(rows_between(r, j, n));
    out_splits.push_back(rows_between(j, r, n));
    in_rows += in_splits.back();
    out_rows += out_splits.back();
  }
  Tensor in_cpu({in_rows, kWidth});
  int64_t row = 0;
  for (int j = 0; j < n; ++j)
    for (int64_t k = 0; k < in_splits[static_cast<std::size_t>(j)]; ++k, ++row)
      for (int64_t c = 0; c < kWidth; ++c)
        in_cpu.at({row, c}) = static_cast<float>(1000 * r + 100 * j + 10 * k + c);
  const Tensor in = in_cpu.to(device);

  Tensor async_out;
  const Tensor outs[] = {
      pg.all_to_all(in, out_splits, in_splits, {"uneven"}),
      (pg.all_to_all_async(in, async_out, out_splits, in_splits, {"uneven async"})->wait(), async_out)};
  for (const Tensor& got_dev : outs) {
    const Tensor got = got_dev.to(Device::cpu);
    require(got.shape() == Shape({out_rows, kWidth}), "rank " + std::to_string(r) + " got shape " +
                                                          shape_str(got.shape()) + ", expected [" +
                                                          std::to_string(out_rows) + ", 3]");
    row = 0;
    for (int i = 0; i < n; ++i)
      for (int64_t k = 0; k < out_splits[static_cast<std::size_t>(i)]; ++k, ++row)
        for (int64_t c = 0; c < kWidth; ++c) {
          const float want = static_cast<float>(1000 * i + 100 * r + 10 * k + c);
          require(got.at({row, c}) == want,
                  "rank " + std::to_string(r) + " row " + std::to_string(row) + " col " + std::to_string(c) +
                      " is " + std::to_string(got.at({row, c})) + ", expected " + std::to_string(want));
        }
  }

  const auto records = pg.recorder().records();
  require(records.size() >= 2, "the calls were not recorded");
  for (std::size_t k = records.size() - 2; k < records.size(); ++k) {
    const trace::CommRecord& rec = records[k];
    require(rec.op == comm::OpKind::all_to_all, "record is not an all_to_all");
    require(rec.send_bytes.size() == static_cast<std::size_t>(n) &&
                rec.recv_bytes.size() == static_cast<std::size_t>(n),
            "the record does not carry bytes per peer");
    uint64_t left = 0;
    for (int j = 0; j < n; ++j) {
      const auto sent = static_cast<uint64_t>(in_splits[static_cast<std::size_t>(j)] * kWidth * 4);
      const auto got = static_cast<uint64_t>(out_splits[static_cast<std::size_t>(j)] * kWidth * 4);
      require(rec.send_bytes[static_cast<std::size_t>(j)] == sent &&
                  rec.recv_bytes[static_cast<std::size_t>(j)] == got,
              "record's bytes to or from rank " + std::to_string(j) + " are wrong");
      if (j != r) left += sent;
    }
    require(rec.bytes == left, "record's bytes " + std::to_string(rec.bytes) + ", expected " +
                                   std::to_string(left) + " (every peer's rows but this rank's own)");
  }
}

}  // namespace tpsp::testing
