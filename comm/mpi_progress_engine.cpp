#include "comm/mpi_progress_engine_impl.h"

#include <algorithm>
#include <atomic>
#include <iostream>
#include <mutex>
#include <thread>
#include <utility>

#include "comm/progress_pacer.h"
#include "runtime/error.h"

namespace weft {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

namespace mpi_engine {

thread_local bool t_driving = false;

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

}  // namespace mpi_engine

using mpi_engine::graveyard;
using mpi_engine::mpi_usable;
using mpi_engine::t_driving;

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
  const auto since = Clock::now();
  // Fixed-size fields only (the kind is a literal): no text is built per request.
  const FlightHandle flight =
      op.standing || !flight_.enabled()
          ? FlightHandle{}
          : flight_.record_start({.kind = op.kind, .peer = op.peer, .tag = op.tag, .bytes = op.bytes,
                                  .start_us = flight_us(since)});
  {
    std::lock_guard lock(mu_);
    if (!shut_) {
      const bool wake = needs_driver(op);
      const auto yield_after = clients_[static_cast<size_t>(client)].yield_after_traffic;
      inbox_.emplace_back(request,
                          Entry{client, std::move(op), std::move(done), std::move(keep), since, yield_after, flight});
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
  flight_.record_end(flight, FlightState::kCancelled);
  std::lock_guard g(graveyard().mu);
  if (keep) graveyard().things.push_back(std::move(keep));
  graveyard().requests.push_back(request);
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
                     [&] {
      return stop_ || !inbox_.empty() || !expected_inbox_.empty() || expecting_ || lenders_ > 0 || wakes_ != wakes;
    });
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
    nap_cv_.wait_for(lock, nap, [&] {
      return stop_ || !inbox_.empty() || !expected_inbox_.empty() || expecting_ || wakes_ != wakes;
    });
    --nappers_;
  }
  {
    // The engine's thread drives again within its next look, or at once when requests in flight
    // need a driver (not woken otherwise: the thread that leaves usually lends again within
    // microseconds, to run a step, and a wake-up costs the step a context switch).
    std::lock_guard lock(mu_);
    --lenders_;
    const bool waiting = needs_driver_ || !expected_inbox_.empty() ||
                         std::any_of(inbox_.begin(), inbox_.end(), [](const auto& r) { return needs_driver(r.second.op); });
    if (lenders_ == 0 && standing_by_ && waiting) standby_cv_.notify_all();
  }
  return ok;
}

MpiProgressEngine::Impl::Pace MpiProgressEngine::Impl::round() {
  t_driving = true;
  adopt();
  std::vector<Completed>& completed = completed_;  // kept between rounds: no allocation per round
  completed.clear();
  // Each probe first, so that what they start is tested in this round.
  bool probed = probe_continuations();
  probed |= probe();
  probed |= probe_expected(completed);
  const bool busy = test(completed) || probed;
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
  for (const Expected& x : expected_) {  // receives waited for, not posted yet
    in_flight = needs_driver_now = true;
    yield_for = std::max(yield_for, x.entry.yield_after_traffic);
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
    adopting_expected_.swap(expected_inbox_);
    inbox_ready_.store(false, std::memory_order_release);
  }
  std::lock_guard lock(table_mu_);
  for (auto& [r, e] : adopting_) {
    requests_.push_back(r);
    entries_.push_back(std::move(e));
  }
  adopting_.clear();
  for (Expected& x : adopting_expected_) expected_.push_back(std::move(x));
  adopting_expected_.clear();
}

void MpiProgressEngine::Impl::add_to_table(MPI_Request request, Entry entry) {
  std::lock_guard lock(table_mu_);
  requests_.push_back(request);
  entries_.push_back(std::move(entry));
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
    const int64_t now_us = flight_now_us();
    for (size_t i = 0; i < requests_.size(); ++i) {
      MPI_Status none{};
      flight_.record_end(entries_[i].flight, FlightState::kError, now_us);
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
  const int64_t now_us = flight_.enabled() ? flight_now_us() : 0;
  for (int k = 0; k < done; ++k) {
    const auto i = static_cast<size_t>(indices_[static_cast<size_t>(k)]);
    const MPI_Status& st = statuses_[static_cast<size_t>(k)];
    const int error = rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : MPI_SUCCESS;
    if (now_us != 0) record_completion(entries_[i], st, error, now_us);
    completed.push_back({std::move(entries_[i].done), st, error, entries_[i].yield_after_traffic});
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

void MpiProgressEngine::Impl::record_completion(const Entry& e, const MPI_Status& status, int error, int64_t now_us) {
  if (!e.op.standing) {
    flight_.record_end(e.flight, error == MPI_SUCCESS ? FlightState::kDone : FlightState::kError, now_us);
    return;
  }
  if (error != MPI_SUCCESS) return;  // a standing receive cancelled or failed: no message came
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  flight_.record({.kind = e.op.kind, .peer = status.MPI_SOURCE, .tag = status.MPI_TAG,
                  .bytes = static_cast<uint64_t>(std::max(count, 0)), .start_us = now_us, .end_us = now_us,
                  .state = FlightState::kDone});
}

void MpiProgressEngine::Impl::give_up(ClientId client, std::chrono::milliseconds send_grace) {
  {
    std::lock_guard lock(mu_);
    for (const auto& l : listeners_)
      if (l->client == client) l->dropped = true;
    std::erase_if(listeners_, [&](const std::shared_ptr<Listener>& l) { return l->client == client; });
    for (const auto& p : probers_)
      if (p->client == client) p->dropped = true;
    std::erase_if(probers_, [&](const std::shared_ptr<Prober>& p) { return p->client == client; });
    probers_changed_ = true;
  }
  std::erase_if(continuing_, [&](const std::shared_ptr<Listener>& l) { return l->client == client; });
  adopt();
  std::lock_guard lock(table_mu_);
  // Receives not posted yet: nothing in MPI to cancel.
  std::erase_if(expected_, [&](const Expected& x) { return x.entry.client == client; });
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
    // Given up: its completion is never run, whether or not MPI finished it meanwhile.
    flight_.record_end(entries_[i].flight, FlightState::kCancelled);
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
    for (const Expected& x : expected_) add(x.entry);
    for (const auto& [r, e] : inbox_) add(e);
    for (const Expected& x : expected_inbox_) add(x.entry);
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
void MpiProgressEngine::irecv_probed(ClientId client, void* buffer, int bytes, int peer, int tag, MPI_Comm comm,
                                     MpiOperation op, Done done, std::shared_ptr<const void> keep) {
  impl_->irecv_probed(client, buffer, bytes, peer, tag, comm, std::move(op), std::move(done), std::move(keep));
}
void MpiProgressEngine::listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes,
                               OnMessage on_message) {
  impl_->listen(client, comm, tag, source, max_bytes, std::move(on_message));
}
void MpiProgressEngine::probe_listen(ClientId client, MPI_Comm comm, int tag, int source, size_t max_bytes,
                                     MpiOperation op, OnMessage on_message) {
  impl_->probe_listen(client, comm, tag, source, max_bytes, std::move(op), std::move(on_message));
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
