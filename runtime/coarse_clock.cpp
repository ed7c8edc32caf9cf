#include "runtime/coarse_clock.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace weft {

namespace {

int64_t steady_ms() {
  return std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

class CoarseClock {
 public:
  CoarseClock() : now_(steady_ms()), ticker_([this] { tick(); }) {}
  ~CoarseClock() {
    {
      std::lock_guard lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    ticker_.join();
  }
  int64_t now() const { return now_.load(std::memory_order_relaxed); }

 private:
  void tick() {
    std::unique_lock lock(mu_);
    while (!cv_.wait_for(lock, std::chrono::milliseconds(100), [&] { return stop_; }))
      now_.store(steady_ms(), std::memory_order_relaxed);
  }

  std::atomic<int64_t> now_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::thread ticker_;  // last: starts once the rest is made
};

}  // namespace

int64_t coarse_now_ms() {
  static CoarseClock clock;
  return clock.now();
}

}  // namespace weft
