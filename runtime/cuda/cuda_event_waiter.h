// Runs host work when GPU work finishes, without holding the thread that queued it: a thread per
// device waits for CUDA events in the order they were handed over and then runs their callbacks.
//
//   cudaEvent_t e = waiter.event();                 // from the waiter's pool
//   cudaEventRecord(e, copy_stream);
//   waiter.when_done(e, [](std::exception_ptr error) { ... });   // on the waiter's thread
//
// Why a thread and not cudaLaunchHostFunc: a host function may not call CUDA, and the callbacks
// here complete executor kernels, which go on to launch more GPU work. The events are made with
// cudaEventBlockingSync, so the thread sleeps in the driver instead of spinning on a core.
// Only GPU progress is waited for (no other process), so the waits need no bound.
#pragma once

#include <cuda_runtime.h>

#include <condition_variable>
#include <deque>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft {

class CudaEventWaiter {
 public:
  using Callback = std::function<void(std::exception_ptr error)>;

  explicit CudaEventWaiter(int device);
  // Runs the callbacks still queued (their events complete: the GPU finishes what was queued),
  // then stops the thread.
  ~CudaEventWaiter();
  CudaEventWaiter(const CudaEventWaiter&) = delete;
  CudaEventWaiter& operator=(const CudaEventWaiter&) = delete;

  // An event to record and hand to when_done, which gives it back to the pool after its callback.
  cudaEvent_t event();
  // `then` runs on the waiter's thread once `event` completed: with null, or with Internal when
  // waiting failed. Callbacks run one at a time in the order given; one that throws has its
  // exception dropped (it must report through its own means).
  void when_done(cudaEvent_t event, Callback then);

 private:
  void run();

  struct Item {
    cudaEvent_t event;
    Callback then;
  };
  int device_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Item> queue_;
  std::vector<cudaEvent_t> free_events_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace weft
