#include "comm/mpi_rendezvous.h"

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <climits>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include "runtime/local_rendezvous.h"
#include "comm/mpi_progress_engine.h"
#include "comm/mpi_rendezvous_wire.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/flight_recorder.h"
#include "runtime/tensor_internals.h"

namespace weft {

namespace {

using mpi_wire::WireHeader;

void check_error(const std::exception_ptr& error, const char* what) {
  if (!error) throw InvalidArgument(std::string("[rendezvous] ") + what + " needs an error, got a null exception_ptr");
}

}  // namespace

class MpiRendezvous::Impl {
 public:
  Impl(MPI_Comm comm, std::function<int(std::string_view)> rank_of, MpiRendezvousOptions options);
  ~Impl();

  void send(const RendezvousKey& key, Tensor value, bool is_dead);
  void deliver_from_peer(int peer, const RendezvousKey& key, Tensor value, bool is_dead);
  void recv_async(const RendezvousKey& key, const RecvExpectation* expected, DoneCallback done);
  void start_abort(std::exception_ptr error);
  void abort_step(int64_t step_id, std::exception_ptr error);
  void cleanup_step(int64_t step_id);
  bool takes_device_tensor(const RendezvousKey& key, const Tensor& value) const;
  void expect_transfer(const RendezvousKey& key);

 private:
  // One tensor crossing: a send (header then payload from `value`) or a receive (payload into
  // `value`). Its MPI requests hold it (as the engine's keep-alive) until each has completed.
  struct Transfer {
    bool is_recv = false;
    int peer = 0;
    WireHeader header;
    std::string header_bytes;  // a send's encoded header, read by MPI until its Isend completes
    Tensor value;
    // Requests not completed yet, counted before the first is made: a completion on the engine's
    // thread never sees the count reach zero while the sending thread is still making them.
    std::atomic<int> outstanding{0};
    std::atomic<bool> failed{false};
  };
  using TransferPtr = std::shared_ptr<Transfer>;
  // For the engine's reports: a transfer's key, formatted only when asked.
  static std::string describe_transfer(const void* transfer) {
    return static_cast<const Transfer*>(transfer)->header.key.to_string();
  }

  // Where a key's devices live; InvalidArgument naming the key when no task owns one.
  std::pair<int, int> ranks_of(const RendezvousKey& key) const;
  std::string where() const { return "[rendezvous] rank " + std::to_string(me_) + ": "; }

  // On the engine's driving thread.
  void listen_for_headers();
  void on_header(const MpiMessage& message);
  void on_payload(const TransferPtr& t, const MPI_Status& status, int error, int expected);
  // A header's dtype and shape against what its waiting recv expects, if one waits and said:
  // the error naming the key, the peer and both, or null.
  std::exception_ptr check_expected(int src, const WireHeader& header) const;
  // Takes a refused transfer's payload messages into nothing, so that none waits in MPI's queue
  // for a later transfer's receive on the same tag.
  void drop_payload(int src, const WireHeader& header);
  // A header whose payload comes by the device transport: the transport receives it.
  void receive_device_payload(int src, const WireHeader& header);
  void finish_one(const TransferPtr& t);
  void deliver(const RendezvousKey& key, Tensor value, bool is_dead);
  void peer_broken(int rank, const std::string& what);
  // Any thread: the MPI sends of a send's header and payload, handed to the engine.
  void start_send(const TransferPtr& t);

  MPI_Comm comm_;
  std::function<int(std::string_view)> rank_of_;
  MpiRendezvousOptions options_;
  std::unique_ptr<DevicePayloads> payloads_;  // options_.device_payloads, moved out
  MpiProgressEngine& engine_;
  MpiProgressEngine::ClientId client_;
  int me_ = 0;
  int size_ = 0;
  int tag_ub_ = 32767;
  uint64_t max_payload_bytes_ = 0;  // options_.max_payload_bytes, or the machine's memory

  // Keys of this rank's devices meet here, and so do tensors arrived from peers with their recvs:
  // the two kinds of keys never overlap (their source ranks differ), so one table serves both and
  // gives the local semantics of abort and cleanup to both.
  LocalRendezvous table_;

