#include "comm/mpi_rendezvous.h"

#include <algorithm>
#include <chrono>
#include <climits>
#include <condition_variable>
#include <deque>
#include <mutex>
#include <thread>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "comm/local_rendezvous.h"
#include "comm/mpi_rendezvous_wire.h"
#include "comm/progress_pacer.h"
#include "runtime/device.h"
#include "runtime/error.h"

namespace weft {

namespace {

using mpi_wire::WireHeader;

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

void check_error(const std::exception_ptr& error, const char* what) {
  if (!error) throw InvalidArgument(std::string("[rendezvous] ") + what + " needs an error, got a null exception_ptr");
}

// Buffers of sends and receives MPI could not cancel when the rendezvous went away: MPI may
// still read or write them, so they live until the process ends (reachable, not leaked).
std::mutex graveyard_mu;
std::vector<Tensor>& graveyard() {
  static auto* g = new std::vector<Tensor>();
  return *g;
}

}  // namespace

class MpiRendezvous::Impl {
 public:
  Impl(MPI_Comm comm, std::function<int(std::string_view)> rank_of, MpiRendezvousOptions options);
  ~Impl();

  void send(const RendezvousKey& key, Tensor value, bool is_dead);
  void deliver_from_peer(int peer, const RendezvousKey& key, Tensor value, bool is_dead);
  void recv_async(const RendezvousKey& key, DoneCallback done);
  void start_abort(std::exception_ptr error);
  void abort_step(int64_t step_id, std::exception_ptr error);
  void cleanup_step(int64_t step_id);
  bool takes_device_tensor(const RendezvousKey& key, const Tensor& value) const;
  void expect_transfer(const RendezvousKey& key);

 private:
  // One tensor crossing: a send (header then payload from `value`) or a receive (payload into
  // `value`). Lives until every one of its MPI requests has completed.
  struct Transfer {
    bool is_recv = false;
    int peer = 0;
    WireHeader header;
    std::string header_bytes;  // a send's encoded header, read by MPI until its Isend completes
    Tensor value;
    int outstanding = 0;
    bool failed = false;
  };
  using TransferPtr = std::shared_ptr<Transfer>;

  // Where a key's devices live; InvalidArgument naming the key when no task owns one.
  std::pair<int, int> ranks_of(const RendezvousKey& key) const;
  std::string where() const { return "[rendezvous] rank " + std::to_string(me_) + ": "; }

  // Progress thread.
  void run();
  void post_header_recv();
  bool adopt_started_sends();
  bool test_requests();
  void on_header(const MPI_Status& status, int error);
  // A header whose payload comes by the device transport: the transport receives it.
  void receive_device_payload(int src, const WireHeader& header);
  void on_complete(const TransferPtr& t);
  void deliver(Transfer& t);
  void deliver(const RendezvousKey& key, Tensor value, bool is_dead);
  void peer_broken(int rank, const std::string& what);
  // `expected` is the byte count a payload receive must get (-1 for a send).
  void add_request(MPI_Request r, TransferPtr owner, int expected = -1);
  void cancel_everything();
  // Any thread: MPI_Isend of a send's header and payload; the requests go to `out`.
  void start_send(const TransferPtr& t, std::vector<MPI_Request>& out);

  MPI_Comm comm_;
  std::function<int(std::string_view)> rank_of_;
  MpiRendezvousOptions options_;
  std::unique_ptr<DevicePayloads> payloads_;  // options_.device_payloads, moved out
  int me_ = 0;
  int size_ = 0;
  int tag_ub_ = 32767;

  // Keys of this rank's devices meet here, and so do tensors arrived from peers with their recvs:
  // the two kinds of keys never overlap (their source ranks differ), so one table serves both and
  // gives the local semantics of abort and cleanup to both.
  LocalRendezvous table_;

