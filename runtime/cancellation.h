// Cancelling a step: whoever fails first cancels it with its error, and everything that waits for
// the step (a pending recv, a collective, a timer) learns of it through a callback registered
// here, so no thread needs to poll or block.
//
//   CancellationManager cm;
//   CancellationToken t = cm.register_callback([&](const std::exception_ptr& e) { rdv.start_abort(e); });
//   ...                               // wait for something, asynchronously
//   cm.deregister_callback(t);        // done: the callback will not run
//   cm.cancel(std::make_exception_ptr(Unavailable("[step] task 3 was lost")));   // elsewhere
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <map>
#include <mutex>
#include <thread>

namespace weft {

// Names one registered callback, to deregister it.
using CancellationToken = uint64_t;
// Returned by register_callback when the manager was already cancelled (the callback has run).
inline constexpr CancellationToken kNoCancellationToken = 0;

class CancellationManager {
 public:
  // Gets the error the manager was cancelled with. Must not throw.
  using Callback = std::function<void(const std::exception_ptr& error)>;

  CancellationManager() = default;
  CancellationManager(const CancellationManager&) = delete;
  CancellationManager& operator=(const CancellationManager&) = delete;

  // Runs `callback` exactly once, when the manager is cancelled, unless deregistered first.
  // When the manager is already cancelled it runs now, on this thread, and the result is
  // kNoCancellationToken.
  CancellationToken register_callback(Callback callback);
  // Forgets a callback. True when it was registered and now will not run. False when it has run
  // or cancellation has already taken it; if it is running on another thread, this waits for it
  // to finish, so the caller may then free what it captured. Never waits when called from a
  // callback of this manager.
  bool deregister_callback(CancellationToken token);
  // Cancels with `error` (non-null): runs every registered callback once, on this thread, in the
  // order they were registered. Only the first call cancels: it returns true, later ones false.
  // A callback that throws does not stop the others; the first exception is rethrown at the end.
  bool cancel(std::exception_ptr error);

  bool is_cancelled() const { return cancelled_.load(std::memory_order_acquire); }
  // The error given to cancel(); null until then.
  std::exception_ptr error() const;

 private:
  mutable std::mutex mu_;
  std::condition_variable callbacks_done_;
  std::atomic<bool> cancelled_{false};
  bool callbacks_running_ = false;       // guarded by mu_
  std::thread::id canceller_;            // guarded by mu_
  std::exception_ptr error_;             // guarded by mu_
  CancellationToken next_token_ = 1;     // guarded by mu_
  std::map<CancellationToken, Callback> callbacks_;  // guarded by mu_; ordered by registration
};

}  // namespace weft
