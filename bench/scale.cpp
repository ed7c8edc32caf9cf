// The chief's per-step cost as the task count grows (docs/scale.md), under any number of ranks:
//   for n in 2 4 8 16 32; do build-release/tools/weft-launch -np $n build-release/bench/bench_scale; done
// Each row twice in the same run, in alternating rounds: with the step tree (cluster/step_tree.h,
// fan-out WEFT_STEP_FANOUT or 8) and flat (the chief sends every task its step and hears every
// answer itself, as before the tree):
// - a null step over every task: a scalar op on each task but the chief, every result fetched;
// - the chief process's CPU time per step of each (all its threads);
// - a data-parallel step: the benchmarks' MLP (784-128x3-10, relu, SGD), 256 rows per replica,
//   each replica reading its rows where it runs; and the first call of a DataParallel function
//   (traced, compiled for every replica, partitions shipped to every task), the job's first (which
//   also warms the job up) and another's;
// On a machine with fewer cores than ranks the tasks share the cores (weft-launch oversubscribes):
// the times then include the tasks waiting for a core, and say how the step's messages scale only
// in part; the messages the chief sends per step say the rest.
#include <time.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "api/weft/weft.h"
#include "bench/bench_util.h"
#include "cluster/cluster_runtime.h"
#include "runtime/npy.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::median;
using weft::bench::Row;

namespace {

double process_cpu_seconds() {
  timespec ts{};
  clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) * 1e-9;
}

// Per call: the wall time, and the CPU time of the chief's process (every thread of it: the
// caller, the progress engine's, the executor's).
struct Cost {
  double wall = 0, chief_cpu = 0;
};

// The medians over `rounds` rounds of `calls` calls, alternating between the two.
template <class F, class G>
std::pair<Cost, Cost> alternating_medians(F&& tree, G&& flat, int calls, int rounds) {
  auto round = [calls](auto& fn) {
    const double cpu0 = process_cpu_seconds();
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) fn();
    return Cost{std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls,
                (process_cpu_seconds() - cpu0) / calls};
  };
  std::vector<double> tw, tc, fw, fc;
  for (int r = 0; r < rounds; ++r) {
    const Cost t = round(tree), f = round(flat);
    tw.push_back(t.wall);
    tc.push_back(t.chief_cpu);
    fw.push_back(f.wall);
    fc.push_back(f.chief_cpu);
  }
  return {{median(tw), median(tc)}, {median(fw), median(fc)}};
}

std::string us(double s) { return fmt("%.1f us", s * 1e6); }
std::string ms(double s) { return fmt("%.3f ms", s * 1e3); }

}  // namespace

