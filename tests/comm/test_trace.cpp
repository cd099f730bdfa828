// Compute spans beside communication records: the overlap figure on constructed intervals, the
// spans the ops record once a recorder is installed (and only then), and the Chrome trace lanes.
#include <doctest/doctest.h>

#include "engine/ops/matmul.h"
#include "engine/trace/recorder.h"
#include "engine/trace/span.h"

using namespace tpsp;
using namespace tpsp::trace;

namespace {
CommRecord comm_span(double a, double b) {
  CommRecord r;
  r.t_start = a, r.t_end = b;
  return r;
}
}  // namespace

TEST_CASE("overlap fraction: covered communication time over communication time (HTA)") {
  // comm [0, 10) and [20, 30); compute [5, 25) covers [5, 10) and [20, 25): 10 of 20 → 0.5.
  CHECK(overlap_fraction({comm_span(0, 10), comm_span(20, 30)}, {{"gemm", "", 5, 25}}) ==
        doctest::Approx(0.5));
  // Overlapping records count once: comm [0, 4) ∪ [2, 6) = [0, 6); compute [1, 2) ∪ [1.5, 3) = [1, 3): 2/6.
  CHECK(overlap_fraction({comm_span(0, 4), comm_span(2, 6)}, {{"a", "", 1, 2}, {"b", "", 1.5, 3}}) ==
        doctest::Approx(1.0 / 3));
  CHECK(overlap_fraction({comm_span(0, 1)}, {}) == 0.0);
  CHECK(overlap_fraction({}, {{"gemm", "", 0, 1}}) == 0.0);  // no communication time
  CHECK(overlap_fraction({comm_span(0, 2)}, {{"gemm", "", -1, 5}}) == doctest::Approx(1.0));
}

TEST_CASE("compute spans: recorded by the GEMMs only while a recorder is installed") {
  auto rec = std::make_shared<Recorder>(0);
  const Tensor x = Tensor::full({4, 3}, 1.f), w = Tensor::full({2, 3}, 1.f);
  ops::matmul_forward(x, w);
  CHECK(rec->compute_records().empty());
  trace::install(rec);
  ops::matmul_forward(x, w);
  Tensor dw({2, 3});
  ops::matmul_wgrad(Tensor::full({4, 2}, 1.f), x, dw);
  trace::install(nullptr);
  ops::matmul_forward(x, w);
  const auto spans = rec->compute_records();
  REQUIRE(spans.size() == 2);
  CHECK((spans[0].name == "gemm" && spans[0].label == "forward"));
  CHECK(spans[1].label == "wgrad");
  CHECK(spans[0].t_start <= spans[0].t_end);
  CHECK(spans[0].t_end <= spans[1].t_start);
}

TEST_CASE("chrome trace: compute spans on their own lane beside the communication") {
  Recorder rec(3);
  rec.append_compute({"gemm", "dgrad", 0.001, 0.002});
  CommRecord c = comm_span(0.0015, 0.003);
  c.group = "tp";
  rec.append(c);
  const auto events = rec.chrome_trace()["traceEvents"];
  int compute = 0, comm = 0;
  for (const auto& e : events) {
    if (e.value("cat", "") == "compute") {
      ++compute;
      CHECK(e["tid"] == 0);
      CHECK(e["name"] == "gemm dgrad");
      CHECK(e["dur"].get<double>() == doctest::Approx(1000.0));
    }
    if (e.value("cat", "") == "comm") {
      ++comm;
      CHECK(e["tid"] != 0);
    }
  }
  CHECK((compute == 1 && comm == 1));
}
