// The cluster's per-step costs, under mpirun with 4 ranks (a chief and three workers):
//   weft-launch -np 4 ./bench/bench_distributed       (scripts/bench runs it so)
// - a null step: a scalar op on each of three workers, all fetched (goal <= 70 us, 0.05x of
//   TensorFlow's gRPC runtime, which measured 1384 us on this machine type);
// - a 1 MiB tensor fetched from a worker, a variable's value there (goal <= 1.3x raw MPI's
//   one-way time, measured here in the same run before the cluster starts, the same way: mean of
//   a round, best of 5), and 1 MiB fed to a worker and fetched back (against twice that time);
// - an MLP training step with its variables on a worker, loss fetched (goal <= 0.3x
//   TensorFlow's 5.4 ms).
// TensorFlow's numbers are the (its distributed runtime is not run here). A last row times
// raw MPI again between buffers of weft's allocator, which are on huge pages at this size: the
// goal's baseline is raw MPI as plain code has it, and this row says how much the buffers give.
#include <mpi.h>

#include <chrono>
#include <cstdio>
#include <optional>
#include <vector>

#include "bench/bench_util.h"
#include "api/weft/weft.h"
#include "runtime/tensor_internals.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::Row;

namespace {

// Raw MPI: rank 1 sends `bytes` to rank 0, which answers with one byte: the one-way time of the
// payload plus a tiny ack, what a fetch that returns costs at least. Measured as weft's steps are
// (bench_util.h's seconds_per_call): the mean of a round of back-to-back transfers, best of 5
// rounds, so that both sides of a ratio are the same statistic. `best_single` is the fastest
// single transfer, for reference: a minimum over hundreds of samples sits below any mean.
struct RawTime {
  double round_mean = 0;
  double best_single = 0;
};
// `buffer`: where the payload is sent from and received into; null: a std::vector, as plain MPI
// code would have it.
RawTime raw_mpi_one_way(size_t bytes, int rank, char* buffer = nullptr) {
  std::vector<char> plain(buffer ? 0 : bytes), ack(1);
  char* const data = buffer ? buffer : plain.data();
  const int per_round = bytes > 100000 ? 100 : 1000;
  auto transfer = [&] {
    if (rank == 1) {
      MPI_Send(data, static_cast<int>(bytes), MPI_BYTE, 0, 7, MPI_COMM_WORLD);
      MPI_Recv(ack.data(), 1, MPI_BYTE, 0, 8, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    } else if (rank == 0) {
      MPI_Recv(data, static_cast<int>(bytes), MPI_BYTE, 1, 7, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
      MPI_Send(ack.data(), 1, MPI_BYTE, 1, 8, MPI_COMM_WORLD);
    }
  };
  RawTime t{1e30, 1e30};
  for (int i = 0; i < per_round / 10; ++i) transfer();  // warm, as seconds_per_call does
  for (int r = 0; r < 5; ++r) {
    MPI_Barrier(MPI_COMM_WORLD);
    const auto t0 = std::chrono::steady_clock::now();
    auto last = t0;
    for (int i = 0; i < per_round; ++i) {
      transfer();
      const auto now = std::chrono::steady_clock::now();
      t.best_single = std::min(t.best_single, std::chrono::duration<double>(now - last).count());
      last = now;
    }
    t.round_mean = std::min(t.round_mean, std::chrono::duration<double>(last - t0).count() / per_round);
  }
  return t;
}

std::string us(double s) { return fmt("%.1f us", s * 1e6); }

}  // namespace

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 1;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  RawTime raw_small, raw_mib_time, raw_mib_weft_buffer;
  if (size >= 2) {
    raw_small = raw_mpi_one_way(1, rank);
    raw_mib_time = raw_mpi_one_way(1 << 20, rank);
    // The same calls between buffers from weft's allocator, which puts blocks this large on huge
    // pages (runtime/huge_page_blocks.h): how much of weft's time is the buffers' doing.
    Tensor buffer = Tensor::empty(DType::UInt8, Shape{1 << 20});
    raw_mib_weft_buffer = raw_mpi_one_way(1 << 20, rank, static_cast<char*>(raw_data(buffer)));
  }
  const double raw_mib = raw_mib_time.round_mean;
  Cluster cluster = cluster::init(argc, argv);  // workers serve from here on
  if (cluster.num_tasks() < 4) {
    std::fprintf(stderr, "bench_distributed: run it with 4 ranks (mpirun -np 4)\n");
    return 1;
  }
  auto task = [](int t) { return "/job:worker/task:" + std::to_string(t); };
  std::vector<Row> rows;

  {  // Null step.
    Graph g;
    std::vector<Tensor> fetches;
    {
      GraphScope scope(g);
      Tensor x = placeholder(float32, {}, "x");
      for (int t = 1; t <= 3; ++t) {
        DeviceScope on(task(t));
        fetches.push_back(x + static_cast<float>(t));
      }
    }
    Session sess(g, cluster);
    const Tensor one = constant(1.f);
    std::vector<TensorRef> refs(fetches.begin(), fetches.end());
    const double t = weft::bench::seconds_per_call([&] { (void)sess.run({{"x:0", one}}, refs); }, 300);
    rows.push_back({"null step (3 workers, 3 fetches)", us(t), "TF 1384 us", fmt("%.3fx", t / 1384e-6), "<= 0.05x"});
  }
  {  // The measure: 1 MiB fetched from a worker, here a variable's value that lives there
     // (nothing is fed, nothing computed: the step is the request, the tensor and the answer).
    Graph g;
    Tensor big;
    std::optional<Variable> v;
    {
      GraphScope scope(g);
      DeviceScope on(task(1));
      v.emplace(ones({262144}), "big");
      big = v->value();
    }
    Session sess(g, cluster);
    const double t = weft::bench::seconds_per_call([&] { (void)sess.run({}, {big}); }, 100);
    rows.push_back({"1 MiB variable on a worker, fetched", us(t), "raw MPI " + us(raw_mib), fmt("%.2fx", t / raw_mib),
                    "<= 1.3x"});
  }
  {  // 1 MiB to a worker and back.
    Graph g;
    Tensor big;
    {
      GraphScope scope(g);
      Tensor x = placeholder(float32, {262144}, "x");
      DeviceScope on(task(1));
      big = x * 2.f;
    }
    Session sess(g, cluster);
    const Tensor x = ones({262144});
    // The feed travels to the worker too: the step moves 1 MiB each way. Half of it is the fetch.
    const double t = weft::bench::seconds_per_call([&] { (void)sess.run({{"x:0", x}}, {big}); }, 100);
    rows.push_back({"1 MiB to a worker and back", us(t), "raw MPI " + us(2 * raw_mib), fmt("%.2fx", t / (2 * raw_mib)),
                    "<= 1.3x"});
  }
  {  // MLP step with its variables on a worker.
    Graph g;
    nn::Dense l1(128, nn::relu), l2(10);
    optim::SGD sgd(0.01);
    Tensor loss;
    Operation train;
    {
      GraphScope scope(g);
      Tensor x = placeholder(float32, {-1, 784}, "x");
      Tensor y = placeholder(float32, {-1, 10}, "y");
      GradientTape tape;
      Tensor out;
      {
        DeviceScope on(task(1));
        out = l2(l1(x));
      }
      loss = identity(reduce_mean(square(out - y)), "loss");
      std::vector<Variable> vars = l1.trainable_variables();
      for (const Variable& v : l2.trainable_variables()) vars.push_back(v);
      train = sgd.apply_gradients(tape.gradient(loss, vars), vars);
    }
    Session sess(g, cluster);
    const Tensor xs = random::uniform({64, 784}), ys = random::uniform({64, 10});
    const double t =
        weft::bench::seconds_per_call([&] { (void)sess.run({{"x:0", xs}, {"y:0", ys}}, {loss}, {train}); }, 50);
    rows.push_back({"MLP step, variables on a worker", us(t), "TF 5400 us", fmt("%.3fx", t / 5.4e-3), "<= 0.3x"});
  }
  rows.push_back({"raw MPI one way, 1 byte (+1-byte ack)", us(raw_small.round_mean), "-", "-", "-"});
  rows.push_back({"raw MPI one way, 1 MiB (+1-byte ack)", us(raw_mib), "-", "-", "-"});
  rows.push_back({"  the same, fastest single transfer", us(raw_mib_time.best_single), "-", "-", "-"});
  rows.push_back({"  the same between weft's (huge-page) buffers", us(raw_mib_weft_buffer.round_mean), "-", "-", "-"});
  weft::bench::print_table("The cluster, per step (4 ranks on this machine, best of 5 rounds)", rows);
  return 0;
}