  std::mutex mu_;  // guards everything below up to the progress thread's own state
  std::condition_variable wake_;
  bool stop_ = false;
  std::exception_ptr aborted_;
  std::unordered_map<int64_t, std::exception_ptr> aborted_steps_;
  // Steps cleaned up lately: a tensor of one arriving later is dropped, not stored forever. A
  // bounded window, since step ids only grow.
  std::unordered_set<int64_t> cleaned_;
  std::deque<int64_t> cleaned_order_;
  // Sends started by the threads that made them, for the progress thread to test: a send is on
  // the wire at once, without waiting for the progress thread to be scheduled (on a core shared
  // with a busy kernel thread that took milliseconds).
  std::vector<std::pair<MPI_Request, TransferPtr>> started_;
  bool expecting_ = false;  // expect_transfer was called: the progress thread naps short
  std::vector<uint32_t> next_tag_;   // per destination rank

  // The progress thread's own state (and the destructor's, once the thread has ended).
  Tensor header_buf_;  // a tensor, so that a receive MPI would not cancel can keep it alive
  std::vector<MPI_Request> requests_;  // [0] is the header receive
  std::vector<TransferPtr> owners_;    // parallel to requests_; null for [0]
  std::vector<int> expected_;          // parallel to requests_
  std::vector<int> indices_;           // MPI_Testsome's outputs, kept to save allocations
  std::vector<MPI_Status> statuses_;
  std::thread thread_;
};

MpiRendezvous::Impl::Impl(MPI_Comm comm, std::function<int(std::string_view)> rank_of,
                          MpiRendezvousOptions options)
    : comm_(comm), rank_of_(std::move(rank_of)), options_(std::move(options)) {
  payloads_ = std::move(options_.device_payloads);
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    throw FailedPrecondition("[rendezvous] MpiRendezvous needs MPI initialised (and not finalised)");
  int provided = MPI_THREAD_SINGLE;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE)
    throw FailedPrecondition("[rendezvous] MpiRendezvous needs MPI_THREAD_MULTIPLE (MPI_Init_thread provided level " +
                             std::to_string(provided) + ")");
  if (comm_ == MPI_COMM_NULL) throw InvalidArgument("[rendezvous] MpiRendezvous got MPI_COMM_NULL");
  if (!rank_of_) throw InvalidArgument("[rendezvous] MpiRendezvous needs a rank_of function");
  if (options_.max_message_bytes == 0) throw InvalidArgument("[rendezvous] max_message_bytes must be positive");
  if (options_.max_header_bytes < 64 || options_.max_header_bytes > INT_MAX)
    throw InvalidArgument("[rendezvous] max_header_bytes must be 64 to 2^31 - 1");
  MPI_Comm_rank(comm_, &me_);
  MPI_Comm_size(comm_, &size_);
  int* ub = nullptr;
  int flag = 0;
  MPI_Comm_get_attr(comm_, MPI_TAG_UB, &ub, &flag);
  if (flag && ub && *ub >= 1) tag_ub_ = *ub;
  // A damaged message from a peer (a truncated header, a payload longer than announced) must
  // become an error here, not abort the process: the communicator carries tensors only, so its
  // error handler is ours to set.
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
  next_tag_.assign(static_cast<size_t>(size_), 0);
  if (payloads_) payloads_->set_failure_handler([this](std::exception_ptr error) { start_abort(std::move(error)); });
  header_buf_ = Tensor::empty(DType::UInt8, {static_cast<int64_t>(options_.max_header_bytes)}, cpu_device());
  requests_.push_back(MPI_REQUEST_NULL);
  owners_.push_back(nullptr);
  expected_.push_back(-1);
  post_header_recv();
  thread_ = std::thread([this] { run(); });
}

MpiRendezvous::Impl::~Impl() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  // Its thread delivers no more tensors once it is gone; its links are aborted.
  if (payloads_) payloads_->abort(std::make_exception_ptr(FailedPrecondition(where() + "the rendezvous was destroyed")));
  payloads_.reset();
  adopt_started_sends();
  cancel_everything();
  // table_'s destructor fails the recvs still waiting with FailedPrecondition.
}

