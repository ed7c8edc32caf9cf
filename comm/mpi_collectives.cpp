#include "comm/mpi_collectives.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "comm/mpi_allreduce_algorithm.h"
#include "comm/mpi_progress_engine.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {

std::vector<std::pair<int64_t, int64_t>> split_counts(int64_t total, int64_t max_count) {
  if (max_count < 1) throw InvalidArgument("[collective] max_count must be positive");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t off = 0; off < total; off += max_count) out.emplace_back(off, std::min(max_count, total - off));
  return out;
}

namespace {

MPI_Datatype mpi_type(DType d, const std::string& op) {
  switch (d) {
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    default: throw InvalidArgument("[" + op + "] MPI collectives take float32, float64, int32 or int64, not " +
                                   std::string(dtype_name(d)));
  }
}

char* at(const Tensor& t, int64_t element) {
  return static_cast<char*>(raw_data(t)) + element * static_cast<int64_t>(dtype_size(t.dtype()));
}

}  // namespace

class MpiCollectives::Impl {
 public:
  Impl(MPI_Comm parent, const std::vector<std::string>& tasks, MpiCollectivesOptions options);
  ~Impl();
  void start(std::shared_ptr<CrossProcessCollective> c);
  void abandon(const std::shared_ptr<CrossProcessCollective>& c, std::exception_ptr error);
  void reset(std::chrono::milliseconds timeout);

 private:
  struct Op {
    std::shared_ptr<CrossProcessCollective> c;
    bool issued = false;
    bool abandoned = false;
    int outstanding = 0;
    int phase = 0;  // all-gather: 1 while its header is in flight, 2 for the data
    std::vector<int64_t> my_header, headers;
    std::vector<int64_t> rank_counts;  // all-gather: elements of each rank
    std::vector<Tensor> rounds;        // all-gather: each round's receive buffer when there are several
    std::vector<std::vector<int>> round_counts, round_displs;
    Tensor rank_order;                 // all-gather: every rank's rows, rank after rank
    std::exception_ptr error;
    bool agreed_failure = false;  // every process failed it alike: the order still holds
    bool dropped = false;         // a reset dropped it: its requests' completions are ignored
  };
  using OpPtr = std::shared_ptr<Op>;

  bool issue_ready(std::vector<OpPtr>& finished);  // mu_ held
  void issue(const OpPtr& op);           // mu_ held; throws on an MPI error
  void issue_gather_data(const OpPtr& op);  // mu_ held
  // One of the op's requests completed (on the engine's driving thread).
  void on_request_done(const OpPtr& op, int error);
  void complete(const OpPtr& op, std::vector<OpPtr>& finished);  // mu_ held
  void finish_gather(Op& op);
  void interrupt(const CollectiveInstanceKey& key, const std::string& why, std::vector<OpPtr>& failed);  // mu_ held
  std::exception_ptr interrupted_error(const CrossProcessCollective& c) const;
  // For the engine's reports: the collective an op's request belongs to.
  static std::string describe_op(const void* op) {
    const CrossProcessCollective& c = *static_cast<const Op*>(op)->c;
    return c.op + " " + c.key.to_string();
  }
  // Hands a request MPI_I<collective> made to the engine (mu_ held).
  void add(MPI_Request r, const OpPtr& op, const char* kind, uint64_t bytes) {
    ++op->outstanding;
    engine_.track(client_, r,
                  {.kind = kind, .bytes = bytes, .describe = describe_op, .cancellable = false},
                  [this, op](const MPI_Status&, int error) { on_request_done(op, error); }, op);
  }
  void check(int rc, const std::string& what) const {
    if (rc != MPI_SUCCESS) throw Unavailable("[collective] " + what + " failed: " + mpi_error_string(rc));
  }

  MPI_Comm parent_;
  MpiCollectivesOptions options_;
  MpiProgressEngine& engine_;
  MpiProgressEngine::ClientId client_;
  int me_ = 0, size_ = 1;

