// A fixed pool of worker threads for intra-op parallelism.
//
//   ThreadPool& pool = cpu_device()->pool();
//   pool.parallel_for(n, /*grain=*/1 << 14, [&](int64_t begin, int64_t end) { ... });
//
// The calling thread works too, so a pool of N threads owns N-1 workers. Between jobs a worker
// spins for a short while (kSpin) before it sleeps on a condition variable, and a caller waiting
// for its chunks does the same: waking a sleeping thread costs 50-80 us on the virtual machines
// weft is measured on, more than most kernels take, while the next parallel kernel of a graph
// usually starts within microseconds. The spin is bounded, and yields after its first part, so an
// idle pool leaves the cores to OpenBLAS and to other processes.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  // Threads that run a parallel_for, the caller included.
  int num_threads() const { return static_cast<int>(workers_.size()) + 1; }

  // Whether the calling thread is a worker of any pool.
  static bool in_worker();

  // Splits [0, n) into at most num_threads() chunks of at least `grain` items and runs
  // fn(begin, end) on each; returns when all are done. An exception from any chunk is rethrown
  // here. Runs inline when n <= grain, or when called from inside a worker of this pool.
  template <class F>
  void parallel_for(int64_t n, int64_t grain, F&& fn) {
    if (n <= 0) return;
    if (n <= grain || workers_.empty() || in_worker()) {
      fn(int64_t{0}, n);
      return;
    }
    run_chunks(n, grain, [&fn](int64_t b, int64_t e) { fn(b, e); });
  }

 private:
  void run_chunks(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);
  void worker_loop();

  struct Job {
    const std::function<void(int64_t, int64_t)>* fn = nullptr;
    int64_t begin = 0, end = 0;
    struct Batch* batch = nullptr;
  };

  std::mutex mu_;
  std::condition_variable cv_;
  std::vector<Job> queue_;       // guarded by mu_
  std::atomic<int> queued_{0};   // queue_.size(), for spinning without the lock
  int sleepers_ = 0;             // workers waiting on cv_; guarded by mu_
  std::atomic<bool> stop_{false};
  std::vector<std::thread> workers_;
};

}  // namespace weft