int main(int argc, char** argv) {
  Cluster cluster = cluster::init(argc, argv);  // workers serve from here on
  const int n = cluster.num_tasks();
  ClusterRuntime* runtime = chief_runtime();
  if (n < 2 || runtime == nullptr) {
    std::fprintf(stderr, "bench_scale: run it with 2 or more ranks (weft-launch -np N)\n");
    return 1;
  }
  const int fan_out = runtime->step_fan_out;
  // Graphs read the fan-out when they are registered: each Session and DataParallel below is
  // made with the one it is to use.
  auto with_fan_out = [&](int k, auto&& make) {
    runtime->step_fan_out = k;
    auto made = make();
    runtime->step_fan_out = fan_out;
    return made;
  };
  std::vector<Row> rows;
  const std::string tasks = std::to_string(n) + " tasks";

  {  // Null step over every task.
    Graph g;
    std::vector<Tensor> fetches;
    {
      GraphScope scope(g);
      Tensor x = placeholder(float32, {}, "x");
      for (int t = 1; t < n; ++t) {
        DeviceScope on("/job:worker/task:" + std::to_string(t));
        fetches.push_back(x + static_cast<float>(t));
      }
    }
    std::vector<TensorRef> refs(fetches.begin(), fetches.end());
    const Tensor one = constant(1.f);
    auto tree = with_fan_out(fan_out, [&] { return std::make_unique<Session>(g, cluster); });
    auto flat = with_fan_out(n, [&] { return std::make_unique<Session>(g, cluster); });
    const uint64_t sent0 = runtime->step_messages_sent.load();
    (void)tree->run({{"x:0", one}}, refs);
    const uint64_t per_step = runtime->step_messages_sent.load() - sent0;
    const int calls = std::max(5, 2000 / (n * n));
    const auto [t_tree, t_flat] = alternating_medians([&] { (void)tree->run({{"x:0", one}}, refs); },
                                                      [&] { (void)flat->run({{"x:0", one}}, refs); }, calls, 15);
    rows.push_back({"null step, " + tasks + ", tree", us(t_tree.wall), "flat " + us(t_flat.wall),
                    fmt("%.2fx", t_tree.wall / t_flat.wall),
                    fmt("%.0f", static_cast<double>(per_step)) + fmt(" vs %.0f msgs", n - 1.0)});
    rows.push_back({"  chief's CPU per null step", us(t_tree.chief_cpu), "flat " + us(t_flat.chief_cpu),
                    fmt("%.2fx", t_tree.chief_cpu / t_flat.chief_cpu), ""});
  }
  {  // Data-parallel step.
    const int64_t per_replica = 256;
    const std::string dir = "/tmp/weft_bench_scale_" + std::to_string(::getpid());
    std::filesystem::create_directories(dir);
    auto training_step = [](nn::Sequential& model, optim::SGD& sgd) {
      return [&model, &sgd](Tensor x, Tensor y) {
        GradientTape tape;
        Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
        auto vars = model.trainable_variables();
        sgd.apply_gradients(tape.gradient(loss, vars), vars);
        return loss;
      };
    };
    auto mlp = [] {
      return nn::Sequential{nn::Dense(128, nn::relu), nn::Dense(128, nn::relu), nn::Dense(128, nn::relu), nn::Dense(10)};
    };
    distribute::DataParallel dp_tree(cluster), dp_flat(cluster);
    nn::Sequential model_tree = mlp(), model_flat = mlp();
    optim::SGD sgd_tree(0.01), sgd_flat(0.01);
    auto step_tree = dp_tree.function(training_step(model_tree, sgd_tree));
    auto step_flat = dp_flat.function(training_step(model_flat, sgd_flat));
    const int64_t global = per_replica * dp_tree.num_replicas();
    save_npy(dir + "/x.npy", random::normal({global * 4, 784}, 0, 1, 4));
    save_npy(dir + "/y.npy", cast(random::uniform({global * 4}, 0, 9.999, 5), int32));
    auto input = data::ShardedInput::npy(dir + "/x.npy", dir + "/y.npy", global);
    // The first call traces and registers the graph: with the fan-out each is to use.
    const auto first0 = std::chrono::steady_clock::now();
    with_fan_out(fan_out, [&] { return step_tree(input).item<float>(); });
    const double first_tree = std::chrono::duration<double>(std::chrono::steady_clock::now() - first0).count();
    const auto first1 = std::chrono::steady_clock::now();
    with_fan_out(n, [&] { return step_flat(input).item<float>(); });
    const double first_flat = std::chrono::duration<double>(std::chrono::steady_clock::now() - first1).count();
    const auto [t_tree, t_flat] = alternating_medians([&] { (void)step_tree(input).item<float>(); },
                                                      [&] { (void)step_flat(input).item<float>(); }, 3, 9);
    std::filesystem::remove_all(dir);
    rows.push_back({"DP step, " + tasks + ", tree", ms(t_tree.wall), "flat " + ms(t_flat.wall),
                    fmt("%.2fx", t_tree.wall / t_flat.wall), fmt("%.0f replicas", static_cast<double>(dp_tree.num_replicas()))});
    // The first ever also warms the job up (MPI's connections between the tasks, the collectives'
    // communicator, thread pools); the second is what each new DataParallel function costs.
    rows.push_back({"  job's first DP step (warm-up too)", ms(first_tree), "", "", ""});
    rows.push_back({"  another DP function's first step", ms(first_flat), "", "", "trace, compile, ship"});
    rows.push_back({"  chief's CPU per DP step", ms(t_tree.chief_cpu), "flat " + ms(t_flat.chief_cpu),
                    fmt("%.2fx", t_tree.chief_cpu / t_flat.chief_cpu), ""});
  }
  weft::bench::print_table("The step's cost at " + tasks + " (fan-out " + std::to_string(fan_out) +
                               "; median of alternating rounds; " +
                               std::to_string(std::thread::hardware_concurrency()) + " cores here)",
                           rows);
  return 0;
}
