#include "comm/nccl/nccl_watchdog.h"

#include <algorithm>
#include <utility>

namespace weft {

namespace {

std::string what_of(std::exception_ptr error) {
  try {
    std::rethrow_exception(error);
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "unknown error";
  }
}

}  // namespace

NcclWatchdog::NcclWatchdog(std::chrono::milliseconds init_timeout, Failure on_failure, Naps naps, Thread thread)
    : init_timeout_(init_timeout), on_failure_(std::move(on_failure)), naps_(naps) {
  if (thread == Thread::kStart) thread_ = std::thread([this] { run(); });
}

NcclWatchdog::~NcclWatchdog() { stop(); }

void NcclWatchdog::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

void NcclWatchdog::watch(std::shared_ptr<NcclChannel> channel) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (channel->state_ == NcclChannel::State::kAborted) return;  // aborted before it came up: stays so
    channel->state_ = NcclChannel::State::kInitializing;
    channel->deadline_ = Clock::now() + init_timeout_;
    channels_.push_back(std::move(channel));
  }
  cv_.notify_all();
}

void NcclWatchdog::watch(std::shared_ptr<NcclLaunch> launch) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    launches_.push_back(std::move(launch));
  }
  cv_.notify_all();
}

bool NcclWatchdog::forget(const std::shared_ptr<NcclLaunch>& launch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (!std::erase(launches_, launch)) return false;
  launch->state_ = NcclLaunch::State::kDone;
  return true;
}

bool NcclWatchdog::issuing(NcclLaunch& launch) {
  std::lock_guard<std::mutex> lock(mu_);
  if (launch.state_ == NcclLaunch::State::kDone) return false;
  if (launch.state_ == NcclLaunch::State::kQueued) launch.state_ = NcclLaunch::State::kIssuing;
  return true;
}

bool NcclWatchdog::launched(NcclLaunch& launch, bool in_progress) {
  if (in_progress) {
    std::lock_guard<std::mutex> lock(mu_);
    if (launch.state_ == NcclLaunch::State::kQueued || launch.state_ == NcclLaunch::State::kIssuing)
      launch.state_ = NcclLaunch::State::kLaunching;
    return false;
  }
  finish(launch);
  return true;
}

void NcclWatchdog::finish(NcclLaunch& launch) {
  launch.finish_launch();
  std::lock_guard<std::mutex> lock(mu_);
  if (launch.state_ != NcclLaunch::State::kDone) launch.state_ = NcclLaunch::State::kInFlight;
}

std::optional<std::string> NcclWatchdog::abort_reason(const NcclChannel& channel) const {
  std::lock_guard<std::mutex> lock(mu_);
  if (channel.state_ != NcclChannel::State::kAborted) return std::nullopt;
  return channel.abort_reason_;
}

std::vector<std::shared_ptr<NcclChannel>> NcclWatchdog::live_channels() const {
  std::lock_guard<std::mutex> lock(mu_);
  return channels_;
}

void NcclWatchdog::abort(const std::vector<std::shared_ptr<NcclChannel>>& channels, std::exception_ptr error) {
  std::vector<std::shared_ptr<NcclChannel>> aborted;
  std::vector<std::shared_ptr<NcclLaunch>> failed, abandoned;
  const std::string reason = what_of(error);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : channels) {
      if (c->state_ == NcclChannel::State::kAborted) continue;
      c->state_ = NcclChannel::State::kAborted;
      c->abort_reason_ = reason;
      std::erase(channels_, c);
      aborted.push_back(c);
    }
    for (auto it = launches_.begin(); it != launches_.end();) {
      NcclLaunch& l = **it;
      if (std::find(aborted.begin(), aborted.end(), l.channel_) == aborted.end()) {
        ++it;
        continue;
      }
      if (l.state_ != NcclLaunch::State::kQueued) abandoned.push_back(*it);
      l.state_ = NcclLaunch::State::kDone;  // a look under way skips it
      failed.push_back(*it);
      it = launches_.erase(it);
    }
  }
  for (const auto& c : aborted) c->abort(error);
  // Only now are they zombies: NCCL queues nothing more for them, and their events can say so.
  std::erase_if(abandoned, [](const std::shared_ptr<NcclLaunch>& z) {
    try {
      z->abandoned();
      return false;
    } catch (...) {
      return true;  // no event to wait for: dropped
    }
  });
  if (!abandoned.empty()) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      zombies_.insert(zombies_.end(), abandoned.begin(), abandoned.end());
    }
    cv_.notify_all();
  }
  for (const auto& l : failed) l->fail(error);
}