  std::mutex reset_mu_;  // one reset at a time
  std::mutex mu_;
  bool stop_ = false;
  bool resetting_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  CollectiveOrder order_;
  std::string interrupted_;  // why, naming the group; empty when not interrupted
  std::vector<OpPtr> ready_;  // started, not issued
  std::unordered_map<const CrossProcessCollective*, OpPtr> ops_;  // every op not finished
  OpPtr blocked_;  // an all-gather whose data is not issued yet: nothing may be issued before it
  AllreduceAlgorithmChooser algorithm_;  // used under mu_, where every MPI_Iallreduce is made
};

MpiCollectives::Impl::Impl(MPI_Comm parent, const std::vector<std::string>& tasks, MpiCollectivesOptions options)
    : parent_(parent),
      options_(options),
      engine_(options.engine ? *options.engine : MpiProgressEngine::process()),
      // Each round of libnbc's collectives waits for a poll: after traffic the engine yields for a
      // millisecond, not 200 us (a 1 MiB all-reduce between 2 processes takes 0.11 to 0.35 ms).
      client_(engine_.add_client("collectives", std::chrono::milliseconds(1))) {
  int provided = 0;
  MPI_Query_thread(&provided);
  if (provided < MPI_THREAD_MULTIPLE) throw FailedPrecondition("[collective] MPI collectives need MPI_THREAD_MULTIPLE");
  if (options_.max_count < 1 || options_.max_count > INT_MAX)
    throw InvalidArgument("[collective] max_count must be 1 to 2^31 - 1");
  MPI_Comm_rank(parent_, &me_);
  MPI_Comm_size(parent_, &size_);
  if (static_cast<int>(tasks.size()) != size_)
    throw InvalidArgument("[collective] " + std::to_string(tasks.size()) + " task names for a communicator of " +
                          std::to_string(size_));
  MPI_Comm_set_errhandler(parent_, MPI_ERRORS_RETURN);
  check(MPI_Comm_dup(parent_, &comm_), "MPI_Comm_dup");  // every process constructs this together
  MPI_Comm_set_errhandler(comm_, MPI_ERRORS_RETURN);
}

MpiCollectives::Impl::~Impl() {
  std::vector<OpPtr> left;
  {
    std::lock_guard lock(mu_);
    stop_ = true;
    for (auto& [c, op] : ops_) {
      op->dropped = true;
      left.push_back(op);
    }
    ops_.clear();
    ready_.clear();
  }
  // What MPI has not completed is kept, with its buffers, until exit (collectives cannot be cancelled).
  engine_.cancel_client(client_, std::chrono::milliseconds(0));
  for (const OpPtr& op : left)
    if (!op->abandoned) op->c->done(std::make_exception_ptr(FailedPrecondition("[collective] MPI collectives shut down")));
}

std::exception_ptr MpiCollectives::Impl::interrupted_error(const CrossProcessCollective& c) const {
  return std::make_exception_ptr(FailedPrecondition("[" + c.op + "] " + c.key.to_string() +
                                                    ": the collectives are interrupted (" + interrupted_ +
                                                    "); every task must reset them (ClusterRuntime::reset_collectives)"));
}

void MpiCollectives::Impl::start(std::shared_ptr<CrossProcessCollective> c) {
  std::exception_ptr error;
  std::vector<OpPtr> failed;
  {
    std::lock_guard lock(mu_);
    if (stop_) error = std::make_exception_ptr(FailedPrecondition("[" + c->op + "] MPI collectives shut down"));
    else if (!interrupted_.empty()) error = interrupted_error(*c);
    else {
      try {
        mpi_type(c->send.defined() ? c->send.dtype() : c->result.dtype(), c->op);
        order_.check(c->key);
        for (const OpPtr& q : ready_)
          if (q->c->key.step_id == c->key.step_id && q->c->key.instance_key == c->key.instance_key)
            throw FailedPrecondition("[" + c->op + "] " + c->key.to_string() + " is started twice on this process");
        auto op = std::make_shared<Op>();
        op->c = c;
        ops_[c.get()] = op;
        ready_.push_back(std::move(op));
        // Issue here, on the starting thread, when this is the next collective in order: waking
        // another thread first put one thread hand-off (tens of microseconds on a busy machine)
        // before every collective's first message. The engine then tests it.
        if (!resetting_) issue_ready(failed);
      } catch (const FailedPrecondition& e) {
        interrupt(c->key, e.what(), failed);
        error = std::current_exception();
      } catch (...) {
        error = std::current_exception();
      }
    }
  }
  for (const OpPtr& op : failed) op->c->done(op->error);
  if (error) c->done(error);
}

