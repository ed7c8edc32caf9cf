#include "comm/mpi_progress_engine.h"

#include <algorithm>
#include <atomic>
#include <cstring>
#include <condition_variable>
#include <deque>
#include <iostream>
#include <mutex>
#include <thread>
#include <utility>

#include "comm/mpi_message_frame.h"
#include "comm/progress_pacer.h"
#include "runtime/error.h"

namespace weft {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

namespace {

using Clock = std::chrono::steady_clock;

// Set while a thread runs a round: cancel_client from a completion would wait for itself.
thread_local bool t_driving = false;

// What MPI may still touch after its requests were given up: kept until the process ends
// (reachable, not leaked).
struct Graveyard {
  std::mutex mu;
  std::vector<std::shared_ptr<const void>> things;
  std::vector<MPI_Request> requests;
};
Graveyard& graveyard() {
  static auto* g = new Graveyard();
  return *g;
}

bool mpi_usable() {
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  return initialized && !finalized;
}

}  // namespace

class MpiProgressEngine::Impl {
 public:
  Impl();
  ~Impl() { shut_down(); }

  ClientId add_client(std::string name, std::chrono::microseconds yield_after_traffic);
  void track(ClientId client, MPI_Request request, MpiOperation op, Done done, std::shared_ptr<const void> keep);
  void listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes, OnMessage on_message);
  void cancel_client(ClientId client, std::chrono::milliseconds send_grace);
  bool flush_sends(ClientId client, std::chrono::milliseconds timeout);
  void expect_traffic();
  void wake();
  bool drive_until(const std::function<bool()>& done, Clock::time_point deadline);
  std::vector<MpiPending> pending() const;
  void shut_down();

 private:
  struct Client {
    std::string name;
    std::chrono::microseconds yield_after_traffic;
  };
  struct Entry {
    ClientId client = 0;
    MpiOperation op;
    Done done;
    std::shared_ptr<const void> keep;
    Clock::time_point since;
    std::chrono::microseconds yield_after_traffic{0};  // its client's
  };
  // A message a listener has begun to receive; handed over in the order the frames came.
  struct Incoming {
    MpiMessage message;
    bool complete = false;
  };
  struct Listener {
    ClientId client = 0;
    MPI_Comm comm = MPI_COMM_NULL;
    int tag = 0, source = MPI_ANY_SOURCE;
    size_t max_bytes = 0;
    OnMessage on_message;
    std::vector<uint64_t> frame;  // the standing receive's buffer
    std::deque<std::shared_ptr<Incoming>> incoming;
    bool dropped = false;  // its client was cancelled: its receive is not posted again
  };
  struct Completed {
    Done done;
    MPI_Status status;
    int error;
    std::chrono::microseconds yield_after_traffic;
  };
  // What the driver does after a round.
  struct Pace {
    bool busy = false;
    bool yield = false;
    std::chrono::microseconds nap{20};
  };

  // Whether a request is waited for and cannot complete without this side's progress: receives
  // of an expected transfer, collectives, and sends above MPI's usual eager limit (their handshake
  // needs both sides). Not a standing receive (it waits for whatever comes; the engine's thread
  // takes it over within kLenderLapse) nor a small send (MPI delivers it without this side).
  static bool needs_driver(const MpiOperation& op) {
    return !op.standing && (!op.is_send || op.bytes > kEagerBytes);
  }
  static constexpr uint64_t kEagerBytes = 4096;

  void run();
  // One round by the thread holding drive_mu_: new requests adopted, listeners probed, requests
  // tested, completions run; then how to pace.
  Pace round();
  void adopt();                                      // drive_mu_ held
  // Posts the listener's standing receive of a frame (any thread).
  void post_frame(const std::shared_ptr<Listener>& l);
  // A frame came (driving thread): the message is complete, or its continuation is posted.
  void on_frame(const std::shared_ptr<Listener>& l, const MPI_Status& status, int error);
  bool test(std::vector<Completed>& completed);  // drive_mu_ held
  void deliver_in_order(Listener& listener);         // drive_mu_ held
  // Removes the client's entries, cancelling what MPI can (drive_mu_ held).
  void give_up(ClientId client, std::chrono::milliseconds send_grace);