std::optional<NcclWatchdog::Clock::duration> NcclWatchdog::poll_once() {
  std::vector<std::shared_ptr<NcclChannel>> initializing;
  std::vector<std::shared_ptr<NcclLaunch>> pending, zombies;
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (const auto& c : channels_)
      if (c->state_ == NcclChannel::State::kInitializing) initializing.push_back(c);
    pending = launches_;
    zombies = zombies_;
  }
  std::vector<std::shared_ptr<NcclLaunch>> buried;
  for (const auto& z : zombies)
    if (z->poll_completion().kind != NcclPoll::Kind::kPending) buried.push_back(z);
  if (!buried.empty()) {
    std::lock_guard<std::mutex> lock(mu_);
    std::erase_if(zombies_, [&](const auto& z) { return std::find(buried.begin(), buried.end(), z) != buried.end(); });
  }

  for (const auto& c : initializing) {
    const NcclPoll p = c->poll_comm();
    if (p.kind == NcclPoll::Kind::kReady) {
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (c->state_ != NcclChannel::State::kInitializing) continue;  // aborted meanwhile
        c->state_ = NcclChannel::State::kReady;
      }
      c->open();
    } else if (p.kind == NcclPoll::Kind::kFailed) {
      on_failure_(c, c->error("creating its communicator failed: " + p.error));
    } else if (Clock::now() > c->deadline_) {
      on_failure_(c, c->error("a rank did not join within " + std::to_string(init_timeout_.count()) +
                              " ms (it is missing or failed)"));
    }
  }

  bool in_flight = false;
  for (const auto& l : pending) {
    NcclLaunch::State state;
    std::exception_ptr cancelled;
    {
      std::lock_guard<std::mutex> lock(mu_);
      state = l->state_;
      if (state == NcclLaunch::State::kDone) continue;
      cancelled = l->cancelled();
    }
    const std::shared_ptr<NcclChannel>& c = l->channel_;
    if (cancelled) {  // also while queued: its turn would leave a hole in the channel's order
      on_failure_(c, cancelled);
      continue;
    }
    // Queued: its turn has not come. Issuing: its issuer is in NCCL's calls, and finishes it.
    if (state == NcclLaunch::State::kQueued || state == NcclLaunch::State::kIssuing) continue;
    in_flight = true;
    const NcclPoll comm = c->poll_comm();
    if (comm.kind == NcclPoll::Kind::kFailed) {
      on_failure_(c, c->error("NCCL error: " + comm.error));
      continue;
    }
    if (state == NcclLaunch::State::kLaunching) {
      if (comm.kind != NcclPoll::Kind::kReady) continue;
      try {
        finish(*l);
      } catch (...) {
        on_failure_(c, std::current_exception());
        continue;
      }
      c->open();
      continue;
    }
    const NcclPoll done = l->poll_completion();
    if (done.kind == NcclPoll::Kind::kPending) continue;
    if (done.kind == NcclPoll::Kind::kFailed) {
      on_failure_(c, c->error("waiting for its work on the GPU failed: " + done.error));
      continue;
    }
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (l->state_ == NcclLaunch::State::kDone) continue;  // failed meanwhile
      l->state_ = NcclLaunch::State::kDone;
      std::erase(launches_, l);
    }
    l->complete();
  }

  std::lock_guard<std::mutex> lock(mu_);
  if (in_flight || !zombies_.empty()) return naps_.in_flight;
  if (watching_locked()) return naps_.waiting;
  return std::nullopt;
}

bool NcclWatchdog::watching_locked() const {
  if (!launches_.empty() || !zombies_.empty()) return true;
  for (const auto& c : channels_)
    if (c->state_ == NcclChannel::State::kInitializing) return true;
  return false;
}

void NcclWatchdog::run() {
  std::unique_lock<std::mutex> lock(mu_);
  while (!stopping_) {
    lock.unlock();
    std::optional<Clock::duration> nap = naps_.waiting;
    try {
      nap = poll_once();
    } catch (...) {
      // A CUDA or NCCL query of the look failed outside any launch's account; the next look tries again.
    }
    lock.lock();
    if (stopping_) break;
    if (nap) cv_.wait_for(lock, *nap);
    else cv_.wait(lock, [&] { return stopping_ || watching_locked(); });
  }
}

void NcclWatchdog::wait_for_zombies() {
  std::vector<std::shared_ptr<NcclLaunch>> zombies;
  {
    std::lock_guard<std::mutex> lock(mu_);
    zombies.swap(zombies_);
  }
  for (const auto& z : zombies) z->wait();
}

size_t NcclWatchdog::launches() const {
  std::lock_guard<std::mutex> lock(mu_);
  return launches_.size();
}

size_t NcclWatchdog::zombies() const {
  std::lock_guard<std::mutex> lock(mu_);
  return zombies_.size();
}

}  // namespace weft
