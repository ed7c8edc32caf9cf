// The one watchdog of weft's two NCCL users: the collectives (nccl_collectives.cpp, a
// communicator per replica group) and the NCCL rendezvous (nccl_p2p.cpp, a communicator per link).
// Both create their communicators in NCCL's non-blocking mode and launch from whichever thread
// makes a call issuable (nccl_issue_queue.h); NCCL and CUDA report progress only when asked, so one
// thread per user asks, about everything pending:
//   - a channel (communicator) coming up: ncclCommGetAsyncError says ready -> open(); an error, or
//     still not ready at its deadline (created + init_timeout) -> the failure handler;
//   - a launch NCCL answered ncclInProgress: once its communicator says ncclSuccess, the launch is
//     finished (finish_launch() records its completion event) and the channel opened again;
//   - a launch in flight: its completion event -> complete(); a CUDA error, or a NCCL error of its
//     communicator -> the failure handler;
//   - a launch whose step was cancelled (cancelled()) -> the failure handler, with the step's error.
// The failure handler decides what a broken channel takes down: the collectives abort that
// channel, the rendezvous every link. abort() marks channels aborted and fails their launches once
// each; a launch NCCL may still be running (being issued, launching or in flight) is kept as a
// zombie, with its buffers, until its completion stops saying pending (ncclCommAbort makes its
// kernels return). A zombie is looked at only once its channel's abort() has returned and it was
// abandoned() (its completion event recorded after everything NCCL queued for it): before that,
// an event never recorded (a launch aborted mid-issue, or while ncclInProgress) would say "done"
// while NCCL's kernels could still write into its buffers.
//
//   struct MyChannel : NcclChannel { ... };   // poll_comm, open, abort, error: NCCL calls
//   struct MyLaunch : NcclLaunch { ... };     // poll_completion, finish_launch, complete, fail
//   NcclWatchdog dog(std::chrono::seconds(60), [&](auto& ch, auto e) { dog.abort({ch}, e); });
//   dog.watch(channel);  dog.watch(launch);   // then, in the issue callback, holding the channel's
//   if (!dog.issuing(*launch)) throw ...;     // NCCL lock: before the NCCL calls, and after them
//   return dog.launched(*launch, r == ncclInProgress);
//
// Locking: the watchdog's own mutex guards the states; no virtual function is called with it
// held except cancelled(). Callers may hold their own locks when calling in, as long as the
// virtual functions never wait for those locks while the watchdog's thread calls them.
//
// Plain C++ with no CUDA or NCCL in it: tests/comm/nccl_watchdog_test.cpp drives the state machine
// with stand-ins on the CPU.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace weft {

// One look at a communicator or at a launch's completion.
struct NcclPoll {
  enum class Kind { kPending, kReady, kFailed };
  Kind kind = Kind::kPending;
  std::string error;  // kFailed: what NCCL or CUDA said
  static NcclPoll pending() { return {}; }
  static NcclPoll ready() { return {Kind::kReady, {}}; }
  static NcclPoll failed(std::string why) { return {Kind::kFailed, std::move(why)}; }
};

class NcclWatchdog;

// A NCCL communicator made in non-blocking mode.
class NcclChannel {
 public:
  virtual ~NcclChannel() = default;
  // ncclCommGetAsyncError: pending while ncclInProgress, ready on ncclSuccess, else failed.
  virtual NcclPoll poll_comm() = 0;
  // The communicator takes calls (again): issue what waits for it.
  virtual void open() = 0;
  // Called once, when the watchdog aborts the channel: fail what waits in its queue with `error`,
  // then ncclCommAbort (so its kernels return and its zombies complete).
  virtual void abort(std::exception_ptr error) = 0;
  // A failure of this channel as the user reports it: `why`, naming the channel.
  virtual std::exception_ptr error(const std::string& why) const = 0;

 private:
  friend class NcclWatchdog;
  enum class State { kInitializing, kReady, kAborted };
  State state_ = State::kInitializing;  // guarded by the watchdog's mutex
  std::chrono::steady_clock::time_point deadline_;
  std::string abort_reason_;
};

// One launch (a collective, a send, a receive) on a channel.
class NcclLaunch {
 public:
  explicit NcclLaunch(std::shared_ptr<NcclChannel> channel) : channel_(std::move(channel)) {}
  virtual ~NcclLaunch() = default;
  const std::shared_ptr<NcclChannel>& channel() const { return channel_; }

  // Its completion event: pending until the GPU ran it, failed on a CUDA error.
  virtual NcclPoll poll_completion() = 0;
  // The launch is complete (at once, or after ncclInProgress): record its completion event and
  // whatever ordering goes with it. May throw.
  virtual void finish_launch() = 0;
  // The error of its step when that step was cancelled, else null. Called with the watchdog's
  // mutex held, and only while neither complete() nor fail() has been called.
  virtual std::exception_ptr cancelled() const { return nullptr; }
  // Exactly one of complete() and fail() is called, once, without the watchdog's mutex.
  virtual void complete() = 0;
  virtual void fail(std::exception_ptr error) = 0;
  // Blocks until the GPU is done with it (a zombie, at its owner's shutdown).
  virtual void wait() {}
  // Called once for a zombie, after its channel's abort() returned, so that nothing more of it
  // will be queued: make poll_completion() (and wait()) cover all NCCL queued for it, typically by
  // recording its completion event now on its NCCL stream (again, if finish_launch() did). A throw
  // drops the zombie.
  virtual void abandoned() {}

