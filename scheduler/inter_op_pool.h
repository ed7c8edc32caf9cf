// The inter-op pool: threads that run independent graph nodes at the same time. Separate from
// the devices' intra-op pools (which split one kernel's loop), so a node can still parallelise
// its own work while another node runs.
//
//   inter_op_pool().submit([&] { run_node(n); });
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace weft {

class InterOpPool {
 public:
  explicit InterOpPool(int num_threads);
  ~InterOpPool();
  InterOpPool(const InterOpPool&) = delete;
  InterOpPool& operator=(const InterOpPool&) = delete;

  void submit(std::function<void()> task);
  // True on a thread of this pool: an executor started there runs sequentially, because
  // waiting for sub-tasks from inside a pool thread could leave no thread to run them.
  static bool in_pool_thread();

 private:
  void loop();
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::function<void()>> queue_;
  bool stop_ = false;
  std::vector<std::thread> threads_;
};

// One per process, with a thread per physical core.
InterOpPool& inter_op_pool();

}  // namespace weft
