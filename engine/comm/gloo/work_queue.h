// The comm worker: one thread per process group that runs the group's calls in issue order, so that
// async calls reach Gloo in the same order on every rank (PyTorch c10d ProcessGroupGloo runs its
// work on worker threads the same way). Each queued call completes a FutureWork.
#pragma once

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/comm/process_group.h"

namespace tpsp::comm {

/// A Work completed by someone else (the worker): wait() blocks until finish() was called and
/// rethrows the exception finish() was given.
class FutureWork : public Work {
 public:
  void wait() override;
  bool is_completed() override;
  /// Marks the work done; `error` (may be null) is rethrown by every wait().
  void finish(std::exception_ptr error);

 private:
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};

/// A thread running submitted tasks one at a time, in submission order. The destructor runs what is
/// still queued (each call is bounded by its timeout) and joins the thread.
class CommWorker {
 public:
  CommWorker();
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  /// Queues `task`; when it returns or throws, `work` is finished with its outcome.
  void submit(std::function<void()> task, std::shared_ptr<FutureWork> work);

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::pair<std::function<void()>, std::shared_ptr<FutureWork>>> queue_;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tpsp::comm