  mutable std::mutex mu_;  // guards up to drive_mu_
  // Drivers nap on nap_cv_, woken by new work; the engine's thread, standing back for a lender,
  // waits on standby_cv_, woken only to stop. A wake-up of a thread that has nothing to do costs a
  // context switch on a core the step needs (one per send, when they shared one).
  std::condition_variable nap_cv_;
  std::condition_variable standby_cv_;
  int nappers_ = 0;
  uint64_t wakes_ = 0;  // wake() calls: a napping driver whose count changed looks again
  bool standing_by_ = false;  // the engine's thread waits for a lender (on standby_cv_)
  // After the last round, requests in flight needed a driver (needs_driver).
  std::atomic<bool> needs_driver_{false};
  std::vector<Client> clients_;
  std::vector<std::pair<MPI_Request, Entry>> inbox_;  // tracked, not adopted yet
  std::vector<std::shared_ptr<Listener>> listeners_;
  // The driver's hot loop reads these without the lock; they change under it (for the waits).
  std::atomic<bool> stop_{false};
  std::atomic<bool> inbox_ready_{false};  // inbox_ is not empty
  bool shut_ = false;
  std::atomic<bool> expecting_{false};
  std::atomic<int> lenders_{0};  // threads in drive_until: the engine's thread stands back
  // When the last round ended, by whichever driver (steady_clock ticks).
  std::atomic<Clock::rep> last_round_{Clock::now().time_since_epoch().count()};
  Clock::time_point last_round() const { return Clock::time_point(Clock::duration(last_round_.load())); }
  // How long a lender may go without a round before the engine's thread drives again: longer than
  // the longest nap, so a lender that naps is not doubled.
  static constexpr auto kLenderLapse = std::chrono::milliseconds(2);
  // Yields in a row a lender makes, idle, before it naps: a few hundred microseconds.
  static constexpr int kLenderYields = 2000;

  std::mutex drive_mu_;  // held by the driver for a whole round
  ProgressPacer pacer_;  // the driver's
  std::vector<Completed> completed_;  // the driver's
  std::vector<std::pair<MPI_Request, Entry>> adopting_;  // the driver's: the inbox being adopted

  mutable std::mutex table_mu_;  // guards the table: the driver changes it, pending() reads it
  std::vector<MPI_Request> requests_;
  std::vector<Entry> entries_;  // parallel to requests_
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;

  std::thread thread_;
};

MpiProgressEngine::Impl::Impl() {
  if (!mpi_usable()) throw FailedPrecondition("[mpi] the progress engine needs MPI initialised (and not finalised)");
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    throw FailedPrecondition("[mpi] the progress engine needs MPI_THREAD_MULTIPLE (MPI_Init_thread provided level " +
                             std::to_string(provided) + ")");
  thread_ = std::thread([this] { run(); });
}

MpiProgressEngine::ClientId MpiProgressEngine::Impl::add_client(std::string name,
                                                                std::chrono::microseconds yield_after_traffic) {
  std::lock_guard lock(mu_);
  clients_.push_back({std::move(name), yield_after_traffic});
  return static_cast<ClientId>(clients_.size() - 1);
}

void MpiProgressEngine::Impl::track(ClientId client, MPI_Request request, MpiOperation op, Done done,
                                    std::shared_ptr<const void> keep) {
  {
    std::lock_guard lock(mu_);
    if (!shut_) {
      const bool wake = needs_driver(op);
      const auto yield_after = clients_[static_cast<size_t>(client)].yield_after_traffic;
      inbox_.emplace_back(request,
                          Entry{client, std::move(op), std::move(done), std::move(keep), Clock::now(), yield_after});
      inbox_ready_.store(true, std::memory_order_release);
      if (nappers_ > 0) {
        nap_cv_.notify_all();
      } else if (lenders_ == 0 && standing_by_ && wake) {
        // Nobody drives: the engine's thread must, now. (Not for a small send, which MPI delivers
        // without this side's help: the thread that sent it usually lends again within
        // microseconds, and a wake-up per send cost the null step a fifth of its time.)
        standby_cv_.notify_all();
      }
      return;
    }
  }
  // After the end: nothing will test it.
  std::lock_guard g(graveyard().mu);
  if (keep) graveyard().things.push_back(std::move(keep));
  graveyard().requests.push_back(request);
}

