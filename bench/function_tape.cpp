// A traced forward (weft::function) differentiated by a GradientTape outside it, against the
// fully eager forward and backward, on the seed model: Keras-style nn::Sequential Dense 128
// relu, Dense 10 over a 256x784 float batch, sparse softmax cross-entropy. The traced call is one
// op on the tape; its gradient runs a traced backward graph (api/function_gradient.h).
// Pass --quick for fewer repetitions.
#include <chrono>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "runtime/device.h"
#include "weft/weft.h"

using namespace weft;
using weft::bench::fmt;
using weft::bench::Row;

namespace {

std::string us(double s) { return fmt("%.1f us", s * 1e6); }

void run(int64_t batch, int64_t features, int64_t hidden, bool quick) {
  Tensor x = random::normal({batch, features}, 0, 1, 1);
  Tensor y = cast(random::uniform({batch}, 0, 9.99, 2), int32);
  nn::Sequential model{nn::Dense(hidden, nn::relu), nn::Dense(10)};
  (void)model(x, false);  // builds the weights
  const std::vector<Variable> vars = model.trainable_variables();
  int body_runs = 0;
  auto fwd = function([&](Tensor in) {
    ++body_runs;
    return model(in, true);
  });

  auto eager_step = [&] {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
    return tape.gradient(loss, vars);
  };
  auto traced_step = [&] {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(y, fwd(x));
    return tape.gradient(loss, vars);
  };
  // For reference: forward and backward traced together (the tape inside the function).
  auto inside = function([&](Tensor in, Tensor labels) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(labels, model(in, true));
    return tape.gradient(loss, vars);
  });

  // Same gradients both ways.
  float diff = 0;
  {
    std::vector<Tensor> e = eager_step(), t = traced_step();
    for (size_t i = 0; i < e.size(); ++i) diff = std::max(diff, reduce_max(abs(e[i] - t[i])).item<float>());
  }

  // Every variant in alternating rounds, so that all see the same states of a shared machine.
  const int calls = std::max<int>(2, static_cast<int>(2e6 / double(batch * features * hidden))) * (quick ? 1 : 2);
  const int rounds = quick ? 5 : 15;
  std::vector<std::function<void()>> variants = {
      [&] { (void)eager_step(); },
      [&] { (void)traced_step(); },
      [&] { (void)inside(x, y); },
      [&] { (void)model(x, true); },
      [&] { (void)fwd(x); },
      [&] {
        GradientTape tape;
        (void)fwd(x);  // the forward that returns the backward's intermediates, recorded
      },
  };
  std::vector<double> best(variants.size(), 1e30);
  for (auto& v : variants) v();
  for (int r = 0; r < rounds; ++r)
    for (size_t k = 0; k < variants.size(); ++k) {
      auto t0 = std::chrono::steady_clock::now();
      for (int i = 0; i < calls; ++i) variants[k]();
      best[k] = std::min(best[k], std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / calls);
    }
  const double eager = best[0], traced = best[1], both_inside = best[2], fwd_eager = best[3], fwd_traced = best[4],
               fwd_taped = best[5];

  std::vector<Row> rows;
  rows.push_back({"fwd+bwd eager", us(eager), "", "", ""});
  rows.push_back({"fwd+bwd traced fwd, outside tape", us(traced), "eager " + us(eager),
                  fmt("%.2fx eager", traced / eager), "well below eager"});
  rows.push_back({"  reference: tape inside the function", us(both_inside), "eager " + us(eager),
                  fmt("%.2fx eager", both_inside / eager), "report"});
  rows.push_back({"  forward only: eager / traced (no tape)", us(fwd_eager), "traced " + us(fwd_traced),
                  fmt("%.2fx eager", fwd_traced / fwd_eager), "report"});
  rows.push_back({"  forward only, traced under a tape", us(fwd_taped), "traced " + us(fwd_traced),
                  fmt("%.2fx traced", fwd_taped / fwd_traced), "~1x (hidden results)"});
  rows.push_back({"  gradients max |eager - traced|", fmt("%.2g", diff), "", "", "~0"});
  rows.push_back({"  body runs (1: traced once, never eager)", fmt("%.0f", body_runs), "", "", "1"});
  weft::bench::print_table("Dense " + std::to_string(hidden) + " relu, Dense 10, batch " + std::to_string(batch) + "x" +
                               std::to_string(features) + ", sparse softmax CE (best of several rounds)",
                           rows);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  std::printf("weft traced forward under an outside tape: %d physical cores\n", host_topology().physical_cores);
  run(256, 784, 128, quick);  // the seed model: GEMM-bound, both modes run the same GEMMs
  run(32, 64, 32, quick);     // a small MLP, where per-op overhead dominates
  return 0;
}
