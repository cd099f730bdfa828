// Compute spans: what the engine computed and when, on the same clock as the communication records,
// so one trace shows what computed while what communicated (lab04 proves overlap from it). Like
// torch.profiler, it is process-wide and off until someone installs a recorder (the checker's rank
// program, tpsp-train); then every GEMM, attention and layer phase appends a ComputeRecord.
#pragma once

#include <memory>
#include <string>

#include "engine/comm/recorder.h"

namespace tpsp::trace {

/// Makes `recorder` the process's compute trace (nullptr turns tracing off). Thread-safe.
void install(std::shared_ptr<comm::Recorder> recorder);
/// The installed recorder, or null.
std::shared_ptr<comm::Recorder> installed();

/// Records [construction, destruction) as a compute span `name` ("gemm", "attention",
/// "layer.forward", …) with `label` into the recorder installed at construction; nothing when none.
class Span {
 public:
  explicit Span(const char* name, std::string label = {});
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  std::shared_ptr<comm::Recorder> recorder_;
  const char* name_;
  std::string label_;
  double t_start_ = 0;
};

}  // namespace tpsp::trace
