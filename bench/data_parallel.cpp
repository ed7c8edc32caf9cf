// Data-parallel training and its all-reduce, under mpirun (scripts/bench runs it with 2, then 1
// and 4 ranks; the all-reduce rows need 2):
//   mpirun --allow-run-as-root --oversubscribe -np 2 ./bench/bench_data_parallel
// of 1 MiB and 64 MiB of float32, three ways in one run:
// - raw MPI_Allreduce between preallocated buffers (the peer), and raw MPI_Iallreduce + MPI_Wait;
// - weft's collective executor called directly on each rank (the kernel's path: the MPI stage,
//   its ordering and the MPI progress engine, a fresh output buffer per call);
// - a graph with one CollectiveAllReduce on each task, run by the chief's Session (the above plus
//   the step's control messages and executors).
// Median of repeats, each started together on both ranks (a barrier for the first two; the
// Session's step start for the third). Goal: weft <= 1.1x raw MPI.
#include <mpi.h>

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <future>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/peer_runner.h"
#include "api/weft/weft.h"
#include "comm/collective_executor.h"
#include "comm/mpi_collectives.h"
#include "runtime/device.h"
#include "runtime/npy.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::median;
using weft::bench::Row;

namespace {

int repeats_for(int64_t n) { return n > (1 << 20) ? 15 : 200; }

// `nonblocking`: MPI_Iallreduce and MPI_Wait, the calls weft makes (Open MPI runs them through
// another component than the blocking MPI_Allreduce).
double raw_mpi(int64_t n, bool nonblocking) {
  std::vector<float> in(static_cast<size_t>(n), 1.f), out(static_cast<size_t>(n));
  auto once = [&] {
    if (!nonblocking) {
      MPI_Allreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD);
      return;
    }
    MPI_Request r;
    MPI_Iallreduce(in.data(), out.data(), static_cast<int>(n), MPI_FLOAT, MPI_SUM, MPI_COMM_WORLD, &r);
    MPI_Wait(&r, MPI_STATUS_IGNORE);
  };
  once();  // warm
  std::vector<double> times;
  for (int r = 0; r < repeats_for(n); ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    once();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(times);
}

double executor_path(CollectiveExecutor& ex, const CollectiveParams& p, int64_t n, int64_t& step) {
  const Tensor input = ones({n});
  std::vector<double> times;
  for (int r = -1; r < repeats_for(n); ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    std::promise<std::exception_ptr> done;
    ex.run_async(p, step++, {input}, nullptr, [&](std::exception_ptr e, std::vector<Tensor>) { done.set_value(e); });
    if (auto e = done.get_future().get()) std::rethrow_exception(e);
    if (r >= 0) times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
  }
  return median(times);
}

std::string ms(double s) { return fmt("%.3f ms", s * 1e3); }

// The training benchmark: an MLP 784-128x3-10, 256 rows per replica, SGD, one replica
// per rank, against TensorFlow's MultiWorkerMirroredStrategy and PyTorch DDP (gloo) with as many
// workers, run from the chief after weft's steps (bench/peers/).
void training_rows(const Cluster& cluster, int ranks) {
  distribute::DataParallel dp(cluster);
  const int64_t per_replica = 256, global = per_replica * dp.num_replicas();
  random::set_seed(1);
  nn::Sequential model{nn::Dense(128, nn::relu), nn::Dense(128, nn::relu), nn::Dense(128, nn::relu), nn::Dense(10)};
  optim::SGD sgd(0.01);
  auto step = dp.function([&](Tensor x, Tensor y) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
    auto vars = model.trainable_variables();
    sgd.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  });
  auto time_steps = [](auto&& one_step) {
    for (int i = 0; i < 10; ++i) one_step();
    std::vector<double> times;
    for (int i = 0; i < 60; ++i) {
      const auto t0 = std::chrono::steady_clock::now();
      one_step();
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    return median(times);
  };
  // The global batch relayed by the chief: it splits it and sends each replica its rows.
  const Tensor x = random::normal({global, 784}, 0, 1, 2);
  const Tensor y = cast(random::uniform({global}, 0, 9.999, 3), int32);
  const double relayed_step = time_steps([&] { (void)step(x, y).item<float>(); });
  // Each replica reads its rows where it runs (as each TensorFlow worker holds its own batch):
  // .npy files of 8 global batches, in /tmp, which every rank of this machine sees.
  const std::string dir = "/tmp/weft_bench_dp_" + std::to_string(::getpid());
  std::filesystem::create_directories(dir);
  save_npy(dir + "/x.npy", random::normal({global * 8, 784}, 0, 1, 4));
  save_npy(dir + "/y.npy", cast(random::uniform({global * 8}, 0, 9.999, 5), int32));
  auto input = data::ShardedInput::npy(dir + "/x.npy", dir + "/y.npy", global);
  const double weft_step = time_steps([&] { (void)step(input).item<float>(); });
  if (const char* trace = std::getenv("WEFT_BENCH_TRACE")) {
    profiler::start();
    for (int i = 0; i < 5; ++i) (void)step(input).item<float>();
    profiler::stop(trace);
  }
  std::filesystem::remove_all(dir);

  std::vector<Row> rows;
  const std::string n = std::to_string(ranks);
  auto peer = [&](const char* label, const char* python_var, const char* script, const char* goal, double goal_ratio) {
    std::string why;
    const std::string python = weft::bench::peer_python(python_var);
    std::optional<std::map<std::string, double>> r;
    if (!python.empty())
      r = weft::bench::run_python_peer(python, weft::bench::peer_script(script),
                                       {"--workers", n, "--steps", "40", "--batch-per-replica", "256", "--timeout", "280"},
                                       300, &why);
    else
      why = std::string(python_var) + " is not set (scripts/bench sets it)";
    if (r && r->contains("step_ms")) {
      const double peer_s = r->at("step_ms") / 1e3;
      rows.push_back({"DP step, " + n + " ranks", ms(weft_step), std::string(label) + " " + ms(peer_s),
                      fmt("%.2fx", weft_step / peer_s), goal_ratio > 0 ? goal : ""});
      rows.push_back({"DP step, batch relayed by the chief", ms(relayed_step), std::string(label) + " " + ms(peer_s),
                      fmt("%.2fx", relayed_step / peer_s), ""});
      rows.push_back({"images/s, " + n + " ranks", fmt("%.0f", static_cast<double>(global) / weft_step),
                      std::string(label) + " " + fmt("%.0f", static_cast<double>(global) / peer_s), "", ""});
    } else {
      rows.push_back({"DP step, " + n + " ranks", ms(weft_step), std::string(label) + " n/a", "", why});
      rows.push_back({"DP step, batch relayed by the chief", ms(relayed_step), std::string(label) + " n/a", "", ""});
    }
  };
  peer("TF MWMS", "WEFT_BENCH_PYTHON", "tf_multiworker.py", "<= 0.35x TF (2 ranks)", ranks == 2 ? 0.35 : 0);
  peer("torch DDP", "WEFT_BENCH_TORCH_PYTHON", "torch_ddp.py", "", 0);
  weft::bench::print_table("Data-parallel training step: MLP 784-128x3-10, 256 rows per replica, SGD, " + n +
                               " ranks (median of 60 steps; each replica reads its rows where it runs, as each TensorFlow "
                               "and PyTorch worker holds its own batch; the relayed row: the chief splits one global batch)",
                           rows);
}

}  // namespace

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  // The all-reduce rows compare 2 ranks; the training rows run on any number of ranks.
  const std::vector<int64_t> sizes =
      size == 2 ? std::vector<int64_t>{int64_t{1} << 18, int64_t{1} << 24} : std::vector<int64_t>{};  // 1, 64 MiB
  std::vector<double> raw, raw_nb, direct;
  if (size == 2) {
    // The executor on its own, before the cluster starts (every rank runs this part).
    set_local_task("worker", rank);
    MPI_Comm parent;
    MPI_Comm_dup(MPI_COMM_WORLD, &parent);
    std::vector<std::string> tasks = {"/job:worker/replica:0/task:0", "/job:worker/replica:0/task:1"};
    CollectiveExecutor ex(std::make_unique<MpiCollectives>(parent, tasks));
    CollectiveParams p;
    p.op = "collective_all_reduce";
    p.group_key = 1;
    p.members = {tasks[0] + "/device:CPU:0", tasks[1] + "/device:CPU:0"};
    p.member = rank;
    int64_t step = 1;
    for (int64_t n : sizes) {
      raw.push_back(raw_mpi(n, false));
      raw_nb.push_back(raw_mpi(n, true));
      direct.push_back(executor_path(ex, p, n, step));
    }
  }
  Cluster cluster = cluster::init(argc, argv);  // rank 1 serves from here on
  std::vector<Row> rows;
  for (size_t i = 0; i < sizes.size(); ++i) {
    const int64_t n = sizes[i];
    Graph g;
    std::vector<Tensor> reduced;
    {
      GraphScope scope(g);
      CollectiveGroup group{.key = 2};
      for (int t = 0; t < 2; ++t) group.members.push_back(cluster.task_names()[static_cast<size_t>(t)] + "/device:CPU:0");
      for (int t = 0; t < 2; ++t) {
        DeviceScope on(group.members[static_cast<size_t>(t)]);
        Variable v(ones({n}), "grad" + std::to_string(t));
        reduced.push_back(collective::all_reduce(v.value(), group, t));
      }
    }
    Session sess(g, cluster);
    std::vector<OperationRef> targets(reduced.begin(), reduced.end());
    (void)sess.run({}, {}, targets);  // registration, variables
    std::vector<double> times;
    for (int r = 0; r < repeats_for(n); ++r) {
      const auto t0 = std::chrono::steady_clock::now();
      (void)sess.run({}, {}, targets);
      times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    const double session = median(times);
    const std::string size_name = n == (int64_t{1} << 18) ? "1 MiB" : "64 MiB";
    rows.push_back({"all-reduce " + size_name + ", raw MPI_Iallreduce+Wait", ms(raw_nb[i]), "MPI " + ms(raw[i]),
                    fmt("%.2fx", raw_nb[i] / raw[i]), "-"});
    rows.push_back({"all-reduce " + size_name + ", executor (kernel path)", ms(direct[i]), "MPI " + ms(raw[i]),
                    fmt("%.2fx", direct[i] / raw[i]), "<= 1.1x"});
    rows.push_back({"all-reduce " + size_name + ", Session step", ms(session), "MPI " + ms(raw[i]),
                    fmt("%.2fx", session / raw[i]), "<= 1.1x"});
  }
  if (!rows.empty())
    weft::bench::print_table("All-reduce of float32 between 2 ranks on this machine (median of repeats)", rows);
  training_rows(cluster, size);
  return 0;
}