void MpiProgressEngine::Impl::listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes,
                                     OnMessage on_message) {
  // A damaged or oversized message must come back as an error code, not end the process.
  MPI_Comm_set_errhandler(comm, MPI_ERRORS_RETURN);
  auto l = std::make_shared<Listener>();
  l->client = client;
  l->comm = comm;
  l->tag = tag;
  l->source = source;
  l->max_bytes = max_bytes;
  l->on_message = std::move(on_message);
  l->frame.resize(mpi_frame::kFrameBytes / sizeof(uint64_t));
  {
    std::lock_guard lock(mu_);
    listeners_.push_back(l);
  }
  post_frame(l);
}

void MpiProgressEngine::Impl::post_frame(const std::shared_ptr<Listener>& l) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Irecv(l->frame.data(), static_cast<int>(mpi_frame::kFrameBytes), MPI_BYTE, l->source, l->tag,
                           l->comm, &r);
  if (rc != MPI_SUCCESS) {
    MpiMessage m;
    m.tag = l->tag;
    m.error = "cannot post the receive of messages: " + mpi_error_string(rc);
    l->on_message(std::move(m));
    return;
  }
  track(l->client, r, {.kind = "message recv", .peer = l->source, .tag = l->tag, .standing = true},
        [this, l](const MPI_Status& status, int error) { on_frame(l, status, error); }, l);
}

void MpiProgressEngine::Impl::on_frame(const std::shared_ptr<Listener>& l, const MPI_Status& status, int error) {
  auto in = std::make_shared<Incoming>();
  in->message.source = status.MPI_SOURCE;
  in->message.tag = l->tag;
  l->incoming.push_back(in);
  auto fail = [&](std::string why) {
    in->message.error = std::move(why);
    in->complete = true;
  };
  int received = 0;
  if (error == MPI_SUCCESS) MPI_Get_count(&status, MPI_BYTE, &received);
  const mpi_frame::FrameInfo f =
      error != MPI_SUCCESS ? mpi_frame::FrameInfo{.error = "a frame that could not be received: " + mpi_error_string(error)}
                           : mpi_frame::read_frame(static_cast<size_t>(std::max(received, 0)), l->frame[0], l->max_bytes);
  const int continuation_tag = l->tag + mpi_frame::kContinuationTagOffset;
  if (!f.error.empty()) {
    fail(f.error);
    // A refused message's continuation is taken into nothing (MPI reports the truncation), so
    // it does not wait in MPI's queue forever.
    if (f.continued && error == MPI_SUCCESS) {
      MPI_Request r = MPI_REQUEST_NULL;
      if (MPI_Irecv(nullptr, 0, MPI_BYTE, status.MPI_SOURCE, continuation_tag, l->comm, &r) == MPI_SUCCESS)
        track(l->client, r, {.kind = "refused message recv", .peer = status.MPI_SOURCE, .tag = continuation_tag},
              [](const MPI_Status&, int) {}, nullptr);
    }
  } else {
    in->message.bytes = static_cast<size_t>(f.length);
    in->message.words.resize((in->message.bytes + 7) / 8);
    char* into = reinterpret_cast<char*>(in->message.words.data());
    if (f.inline_bytes) std::memcpy(into, l->frame.data() + 1, f.inline_bytes);
    if (!f.continued) {
      in->complete = true;
    } else {
      const auto rest = static_cast<int>(f.length - f.inline_bytes);
      MPI_Request r = MPI_REQUEST_NULL;
      const int rc = MPI_Irecv(into + f.inline_bytes, rest, MPI_BYTE, status.MPI_SOURCE, continuation_tag, l->comm, &r);
      if (rc != MPI_SUCCESS) {
        fail("its continuation could not be received: " + mpi_error_string(rc));
      } else {
        track(l->client, r,
              {.kind = "message continuation recv", .peer = status.MPI_SOURCE, .tag = continuation_tag,
               .bytes = static_cast<uint64_t>(rest)},
              [this, l, in, rest](const MPI_Status& st, int e) {
                int got = 0;
                if (e == MPI_SUCCESS) MPI_Get_count(&st, MPI_BYTE, &got);
                if (e != MPI_SUCCESS || got != rest) {
                  in->message.error = e != MPI_SUCCESS ? "its continuation was not received: " + mpi_error_string(e)
                                                       : "a continuation of " + std::to_string(got) +
                                                             " bytes, where its frame announced " +
                                                             std::to_string(rest);
                  in->message.words.clear();
                  in->message.bytes = 0;
                }
                in->complete = true;
                deliver_in_order(*l);
              },
              in);
      }
    }
  }
  if (!in->message.error.empty()) {
    in->message.words.clear();
    in->message.bytes = 0;
  }
  deliver_in_order(*l);
  if (!l->dropped) post_frame(l);
}