void MpiCollectives::Impl::interrupt(const CollectiveInstanceKey& key, const std::string& why,
                                     std::vector<OpPtr>& failed) {
  if (interrupted_.empty()) interrupted_ = "group " + std::to_string(key.group_key) + ": " + why;
  // What was not issued yet never will be: it fails now.
  for (const OpPtr& op : ready_) {
    op->error = interrupted_error(*op->c);
    ops_.erase(op->c.get());
    failed.push_back(op);
  }
  ready_.clear();
}

void MpiCollectives::Impl::abandon(const std::shared_ptr<CrossProcessCollective>& c, std::exception_ptr error) {
  std::vector<OpPtr> failed;
  {
    std::lock_guard lock(mu_);
    auto it = ops_.find(c.get());
    if (it == ops_.end()) return;
    OpPtr op = it->second;
    op->abandoned = true;
    std::string why = "step " + std::to_string(c->key.step_id) + " was cancelled while instance " +
                      std::to_string(c->key.instance_key) + " waited";
    try {
      if (error) std::rethrow_exception(error);
    } catch (const std::exception& e) {
      why += std::string(": ") + e.what();
    } catch (...) {
    }
    if (!op->issued) {
      ready_.erase(std::remove(ready_.begin(), ready_.end(), op), ready_.end());
      ops_.erase(it);
    }
    // An issued op stays with its requests: its buffers live while MPI may write them.
    interrupt(c->key, why, failed);
  }
  for (const OpPtr& op : failed)
    if (!op->abandoned) op->c->done(op->error);
}

bool MpiCollectives::Impl::issue_ready(std::vector<OpPtr>& finished) {
  bool any = false;
  while (!blocked_ && !resetting_ && interrupted_.empty()) {
    auto it = std::find_if(ready_.begin(), ready_.end(), [&](const OpPtr& op) { return order_.is_next(op->c->key); });
    if (it == ready_.end()) break;
    OpPtr op = *it;
    ready_.erase(it);
    any = true;
    op->issued = true;
    try {
      issue(op);
    } catch (...) {
      // A process that could not issue breaks the order for everyone.
      // (Requests it did make stay in requests_, with their buffers.)
      op->error = std::current_exception();
      interrupt(op->c->key, "MPI refused instance " + std::to_string(op->c->key.instance_key), finished);
      if (op->outstanding == 0) ops_.erase(op->c.get());
      op->abandoned = true;  // done is called now; its requests, if any, may still complete
      finished.push_back(op);
      blocked_ = nullptr;
    }
    if (!blocked_) order_.advance(op->c->key);
  }
  return any;
}