std::pair<int, int> MpiRendezvous::Impl::ranks_of(const RendezvousKey& key) const {
  const int src = rank_of_(key.src_device);
  const int dst = rank_of_(key.dst_device);
  auto bad = [&](int r) { return r < 0 || r >= size_; };
  if (bad(src) || bad(dst))
    throw InvalidArgument(where() + "no task of the communicator owns the " + (bad(src) ? "source" : "destination") +
                          " device of key " + key.to_string());
  return {src, dst};
}

void MpiRendezvous::Impl::send(const RendezvousKey& key, Tensor value, bool is_dead) {
  const auto [src, dst] = ranks_of(key);
  if (src != me_)
    throw InvalidArgument(where() + "cannot send key " + key.to_string() + ": its source device is on rank " +
                          std::to_string(src));
  if (dst == me_) return table_.send(key, std::move(value), is_dead);
  key.validate();  // the peer would reject it anyway, and blame this rank as broken
  auto t = std::make_shared<Transfer>();
  t->peer = dst;
  t->header.key = key;
  t->header.is_dead = is_dead;
  t->header.has_value = value.defined();
  bool by_device = false;
  if (value.defined()) {
    by_device = payloads_ && payloads_->carries(key, value);
    if (!by_device && (value.is_symbolic() || (value.device_ptr() && value.device_ptr()->type() != DeviceType::CPU)))
      throw InvalidArgument(where() + "key " + key.to_string() + " carries a tensor on " + value.device() +
                            "; the MPI rendezvous sends host tensors only" +
                            (payloads_ ? "" : " (it has no device transport)"));
    t->header.dtype = value.dtype();
    t->header.shape = value.shape();
    t->header.total_bytes = value.nbytes();
  }
  t->header.chunk_bytes = mpi_wire::chunk_bytes_for(t->header.total_bytes, options_.max_message_bytes);
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (aborted_) std::rethrow_exception(aborted_);
    if (auto a = aborted_steps_.find(key.step_id); a != aborted_steps_.end()) std::rethrow_exception(a->second);
    // Tags 1..tag_ub per destination, wrapping; 0 is the header tag. A tag is reused only after
    // tag_ub later tensors to the same rank, long after its payload was matched.
    uint32_t& next = next_tag_[static_cast<size_t>(dst)];
    next = next >= static_cast<uint32_t>(tag_ub_) ? 1 : next + 1;
    t->header.tag = next;
  }
  // From the transport's ticket on, the header must go: the peer's receive keeps its link in step.
  if (by_device) t->header.device = payloads_->send(dst, key, std::move(value));
  else t->value = std::move(value);
  t->header_bytes = mpi_wire::encode_header(t->header);
  // MPI is called outside the lock: the progress thread, and with it aborts, never wait on a
  // send that MPI is slow to take.
  std::vector<MPI_Request> requests;
  start_send(t, requests);
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (MPI_Request r : requests) started_.emplace_back(r, t);
  }
  wake_.notify_one();
}

void MpiRendezvous::Impl::recv_async(const RendezvousKey& key, DoneCallback done) {
  std::exception_ptr error;
  try {
    const auto [src, dst] = ranks_of(key);
    if (dst != me_)
      throw InvalidArgument(where() + "cannot receive key " + key.to_string() + ": its destination device is on rank " +
                            std::to_string(dst));
  } catch (...) {
    error = std::current_exception();
  }
  if (error) return done(error, Tensor(), false);
  table_.recv_async(key, std::move(done));
}

void MpiRendezvous::Impl::start_abort(std::exception_ptr error) {
  check_error(error, "start_abort");
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (!aborted_) aborted_ = error;
  }
  if (payloads_) payloads_->abort(error);
  table_.start_abort(error);
}

void MpiRendezvous::Impl::expect_transfer(const RendezvousKey& key) {
  const int src = rank_of_(key.src_device);
  if (src < 0 || src == me_) return;
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (expecting_) return;
    expecting_ = true;
  }
  wake_.notify_one();
}

