#include "runtime/cuda/cuda_event_waiter.h"

#include <string>

#include "runtime/cuda/cuda_check.h"
#include "runtime/error.h"

namespace weft {

CudaEventWaiter::CudaEventWaiter(int device) : device_(device), thread_([this] { run(); }) {}

CudaEventWaiter::~CudaEventWaiter() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  thread_.join();
  ignore_cuda_error(cudaSetDevice(device_));
  for (cudaEvent_t e : free_events_) ignore_cuda_error(cudaEventDestroy(e));
}

cudaEvent_t CudaEventWaiter::event() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!free_events_.empty()) {
      cudaEvent_t e = free_events_.back();
      free_events_.pop_back();
      return e;
    }
  }
  cudaEvent_t e = nullptr;
  check_cuda(cudaSetDevice(device_), "cudaSetDevice");
  check_cuda(cudaEventCreateWithFlags(&e, cudaEventDisableTiming | cudaEventBlockingSync), "cudaEventCreate(waiter)");
  return e;
}

void CudaEventWaiter::when_done(cudaEvent_t event, Callback then) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    queue_.push_back({event, std::move(then)});
  }
  cv_.notify_one();
}

void CudaEventWaiter::run() {
  bool device_set = false;
  for (;;) {
    Item item;
    {
      std::unique_lock<std::mutex> lock(mu_);
      cv_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
      if (queue_.empty()) return;  // stopping, and everything handed over has run
      item = std::move(queue_.front());
      queue_.pop_front();
    }
    std::exception_ptr error;
    if (!device_set) device_set = cudaSetDevice(device_) == cudaSuccess;
    const cudaError_t err = cudaEventSynchronize(item.event);
    if (err != cudaSuccess) {
      cudaGetLastError();
      error = std::make_exception_ptr(Internal(std::string("[cuda] waiting for a copy on GPU ") +
                                               std::to_string(device_) + ": " + cudaGetErrorString(err)));
    }
    try {
      item.then(error);
    } catch (...) {
      // Documented: a callback reports through its own means.
    }
    std::lock_guard<std::mutex> lock(mu_);
    free_events_.push_back(item.event);
  }
}

}  // namespace weft
