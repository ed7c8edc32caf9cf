// One eager training step of an MLP 784-128-128-128-10 on a batch of 256 (forward, backward,
// SGD update), weft against the same model in libtorch, in one run. libtorch gets its best of
// 1 and 2 intra-op threads. weft's peak memory per step is read from its allocator.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "bench/weft_mlp.h"
#include "runtime/allocator.h"
#include "weft/weft.h"

#ifdef WEFT_HAVE_TORCH
#include <torch/torch.h>
#endif

using namespace weft;
using weft::bench::fmt;

namespace {

using bench::WeftMlp;
constexpr int64_t kBatch = bench::kMlpBatch;

}  // namespace

int main(int argc, char** argv) {
  const bool with_peer = !(argc > 1 && std::string(argv[1]) == "--no-peer");
  Tensor x = random::normal({kBatch, 784}, 0, 1, 1);
  Tensor y = cast(mul(random::uniform({kBatch}, 0, 10, 2), 1.f), int32);
  WeftMlp model;
  const int calls = 200;
  auto& alloc = CpuAllocator::instance();
  model.step(x, y);
  alloc.reset_peak();
  int64_t base = alloc.stats().bytes_in_use;
  model.step(x, y);
  int64_t peak = alloc.stats().peak_bytes_in_use - base;
  double w = bench::seconds_per_call([&] { model.step(x, y); }, calls);

  std::vector<weft::bench::Row> rows;
  std::string peer = "n/a", ratio = "n/a";
#ifdef WEFT_HAVE_TORCH
  if (with_peer) {
  double best = 1e30;
  int best_threads = 0;
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    torch::manual_seed(0);
    torch::nn::Sequential net(torch::nn::Linear(784, 128), torch::nn::ReLU(), torch::nn::Linear(128, 128),
                              torch::nn::ReLU(), torch::nn::Linear(128, 128), torch::nn::ReLU(),
                              torch::nn::Linear(128, 10));
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
    auto tx = torch::randn({kBatch, 784});
    auto ty = torch::randint(0, 10, {kBatch}, torch::kLong);
    double t = bench::seconds_per_call([&] {
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(tx), ty);
      loss.backward();
      opt.step();
      (void)loss.item<float>();
    }, calls);
    if (t < best) {
      best = t;
      best_threads = threads;
    }
  }
  peer = "libtorch " + fmt("%.3f ms", best * 1e3) + " (" + std::to_string(best_threads) + " thr)";
  ratio = fmt("%.2fx torch", w / best);
  }
#endif
  rows.push_back({"MLP 784-128-128-128-10, batch 256, step", fmt("%.3f ms", w * 1e3), peer, ratio, "<= 0.8x libtorch"});
  rows.push_back({"weft peak memory per step", fmt("%.2f MB", peak / 1e6), "", "", "reported"});
  weft::bench::print_table("eager training step (forward + backward + SGD), best of 5 runs", rows);
  return 0;
}