void MpiCollectives::Impl::issue(const OpPtr& op) {
  CrossProcessCollective& c = *op->c;
  switch (c.kind) {
    case CollectiveKind::kAllReduce: {
      const MPI_Datatype type = mpi_type(c.result.dtype(), c.op);
      const bool in_place = c.send.same_as(c.result) || raw_data(c.send) == raw_data(c.result);
      for (auto [off, n] : split_counts(c.result.size(), options_.max_count)) {
        MPI_Request r;
        algorithm_.before(n * static_cast<int64_t>(dtype_size(c.result.dtype())), size_);
        check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : at(c.send, off), at(c.result, off), static_cast<int>(n), type,
                             MPI_SUM, comm_, &r),
              "MPI_Iallreduce");
        add(r, op, "all-reduce", static_cast<uint64_t>(n) * dtype_size(c.result.dtype()));
      }
      break;
    }
    case CollectiveKind::kBroadcast: {
      const MPI_Datatype type = mpi_type(c.result.dtype(), c.op);
      for (auto [off, n] : split_counts(c.result.size(), options_.max_count)) {
        MPI_Request r;
        check(MPI_Ibcast(at(c.result, off), static_cast<int>(n), type, c.root_rank, comm_, &r), "MPI_Ibcast");
        add(r, op, "broadcast", static_cast<uint64_t>(n) * dtype_size(c.result.dtype()));
      }
      break;
    }
    case CollectiveKind::kAllGather: {
      // First every process's counts (and dtype and row size, checked alike everywhere), so that
      // the data's counts are known; nothing else is issued before the data (blocked_).
      const size_t m = c.member_rows.size();
      op->my_header.assign(m + 2, 0);
      op->my_header[0] = static_cast<int64_t>(c.send.dtype());
      op->my_header[1] = c.send.rank() >= 1 && c.send.shape()[0] > 0 ? c.send.size() / c.send.shape()[0] : -1;
      if (c.send.rank() >= 1 && c.send.shape()[0] == 0) {
        int64_t row = 1;
        for (int64_t d = 1; d < c.send.rank(); ++d) row *= c.send.shape()[d];
        op->my_header[1] = row;
      }
      for (size_t i = 0; i < m; ++i) op->my_header[2 + i] = c.member_rows[i];
      op->headers.assign(static_cast<size_t>(size_) * (m + 2), 0);
      MPI_Request r;
      check(MPI_Iallgather(op->my_header.data(), static_cast<int>(m + 2), MPI_INT64_T, op->headers.data(),
                           static_cast<int>(m + 2), MPI_INT64_T, comm_, &r),
            "MPI_Iallgather");
      op->phase = 1;
      add(r, op, "all-gather header", (m + 2) * sizeof(int64_t));
      blocked_ = op;
      break;
    }
  }
}

void MpiCollectives::Impl::issue_gather_data(const OpPtr& op) {
  CrossProcessCollective& c = *op->c;
  const size_t m = c.member_rows.size();
  const size_t stride = m + 2;
  auto header = [&](int rank, size_t i) { return op->headers[static_cast<size_t>(rank) * stride + i]; };
  const int64_t row = header(0, 1);
  for (int r = 0; r < size_; ++r)
    if (header(r, 0) != header(0, 0) || header(r, 1) != row)
      throw InvalidArgument("[" + c.op + "] " + c.key.to_string() + ": the processes' inputs disagree (rank " +
                            std::to_string(r) + " gives dtype " + std::string(dtype_name(static_cast<DType>(header(r, 0)))) +
                            " and rows of " + std::to_string(header(r, 1)) + " elements, rank 0 dtype " +
                            std::string(dtype_name(static_cast<DType>(header(0, 0)))) + " and " + std::to_string(row) +
                            "): every dim but the first must agree");
  op->rank_counts.assign(static_cast<size_t>(size_), 0);
  for (size_t i = 0; i < m; ++i) {
    const int rank = c.member_ranks[i];
    const int64_t rows = header(rank, 2 + i);
    if (rows < 0) throw Internal("[" + c.op + "] rank " + std::to_string(rank) + " did not give member " + std::to_string(i));
    c.member_rows[i] = rows;
    op->rank_counts[static_cast<size_t>(rank)] += rows * row;
  }
  int64_t total = 0;
  for (int64_t n : op->rank_counts) total += n;
  const DType dtype = c.send.dtype();
  const MPI_Datatype type = mpi_type(dtype, c.op);
  op->rank_order = Tensor::empty(dtype, Shape({total}), cpu_device());
  // Rounds of at most max_count / size elements per rank, so a round's displacements fit an int.
  const int64_t per_round = std::max<int64_t>(1, options_.max_count / size_);
  int64_t most = 0;
  for (int64_t n : op->rank_counts) most = std::max(most, n);
  const int64_t rounds = most == 0 ? 0 : (most + per_round - 1) / per_round;
  for (int64_t k = 0; k < rounds; ++k) {
    std::vector<int> counts(static_cast<size_t>(size_)), displs(static_cast<size_t>(size_));
    int64_t sum = 0;
    for (int r = 0; r < size_; ++r) {
      const int64_t n = std::clamp<int64_t>(op->rank_counts[static_cast<size_t>(r)] - k * per_round, 0, per_round);
      counts[static_cast<size_t>(r)] = static_cast<int>(n);
      displs[static_cast<size_t>(r)] = static_cast<int>(sum);
      sum += n;
    }
    // One round goes straight into place; several go through buffers copied in place at the end.
    Tensor into = rounds == 1 ? op->rank_order : Tensor::empty(dtype, Shape({sum}), cpu_device());
    const int64_t mine = counts[static_cast<size_t>(me_)];
    MPI_Request r;
    check(MPI_Iallgatherv(mine ? at(c.send, k * per_round) : raw_data(c.send), static_cast<int>(mine), type,
                          raw_data(into), counts.data(), displs.data(), type, comm_, &r),
          "MPI_Iallgatherv");
    add(r, op, "all-gather", static_cast<uint64_t>(sum) * dtype_size(dtype));
    op->rounds.push_back(into);
    op->round_counts.push_back(std::move(counts));
    op->round_displs.push_back(std::move(displs));
  }
  op->phase = 2;
}