bool MpiRendezvous::Impl::takes_device_tensor(const RendezvousKey& key, const Tensor& value) const {
  if (!payloads_) return false;
  const int dst = rank_of_(key.dst_device);
  return dst >= 0 && dst != me_ && payloads_->carries(key, value);
}

void MpiRendezvous::Impl::abort_step(int64_t step_id, std::exception_ptr error) {
  check_error(error, "abort_step");
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_steps_.emplace(step_id, error);  // the first abort of a step wins
    // Sends already made complete and the peer drops them; later ones of the step are refused.
  }
  table_.abort_step(step_id, error);
}

void MpiRendezvous::Impl::cleanup_step(int64_t step_id) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    aborted_steps_.erase(step_id);
    if (cleaned_.insert(step_id).second) {
      cleaned_order_.push_back(step_id);
      if (cleaned_order_.size() > 4096) {
        cleaned_.erase(cleaned_order_.front());
        cleaned_order_.pop_front();
      }
    }
  }
  table_.cleanup_step(step_id);
}

// ---- the progress thread ----

void MpiRendezvous::Impl::run() {
  ProgressPacer::shorten_timer_slack();
  ProgressPacer pacer;
  while (true) {
    bool busy = adopt_started_sends();
    busy |= test_requests();
    // Payloads in flight need MPI's progress on this side too (a large message's handshake).
    const bool in_flight = requests_.size() > 1;
    std::unique_lock<std::mutex> lock(mu_);
    if (stop_) return;  // the destructor adopts what is left and gives sends a moment
    if (busy || !started_.empty()) {
      pacer.traffic();
      continue;
    }
    if (expecting_) {
      // A big tensor is on its way (expect_transfer): nap short from here, as after traffic.
      // After 30 ms idle a 1 MiB fetch took 1.4 ms, the header waiting out a 1 ms nap.
      expecting_ = false;
      pacer.expect_traffic();
    }
    if (pacer.yield_now()) {
      lock.unlock();
      std::this_thread::yield();
      continue;
    }
    wake_.wait_for(lock, pacer.nap(in_flight), [&] { return stop_ || !started_.empty() || expecting_; });
  }
}

void MpiRendezvous::Impl::post_header_recv() {
  const int rc = MPI_Irecv(header_buf_.raw_data(), static_cast<int>(options_.max_header_bytes), MPI_BYTE, MPI_ANY_SOURCE,
                           kMpiRendezvousHeaderTag, comm_, &requests_[0]);
  if (rc != MPI_SUCCESS) {
    requests_[0] = MPI_REQUEST_NULL;
    start_abort(std::make_exception_ptr(
        Unavailable(where() + "cannot post the receive of tensor headers: " + mpi_error_string(rc))));
  }
}

void MpiRendezvous::Impl::add_request(MPI_Request r, TransferPtr owner, int expected) {
  requests_.push_back(r);
  owners_.push_back(std::move(owner));
  expected_.push_back(expected);
}

bool MpiRendezvous::Impl::adopt_started_sends() {
  std::vector<std::pair<MPI_Request, TransferPtr>> sends;
  {
    std::lock_guard<std::mutex> lock(mu_);
    sends.swap(started_);
  }
  for (auto& [r, t] : sends) add_request(r, std::move(t));
  return !sends.empty();
}

