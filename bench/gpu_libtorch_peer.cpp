// libtorch (C++, CUDA) on the GPU: the peer of bench/gpu.cpp's eager and training rows, without
// Python's per-call overhead. Debian's libtorch has no CUDA, so bench/gpu_libtorch_peer.sh builds
// this on the GPU machine against the libtorch inside python3's torch wheel.
//   eager relu(a + b) on 4-element GPU tensors, per call
//   the MLP training step (784-128x3-10, batch 256, SGD, cross-entropy), eager
// Timing as bench/gpu.cpp: a batch of calls, then a synchronisation, best of several rounds.
#include <torch/torch.h>

#include <algorithm>
#include <chrono>
#include <cstdio>

namespace {

template <class F>
double best_seconds_per_call(F&& f, int calls, int rounds) {
  double best = 1e30;
  for (int r = 0; r < rounds; ++r) {
    torch::cuda::synchronize();
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) f();
    torch::cuda::synchronize();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best / calls;
}

}  // namespace

int main() {
  if (!torch::cuda::is_available()) {
    std::printf("libtorch: no CUDA device\n");
    return 0;
  }
  const torch::Device dev(torch::kCUDA, 0);
  {
    torch::NoGradGuard no_grad;  // as weft's eager ops outside a GradientTape
    const auto a = torch::tensor({1.f, -2.f, 3.f, -4.f}).to(dev), b = torch::tensor({.5f, .5f, -5.f, 5.f}).to(dev);
    best_seconds_per_call([&] { (void)torch::relu(a + b); }, 2000, 1);  // warm-up
    const double s = best_seconds_per_call([&] { (void)torch::relu(a + b); }, 20000, 5);
    std::printf("libtorch eager relu(a + b), 4 floats, per call: %.2f us\n", s * 1e6);
  }
  {
    torch::manual_seed(0);
    torch::nn::Sequential model(torch::nn::Linear(784, 128), torch::nn::ReLU(), torch::nn::Linear(128, 128),
                                torch::nn::ReLU(), torch::nn::Linear(128, 128), torch::nn::ReLU(),
                                torch::nn::Linear(128, 10));
    model->to(dev);
    torch::optim::SGD opt(model->parameters(), torch::optim::SGDOptions(0.01));
    const auto x = torch::randn({256, 784}, dev), y = torch::randint(0, 10, {256}, torch::TensorOptions(dev).dtype(torch::kLong));
    auto step = [&] {
      opt.zero_grad(true);
      auto loss = torch::nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      opt.step();
    };
    best_seconds_per_call(step, 20, 1);
    const double s = best_seconds_per_call(step, 100, 5);
    std::printf("libtorch eager MLP 784-128x3-10 step, batch 256: %.3f ms\n", s * 1e3);
  }
  return 0;
}
