#include "runtime/thread_pool.h"

#include <algorithm>
#include <chrono>

namespace weft {

struct Batch {
  std::mutex mu;
  std::condition_variable done_cv;
  std::atomic<int> pending{0};  // decremented under mu, so a waiter that saw 0 and then took mu
                                // knows no worker touches the batch any more
  bool waiting = false;         // the caller sleeps on done_cv; guarded by mu
  std::exception_ptr error;     // guarded by mu
};

namespace {

thread_local const void* t_worker_of = nullptr;

// Spins until done() or about kSpin has passed; the caller checks again under its lock. Polls first, then
// yields the core to any other runnable thread. No pause instruction: under a hypervisor a pause
// loop gets the virtual CPU descheduled (pause-loop exiting), which costs more than it saves.
template <class Done>
void spin_until(Done&& done) {
  constexpr auto kSpin = std::chrono::microseconds(200);
  constexpr int kPolls = 50000;
  for (int i = 0; i < kPolls; ++i) {
    if (done()) return;
    asm volatile("" ::: "memory");
  }
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  while (std::chrono::steady_clock::now() < deadline) {
    if (done()) return;
    std::this_thread::yield();
  }
}

}  // namespace

bool ThreadPool::in_worker() { return t_worker_of != nullptr; }

ThreadPool::ThreadPool(int num_threads) {
  int workers = std::max(0, num_threads - 1);
  workers_.reserve(workers);
  for (int i = 0; i < workers; ++i) workers_.emplace_back([this] { worker_loop(); });
}

ThreadPool::~ThreadPool() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  for (auto& t : workers_) t.join();
}

void ThreadPool::worker_loop() {
  t_worker_of = this;
  for (;;) {
    spin_until([this] { return queued_.load(std::memory_order_acquire) > 0 || stop_.load(std::memory_order_relaxed); });
    Job job;
    {
      std::unique_lock<std::mutex> lock(mu_);
      if (queue_.empty() && !stop_) {
        ++sleepers_;
        cv_.wait(lock, [this] { return stop_ || !queue_.empty(); });
        --sleepers_;
      }
      if (queue_.empty()) return;  // stopping
      job = std::move(queue_.back());
      queue_.pop_back();
      queued_.fetch_sub(1, std::memory_order_relaxed);
    }
    std::exception_ptr err;
    try {
      (*job.fn)(job.begin, job.end);
    } catch (...) {
      err = std::current_exception();
    }
    Batch* b = job.batch;
    std::lock_guard<std::mutex> lock(b->mu);
    if (err && !b->error) b->error = err;
    if (b->pending.fetch_sub(1, std::memory_order_acq_rel) == 1 && b->waiting) b->done_cv.notify_one();
  }
}

void ThreadPool::run_chunks(int64_t n, int64_t grain,
                            const std::function<void(int64_t, int64_t)>& fn) {
  int64_t max_chunks = std::max<int64_t>(1, n / std::max<int64_t>(grain, 1));
  int64_t chunks = std::min<int64_t>(num_threads(), max_chunks);
  // Chunk sizes differ by at most one. Rounding the size up instead (ceil(n / chunks) each) leaves
  // the last chunks empty or even reversed: n = 5 over 4 chunks of 2 gives [6, 5).
  const int64_t per = n / chunks, extra = n % chunks;
  auto chunk_begin = [&](int64_t c) { return c * per + std::min(c, extra); };
  Batch batch;
  batch.pending = static_cast<int>(chunks - 1);
  int sleepers = 0;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (int64_t c = 1; c < chunks; ++c) {
      Job j;
      j.fn = &fn;
      j.begin = chunk_begin(c);
      j.end = chunk_begin(c + 1);
      j.batch = &batch;
      queue_.push_back(std::move(j));
    }
    queued_.fetch_add(static_cast<int>(chunks - 1), std::memory_order_release);
    sleepers = sleepers_;
  }
  if (sleepers > 1 && chunks > 2) cv_.notify_all();
  else if (sleepers > 0) cv_.notify_one();
  std::exception_ptr err;
  try {
    fn(0, chunk_begin(1));
  } catch (...) {
    err = std::current_exception();
  }
  spin_until([&] { return batch.pending.load(std::memory_order_acquire) == 0; });
  {
    std::unique_lock<std::mutex> lock(batch.mu);
    batch.waiting = true;
    batch.done_cv.wait(lock, [&] { return batch.pending.load(std::memory_order_acquire) == 0; });
  }
  if (err) std::rethrow_exception(err);
  if (batch.error) std::rethrow_exception(batch.error);
}

}  // namespace weft