void MpiRendezvous::Impl::start_send(const TransferPtr& t, std::vector<MPI_Request>& out) {
  auto fail = [&](int rc) {
    // The peer's recv will not hear of this tensor: fail the step here, where the cluster's
    // error handling sees it.
    abort_step(t->header.key.step_id,
               std::make_exception_ptr(Unavailable(where() + "MPI could not send key " + t->header.key.to_string() +
                                                   " to rank " + std::to_string(t->peer) + ": " +
                                                   mpi_error_string(rc))));
  };
  MPI_Request r = MPI_REQUEST_NULL;
  int rc = MPI_Isend(t->header_bytes.data(), static_cast<int>(t->header_bytes.size()), MPI_BYTE, t->peer,
                     kMpiRendezvousHeaderTag, comm_, &r);
  if (rc != MPI_SUCCESS) return fail(rc);
  ++t->outstanding;
  out.push_back(r);
  if (t->header.device) return;  // the transport moves the bytes
  const uint64_t chunk = t->header.chunk_bytes;
  auto* base = t->header.total_bytes ? static_cast<char*>(t->value.raw_data()) : nullptr;
  for (uint64_t off = 0; off < t->header.total_bytes; off += chunk) {
    const auto count = static_cast<int>(std::min(chunk, t->header.total_bytes - off));
    rc = MPI_Isend(base + off, count, MPI_BYTE, t->peer, static_cast<int>(t->header.tag), comm_, &r);
    if (rc != MPI_SUCCESS) return fail(rc);
    ++t->outstanding;
    out.push_back(r);
  }
}

bool MpiRendezvous::Impl::test_requests() {
  const int n = static_cast<int>(requests_.size());
  indices_.resize(requests_.size());
  statuses_.resize(requests_.size());
  int done = 0;
  const int rc = MPI_Testsome(n, requests_.data(), &done, indices_.data(), statuses_.data());
  if (done == MPI_UNDEFINED || done <= 0) {
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS)
      start_abort(std::make_exception_ptr(Unavailable(where() + "MPI_Testsome failed: " + mpi_error_string(rc))));
    return false;
  }
  bool header_arrived = false;
  for (int k = 0; k < done; ++k) {
    const int i = indices_[static_cast<size_t>(k)];
    const MPI_Status& st = statuses_[static_cast<size_t>(k)];
    int error = rc == MPI_ERR_IN_STATUS ? st.MPI_ERROR : MPI_SUCCESS;
    if (i == 0) {
      header_arrived = true;
      on_header(st, error);
      continue;
    }
    TransferPtr t = owners_[static_cast<size_t>(i)];
    if (error == MPI_SUCCESS && t->is_recv) {
      // A shorter message than announced completes without an error in MPI: check the count.
      int got = 0;
      MPI_Get_count(&st, MPI_BYTE, &got);
      if (got != expected_[static_cast<size_t>(i)]) error = MPI_ERR_TRUNCATE;
    }
    if (error != MPI_SUCCESS && !t->failed) {
      t->failed = true;
      if (t->is_recv)
        peer_broken(t->peer, "its payload of key " + t->header.key.to_string() + " did not arrive as announced (" +
                                 mpi_error_string(error) + ")");
      else
        abort_step(t->header.key.step_id,
                   std::make_exception_ptr(Unavailable(where() + "MPI failed sending key " +
                                                       t->header.key.to_string() + " to rank " +
                                                       std::to_string(t->peer) + ": " + mpi_error_string(error))));
    }
    if (--t->outstanding == 0) on_complete(t);
  }
  // Drop the completed requests (Testsome set them to null), keeping [0] in place.
  size_t w = 1;
  for (size_t r = 1; r < requests_.size(); ++r) {
    if (requests_[r] == MPI_REQUEST_NULL) continue;
    requests_[w] = requests_[r];
    owners_[w] = std::move(owners_[r]);
    expected_[w] = expected_[r];
    ++w;
  }
  requests_.resize(w);
  owners_.resize(w);
  expected_.resize(w);
  if (header_arrived) post_header_recv();
  return true;
}

