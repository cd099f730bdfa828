// What tpsp-capacity prints: a readable table, or JSON for scripts (tools/plot_capacity.py).
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "engine/comm/link_model.h"
#include "engine/model/capacity.h"

namespace tpsp::capacity {

/// The question: a model's sizes and layout, its name and provenance, and the link of the time column.
struct Question {
  std::string model;  ///< preset name, or "custom"
  std::string about;  ///< the preset's provenance ("" for custom)
  model::CapacityConfig config;
  comm::LinkModel link;
};

/// Every number of the report as JSON: config, link, sbh_bytes (+ per rank), parameters,
/// activations per layer without and with SP (null where s % tp != 0) and for the chosen setting,
/// the layer's and the step's collectives per call and per (phase, op), with bytes and seconds.
/// Throws ShapeError (CapacityConfig::validate) for sizes the engine refuses.
nlohmann::json report_json(const Question& q);

/// The same numbers as aligned text tables (bytes in KiB/MiB/GiB, times in µs/ms/s).
std::string report_table(const Question& q);

/// "64 MiB", "1.50 GiB", "24 B": binary units, two decimals unless exact.
std::string human_bytes(uint64_t bytes);

}  // namespace tpsp::capacity
