#include "scheduler/inter_op_pool.h"

#include <algorithm>

#include "runtime/device.h"

namespace weft {

namespace {
thread_local bool t_in_pool = false;
}

InterOpPool::InterOpPool(int num_threads) {
  for (int i = 0; i < std::max(1, num_threads); ++i) threads_.emplace_back([this] { loop(); });
}

InterOpPool::~InterOpPool() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : threads_) t.join();
}

void InterOpPool::submit(std::function<void()> task) {
  {
    std::lock_guard lock(mu_);
    queue_.push_back(std::move(task));
  }
  cv_.notify_one();
}

bool InterOpPool::in_pool_thread() { return t_in_pool; }

void InterOpPool::loop() {
  t_in_pool = true;
  for (;;) {
    std::function<void()> task;
    {
      std::unique_lock lock(mu_);
      cv_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (queue_.empty()) return;
      task = std::move(queue_.front());
      queue_.pop_front();
    }
    task();
  }
}

InterOpPool& inter_op_pool() {
  static InterOpPool* pool = new InterOpPool(host_topology().usable_cores);  // never destroyed: threads may outlive statics
  return *pool;
}

}  // namespace weft