void MpiProgressEngine::Impl::wake() {
  std::lock_guard lock(mu_);
  ++wakes_;
  if (nappers_ > 0) nap_cv_.notify_all();
}

void MpiProgressEngine::Impl::expect_traffic() {
  {
    std::lock_guard lock(mu_);
    if (expecting_.exchange(true)) return;
    if (nappers_ == 0) return;
  }
  nap_cv_.notify_all();
}

void MpiProgressEngine::Impl::run() {
  ProgressPacer::shorten_timer_slack();
  // The hot path (a round, then a yield) takes no lock but the driver's: a wait takes mu_.
  while (!stop_.load(std::memory_order_acquire)) {
    if (lenders_.load(std::memory_order_acquire) > 0 && Clock::now() - last_round() < kLenderLapse) {
      // A waiting thread drives; this one looks again when the lapse would be over, and drives
      // when the waiter has not for that long (it runs its step's kernels between rounds).
      std::unique_lock lock(mu_);
      if (stop_) return;
      standing_by_ = true;
      standby_cv_.wait_until(lock, last_round() + kLenderLapse);
      standing_by_ = false;
      continue;
    }
    Pace pace;
    {
      std::lock_guard drive(drive_mu_);
      pace = round();
    }
    if (pace.busy || inbox_ready_.load(std::memory_order_acquire)) continue;
    if (pace.yield) {
      std::this_thread::yield();
      continue;
    }
    std::unique_lock lock(mu_);
    const uint64_t wakes = wakes_;
    ++nappers_;
    nap_cv_.wait_for(lock, pace.nap,
                     [&] { return stop_ || !inbox_.empty() || expecting_ || lenders_ > 0 || wakes_ != wakes; });
    --nappers_;
  }
}