 private:
  friend class NcclWatchdog;
  // kIssuing: the issue callback is making its NCCL calls; kLaunching: NCCL said ncclInProgress.
  enum class State { kQueued, kIssuing, kLaunching, kInFlight, kDone };
  std::shared_ptr<NcclChannel> channel_;
  State state_ = State::kQueued;  // guarded by the watchdog's mutex
};

// How long the watchdog's thread sleeps between looks: short while launches are on the GPU (their
// completion is a tensor's latency), longer while channels come up or launches wait their turn.
// With nothing pending it sleeps until something is watched.
struct NcclWatchdogNaps {
  std::chrono::steady_clock::duration in_flight = std::chrono::microseconds(50);
  std::chrono::steady_clock::duration waiting = std::chrono::milliseconds(1);
};

class NcclWatchdog {
 public:
  using Clock = std::chrono::steady_clock;
  // Takes a failed channel (and, where the user wants, more) down: typically abort({channel}, e).
  // Called on the watchdog's thread, or in poll_once()'s caller, without the watchdog's mutex.
  using Failure = std::function<void(const std::shared_ptr<NcclChannel>& channel, std::exception_ptr error)>;
  using Naps = NcclWatchdogNaps;
  enum class Thread { kStart, kNone };  // kNone: only poll_once() looks (tests)

  NcclWatchdog(std::chrono::milliseconds init_timeout, Failure on_failure, Naps naps = {},
               Thread thread = Thread::kStart);
  // Stops the thread. Owners abort what they have first; zombies are theirs to wait_for_zombies().
  ~NcclWatchdog();
  NcclWatchdog(const NcclWatchdog&) = delete;
  NcclWatchdog& operator=(const NcclWatchdog&) = delete;

  std::chrono::milliseconds init_timeout() const { return init_timeout_; }

  // A channel whose communicator is coming up; it has until now + init_timeout. A channel already
  // aborted (its launches may be watched, and fail, before it is) is left aborted.
  void watch(std::shared_ptr<NcclChannel> channel);
  // A launch queued on its channel (the issue queue calls back when its turn comes).
  void watch(std::shared_ptr<NcclLaunch> launch);
  // A watched launch that was refused before any NCCL call (out of order): dropped unfailed. False
  // when the watchdog no longer had it (an abort failed it meanwhile): the caller must not fail it.
  bool forget(const std::shared_ptr<NcclLaunch>& launch);
  // The issue callback's start, before the NCCL calls: false when the launch was failed already
  // (its channel aborted), and it must not be issued; from now on an abort keeps it as a zombie.
  bool issuing(NcclLaunch& launch);
  // The issue callback's end, after the NCCL calls: with `in_progress` (ncclInProgress) the
  // watchdog finishes the launch when the communicator is ready and returns false; otherwise
  // finish_launch() now and true. The issue queue's contract: true when the launch is complete.
  bool launched(NcclLaunch& launch, bool in_progress);

  // Why the channel was aborted, or nothing while it is not.
  std::optional<std::string> abort_reason(const NcclChannel& channel) const;
  // Marks the channels aborted (those not already) and takes them down: each one's abort(error),
  // then fail(error) for each of their launches not yet complete or failed.
  void abort(const std::vector<std::shared_ptr<NcclChannel>>& channels, std::exception_ptr error);
  // The channels not aborted.
  std::vector<std::shared_ptr<NcclChannel>> live_channels() const;

  // One look at everything pending: the nap before the next look, or nothing when idle.
  std::optional<Clock::duration> poll_once();
  // Stops and joins the thread (idempotent).
  void stop();
  // Blocks until every zombie's wait() returned, and drops them (after stop()).
  void wait_for_zombies();

  size_t launches() const;  // watched, not yet complete or failed
  size_t zombies() const;

 private:
  void run();
  void finish(NcclLaunch& launch);  // finish_launch(), then in flight unless failed meanwhile
  bool watching_locked() const;     // anything to look at: launches, zombies, channels coming up

  const std::chrono::milliseconds init_timeout_;
  const Failure on_failure_;
  const Naps naps_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool stopping_ = false;
  std::vector<std::shared_ptr<NcclChannel>> channels_;  // not aborted
  std::vector<std::shared_ptr<NcclLaunch>> launches_;   // not yet complete or failed
  std::vector<std::shared_ptr<NcclLaunch>> zombies_;    // failed while NCCL may still run them
  std::thread thread_;                                   // last: starts when the rest is made
};

}  // namespace weft
