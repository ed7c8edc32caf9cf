#include "runtime/cancellation.h"

#include <vector>

#include "runtime/error.h"

namespace weft {

CancellationToken CancellationManager::register_callback(Callback callback) {
  std::exception_ptr error;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!error_) {
      CancellationToken token = next_token_++;
      callbacks_.emplace(token, std::move(callback));
      return token;
    }
    error = error_;
  }
  callback(error);
  return kNoCancellationToken;
}

bool CancellationManager::deregister_callback(CancellationToken token) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!error_) return callbacks_.erase(token) > 0;
  // Cancelled: cancel() took every callback. Wait for it to finish running them, unless this is
  // one of them, which would wait for itself.
  if (canceller_ != std::this_thread::get_id())
    callbacks_done_.wait(lock, [this] { return !callbacks_running_; });
  return false;
}

bool CancellationManager::cancel(std::exception_ptr error) {
  if (!error) throw InvalidArgument("[cancel] needs an error to cancel with, got a null exception_ptr");
  std::map<CancellationToken, Callback> callbacks;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (error_) return false;
    error_ = error;
    callbacks_running_ = true;
    canceller_ = std::this_thread::get_id();
    callbacks.swap(callbacks_);
    cancelled_.store(true, std::memory_order_release);
  }
  std::exception_ptr thrown;
  for (auto& [token, callback] : callbacks) {
    try {
      callback(error);
    } catch (...) {
      if (!thrown) thrown = std::current_exception();
    }
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    callbacks_running_ = false;
    canceller_ = std::thread::id();
  }
  callbacks_done_.notify_all();
  if (thrown) std::rethrow_exception(thrown);
  return true;
}

std::exception_ptr CancellationManager::error() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

}  // namespace weft
