#include "engine/trace/record_json.h"

namespace tpsp::trace {

namespace {

using nlohmann::json;

constexpr OpKind kOps[] = {OpKind::all_reduce, OpKind::all_gather, OpKind::reduce_scatter,
                           OpKind::all_to_all, OpKind::broadcast,  OpKind::send,
                           OpKind::recv,       OpKind::barrier,    OpKind::new_group};

std::optional<DType> dtype_from_name(std::string_view name) {
  for (DType d : {DType::f32, DType::bf16, DType::f16})
    if (name == dtype_name(d)) return d;
  return std::nullopt;
}

}  // namespace

std::optional<OpKind> op_from_name(std::string_view name) {
  for (OpKind op : kOps)
    if (name == op_name(op)) return op;
  return std::nullopt;
}

std::optional<ReduceOp> reduce_op_from_name(std::string_view name) {
  for (ReduceOp op : {ReduceOp::sum, ReduceOp::max})
    if (name == reduce_op_name(op)) return op;
  return std::nullopt;
}

json to_json(const PhasedCall& c) {
  const CommRecord& r = c.rec;
  json j = {{"phase", c.phase},
            {"op", op_name(r.op)},
            {"group", r.group},
            {"group_rank", r.group_rank},
            {"group_size", r.group_size},
            {"dim", r.dim},
            {"shape", r.shape},
            {"dtype", dtype_name(r.dtype)},
            {"tensor_bytes", r.tensor_bytes},
            {"bytes", r.bytes},
            {"label", r.label},
            {"seq", r.seq},
            {"id", r.id},
            {"async", r.async},
            {"waited", r.waited},
            {"ok", r.ok},
            {"peer", r.peer},
            {"reduce", reduce_op_name(r.reduce)},
            {"t_issue", r.t_issue},
            {"t_start", r.t_start},
            {"t_end", r.t_end},
            {"t_waited", r.t_waited}};
  if (!r.send_bytes.empty()) {
    j["send_bytes"] = r.send_bytes;
    j["recv_bytes"] = r.recv_bytes;
  }
  return j;
}

json to_json(const PhasedSpan& s) {
  return {{"phase", s.phase},
          {"name", s.span.name},
          {"label", s.span.label},
          {"t_start", s.span.t_start},
          {"t_end", s.span.t_end}};
}

std::optional<PhasedCall> call_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  try {
    PhasedCall c;
    CommRecord& r = c.rec;
    const auto op = op_from_name(j.value("op", ""));
    const auto reduce = reduce_op_from_name(j.value("reduce", "sum"));
    const auto dtype = dtype_from_name(j.value("dtype", "f32"));
    if (!op || !reduce || !dtype) return std::nullopt;
    c.phase = j.value("phase", "");
    r.op = *op;
    r.reduce = *reduce;
    r.dtype = *dtype;
    r.group = j.value("group", "");
    r.group_rank = j.value("group_rank", 0);
    r.group_size = j.value("group_size", 1);
    r.dim = j.value("dim", int64_t{0});
    r.shape = j.value("shape", Shape{});
    r.tensor_bytes = j.value("tensor_bytes", uint64_t{0});
    r.bytes = j.value("bytes", uint64_t{0});
    r.label = j.value("label", "");
    r.seq = j.value("seq", uint64_t{0});
    r.id = j.value("id", uint64_t{0});
    r.async = j.value("async", false);
    r.waited = j.value("waited", true);
    r.ok = j.value("ok", true);
    r.peer = j.value("peer", -1);
    r.t_issue = j.value("t_issue", 0.0);
    r.t_start = j.value("t_start", 0.0);
    r.t_end = j.value("t_end", 0.0);
    r.t_waited = j.value("t_waited", -1.0);
    r.send_bytes = j.value("send_bytes", std::vector<uint64_t>{});
    r.recv_bytes = j.value("recv_bytes", std::vector<uint64_t>{});
    return c;
  } catch (const json::exception&) {  // a field of the wrong type
    return std::nullopt;
  }
}

std::optional<PhasedSpan> span_from_json(const json& j) {
  if (!j.is_object()) return std::nullopt;
  try {
    return PhasedSpan{
        j.value("phase", ""),
        {j.value("name", ""), j.value("label", ""), j.value("t_start", 0.0), j.value("t_end", 0.0)}};
  } catch (const json::exception&) {
    return std::nullopt;
  }
}

}  // namespace tpsp::trace
