// Work: the handle of an issued communication call (PyTorch c10d Work), and the comm worker thread
// that runs a group's calls in issue order.
//
// A call is issued on the caller's thread (validated, sequenced, recorded as issued) and carried out
// later on the group's worker; its Work completes then. wait() blocks until completion and rethrows
// the call's error; the Work also tells when the transfer really started and ended (the recorder's
// clock), so a trace can prove that a collective was in flight while a GEMM ran. An async call's
// record says waited = false until its Work is waited: one never waited stays so.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "engine/tensor.h"

namespace tpsp::trace {
class Recorder;
}  // namespace tpsp::trace

namespace tpsp::comm {

class Work {
 public:
  /// A pending call recorded as record `id` of `recorder` (may be null). `async`: issued through an
  /// *_async form (only those can be left unwaited). `description` names the call in errors.
  Work(std::shared_ptr<trace::Recorder> recorder, uint64_t id, bool async, std::string description);
  ~Work();
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Blocks until the call completed; rethrows its exception (CommError, ShapeError) if it failed.
  /// May be called again (and rethrows again).
  void wait();
  /// Like wait(), but raises CommTimeoutError naming the call if it has not completed within
  /// `timeout` (the call itself stays in flight, bounded by its own timeout).
  void wait(std::chrono::milliseconds timeout);
  /// True once the call finished, successfully or not; never blocks.
  bool is_completed();
  /// The call's error once it failed, else null; never blocks.
  std::exception_ptr exception();
  /// For stream-based backends: makes the current compute stream wait for the call without blocking
  /// the host. On the CPU (Gloo) it is wait().
  void synchronize();
  /// When the transfer started and ended, in seconds on the recorder's clock (after earlier calls of
  /// the group, including any emulated link delay); NaN until the call completed.
  double start_time();
  double end_time();

  // ---- for the ProcessGroup ----
  /// Marks the call done with its outcome and transfer times.
  void finish(std::exception_ptr error, double t_start, double t_end);
  /// A check to run when the caller waits (e.g. that a send buffer was not modified before wait()).
  void on_wait(std::function<void()> check);

 private:
  void waited();
  std::shared_ptr<trace::Recorder> recorder_;
  uint64_t id_;
  bool async_;
  std::string description_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool waited_ = false;
  std::exception_ptr error_;
  double t_start_, t_end_;
  std::function<void()> on_wait_;
};
using WorkPtr = std::shared_ptr<Work>;

/// A thread running submitted tasks one at a time, in submission order (PyTorch c10d
/// ProcessGroupGloo runs its work on worker threads the same way). The thread starts at the first
/// submit(): a group whose calls all run on their callers' threads (claim_if_idle) never starts one
/// (a check's scenario makes several groups per rank, each with two workers). The destructor runs
/// what is still queued (each call is bounded by its timeout) and joins the thread.
class CommWorker {
 public:
  CommWorker();
  ~CommWorker();
  CommWorker(const CommWorker&) = delete;
  CommWorker& operator=(const CommWorker&) = delete;

  /// Queues `task`; it runs on the worker thread and must not throw (it finishes its own Work).
  void submit(std::function<void()> task);

  /// When nothing is queued or running, claims the worker for the caller and returns true: the caller
  /// then runs one task on its own thread and calls release(); tasks submitted meanwhile wait, so tasks
  /// still run one at a time in submission order. False (nothing claimed) otherwise. A blocking call
  /// run this way saves two thread hand-offs (issue → worker, worker → waiter): on the 2-vCPU VMs of
  /// docs/performance.md a 4 KiB all_reduce took 1.7–2.2 ms through the worker and 0.45 ms as a raw
  /// Gloo call on the same context.
  bool claim_if_idle();
  /// Ends a claim_if_idle() claim; the worker runs what was queued during it.
  void release();

 private:
  void loop();

  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  bool busy_ = false;  ///< a task is running (on the worker, or on a claimer's thread)
  std::thread thread_;
};

}  // namespace tpsp::comm