  std::mutex mu_;  // guards everything below
  std::exception_ptr aborted_;
  std::unordered_map<int64_t, std::exception_ptr> aborted_steps_;
  // Steps cleaned up lately: a tensor of one arriving later is dropped, not stored forever. A
  // bounded window, since step ids only grow.
  std::unordered_set<int64_t> cleaned_;
  std::deque<int64_t> cleaned_order_;
  std::vector<uint32_t> next_tag_;   // per destination rank

};

MpiRendezvous::Impl::Impl(MPI_Comm comm, std::function<int(std::string_view)> rank_of,
                          MpiRendezvousOptions options)
    : comm_(comm),
      rank_of_(std::move(rank_of)),
      options_(std::move(options)),
      engine_(options_.engine ? *options_.engine : MpiProgressEngine::process()),
      client_(engine_.add_client("rendezvous")) {
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
  max_payload_bytes_ = options_.max_payload_bytes;
  if (max_payload_bytes_ == 0) {
    const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
    max_payload_bytes_ = pages > 0 && page > 0 ? static_cast<uint64_t>(pages) * static_cast<uint64_t>(page) : UINT64_MAX;
  }
  next_tag_.assign(static_cast<size_t>(size_), 0);
  if (payloads_) payloads_->set_failure_handler([this](std::exception_ptr error) { start_abort(std::move(error)); });
  listen_for_headers();
}

MpiRendezvous::Impl::~Impl() {
  // Receives are cancelled at once; sends get half a second to be delivered (most are eager and
  // done by now). No completion of this client runs after this.
  engine_.cancel_client(client_, std::chrono::milliseconds(500));
  if (payloads_) payloads_->abort(std::make_exception_ptr(FailedPrecondition(where() + "the rendezvous was destroyed")));
  payloads_.reset();
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
  // MPI is called on this thread, outside the lock: the tensor is on the wire at once, and
  // nothing waits on a send that MPI is slow to take.
  start_send(t);
}

void MpiRendezvous::Impl::recv_async(const RendezvousKey& key, const RecvExpectation* expected, DoneCallback done) {
  std::exception_ptr error;
  int src = -1;
  try {
    const auto [from, dst] = ranks_of(key);
    src = from;
    if (dst != me_)
      throw InvalidArgument(where() + "cannot receive key " + key.to_string() + ": its destination device is on rank " +
                            std::to_string(dst));
  } catch (...) {
    error = std::current_exception();
  }
  if (error) return done(error, Tensor(), false);
  FlightRecorder& fr = process_flight_recorder();
  if (src != me_ && fr.enabled()) {
    // A tensor from a peer is waited for here before any MPI request exists (its header is probed
    // for, not received into a posted buffer): the flight record shows this wait, so a Recv whose
    // tensor never came is seen pending, with the rank it waits for.
    const FlightHandle h =
        fr.record_start({.kind = "tensor recv", .peer = src, .tag = -1, .step = key.step_id});
    done = [h, inner = std::move(done)](const std::exception_ptr& e, Tensor value, bool is_dead) {
      process_flight_recorder().record_end(h, e ? FlightState::kError : FlightState::kDone, 0,
                                           value.defined() && !value.is_symbolic() ? value.nbytes() : 0);
      inner(e, std::move(value), is_dead);
    };
  }
  if (expected) table_.recv_async_expecting(key, *expected, std::move(done));
  else table_.recv_async(key, std::move(done));
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
  // After 30 ms idle a 1 MiB fetch took 1.4 ms, its header waiting out a 1 ms nap.
  engine_.expect_traffic();
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

// ---- MPI, through the engine ----

void MpiRendezvous::Impl::listen_for_headers() {
  // Probed, not a standing receive: a header's length is checked before a byte of it is written
  // (a longer message would overrun a fixed receive on Open MPI's single-copy path). Payloads,
  // whose length a checked header has fixed, are probed too (irecv_probed), only while awaited.
  engine_.probe_listen(client_, comm_, kMpiRendezvousHeaderTag, MPI_ANY_SOURCE, options_.max_header_bytes,
                       {.kind = "header recv", .tag = kMpiRendezvousHeaderTag},
                       [this](MpiMessage message) { on_header(message); });
}

void MpiRendezvous::Impl::start_send(const TransferPtr& t) {
  const uint64_t chunk = t->header.chunk_bytes;
  const uint64_t chunks = t->header.device ? 0 : (t->header.total_bytes + chunk - 1) / chunk;
  t->outstanding = static_cast<int>(1 + chunks);
  auto sent = [this, t](const MPI_Status&, int error) {
    if (error != MPI_SUCCESS && !t->failed.exchange(true))
      abort_step(t->header.key.step_id,
                 std::make_exception_ptr(Unavailable(where() + "MPI failed sending key " + t->header.key.to_string() +
                                                     " to rank " + std::to_string(t->peer) + ": " +
                                                     mpi_error_string(error))));
    finish_one(t);
  };
  auto fail = [&](int rc, uint64_t not_made) {
    // The peer's recv will not hear of this tensor: fail the step here, where the cluster's
    // error handling sees it.
    t->failed = true;
    abort_step(t->header.key.step_id,
               std::make_exception_ptr(Unavailable(where() + "MPI could not send key " + t->header.key.to_string() + " to rank " +
                                                   std::to_string(t->peer) + ": " + mpi_error_string(rc))));
    for (uint64_t i = 0; i < not_made; ++i) finish_one(t);
  };
  int rc = engine_.isend(client_, t->header_bytes.data(), static_cast<int>(t->header_bytes.size()), t->peer,
                         kMpiRendezvousHeaderTag, comm_,
                         {.kind = "header send", .peer = t->peer, .tag = kMpiRendezvousHeaderTag,
                          .bytes = t->header_bytes.size(), .describe = describe_transfer},
                         sent, t);
  if (rc != MPI_SUCCESS) return fail(rc, 1 + chunks);
  auto* base = chunks ? static_cast<char*>(raw_data(t->value)) : nullptr;  // a device's tensor went to its transport
  for (uint64_t k = 0; k < chunks; ++k) {
    const uint64_t off = k * chunk;
    const auto count = static_cast<int>(std::min(chunk, t->header.total_bytes - off));
    rc = engine_.isend(client_, base + off, count, t->peer, static_cast<int>(t->header.tag), comm_,
                       {.kind = "payload send", .peer = t->peer, .tag = static_cast<int>(t->header.tag),
                        .bytes = static_cast<uint64_t>(count), .describe = describe_transfer},
                       sent, t);
    if (rc != MPI_SUCCESS) return fail(rc, chunks - k);
  }
}

void MpiRendezvous::Impl::on_header(const MpiMessage& message) {
  const int src = message.source;
  if (!message.error.empty()) {
    peer_broken(src, "a header that could not be taken: " + message.error);
    return;
  }
  auto t = std::make_shared<Transfer>();
  t->is_recv = true;
  t->peer = src;
  try {
    t->header = mpi_wire::decode_header(
        std::string_view(reinterpret_cast<const char*>(message.words.data()), message.bytes),
        {options_.max_header_bytes, tag_ub_});
    const RendezvousKey& key = t->header.key;
    if (rank_of_(key.src_device) != src || rank_of_(key.dst_device) != me_)
      throw InvalidArgument("key " + key.to_string() + " is not a tensor from rank " + std::to_string(src) +
                            " to rank " + std::to_string(me_));
    if (t->header.total_bytes > max_payload_bytes_)
      throw InvalidArgument("key " + key.to_string() + " announces " + std::to_string(t->header.total_bytes) +
                            " bytes, over the limit of " + std::to_string(max_payload_bytes_) +
                            " (MpiRendezvousOptions::max_payload_bytes; by default this machine's memory)");
  } catch (const std::exception& e) {
    peer_broken(src, std::string("a damaged header: ") + e.what());
    return;
  }
  // A well-formed header for a tensor its recv cannot take: the step fails, the stream of
  // tensors from the peer is still in step (the payload is dropped by length).
  if (std::exception_ptr refused = check_expected(src, t->header)) {
    abort_step(t->header.key.step_id, refused);
    if (t->header.device) return receive_device_payload(src, t->header);  // its link must stay in step
    return drop_payload(src, t->header);
  }
  if (t->header.device) return receive_device_payload(src, t->header);
  try {
    if (t->header.has_value) t->value = Tensor::empty(t->header.dtype, t->header.shape, cpu_device());
  } catch (const std::exception& e) {
    peer_broken(src, "key " + t->header.key.to_string() + ", whose tensor cannot be allocated: " + e.what());
    return;
  }
  const uint64_t chunk = t->header.chunk_bytes;
  const uint64_t chunks = (t->header.total_bytes + chunk - 1) / chunk;
  if (chunks == 0) return deliver(t->header.key, std::move(t->value), t->header.is_dead);
  t->outstanding = static_cast<int>(chunks);
  auto* base = static_cast<char*>(raw_data(t->value));
  for (uint64_t k = 0; k < chunks; ++k) {
    const uint64_t off = k * chunk;
    const auto n = static_cast<int>(std::min(chunk, t->header.total_bytes - off));
    // Probed before it is received: a message longer than announced is refused, not written past
    // the tensor's buffer (comm/mpi_message_frame.h).
    engine_.irecv_probed(client_, base + off, n, src, static_cast<int>(t->header.tag), comm_,
                         {.kind = "payload recv", .peer = src, .tag = static_cast<int>(t->header.tag),
                          .bytes = static_cast<uint64_t>(n), .describe = describe_transfer},
                         [this, t, n](const MPI_Status& st, int e) { on_payload(t, st, e, n); }, t);
  }
}

void MpiRendezvous::Impl::on_payload(const TransferPtr& t, const MPI_Status& status, int error, int expected) {
  // A message of another length than announced is refused by the probe (MPI_ERR_TRUNCATE, the
  // status the probe's), and a shorter one would complete without an error: the count says which.
  int got = -1;
  if (error == MPI_SUCCESS || error == MPI_ERR_TRUNCATE)
    if (MPI_Get_count(&status, MPI_BYTE, &got) != MPI_SUCCESS || got == MPI_UNDEFINED) got = -1;
  if (error == MPI_SUCCESS && got != expected) error = MPI_ERR_TRUNCATE;
  if (error != MPI_SUCCESS && !t->failed.exchange(true))
    peer_broken(t->peer, "its payload of key " + t->header.key.to_string() + " did not arrive as announced (" +
                             (got >= 0 && got != expected ? "a message of " + std::to_string(got) +
                                                                " bytes, where its header announced " +
                                                                std::to_string(expected)
                                                          : mpi_error_string(error)) +
                             ")");
  finish_one(t);
}

std::exception_ptr MpiRendezvous::Impl::check_expected(int src, const WireHeader& header) const {
  if (!header.has_value) return nullptr;  // a dead branch's, without a tensor
  RecvExpectation expected;
  if (!table_.expectation_of(header.key, expected) || expected.admits(header.dtype, header.shape)) return nullptr;
  return std::make_exception_ptr(InvalidArgument(
      where() + "rank " + std::to_string(src) + " announced key " + header.key.to_string() + " as " +
      std::string(dtype_name(header.dtype)) + header.shape.to_string() + " (" + std::to_string(header.total_bytes) +
      " bytes), where its Recv expects " + expected.to_string() + "; refused before its bytes were received"));
}

void MpiRendezvous::Impl::drop_payload(int src, const WireHeader& header) {
  const uint64_t chunks = mpi_wire::chunk_count(header.total_bytes, header.chunk_bytes);
  for (uint64_t k = 0; k < chunks; ++k) {
    const uint64_t off = k * header.chunk_bytes;
    const auto n = static_cast<int>(std::min(header.chunk_bytes, header.total_bytes - off));
    engine_.irecv_probed(client_, nullptr, n, src, static_cast<int>(header.tag), comm_,
                         {.kind = "refused payload recv", .peer = src, .tag = static_cast<int>(header.tag),
                          .bytes = static_cast<uint64_t>(n)},
                         [](const MPI_Status&, int) {});
  }
}

void MpiRendezvous::Impl::finish_one(const TransferPtr& t) {
  if (t->outstanding.fetch_sub(1) != 1) return;
  // A send's buffer is freed when the last of its requests lets go of the transfer.
  if (t->is_recv && !t->failed) deliver(t->header.key, std::move(t->value), t->header.is_dead);
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
  impl_->recv_async(key, nullptr, std::move(done));
}
void MpiRendezvous::recv_async_expecting(const RendezvousKey& key, const RecvExpectation& expected, DoneCallback done) {
  impl_->recv_async(key, &expected, std::move(done));
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
