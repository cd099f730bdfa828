#include "engine/comm/work.h"

#include <cmath>
#include <limits>

#include "engine/comm/comm_error.h"
#include "engine/trace/recorder.h"

namespace tpsp::comm {

Work::Work(std::shared_ptr<trace::Recorder> recorder, uint64_t id, bool async, std::string description)
    : recorder_(std::move(recorder)),
      id_(id),
      async_(async),
      description_(std::move(description)),
      t_start_(std::numeric_limits<double>::quiet_NaN()),
      t_end_(std::numeric_limits<double>::quiet_NaN()) {}

Work::~Work() = default;

void Work::waited() {
  std::function<void()> check;
  bool first = false;
  {
    std::lock_guard<std::mutex> lock(mu_);
    first = !waited_;
    if (first) check = on_wait_;
    waited_ = true;
  }
  if (first && async_ && recorder_) recorder_->mark_waited(id_);
  if (check) check();
}

void Work::wait() {
  {
    std::unique_lock<std::mutex> lock(mu_);
    // Bounded: every queued call carries its own timeout, so the worker always finishes it.
    cv_.wait(lock, [this] { return done_; });
  }
  waited();
  std::lock_guard<std::mutex> lock(mu_);
  if (error_) std::rethrow_exception(error_);
}

void Work::wait(std::chrono::milliseconds timeout) {
  {
    std::unique_lock<std::mutex> lock(mu_);
    if (!cv_.wait_for(lock, timeout, [this] { return done_; }))
      throw CommTimeoutError(description_ + ": wait(" + std::to_string(timeout.count()) +
                             " ms) returned before the call completed");
  }
  wait();
}

bool Work::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

std::exception_ptr Work::exception() {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

void Work::synchronize() {
  wait();
}

double Work::start_time() {
  std::lock_guard<std::mutex> lock(mu_);
  return t_start_;
}

double Work::end_time() {
  std::lock_guard<std::mutex> lock(mu_);
  return t_end_;
}

void Work::finish(std::exception_ptr error, double t_start, double t_end) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
    t_start_ = t_start;
    t_end_ = t_end;
  }
  cv_.notify_all();
}

void Work::on_wait(std::function<void()> check) {
  std::lock_guard<std::mutex> lock(mu_);
  on_wait_ = std::move(check);
}

CommWorker::CommWorker() = default;

CommWorker::~CommWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void CommWorker::submit(std::function<void()> task) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back(std::move(task));
    if (!thread_.joinable()) thread_ = std::thread([this] { loop(); });
  }
  cv_.notify_one();
}

bool CommWorker::claim_if_idle() {
  std::lock_guard<std::mutex> lock(mu_);
  if (busy_ || !queue_.empty()) return false;
  busy_ = true;
  return true;
}

void CommWorker::release() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
  cv_.notify_all();
}

void CommWorker::loop() {
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return !busy_ && (stop_ || !queue_.empty()); });
      if (queue_.empty()) return;  // stop_ and drained
      task = std::move(queue_.front());
      queue_.pop_front();
      busy_ = true;
    }
    task();
    std::lock_guard<std::mutex> lock(mu_);
    busy_ = false;
  }
}

}  // namespace tpsp::comm
