#include "engine/trace/span.h"

#include <atomic>
#include <mutex>

#include "engine/device_hooks.h"

namespace tpsp::trace {

namespace {
std::mutex g_mu;
std::shared_ptr<Recorder> g_recorder;
std::atomic<bool> g_on{false};  // fast path: no lock while tracing is off
}  // namespace

void install(std::shared_ptr<Recorder> recorder) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_recorder = std::move(recorder);
  g_on = g_recorder != nullptr;
}

std::shared_ptr<Recorder> installed() {
  if (!g_on.load(std::memory_order_relaxed)) return nullptr;
  std::lock_guard<std::mutex> lock(g_mu);
  return g_recorder;
}

Span::Span(const char* name, std::string label, Device device)
    : recorder_(installed()), name_(name), label_(std::move(label)) {
  if (!recorder_) return;
  const DeviceHooks* h = device_hooks(device);
  if (h && h->event_record && h->event_elapsed_s && h->event_release) {
    recorder_->set_device_anchor(h);
    device_ = h;
    start_ = h->event_record();
    return;
  }
  t_start_ = recorder_->now();
}

Span::~Span() {
  if (!recorder_) return;
  if (device_) {
    recorder_->append_device_compute(name_, std::move(label_), start_, device_->event_record(), device_);
    return;
  }
  recorder_->append_compute({name_, std::move(label_), t_start_, recorder_->now()});
}

}  // namespace tpsp::trace