bool MpiProgressEngine::Impl::drive_until(const std::function<bool()>& done, Clock::time_point deadline) {
  if (t_driving) throw Internal("[mpi] drive_until called from a completion: the round that runs it holds the engine");
  static thread_local bool slack_shortened = false;
  if (!slack_shortened) {
    ProgressPacer::shorten_timer_slack();
    slack_shortened = true;
  }
  {
    std::lock_guard lock(mu_);
    ++lenders_;
  }
  bool ok = false;
  int idle_yields = 0;
  for (;;) {
    if (done()) {
      ok = true;
      break;
    }
    if (Clock::now() >= deadline) break;
    Pace pace;
    {
      // Blocking, not trying: a driver that spun on a held lock kept the core from the holder
      // when both were on one core (a round then waited out a whole time slice, milliseconds).
      std::lock_guard drive(drive_mu_);
      pace = round();
    }
    if (stop_.load(std::memory_order_acquire)) break;
    if (pace.busy || inbox_ready_.load(std::memory_order_acquire)) {
      idle_yields = 0;
      continue;
    }
    // A waiting thread spends its own time: it yields a while longer than the engine's thread
    // would before it naps (as the executor's own wait does), since what it waits for is usually
    // microseconds away. Napping sooner made a training step with its variables on another task
    // a third slower.
    if (pace.yield || ++idle_yields < kLenderYields) {
      std::this_thread::yield();
      continue;
    }
    idle_yields = 0;
    std::unique_lock lock(mu_);
    const auto nap = std::min<Clock::duration>(pace.nap, deadline - Clock::now());
    const uint64_t wakes = wakes_;
    ++nappers_;
    nap_cv_.wait_for(lock, nap, [&] { return stop_ || !inbox_.empty() || expecting_ || wakes_ != wakes; });
    --nappers_;
  }
  {
    // The engine's thread drives again within its next look, or at once when requests in flight
    // need a driver (not woken otherwise: the thread that leaves usually lends again within
    // microseconds, to run a step, and a wake-up costs the step a context switch).
    std::lock_guard lock(mu_);
    --lenders_;
    const bool waiting = needs_driver_ || std::any_of(inbox_.begin(), inbox_.end(), [](const auto& r) {
                           return needs_driver(r.second.op);
                         });
    if (lenders_ == 0 && standing_by_ && waiting) standby_cv_.notify_all();
  }
  return ok;
}

MpiProgressEngine::Impl::Pace MpiProgressEngine::Impl::round() {
  t_driving = true;
  adopt();
  std::vector<Completed>& completed = completed_;  // kept between rounds: no allocation per round
  completed.clear();
  const bool busy = test(completed);
  for (Completed& c : completed) {
    try {
      c.done(c.status, c.error);
    } catch (const std::exception& e) {
      std::cerr << "weft: [mpi] a completion threw: " << e.what() << "\n";
    }
  }
  t_driving = false;
  // What the completions started (a standing receive posted again, a payload's receive) joins the
  // table now: the driver may leave after this round, and the next may be a while coming.
  adopt();
  // Pacing: after traffic, the longest yield a client with traffic or requests in flight asks for.
  Pace pace;
  pace.busy = busy;
  bool in_flight = false;
  std::chrono::microseconds yield_for{0};
  // The table is read without its lock: only a driver (this one, holding drive_mu_) changes it.
  bool needs_driver_now = false;
  for (const Entry& e : entries_) {
    if (e.op.standing) continue;
    in_flight |= e.op.cancellable;  // point-to-point: a big message's handshake needs this side
    needs_driver_now |= needs_driver(e.op);
    yield_for = std::max(yield_for, e.yield_after_traffic);
  }
  for (const Completed& c : completed) yield_for = std::max(yield_for, c.yield_after_traffic);
  needs_driver_.store(needs_driver_now, std::memory_order_release);
  const auto now = Clock::now();
  if (busy) pacer_.traffic(now, yield_for);
  if (expecting_.exchange(false, std::memory_order_acq_rel)) pacer_.expect_traffic(now);
  last_round_.store(now.time_since_epoch().count(), std::memory_order_release);
  pace.yield = pacer_.yield_now(now);
  pace.nap = pacer_.nap(now, in_flight);
  return pace;
}

void MpiProgressEngine::Impl::adopt() {
  if (!inbox_ready_.load(std::memory_order_acquire)) return;  // the usual case: no lock taken
  {
    std::lock_guard lock(mu_);
    adopting_.swap(inbox_);
    inbox_ready_.store(false, std::memory_order_release);
  }
  std::lock_guard lock(table_mu_);
  for (auto& [r, e] : adopting_) {
    requests_.push_back(r);
    entries_.push_back(std::move(e));
  }
  adopting_.clear();
}

void MpiProgressEngine::Impl::deliver_in_order(Listener& l) {
  while (!l.incoming.empty() && l.incoming.front()->complete) {
    std::shared_ptr<Incoming> in = std::move(l.incoming.front());
    l.incoming.pop_front();
    l.on_message(std::move(in->message));
  }
}