void MpiRendezvous::Impl::on_header(const MPI_Status& status, int error) {
  const int src = status.MPI_SOURCE;
  if (error != MPI_SUCCESS) {
    peer_broken(src, "a header that could not be received (" + mpi_error_string(error) + "; over " +
                         std::to_string(options_.max_header_bytes) + " bytes?)");
    return;
  }
  int count = 0;
  MPI_Get_count(&status, MPI_BYTE, &count);
  auto t = std::make_shared<Transfer>();
  t->is_recv = true;
  t->peer = src;
  try {
    t->header = mpi_wire::decode_header(std::string_view(static_cast<const char*>(header_buf_.raw_data()), static_cast<size_t>(std::max(count, 0))),
                                        {options_.max_header_bytes, tag_ub_});
    const RendezvousKey& key = t->header.key;
    if (rank_of_(key.src_device) != src || rank_of_(key.dst_device) != me_)
      throw InvalidArgument("key " + key.to_string() + " is not a tensor from rank " + std::to_string(src) +
                            " to rank " + std::to_string(me_));
    if (t->header.has_value && !t->header.device) t->value = Tensor::empty(t->header.dtype, t->header.shape, cpu_device());
  } catch (const std::exception& e) {
    peer_broken(src, std::string("a damaged header: ") + e.what());
    return;
  }
  if (t->header.device) return receive_device_payload(src, t->header);
  const uint64_t chunk = t->header.chunk_bytes;
  auto* base = t->header.total_bytes ? static_cast<char*>(t->value.raw_data()) : nullptr;
  for (uint64_t off = 0; off < t->header.total_bytes; off += chunk) {
    MPI_Request r = MPI_REQUEST_NULL;
    const auto n = static_cast<int>(std::min(chunk, t->header.total_bytes - off));
    const int rc = MPI_Irecv(base + off, n, MPI_BYTE, src, static_cast<int>(t->header.tag), comm_, &r);
    if (rc != MPI_SUCCESS) {
      t->failed = true;
      peer_broken(src, "its payload of key " + t->header.key.to_string() + " cannot be received (" +
                           mpi_error_string(rc) + ")");
      break;
    }
    ++t->outstanding;
    add_request(r, t, n);
  }
  if (t->outstanding == 0) on_complete(t);
}

void MpiRendezvous::Impl::receive_device_payload(int src, const WireHeader& header) {
  if (!payloads_) {
    peer_broken(src, "key " + header.key.to_string() + " by a device transport, which rank " + std::to_string(me_) +
                         " does not have");
    return;
  }
  try {
    // Received even when the key's step was aborted or has ended: the link's next transfer must
    // find this one taken. deliver() drops the tensor then.
    payloads_->recv(src, header.key, header.dtype, header.shape, *header.device,
                    [this, key = header.key, is_dead = header.is_dead](Tensor value) {
                      deliver(key, std::move(value), is_dead);
                    });
  } catch (const std::exception& e) {
    peer_broken(src, "key " + header.key.to_string() + " by the device transport, which cannot receive it: " + e.what());
  }
}

void MpiRendezvous::Impl::on_complete(const TransferPtr& t) {
  if (t->is_recv && !t->failed) deliver(*t);
  t->value = Tensor();  // a send's buffer is free once MPI is done with it
}

void MpiRendezvous::Impl::deliver(Transfer& t) { deliver(t.header.key, std::move(t.value), t.header.is_dead); }

void MpiRendezvous::Impl::deliver_from_peer(int peer, const RendezvousKey& key, Tensor value, bool is_dead) {
  const auto [src, dst] = ranks_of(key);
  if (src != peer || dst != me_)
    throw InvalidArgument(where() + "rank " + std::to_string(peer) + " delivered key " + key.to_string() +
                          ", which goes from rank " + std::to_string(src) + " to rank " + std::to_string(dst));
  deliver(key, std::move(value), is_dead);
}

void MpiRendezvous::Impl::deliver(const RendezvousKey& key, Tensor value, bool is_dead) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    // A tensor for an aborted or finished step has no recv to go to: dropped.
    if (aborted_ || aborted_steps_.count(key.step_id) || cleaned_.count(key.step_id)) return;
  }
  try {
    table_.send(key, std::move(value), is_dead);  // runs a waiting recv's callback here
  } catch (const Internal&) {
    // The peer sent the key twice (or an abort raced this check, and this one is ignored): the
    // step cannot be trusted.
    abort_step(key.step_id, std::current_exception());
  } catch (...) {
    // An abort that came after the check above: the tensor is dropped.
  }
}

