// The recorder's records as a rank files them for the grader (a check's DIR/rank<w>/result.json "calls"
// and "compute"), both directions in one place: checkers/rank/ranks_main.cpp writes with to_json, the
// grader reads with call_from_json / span_from_json into the same structs the recorder keeps, so
// operations and reductions arrive as enums and times as numbers (a field one side adds, the other
// reads). Room for more per call (bytes per peer of an uneven all-to-all) goes here and in CommRecord.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "engine/trace/op_kind.h"
#include "engine/trace/recorder.h"

namespace tpsp::trace {

/// A call as a check files it: the phase of the scenario it was issued in ("setup", "forward", ...)
/// and the record.
struct PhasedCall {
  std::string phase;
  CommRecord rec;
};

/// A compute span and the phase it started in.
struct PhasedSpan {
  std::string phase;
  ComputeRecord span;
};

/// {"phase", "op" (op_name), "group", "dim", "shape", "dtype", "tensor_bytes", "bytes", "label", "seq", "id",
///  "async", "waited", "peer", "reduce" (reduce_op_name), "group_rank", "group_size", "ok", "t_issue",
///  "t_start", "t_end", "t_waited"} (seconds on the rank's recorder clock).
nlohmann::json to_json(const PhasedCall& call);
/// {"phase", "name", "label", "t_start", "t_end"}.
nlohmann::json to_json(const PhasedSpan& span);

/// The call to_json wrote; a missing field takes CommRecord's default. nullopt for what no rank program
/// writes: not an object, an op or reduction that is not one of op_name's / reduce_op_name's, a dtype
/// that is not f32, bf16 or f16, a field of the wrong type. Never throws.
std::optional<PhasedCall> call_from_json(const nlohmann::json& j);
/// The span to_json wrote; nullopt as call_from_json. Never throws.
std::optional<PhasedSpan> span_from_json(const nlohmann::json& j);

/// The op whose op_name is `name`, or nullopt.
std::optional<OpKind> op_from_name(std::string_view name);
/// The reduction whose reduce_op_name is `name`, or nullopt.
std::optional<ReduceOp> reduce_op_from_name(std::string_view name);

}  // namespace tpsp::trace
