#include "comm/mpi_collectives.h"

#include <algorithm>
#include <condition_variable>
#include <cstring>
#include <mutex>
#include <thread>
#include <unordered_map>

#include "comm/mpi_allreduce_algorithm.h"
#include "comm/progress_pacer.h"
#include "runtime/device.h"
#include "runtime/error.h"

namespace weft {

std::vector<std::pair<int64_t, int64_t>> split_counts(int64_t total, int64_t max_count) {
  if (max_count < 1) throw InvalidArgument("[collective] max_count must be positive");
  std::vector<std::pair<int64_t, int64_t>> out;
  for (int64_t off = 0; off < total; off += max_count) out.emplace_back(off, std::min(max_count, total - off));
  return out;
}

namespace {

std::string mpi_error_string(int code) {
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  if (MPI_Error_string(code, text, &len) != MPI_SUCCESS) return "MPI error " + std::to_string(code);
  return std::string(text, static_cast<size_t>(len));
}

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
  return static_cast<char*>(t.raw_data()) + element * static_cast<int64_t>(dtype_size(t.dtype()));
}

// Collectives' buffers and requests MPI may still use after they were abandoned: kept until exit.
std::mutex graveyard_mu;
struct Graveyard {
  std::vector<std::shared_ptr<void>> things;
  std::vector<MPI_Request> requests;
  std::vector<MPI_Comm> comms;
};
Graveyard& graveyard() {
  static auto* g = new Graveyard();
  return *g;
}

}  // namespace

class MpiCollectives::Impl {
 public:
  Impl(MPI_Comm parent, const std::vector<std::string>& tasks, MpiCollectivesOptions options);
  ~Impl();
  void start(std::shared_ptr<CrossProcessCollective> c);
  void abandon(const std::shared_ptr<CrossProcessCollective>& c, std::exception_ptr error);
  void reset(std::chrono::milliseconds timeout);
  bool poll();

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
  };
  using OpPtr = std::shared_ptr<Op>;

  void run();
  bool issue_ready(std::vector<OpPtr>& finished);  // mu_ held
  void issue(const OpPtr& op);           // mu_ held; throws on an MPI error
  void issue_gather_data(const OpPtr& op);  // mu_ held
  bool test(std::vector<OpPtr>& finished);  // mu_ held
  void complete(const OpPtr& op, std::vector<OpPtr>& finished);  // mu_ held
  void finish_gather(Op& op);
  void interrupt(const CollectiveInstanceKey& key, const std::string& why, std::vector<OpPtr>& failed);  // mu_ held
  std::exception_ptr interrupted_error(const CrossProcessCollective& c) const;
  void add(MPI_Request r, const OpPtr& op) {
    requests_.push_back(r);
    owners_.push_back(op);
    ++op->outstanding;
  }
  void check(int rc, const std::string& what) const {
    if (rc != MPI_SUCCESS) throw Unavailable("[collective] " + what + " failed: " + mpi_error_string(rc));
  }

  MPI_Comm parent_;
  MpiCollectivesOptions options_;
  int me_ = 0, size_ = 1;

  std::mutex reset_mu_;  // one reset at a time
  std::mutex mu_;
  std::condition_variable wake_;
  bool stop_ = false;
  bool resetting_ = false;
  MPI_Comm comm_ = MPI_COMM_NULL;
  CollectiveOrder order_;
  std::string interrupted_;  // why, naming the group; empty when not interrupted
  std::vector<OpPtr> ready_;  // started, not issued
  std::unordered_map<const CrossProcessCollective*, OpPtr> ops_;  // every op not finished
  OpPtr blocked_;  // an all-gather whose data is not issued yet: nothing may be issued before it
  std::vector<MPI_Request> requests_;
  std::vector<OpPtr> owners_;
  std::vector<int> indices_;
  std::vector<MPI_Status> statuses_;
  AllreduceAlgorithmChooser algorithm_;  // used under mu_, where every MPI_Iallreduce is made
  std::thread thread_;
};

MpiCollectives::Impl::Impl(MPI_Comm parent, const std::vector<std::string>& tasks, MpiCollectivesOptions options)
    : parent_(parent), options_(options) {
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
  thread_ = std::thread([this] { run(); });
}

