// All-reduce, the collective of data-parallel training, under mpirun with 2 ranks:
//   mpirun --allow-run-as-root --oversubscribe -np 2 ./bench/bench_data_parallel
// of 1 MiB and 64 MiB of float32, three ways in one run:
// - raw MPI_Allreduce between preallocated buffers (the peer), and raw MPI_Iallreduce + MPI_Wait;
// - weft's collective executor called directly on each rank (the kernel's path: the MPI stage,
//   its ordering and progress thread, a fresh output buffer per call);
// - a graph with one CollectiveAllReduce on each task, run by the chief's Session (the above plus
//   the step's control messages and executors).
// Median of repeats, each started together on both ranks (a barrier for the first two; the
// Session's step start for the third). Goal: weft <= 1.1x raw MPI.
#include <mpi.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <future>
#include <vector>

#include "bench/bench_util.h"
#include "api/weft/weft.h"
#include "comm/collective_executor.h"
#include "comm/mpi_collectives.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::Row;

namespace {

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

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

}  // namespace

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  if (size != 2) {
    if (rank == 0) std::fprintf(stderr, "bench_data_parallel: run it with 2 ranks (mpirun -np 2)\n");
    MPI_Finalize();
    return 1;
  }
  const std::vector<int64_t> sizes = {int64_t{1} << 18, int64_t{1} << 24};  // 1 MiB, 64 MiB of float32
  std::vector<double> raw, raw_nb, direct;
  {
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
  weft::bench::print_table("All-reduce of float32 between 2 ranks on this machine (median of repeats)", rows);
  return 0;
}