void MpiCollectives::Impl::finish_gather(Op& op) {
  CrossProcessCollective& c = *op.c;
  const size_t esize = dtype_size(op.rank_order.dtype());
  std::vector<int64_t> rank_offset(static_cast<size_t>(size_), 0);
  for (int r = 1; r < size_; ++r)
    rank_offset[static_cast<size_t>(r)] = rank_offset[static_cast<size_t>(r - 1)] + op.rank_counts[static_cast<size_t>(r - 1)];
  if (op.rounds.size() > 1) {
    const int64_t per_round = std::max<int64_t>(1, options_.max_count / size_);
    for (size_t k = 0; k < op.rounds.size(); ++k)
      for (int r = 0; r < size_; ++r) {
        const int n = op.round_counts[k][static_cast<size_t>(r)];
        if (n)
          std::memcpy(at(op.rank_order, rank_offset[static_cast<size_t>(r)] + static_cast<int64_t>(k) * per_round),
                      at(op.rounds[k], op.round_displs[k][static_cast<size_t>(r)]), static_cast<size_t>(n) * esize);
      }
  }
  op.rounds.clear();
  // Rank order is member order when members' ranks never go down; otherwise reorder.
  if (std::is_sorted(c.member_ranks.begin(), c.member_ranks.end())) {
    c.result = op.rank_order;
    return;
  }
  const int64_t total = op.rank_order.size();
  const int64_t row = op.headers[1];
  c.result = Tensor::empty(op.rank_order.dtype(), Shape({total}), cpu_device());
  std::vector<int64_t> next_in_rank = rank_offset;
  int64_t out = 0;
  for (size_t i = 0; i < c.member_ranks.size(); ++i) {
    const int64_t n = c.member_rows[i] * row;
    int64_t& src = next_in_rank[static_cast<size_t>(c.member_ranks[i])];
    if (n) std::memcpy(at(c.result, out), at(op.rank_order, src), static_cast<size_t>(n) * esize);
    src += n;
    out += n;
  }
}

void MpiCollectives::Impl::on_request_done(const OpPtr& op, int error) {
  std::vector<OpPtr> finished;
  {
    std::lock_guard lock(mu_);
    if (op->dropped) return;  // a reset or the end dropped it, and told its waiter
    if (error != MPI_SUCCESS && !op->error)
      op->error = std::make_exception_ptr(Unavailable("[" + op->c->op + "] " + op->c->key.to_string() +
                                                      ": MPI failed: " + mpi_error_string(error)));
    if (--op->outstanding > 0) return;
    complete(op, finished);
    // An all-gather's header completing unblocks what waited behind it.
    if (!resetting_) issue_ready(finished);
  }
  for (const OpPtr& f : finished) f->c->done(f->error);
}

void MpiCollectives::Impl::complete(const OpPtr& op, std::vector<OpPtr>& finished) {
  if (op->phase == 1 && !op->error) {
    // The header is here: the data goes now, before anything else is issued.
    try {
      issue_gather_data(op);
    } catch (const InvalidArgument&) {
      op->error = std::current_exception();  // every process saw the same headers: all fail alike
      op->agreed_failure = true;
    } catch (...) {
      op->error = std::current_exception();
      std::vector<OpPtr> failed;
      interrupt(op->c->key, "MPI refused the data of instance " + std::to_string(op->c->key.instance_key), failed);
      finished.insert(finished.end(), failed.begin(), failed.end());
    }
    if (blocked_ == op) {
      blocked_ = nullptr;
      order_.advance(op->c->key);
    }
    if (!op->error && op->outstanding > 0) return;
  }
  if (!op->error && op->c->kind == CollectiveKind::kAllGather) {
    try {
      finish_gather(*op);
    } catch (...) {
      op->error = std::current_exception();
    }
  }
  if (op->error && interrupted_.empty() && !op->agreed_failure) {
    std::vector<OpPtr> failed;
    interrupt(op->c->key, "MPI failed", failed);
    finished.insert(finished.end(), failed.begin(), failed.end());
  }
  ops_.erase(op->c.get());
  if (!op->abandoned) finished.push_back(op);
}

