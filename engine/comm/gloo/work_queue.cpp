#include "engine/comm/gloo/work_queue.h"

namespace tpsp::comm {

void FutureWork::wait() {
  std::unique_lock<std::mutex> lock(mu_);
  // Bounded: every queued call carries its own timeout, so the worker always finishes it.
  cv_.wait(lock, [this] { return done_; });
  if (error_) std::rethrow_exception(error_);
}

bool FutureWork::is_completed() {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

void FutureWork::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

CommWorker::CommWorker() : thread_([this] { loop(); }) {}

CommWorker::~CommWorker() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void CommWorker::submit(std::function<void()> task, std::shared_ptr<FutureWork> work) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.emplace_back(std::move(task), std::move(work));
  }
  cv_.notify_one();
}

void CommWorker::loop() {
  for (;;) {
    std::pair<std::function<void()>, std::shared_ptr<FutureWork>> item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stop_ and drained
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    try {
      item.first();
    } catch (...) {
      error = std::current_exception();
    }
    item.second->finish(error);
  }
}

}  // namespace tpsp::comm