bool MpiProgressEngine::Impl::test(std::vector<Completed>& completed) {
  std::lock_guard lock(table_mu_);
  if (requests_.empty()) return false;
  const int n = static_cast<int>(requests_.size());
  indices_.resize(requests_.size());
  statuses_.resize(requests_.size());
  int done = 0;
  const int rc = MPI_Testsome(n, requests_.data(), &done, indices_.data(), statuses_.data());
  if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
    // Nothing on these requests can be trusted any more: every one fails, its buffers kept.
    std::lock_guard g(graveyard().mu);
    for (size_t i = 0; i < requests_.size(); ++i) {
      MPI_Status none{};
      completed.push_back({std::move(entries_[i].done), none, rc, entries_[i].yield_after_traffic});
      if (entries_[i].keep) graveyard().things.push_back(std::move(entries_[i].keep));
      graveyard().requests.push_back(requests_[i]);
    }
    std::cerr << "weft: [mpi] MPI_Testsome failed: " << mpi_error_string(rc) << "; every pending request fails\n";
    requests_.clear();
    entries_.clear();
    return true;
  }
  if (done == MPI_UNDEFINED || done <= 0) return false;
  for (int k = 0; k < done; ++k) {
    const auto i = static_cast<size_t>(indices_[static_cast<size_t>(k)]);
    const MPI_Status& st = statuses_[static_cast<size_t>(k)];
    completed.push_back(
        {std::move(entries_[i].done), st, rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : MPI_SUCCESS,
         entries_[i].yield_after_traffic});
    entries_[i].keep.reset();  // MPI is done with the buffers; the callback holds what it needs
  }
  // Drop the completed requests (Testsome set them to null).
  size_t w = 0;
  for (size_t r = 0; r < requests_.size(); ++r) {
    if (requests_[r] == MPI_REQUEST_NULL) continue;
    if (w != r) {
      requests_[w] = requests_[r];
      entries_[w] = std::move(entries_[r]);
    }
    ++w;
  }
  requests_.resize(w);
  entries_.resize(w);
  return true;
}

void MpiProgressEngine::Impl::give_up(ClientId client, std::chrono::milliseconds send_grace) {
  {
    std::lock_guard lock(mu_);
    for (const auto& l : listeners_)
      if (l->client == client) l->dropped = true;
    std::erase_if(listeners_, [&](const std::shared_ptr<Listener>& l) { return l->client == client; });
  }
  adopt();
  std::lock_guard lock(table_mu_);
  auto mine = [&](size_t i) { return entries_[i].client == client && requests_[i] != MPI_REQUEST_NULL; };
  auto wait_a_little = [&](std::chrono::milliseconds limit) {
    const auto deadline = Clock::now() + limit;
    for (;;) {
      bool left = false;
      for (size_t i = 0; i < requests_.size(); ++i) {
        if (!mine(i) || !entries_[i].op.cancellable) continue;
        int flag = 0;
        MPI_Test(&requests_[i], &flag, MPI_STATUS_IGNORE);
        left |= !flag;
      }
      if (!left || Clock::now() > deadline) return;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  };
  auto cancel = [&](bool sends) {
    for (size_t i = 0; i < requests_.size(); ++i)
      if (mine(i) && entries_[i].op.cancellable && entries_[i].op.is_send == sends)
        MPI_Cancel(&requests_[i]);
  };
  if (mpi_usable()) {
    // Receives are cancelled at once; sends get a moment to be delivered first (most are eager
    // and done by now), then are cancelled too, which MPI may not manage for a send whose peer
    // never takes it.
    cancel(/*sends=*/false);
    wait_a_little(send_grace);
    cancel(/*sends=*/true);
    wait_a_little(std::chrono::milliseconds(100));
  }
  std::lock_guard g(graveyard().mu);
  size_t w = 0;
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (entries_[i].client != client) {
      if (w != i) {
        requests_[w] = requests_[i];
        entries_[w] = std::move(entries_[i]);
      }
      ++w;
      continue;
    }
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    // Still pending: MPI may read or write its buffers whenever it likes.
    if (entries_[i].op.cancellable && mpi_usable()) MPI_Request_free(&requests_[i]);
    else graveyard().requests.push_back(requests_[i]);  // a collective's: MPI forbids freeing it
    if (entries_[i].keep) graveyard().things.push_back(std::move(entries_[i].keep));
  }
  requests_.resize(w);
  entries_.resize(w);
}