MpiCollectives::Impl::~Impl() {
  {
    std::lock_guard lock(mu_);
    stop_ = true;
  }
  wake_.notify_all();
  thread_.join();
  std::vector<OpPtr> left;
  for (auto& [c, op] : ops_) left.push_back(op);
  ops_.clear();
  ready_.clear();
  {
    std::lock_guard g(graveyard_mu);
    for (size_t i = 0; i < requests_.size(); ++i)
      if (requests_[i] != MPI_REQUEST_NULL) graveyard().things.push_back(owners_[i]);
  }
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
        // the progress thread first put one thread hand-off (tens of microseconds on a busy
        // machine) before every collective's first message. The progress thread then tests it.
        if (!resetting_) issue_ready(failed);
      } catch (const FailedPrecondition& e) {
        interrupt(c->key, e.what(), failed);
        error = std::current_exception();
      } catch (...) {
        error = std::current_exception();
      }
    }
  }
  wake_.notify_one();
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
      const bool in_place = c.send.same_as(c.result) || c.send.raw_data() == c.result.raw_data();
      for (auto [off, n] : split_counts(c.result.size(), options_.max_count)) {
        MPI_Request r;
        algorithm_.before(n * static_cast<int64_t>(dtype_size(c.result.dtype())), size_);
        check(MPI_Iallreduce(in_place ? MPI_IN_PLACE : at(c.send, off), at(c.result, off), static_cast<int>(n), type,
                             MPI_SUM, comm_, &r),
              "MPI_Iallreduce");
        add(r, op);
      }
      break;
    }
    case CollectiveKind::kBroadcast: {
      const MPI_Datatype type = mpi_type(c.result.dtype(), c.op);
      for (auto [off, n] : split_counts(c.result.size(), options_.max_count)) {
        MPI_Request r;
        check(MPI_Ibcast(at(c.result, off), static_cast<int>(n), type, c.root_rank, comm_, &r), "MPI_Ibcast");
        add(r, op);
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
      add(r, op);
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
    check(MPI_Iallgatherv(mine ? at(c.send, k * per_round) : c.send.raw_data(), static_cast<int>(mine), type,
                          into.raw_data(), counts.data(), displs.data(), type, comm_, &r),
          "MPI_Iallgatherv");
    add(r, op);
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

bool MpiCollectives::Impl::test(std::vector<OpPtr>& finished) {
  if (requests_.empty()) return false;
  const int n = static_cast<int>(requests_.size());
  indices_.resize(requests_.size());
  statuses_.resize(requests_.size());
  int done = 0;
  const int rc = MPI_Testsome(n, requests_.data(), &done, indices_.data(), statuses_.data());
  if (done == MPI_UNDEFINED || done <= 0) {
    if (rc != MPI_SUCCESS && rc != MPI_ERR_IN_STATUS) {
      // Nothing can be trusted on this communicator any more.
      for (size_t i = 0; i < owners_.size(); ++i)
        if (!owners_[i]->error)
          owners_[i]->error = std::make_exception_ptr(Unavailable("[collective] MPI_Testsome failed: " + mpi_error_string(rc)));
    }
    return false;
  }
  std::vector<OpPtr> completed;
  for (int k = 0; k < done; ++k) {
    const auto i = static_cast<size_t>(indices_[static_cast<size_t>(k)]);
    const OpPtr& op = owners_[i];
    const int error = rc == MPI_ERR_IN_STATUS ? statuses_[static_cast<size_t>(k)].MPI_ERROR : MPI_SUCCESS;
    if (error != MPI_SUCCESS && !op->error)
      op->error = std::make_exception_ptr(Unavailable("[" + op->c->op + "] " + op->c->key.to_string() +
                                                      ": MPI failed: " + mpi_error_string(error)));
    if (--op->outstanding == 0) completed.push_back(op);
  }
  size_t w = 0;
  for (size_t r = 0; r < requests_.size(); ++r) {
    if (requests_[r] == MPI_REQUEST_NULL) continue;
    requests_[w] = requests_[r];
    owners_[w] = std::move(owners_[r]);
    ++w;
  }
  requests_.resize(w);
  owners_.resize(w);
  for (const OpPtr& op : completed) complete(op, finished);
  return true;
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

void MpiCollectives::Impl::run() {
  ProgressPacer::shorten_timer_slack();
  // A collective in flight is polled through with yields for its first millisecond, not 200 us:
  // a 1 MiB all-reduce between 2 processes takes 0.11 ms, or 0.35 ms while this VM's shared-memory
  // copies are slow, and each of libnbc's rounds waits for a poll. Measured (bench_data_parallel,
  // 2 ranks): 0.35 ms instead of 0.52 in the slow state. Nothing in flight: the thread sleeps.
  ProgressPacer pacer{std::chrono::milliseconds(1)};
  std::vector<OpPtr> finished;
  while (true) {
    std::unique_lock lock(mu_);
    if (stop_) return;
    bool busy = false;
    if (!resetting_) {
      busy |= issue_ready(finished);
      busy |= test(finished);
    }
    const bool in_flight = !requests_.empty() && !resetting_;
    const bool waiting = !ready_.empty();
    lock.unlock();
    for (const OpPtr& op : finished) op->c->done(op->error);
    finished.clear();
    if (busy) {
      pacer.traffic();
      continue;
    }
    if ((in_flight || waiting) && pacer.yield_now()) {
      std::this_thread::yield();
      continue;
    }
    lock.lock();
    if (stop_) return;
    if (!in_flight) {
      // Nothing MPI must progress: sleep until a collective is started (bounded, to be safe).
      // start() issues on its own thread and then notifies: the predicate sees a collective issued
      // between this thread's last look and its wait, which a bare wait_for slept through.
      wake_.wait_for(lock, std::chrono::milliseconds(100),
                     [&] { return stop_ || (!resetting_ && !requests_.empty()); });
      // Woken by a start: poll it through as after traffic. (Napping first, as after other
      // wake-ups, added 20 us to each of its rounds: 0.16 ms for a 1 MiB all-reduce, not 0.115.)
      if (!requests_.empty()) pacer.traffic();
      else pacer.woke_from_sleep();
      continue;
    }
    // A long collective's naps grow with its time in flight, so that it takes little from the
    // computation it overlaps.
    wake_.wait_for(lock, pacer.nap(/*in_flight=*/false));
  }
}

bool MpiCollectives::Impl::poll() {
  std::vector<OpPtr> finished;
  bool issued = false, tested = false;
  {
    std::unique_lock lock(mu_, std::try_to_lock);
    if (!lock.owns_lock() || stop_ || resetting_ || (requests_.empty() && ready_.empty())) return false;
    issued = issue_ready(finished);
    tested = test(finished);
  }
  if (issued) wake_.notify_one();  // the progress thread tests what this thread may stop testing
  for (const OpPtr& op : finished) op->c->done(op->error);
  return issued || tested;
}

void MpiCollectives::Impl::reset(std::chrono::milliseconds timeout) {
  std::lock_guard serial(reset_mu_);
  std::vector<OpPtr> dropped;
  {
    std::lock_guard lock(mu_);
    resetting_ = true;
    for (auto& [c, op] : ops_)
      if (!op->abandoned) dropped.push_back(op);
    {
      // What MPI may still touch (the old communicator's requests and buffers) is kept until exit.
      std::lock_guard g(graveyard_mu);
      for (size_t i = 0; i < requests_.size(); ++i) {
        graveyard().requests.push_back(requests_[i]);
        graveyard().things.push_back(owners_[i]);
      }
      graveyard().comms.push_back(comm_);
    }
    requests_.clear();
    owners_.clear();
    ops_.clear();
    ready_.clear();
    blocked_ = nullptr;
    order_.reset();
    comm_ = MPI_COMM_NULL;
  }
  for (const OpPtr& op : dropped)
    op->c->done(std::make_exception_ptr(
        FailedPrecondition("[" + op->c->op + "] " + op->c->key.to_string() + ": the collectives were reset")));
  MPI_Comm fresh = MPI_COMM_NULL;
  MPI_Request r = MPI_REQUEST_NULL;
  int rc = MPI_Comm_idup(parent_, &fresh, &r);
  std::string failure;
  if (rc != MPI_SUCCESS) failure = "MPI_Comm_idup failed: " + mpi_error_string(rc);
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  const auto begun = std::chrono::steady_clock::now();
  while (failure.empty()) {
    int flag = 0;
    rc = MPI_Test(&r, &flag, MPI_STATUS_IGNORE);
    if (rc != MPI_SUCCESS) failure = "MPI_Comm_idup failed: " + mpi_error_string(rc);
    if (flag) break;
    if (std::chrono::steady_clock::now() > deadline) {
      failure = "not every task took part within " + std::to_string(timeout.count()) + " ms";
      std::lock_guard g(graveyard_mu);
      graveyard().requests.push_back(r);  // MPI may still complete it: never freed
      break;
    }
    if (std::chrono::steady_clock::now() - begun < std::chrono::microseconds(200)) std::this_thread::yield();
    else std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  std::lock_guard lock(mu_);
  resetting_ = false;
  if (!failure.empty()) {
    interrupted_ = "the last reset failed: " + failure;
    throw Unavailable("[collective] reset: " + failure);
  }
  MPI_Comm_set_errhandler(fresh, MPI_ERRORS_RETURN);
  comm_ = fresh;
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
bool MpiCollectives::poll() { return impl_->poll(); }

}  // namespace weft