void MpiCollectives::Impl::reset(std::chrono::milliseconds timeout) {
  std::lock_guard serial(reset_mu_);
  std::vector<OpPtr> dropped;
  {
    std::lock_guard lock(mu_);
    resetting_ = true;
    for (auto& [c, op] : ops_) {
      op->dropped = true;
      if (!op->abandoned) dropped.push_back(op);
    }
    ops_.clear();
    ready_.clear();
    blocked_ = nullptr;
    order_.reset();
    // The old communicator is never freed: MPI may still complete its abandoned requests.
    comm_ = MPI_COMM_NULL;
  }
  // What MPI may still touch (the old communicator's requests and buffers) is kept until exit.
  engine_.cancel_client(client_, std::chrono::milliseconds(0));
  for (const OpPtr& op : dropped)
    op->c->done(std::make_exception_ptr(
        FailedPrecondition("[" + op->c->op + "] " + op->c->key.to_string() + ": the collectives were reset")));
  // A fresh communicator, made by every process together: MPI_Comm_idup through the engine,
  // awaited against a deadline (MPI_Comm_dup could wait forever for a dead peer).
  struct Dup {
    std::mutex mu;
    std::condition_variable cv;
    bool done = false;
    int error = MPI_SUCCESS;
    MPI_Comm comm = MPI_COMM_NULL;
  };
  auto dup = std::make_shared<Dup>();
  MPI_Request r = MPI_REQUEST_NULL;
  std::string failure;
  const int rc = MPI_Comm_idup(parent_, &dup->comm, &r);
  if (rc != MPI_SUCCESS) {
    failure = "MPI_Comm_idup failed: " + mpi_error_string(rc);
  } else {
    engine_.track(client_, r, {.kind = "communicator dup", .what = "reset of the collectives", .cancellable = false},
                  [dup](const MPI_Status&, int error) {
                    std::lock_guard lock(dup->mu);
                    dup->done = true;
                    dup->error = error;
                    dup->cv.notify_all();
                  },
                  dup);
    std::unique_lock lock(dup->mu);
    if (!dup->cv.wait_for(lock, timeout, [&] { return dup->done; }))
      failure = "not every task took part within " + std::to_string(timeout.count()) + " ms";
    else if (dup->error != MPI_SUCCESS)
      failure = "MPI_Comm_idup failed: " + mpi_error_string(dup->error);
  }
  std::lock_guard lock(mu_);
  resetting_ = false;
  if (!failure.empty()) {
    interrupted_ = "the last reset failed: " + failure;
    throw Unavailable("[collective] reset: " + failure);
  }
  MPI_Comm_set_errhandler(dup->comm, MPI_ERRORS_RETURN);
  comm_ = dup->comm;
  interrupted_.clear();
}

// ---- the public face ----

MpiCollectives::MpiCollectives(MPI_Comm parent, std::vector<std::string> tasks, MpiCollectivesOptions options)
    : tasks_(std::move(tasks)), impl_(std::make_unique<Impl>(parent, tasks_, options)) {}
MpiCollectives::~MpiCollectives() = default;
void MpiCollectives::start(std::shared_ptr<CrossProcessCollective> c) { impl_->start(std::move(c)); }
void MpiCollectives::abandon(const std::shared_ptr<CrossProcessCollective>& c, std::exception_ptr error) {
  impl_->abandon(c, std::move(error));
}
void MpiCollectives::reset(std::chrono::milliseconds timeout) { impl_->reset(timeout); }

}  // namespace weft
