// A data-parallel job killed and restarted from its last checkpoint continues with the losses of
// an uninterrupted one. Run by data_parallel_restart_test.sh under mpirun:
//
//   data_parallel_restart DIR run 10        # 10 steps, printing "step i loss L"
//   data_parallel_restart DIR die-after 7   # checkpoint every 3 steps, then SIGKILL at step 7
//   data_parallel_restart DIR resume 10     # restore DIR/ckpt.safetensors, go on to step 10
//   data_parallel_restart DIR preemptible 30 100
//       # a CheckpointManager in DIR/preempt resumes from its newest checkpoint, if any, and a
//       # PreemptionCheckpoint saves there when a task gets SIGTERM; 100 ms between steps, so a
//       # test's signal lands mid-training (preemption_restart_test.sh)
//
// Each replica reads its rows of every global batch itself, from .npy files (a ShardedInput, 100
// examples in batches of 16: uneven shards, and epochs that end mid-run). On restart the input is
// put back at the optimizer's iteration count (saved in the checkpoint), before the first step,
// and every task reads on from there.
#include <signal.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <thread>

#include "api/weft/weft.h"
#include "runtime/npy.h"

using namespace weft;

int main(int argc, char** argv) {
  // Where a test finds each task to signal it: DIR/pid.RANK.
  if (const char* rank = std::getenv("OMPI_COMM_WORLD_RANK"); rank && argc >= 2)
    if (std::FILE* f = std::fopen((std::string(argv[1]) + "/pid." + rank).c_str(), "w")) {
      std::fprintf(f, "%d\n", static_cast<int>(::getpid()));
      std::fclose(f);
    }
  Cluster cluster = cluster::init(argc, argv);
  if (argc != 4 && !(argc == 5 && std::string(argv[2]) == "preemptible")) {
    std::fprintf(stderr, "usage: data_parallel_restart DIR run|die-after|resume STEPS | DIR preemptible STEPS [SLEEP_MS]\n");
    return 2;
  }
  const std::string dir = argv[1], mode = argv[2];
  const int steps = std::stoi(argv[3]);
  const std::string path = dir + "/ckpt.safetensors";

  // The data, written once by the first run (the files are on every task's disk: one machine).
  const std::string features = dir + "/x.npy", labels = dir + "/y.npy";
  if (mode == "run") {
    save_npy(features, random::normal({100, 12}, 0, 1, 100));
    save_npy(labels, cast(random::uniform({100}, 0, 4.999, 200), int32));
  }
  auto input = data::ShardedInput::npy(features, labels, 16).shuffle(3).source("restart_input");

  random::set_seed(7);
  nn::Sequential model{nn::Dense(32, nn::relu), nn::Dense(5)};
  optim::Adam adam(0.01);
  distribute::DataParallel dp(cluster);
  auto step = dp.function([&](Tensor x, Tensor y) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
    auto vars = model.trainable_variables();
    adam.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  });
  Checkpoint ckpt({{"model", model}, {"optimizer", adam}});
  if (mode == "preemptible") {
    CheckpointManager manager(ckpt, dir + "/preempt", 2);
    if (const std::string from = manager.restore_or_initialize(); !from.empty()) {
      input.set_position(0, adam.iterations());
      std::fprintf(stderr, "resumed from %s at step %lld\n", from.c_str(), static_cast<long long>(adam.iterations()));
    }
    distribute::PreemptionCheckpoint preemption(manager);
    const auto pause = std::chrono::milliseconds(argc == 5 ? std::stoi(argv[4]) : 0);
    for (int i = static_cast<int>(adam.iterations()); i < steps; ++i) {
      const float loss = step(input).item<float>();
      std::printf("step %d loss %.9g\n", i, static_cast<double>(loss));
      std::fflush(stdout);
      std::this_thread::sleep_for(pause);
      preemption.save_if_preempted();
    }
    return 0;
  }
  if (mode == "resume") ckpt.restore(path);
  if (mode == "resume") input.set_position(0, adam.iterations());
  for (int i = static_cast<int>(adam.iterations()); i < steps; ++i) {
    const float loss = step(input).item<float>();
    std::printf("step %d loss %.9g\n", i, static_cast<double>(loss));
    std::fflush(stdout);
    if (mode == "die-after" && (i + 1) % 3 == 0) ckpt.save(path);
    if (mode == "die-after" && i + 1 == steps) ::kill(::getpid(), SIGKILL);  // steps after the checkpoint are lost
  }
  return 0;
}
