// engine/trace/record_json.h: a call and a span survive the rank → grader trip field for field, the
// names are the recorder's own, and what no rank program writes is refused instead of read as a default.
#include <doctest/doctest.h>

#include "engine/trace/record_json.h"

using namespace tpsp;
using namespace tpsp::trace;
using nlohmann::json;

TEST_CASE("record json: a call and a span round-trip field for field") {
  PhasedCall c{"backward", {}};
  CommRecord& r = c.rec;
  r.seq = 7;
  r.op = OpKind::reduce_scatter;
  r.group = "tp";
  r.group_rank = 1;
  r.group_size = 3;
  r.dim = 2;
  r.peer = -1;
  r.reduce = ReduceOp::max;
  r.dtype = DType::bf16;
  r.shape = {6, 2, 4};
  r.tensor_bytes = 96;
  r.bytes = 64;
  r.t_issue = 0.25;
  r.t_start = 0.5;
  r.t_end = 0.75;
  r.label = "layer0.fc2.rs";
  r.async = true;
  r.waited = false;
  r.t_waited = -1;
  r.ok = false;
  const json j = to_json(c);
  CHECK(j["op"] == "reduce_scatter");
  CHECK(j["reduce"] == "max");
  CHECK(j["dtype"] == "bf16");
  const auto back = call_from_json(json::parse(j.dump()));
  REQUIRE(back);
  CHECK(back->phase == "backward");
  const CommRecord& b = back->rec;
  CHECK(b.seq == 7);
  CHECK(b.op == OpKind::reduce_scatter);
  CHECK(b.group == "tp");
  CHECK(b.group_rank == 1);
  CHECK(b.group_size == 3);
  CHECK(b.dim == 2);
  CHECK(b.peer == -1);
  CHECK(b.reduce == ReduceOp::max);
  CHECK(b.dtype == DType::bf16);
  CHECK(b.shape == Shape{6, 2, 4});
  CHECK(b.tensor_bytes == 96);
  CHECK(b.bytes == 64);
  CHECK(b.t_issue == 0.25);
  CHECK(b.t_start == 0.5);
  CHECK(b.t_end == 0.75);
  CHECK(b.label == "layer0.fc2.rs");
  CHECK(b.async);
  CHECK_FALSE(b.waited);
  CHECK(b.t_waited == -1);
  CHECK_FALSE(b.ok);

  const PhasedSpan s{"forward", {"gemm", "dgrad", 1.5, 2.25}};
  const auto sb = span_from_json(json::parse(to_json(s).dump()));
  REQUIRE(sb);
  CHECK(sb->phase == "forward");
  CHECK(sb->span.name == "gemm");
  CHECK(sb->span.label == "dgrad");
  CHECK(sb->span.t_start == 1.5);
  CHECK(sb->span.t_end == 2.25);
}

TEST_CASE("record json: an all_to_all's bytes per peer round-trip; other calls carry none") {
  PhasedCall c{"forward", {}};
  c.rec.op = OpKind::all_to_all;
  c.rec.send_bytes = {24, 0, 12};
  c.rec.recv_bytes = {0, 36, 12};
  const json j = to_json(c);
  CHECK(j["send_bytes"] == json({24, 0, 12}));
  const auto back = call_from_json(j);
  REQUIRE(back);
  CHECK(back->rec.send_bytes == std::vector<uint64_t>{24, 0, 12});
  CHECK(back->rec.recv_bytes == std::vector<uint64_t>{0, 36, 12});
  CHECK_FALSE(to_json(PhasedCall{"forward", {}}).contains("send_bytes"));
  CHECK_FALSE(call_from_json(json{{"op", "all_to_all"}, {"send_bytes", "all"}}));
}

TEST_CASE("record json: every op and reduction name maps back to itself") {
  for (OpKind op : {OpKind::all_reduce, OpKind::all_gather, OpKind::reduce_scatter, OpKind::all_to_all,
                    OpKind::broadcast, OpKind::send, OpKind::recv, OpKind::barrier, OpKind::new_group})
    CHECK(op_from_name(op_name(op)) == op);
  CHECK(reduce_op_from_name("sum") == ReduceOp::sum);
  CHECK(reduce_op_from_name("max") == ReduceOp::max);
  CHECK_FALSE(op_from_name("allreduce"));
  CHECK_FALSE(reduce_op_from_name("avg"));
}

TEST_CASE("record json: what no rank program writes is refused, not read as a default") {
  CHECK_FALSE(call_from_json(json::array()));
  CHECK_FALSE(call_from_json(json{{"op", "all_reduce_fast"}}));
  CHECK_FALSE(call_from_json(json{{"op", "all_reduce"}, {"reduce", "avg"}}));
  CHECK_FALSE(call_from_json(json{{"op", "all_reduce"}, {"dtype", "f64"}}));
  CHECK_FALSE(call_from_json(json{{"op", "all_reduce"}, {"tensor_bytes", "many"}}));
  CHECK_FALSE(span_from_json(json{{"t_start", "soon"}}));
  // Missing fields take the record's defaults (an older rank program's file still reads).
  const auto minimal = call_from_json(json{{"op", "barrier"}});
  REQUIRE(minimal);
  CHECK(minimal->rec.op == OpKind::barrier);
  CHECK(minimal->rec.waited);
  CHECK(minimal->rec.t_waited == -1);
}
