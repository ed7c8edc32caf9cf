#include "runtime/local_rendezvous.h"

#include <utility>
#include <vector>

#include "runtime/error.h"

namespace weft {

namespace {

// Callbacks run outside the lock, and must not throw: one that does would leave the other
// waiters of an abort without their answer, so it ends the process instead.
void deliver(Rendezvous::DoneCallback& done, std::exception_ptr error, Tensor value, bool is_dead) noexcept {
  done(std::move(error), std::move(value), is_dead);
}

void check_error(const std::exception_ptr& error, const char* what) {
  if (!error) throw InvalidArgument(std::string("[rendezvous] ") + what + " needs an error, got a null exception_ptr");
}

}  // namespace

const std::exception_ptr* LocalRendezvous::abort_error(const Shard& s, int64_t step_id) {
  if (s.aborted) return &s.aborted;
  if (s.aborted_steps.empty()) return nullptr;
  auto a = s.aborted_steps.find(step_id);
  return a == s.aborted_steps.end() ? nullptr : &a->second;
}

LocalRendezvous::~LocalRendezvous() {
  std::exception_ptr error;
  for (Shard& s : shards_)
    for (auto& [key, item] : s.items) {
      if (item.has_value) continue;
      if (!error)
        error = std::make_exception_ptr(
            FailedPrecondition("[rendezvous] destroyed while a recv was still waiting for its tensor"));
      deliver(item.done, error, Tensor(), false);
    }
}

void LocalRendezvous::send(const RendezvousKey& key, Tensor value, bool is_dead) {
  const KeyRef ref{&key, RendezvousKeyHash()(key)};
  Shard& s = shard_of(ref.hash);
  DoneCallback done;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (const std::exception_ptr* aborted = abort_error(s, key.step_id)) std::rethrow_exception(*aborted);
    auto it = s.items.find(ref);
    if (it == s.items.end()) {
      Item& item = s.items.try_emplace(StoredKey{key, ref.hash}).first->second;
      item.has_value = true;
      item.is_dead = is_dead;
      item.value = std::move(value);
      return;
    }
    if (it->second.has_value)
      throw Internal("[rendezvous] key " + key.to_string() + " was sent twice before it was received");
    done = std::move(it->second.done);
    s.items.erase(it);
  }
  deliver(done, nullptr, std::move(value), is_dead);
}

void LocalRendezvous::recv_async(const RendezvousKey& key, DoneCallback done) { recv_with(key, nullptr, std::move(done)); }

void LocalRendezvous::recv_async_expecting(const RendezvousKey& key, const RecvExpectation& expected,
                                           DoneCallback done) {
  recv_with(key, &expected, std::move(done));
}

bool LocalRendezvous::expectation_of(const RendezvousKey& key, RecvExpectation& out) const {
  const KeyRef ref{&key, RendezvousKeyHash()(key)};
  const Shard& s = shard_of(ref.hash);
  std::lock_guard<std::mutex> lock(s.mu);
  auto it = s.items.find(ref);
  if (it == s.items.end() || it->second.has_value || !it->second.has_expectation) return false;
  out = it->second.expected;
  return true;
}

void LocalRendezvous::recv_with(const RendezvousKey& key, const RecvExpectation* expected, DoneCallback done) {
  const KeyRef ref{&key, RendezvousKeyHash()(key)};
  Shard& s = shard_of(ref.hash);
  std::exception_ptr error;
  Tensor value;
  bool is_dead = false;
  {
    std::lock_guard<std::mutex> lock(s.mu);
    if (const std::exception_ptr* aborted = abort_error(s, key.step_id)) {
      error = *aborted;
    } else if (auto it = s.items.find(ref); it == s.items.end()) {
      Item& item = s.items.try_emplace(StoredKey{key, ref.hash}).first->second;
      item.done = std::move(done);
      if (expected) {
        item.has_expectation = true;
        item.expected = *expected;
      }
      return;
    } else if (!it->second.has_value) {
      error = std::make_exception_ptr(
          Internal("[rendezvous] two recvs wait for key " + key.to_string() + "; each key has one receiver"));
    } else {
      value = std::move(it->second.value);
      is_dead = it->second.is_dead;
      s.items.erase(it);
    }
  }
  deliver(done, std::move(error), std::move(value), is_dead);
}

void LocalRendezvous::start_abort(std::exception_ptr error) {
  check_error(error, "start_abort");
  std::vector<DoneCallback> waiting;
  std::vector<Tensor> dropped;  // released outside the locks: freeing a buffer may take a while
  {
    // Every shard at once, so that no send or recv sees some shards aborted and others not.
    std::vector<std::unique_lock<std::mutex>> locks;
    for (Shard& s : shards_) locks.emplace_back(s.mu);
    if (shards_[0].aborted) return;
    for (Shard& s : shards_) {
      s.aborted = error;
      for (auto& [key, item] : s.items) {
        if (item.has_value) dropped.push_back(std::move(item.value));
        else waiting.push_back(std::move(item.done));
      }
      s.items.clear();
    }
  }
  for (DoneCallback& done : waiting) deliver(done, error, Tensor(), false);
}

void LocalRendezvous::abort_step(int64_t step_id, std::exception_ptr error) {
  check_error(error, "abort_step");
  std::vector<DoneCallback> waiting;
  std::vector<Tensor> dropped;
  {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (Shard& s : shards_) locks.emplace_back(s.mu);
    if (shards_[0].aborted || shards_[0].aborted_steps.count(step_id)) return;
    for (Shard& s : shards_) {
      s.aborted_steps.emplace(step_id, error);
      for (auto it = s.items.begin(); it != s.items.end();) {
        if (it->first.key.step_id != step_id) {
          ++it;
          continue;
        }
        if (it->second.has_value) dropped.push_back(std::move(it->second.value));
        else waiting.push_back(std::move(it->second.done));
        it = s.items.erase(it);
      }
    }
  }
  for (DoneCallback& done : waiting) deliver(done, error, Tensor(), false);
}

void LocalRendezvous::cleanup_step(int64_t step_id) {
  std::vector<std::pair<RendezvousKey, DoneCallback>> waiting;
  std::vector<Tensor> dropped;
  {
    std::vector<std::unique_lock<std::mutex>> locks;
    for (Shard& s : shards_) locks.emplace_back(s.mu);
    for (Shard& s : shards_) {
      s.aborted_steps.erase(step_id);
      for (auto it = s.items.begin(); it != s.items.end();) {
        if (it->first.key.step_id != step_id) {
          ++it;
          continue;
        }
        if (it->second.has_value) dropped.push_back(std::move(it->second.value));
        else waiting.emplace_back(it->first.key, std::move(it->second.done));
        it = s.items.erase(it);
      }
    }
  }
  for (auto& [key, done] : waiting)
    deliver(done,
            std::make_exception_ptr(FailedPrecondition("[rendezvous] step " + std::to_string(step_id) +
                                                       " was cleaned up while a recv still waited for key " +
                                                       key.to_string())),
            Tensor(), false);
}

size_t LocalRendezvous::pending() const {
  size_t n = 0;
  for (const Shard& s : shards_) {
    std::lock_guard<std::mutex> lock(s.mu);
    n += s.items.size();
  }
  return n;
}

LocalRendezvous& process_local_rendezvous() {
  // Never destroyed: recvs of a run still in flight at exit must not find it gone.
  static auto* r = new LocalRendezvous();
  return *r;
}

}  // namespace weft