void MpiProgressEngine::Impl::cancel_client(ClientId client, std::chrono::milliseconds send_grace) {
  if (t_driving)
    throw Internal("[mpi] cancel_client called from a completion: it would wait for the round that runs it");
  std::lock_guard drive(drive_mu_);
  give_up(client, send_grace);
}

bool MpiProgressEngine::Impl::flush_sends(ClientId client, std::chrono::milliseconds timeout) {
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    bool left = false;
    {
      std::scoped_lock lock(table_mu_, mu_);
      if (shut_) return false;
      for (const Entry& e : entries_) left |= e.client == client && e.op.is_send;
      for (const auto& [r, e] : inbox_) left |= e.client == client && e.op.is_send;
    }
    if (!left) return true;
    if (Clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
}

std::vector<MpiPending> MpiProgressEngine::Impl::pending() const {
  const auto now = Clock::now();
  std::vector<std::pair<Clock::time_point, MpiPending>> all;
  {
    std::scoped_lock lock(table_mu_, mu_);
    auto add = [&](const Entry& e) {
      MpiPending p{clients_[static_cast<size_t>(e.client)].name, e.op, now - e.since};
      if (p.op.describe && e.keep) p.op.what = p.op.describe(e.keep.get());
      all.push_back({e.since, std::move(p)});
    };
    for (const Entry& e : entries_) add(e);
    for (const auto& [r, e] : inbox_) add(e);
  }
  std::stable_sort(all.begin(), all.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  std::vector<MpiPending> out;
  out.reserve(all.size());
  for (auto& [since, p] : all) out.push_back(std::move(p));
  return out;
}

void MpiProgressEngine::Impl::shut_down() {
  {
    std::lock_guard lock(mu_);
    if (shut_) return;
    stop_ = true;
  }
  nap_cv_.notify_all();
  standby_cv_.notify_all();
  if (thread_.joinable()) thread_.join();
  std::lock_guard drive(drive_mu_);
  size_t clients;
  {
    std::lock_guard lock(mu_);
    shut_ = true;
    clients = clients_.size();
  }
  for (size_t c = 0; c < clients; ++c) give_up(static_cast<ClientId>(c), std::chrono::milliseconds(100));
}

// ---- the public face ----

namespace {

std::mutex g_process_mu;
MpiProgressEngine* g_process = nullptr;  // never deleted: clients may outlive MPI_Finalize

// MPI_Finalize deletes MPI_COMM_SELF's attributes first, while MPI still works: the engine's
// thread stops there, whatever order the program ends its objects in.
int shut_down_at_finalize(MPI_Comm, int, void* engine, void*) {
  static_cast<MpiProgressEngine*>(engine)->shut_down();
  return MPI_SUCCESS;
}

}  // namespace

MpiProgressEngine& MpiProgressEngine::process() {
  std::lock_guard lock(g_process_mu);
  if (!g_process) {
    g_process = new MpiProgressEngine();
    int key = MPI_KEYVAL_INVALID;
    MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, shut_down_at_finalize, &key, nullptr);
    MPI_Comm_set_attr(MPI_COMM_SELF, key, g_process);
  }
  return *g_process;
}

MpiProgressEngine::MpiProgressEngine() : impl_(std::make_unique<Impl>()) {}
MpiProgressEngine::~MpiProgressEngine() = default;

MpiProgressEngine::ClientId MpiProgressEngine::add_client(std::string name,
                                                          std::chrono::microseconds yield_after_traffic) {
  return impl_->add_client(std::move(name), yield_after_traffic);
}
void MpiProgressEngine::track(ClientId client, MPI_Request request, MpiOperation op, Done done,
                              std::shared_ptr<const void> keep) {
  impl_->track(client, request, std::move(op), std::move(done), std::move(keep));
}
int MpiProgressEngine::isend(ClientId client, const void* buffer, int bytes, int peer, int tag, MPI_Comm comm,
                             MpiOperation op, Done done, std::shared_ptr<const void> keep) {
  MPI_Request r = MPI_REQUEST_NULL;
  op.is_send = true;
  const int rc = MPI_Isend(buffer, bytes, MPI_BYTE, peer, tag, comm, &r);
  if (rc == MPI_SUCCESS) impl_->track(client, r, std::move(op), std::move(done), std::move(keep));
  return rc;
}
int MpiProgressEngine::irecv(ClientId client, void* buffer, int bytes, int peer, int tag, MPI_Comm comm,
                             MpiOperation op, Done done, std::shared_ptr<const void> keep) {
  MPI_Request r = MPI_REQUEST_NULL;
  const int rc = MPI_Irecv(buffer, bytes, MPI_BYTE, peer, tag, comm, &r);
  if (rc == MPI_SUCCESS) impl_->track(client, r, std::move(op), std::move(done), std::move(keep));
  return rc;
}
int MpiProgressEngine::send_message(ClientId client, MPI_Comm comm, int peer, int tag, const void* data, size_t bytes,
                                    std::shared_ptr<const void> keep, std::string what) {
  const size_t inline_bytes = std::min(bytes, mpi_frame::kInlineBytes);
  auto frame = std::make_shared<std::vector<uint64_t>>((mpi_frame::kLengthBytes + inline_bytes + 7) / 8);
  (*frame)[0] = bytes;
  if (inline_bytes) std::memcpy(frame->data() + 1, data, inline_bytes);
  const int rc = isend(client, frame->data(), static_cast<int>(mpi_frame::kLengthBytes + inline_bytes), peer, tag, comm,
                       {.kind = "message send", .peer = peer, .tag = tag, .bytes = bytes, .what = what},
                       [](const MPI_Status&, int) {}, frame);
  if (rc != MPI_SUCCESS || bytes == inline_bytes) return rc;
  const int continuation_tag = tag + mpi_frame::kContinuationTagOffset;
  return isend(client, static_cast<const char*>(data) + inline_bytes, static_cast<int>(bytes - inline_bytes), peer,
               continuation_tag, comm,
               {.kind = "message continuation send", .peer = peer, .tag = continuation_tag,
                .bytes = bytes - inline_bytes, .what = std::move(what)},
               [](const MPI_Status&, int) {}, std::move(keep));
}
void MpiProgressEngine::listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes,
                               OnMessage on_message) {
  impl_->listen(client, comm, tag, source, max_bytes, std::move(on_message));
}
void MpiProgressEngine::cancel_client(ClientId client, std::chrono::milliseconds send_grace) {
  impl_->cancel_client(client, send_grace);
}
bool MpiProgressEngine::flush_sends(ClientId client, std::chrono::milliseconds timeout) {
  return impl_->flush_sends(client, timeout);
}
void MpiProgressEngine::keep_until_exit(std::shared_ptr<const void> thing) {
  std::lock_guard g(graveyard().mu);
  graveyard().things.push_back(std::move(thing));
}
void MpiProgressEngine::keep_until_exit(MPI_Request request) {
  std::lock_guard g(graveyard().mu);
  graveyard().requests.push_back(request);
}
void MpiProgressEngine::expect_traffic() { impl_->expect_traffic(); }
void MpiProgressEngine::wake() { impl_->wake(); }
bool MpiProgressEngine::drive_until(const std::function<bool()>& done, std::chrono::steady_clock::time_point deadline) {
  return impl_->drive_until(done, deadline);
}
std::vector<MpiPending> MpiProgressEngine::pending() const { return impl_->pending(); }
void MpiProgressEngine::shut_down() { impl_->shut_down(); }

}  // namespace weft
