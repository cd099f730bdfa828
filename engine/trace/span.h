// Compute spans: what the engine computed and when, on the same clock as the communication records,
// so one trace shows what computed while what communicated (lab04 proves overlap from it). Like
// torch.profiler, it is process-wide and off until someone installs a recorder (the checker's rank
// program, tpsp-train); then every GEMM, attention and layer phase appends a ComputeRecord.
#pragma once

#include <memory>
#include <string>

#include "engine/trace/recorder.h"

namespace tpsp::trace {

/// Makes `recorder` the process's compute trace (nullptr turns tracing off). Thread-safe.
void install(std::shared_ptr<Recorder> recorder);
/// The installed recorder, or null.
std::shared_ptr<Recorder> installed();

/// Records [construction, destruction) as a compute span `name` ("gemm", "attention",
/// "layer.forward", …) with `label` into the recorder installed at construction; nothing when none.
/// A span of work on a device whose hooks have a clock (DeviceHooks::event_record: CUDA events) is
/// timed by the device — when the device ran the work the host queued in between — on the recorder's
/// clock (Recorder::append_device_compute); otherwise by the host.
class Span {
 public:
  explicit Span(const char* name, std::string label = {}, Device device = Device::cpu);
  ~Span();
  Span(const Span&) = delete;
  Span& operator=(const Span&) = delete;

 private:
  std::shared_ptr<Recorder> recorder_;
  const char* name_;
  std::string label_;
  double t_start_ = 0;
  const DeviceHooks* device_ = nullptr;  // set when timed by the device
  void* start_ = nullptr;
};

}  // namespace tpsp::trace