void MpiRendezvous::Impl::peer_broken(int rank, const std::string& what) {
  // The peer's stream of tensors cannot be matched any more: which recv would the lost tensor
  // have gone to? Like an abort, every recv fails, naming the culprit.
  start_abort(std::make_exception_ptr(InvalidArgument(where() + "rank " + std::to_string(rank) + " sent " + what +
                                                      "; every recv of this rendezvous fails")));
}

void MpiRendezvous::Impl::cancel_everything() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (finalized) return;  // too late to touch MPI; nothing progresses any more either
  // Receives are cancelled at once (they complete as cancelled); sends get a moment to be
  // delivered, as most are eager and done by now. A send still pending then is cancelled, which
  // MPI may not manage for a send whose peer never takes it: its request is freed below and its
  // buffer kept alive.
  auto cancel = [&](bool sends) {
    for (size_t i = 0; i < requests_.size(); ++i) {
      const bool is_send = owners_[i] && !owners_[i]->is_recv;
      if (requests_[i] != MPI_REQUEST_NULL && is_send == sends) MPI_Cancel(&requests_[i]);
    }
  };
  auto wait_a_little = [&](std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    while (true) {
      bool pending = false;
      for (MPI_Request& r : requests_) {
        if (r == MPI_REQUEST_NULL) continue;
        int flag = 0;
        MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
        if (!flag) pending = true;
      }
      if (!pending || std::chrono::steady_clock::now() > deadline) return;
      std::this_thread::sleep_for(std::chrono::microseconds(200));
    }
  };
  cancel(/*sends=*/false);
  wait_a_little(std::chrono::milliseconds(500));
  cancel(/*sends=*/true);
  wait_a_little(std::chrono::milliseconds(100));
  std::lock_guard<std::mutex> lock(graveyard_mu);
  for (size_t i = 0; i < requests_.size(); ++i) {
    if (requests_[i] == MPI_REQUEST_NULL) continue;
    MPI_Request_free(&requests_[i]);
    const Tensor& buffer = i == 0 ? header_buf_ : owners_[i]->value;
    if (buffer.defined()) graveyard().push_back(buffer);
  }
  requests_.clear();
  owners_.clear();
  expected_.clear();
}

// ---- the public face ----

MpiRendezvous::MpiRendezvous(MPI_Comm comm, std::function<int(std::string_view device)> rank_of,
                             MpiRendezvousOptions options)
    : impl_(std::make_unique<Impl>(comm, std::move(rank_of), std::move(options))) {}

MpiRendezvous::~MpiRendezvous() = default;

void MpiRendezvous::send(const RendezvousKey& key, Tensor value, bool is_dead) {
  impl_->send(key, std::move(value), is_dead);
}
void MpiRendezvous::deliver_from_peer(int peer, const RendezvousKey& key, Tensor value, bool is_dead) {
  impl_->deliver_from_peer(peer, key, std::move(value), is_dead);
}
void MpiRendezvous::recv_async(const RendezvousKey& key, DoneCallback done) {
  impl_->recv_async(key, std::move(done));
}
void MpiRendezvous::start_abort(std::exception_ptr error) { impl_->start_abort(std::move(error)); }
void MpiRendezvous::abort_step(int64_t step_id, std::exception_ptr error) {
  impl_->abort_step(step_id, std::move(error));
}
void MpiRendezvous::cleanup_step(int64_t step_id) { impl_->cleanup_step(step_id); }
bool MpiRendezvous::takes_device_tensor(const RendezvousKey& key, const Tensor& value) const {
  return impl_->takes_device_tensor(key, value);
}

void MpiRendezvous::expect_transfer(const RendezvousKey& key, uint64_t /*bytes*/) { impl_->expect_transfer(key); }

}  // namespace weft
