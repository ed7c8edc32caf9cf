// Eager against traced (weft::function), with libtorch eager beside them in the same run: the
// experiments of the TensorFlow tutorials weft learns from (see ../shared/SEEDS.md).
//   1. four dense layers 784-128-128-128-10 over a 60000x784 batch, returning the logits; and
//      the variant that returns nothing, which pruning reduces to (almost) nothing
//   2. relu(a + b) on small tensors, 100 000 calls
//   3. Keras-like shallow (Dense 10/20/30) and deep (Dense 1000/2000/3000) models on 60x28x28
//   4. the training step of bench/train_step.cpp (MLP, batch 256, SGD), traced
// Pass --quick for fewer repetitions.
#include <cstdio>
#include <string>
#include <vector>

#include "bench/bench_util.h"
#include "runtime/device.h"
#include "weft/weft.h"

#ifdef WEFT_HAVE_TORCH
#include <torch/torch.h>
#endif

using namespace weft;
using weft::bench::fmt;
using weft::bench::Row;

namespace {

std::string ms(double s) { return fmt("%.2f ms", s * 1e3); }
std::string us(double s) { return fmt("%.3f us", s * 1e6); }

// Dense layers as plain variables, so the same weights serve eager, traced and libtorch.
struct Mlp {
  std::vector<Variable> w, b;
  explicit Mlp(const std::vector<int64_t>& widths, int64_t seed) {
    for (size_t i = 0; i + 1 < widths.size(); ++i) {
      w.emplace_back(random::normal({widths[i], widths[i + 1]}, 0, 0.05, seed + int64_t(i)), "w" + std::to_string(i));
      b.emplace_back(zeros({widths[i + 1]}), "b" + std::to_string(i));
    }
  }
  Tensor operator()(Tensor h) const {
    for (size_t i = 0; i < w.size(); ++i) {
      h = matmul(h, w[i]) + b[i];
      if (i + 1 < w.size()) h = relu(h);
    }
    return h;
  }
  std::vector<Variable> variables() const {
    std::vector<Variable> v = w;
    v.insert(v.end(), b.begin(), b.end());
    return v;
  }
};

#ifdef WEFT_HAVE_TORCH
struct TorchMlp {
  std::vector<torch::Tensor> w, b;
  explicit TorchMlp(const Mlp& m) {
    for (size_t i = 0; i < m.w.size(); ++i) {
      Tensor wi = m.w[i].value();
      w.push_back(torch::from_blob(wi.data<float>(), {wi.shape()[0], wi.shape()[1]}).clone());
      b.push_back(torch::zeros({wi.shape()[1]}));
    }
  }
  torch::Tensor operator()(torch::Tensor h) const {
    for (size_t i = 0; i < w.size(); ++i) {
      h = torch::addmm(b[i], h, w[i]);
      if (i + 1 < w.size()) h = torch::relu(h);
    }
    return h;
  }
};
#endif

void dense_60000(std::vector<Row>& rows, bool quick) {
  Tensor x = random::uniform({60000, 784}, 0, 1, 3);
  Mlp model({784, 128, 128, 128, 10}, 10);
  auto traced = function([&](Tensor in) { return model(in); });
  auto traced_nothing = function([&](Tensor in) { (void)model(in); });
  const int calls = quick ? 2 : 5;
  double eager = bench::seconds_per_call([&] { Tensor y = model(x); }, calls, 3);
  double graph = bench::seconds_per_call([&] { Tensor y = traced(x); }, calls, 3);
  double nothing = bench::seconds_per_call([&] { traced_nothing(x); }, 100, 3);
  // Same numbers traced and eager.
  const float diff = reduce_max(abs(traced(x) - model(x))).item<float>();
  std::string peer = "n/a", ratio = "n/a";
#ifdef WEFT_HAVE_TORCH
  torch::NoGradGuard no_grad;
  TorchMlp tm(model);
  auto tx = torch::from_blob(x.data<float>(), {60000, 784});
  double t = bench::seconds_per_call([&] { auto y = tm(tx); }, calls, 3);
  peer = "libtorch " + ms(t);
  ratio = fmt("%.2fx torch", graph / t);
  rows.push_back({"4 dense 60000x784: weft eager", ms(eager), peer, fmt("%.2fx torch", eager / t), ""});
#else
  rows.push_back({"4 dense 60000x784: weft eager", ms(eager), peer, "n/a", ""});
#endif
  rows.push_back({"4 dense 60000x784: traced", ms(graph), peer, ratio, "<= 0.6x torch"});
  rows.push_back({"  same, returning nothing (pruned)", us(nothing), "", "", "not comparable: no work"});
  rows.push_back({"  traced vs eager max |diff|", fmt("%.2g", diff), "", "", "~0"});
  std::printf("returning nothing: the graph keeps %d of the %d nodes (TensorFlow prunes the same way)\n",
              traced_nothing.graph(x).num_nodes(), traced.graph(x).num_nodes());
}

void relu_add(std::vector<Row>& rows, bool quick) {
  Tensor a = constant({1.f, -2.f, 3.f, -4.f}), b = constant({0.5f, 0.5f, -5.f, 5.f});
  auto add_then_relu = function([](Tensor p, Tensor q) { return relu(p + q); });
  const int calls = quick ? 20000 : 100000;
  // 20 alternating rounds of 5000 calls each.
  auto [eager, graph] = bench::seconds_per_call_paired([&] { Tensor y = relu(a + b); },
                                                       [&] { Tensor y = add_then_relu(a, b); }, calls / 20);
  std::string peer = "n/a", ratio = "n/a";
#ifdef WEFT_HAVE_TORCH
  torch::NoGradGuard no_grad;
  auto ta = torch::tensor({1.f, -2.f, 3.f, -4.f}), tb = torch::tensor({0.5f, 0.5f, -5.f, 5.f});
  double t = bench::seconds_per_call([&] { auto y = torch::relu(ta + tb); }, calls);
  peer = "libtorch " + us(t);
  ratio = fmt("%.2fx torch", graph / t);
#endif
  rows.push_back({"relu(a + b), 4 floats: weft eager", us(eager), peer, "", ""});
  rows.push_back({"relu(a + b), 4 floats: traced", us(graph), peer, ratio + fmt(", %.2fx eager", graph / eager),
                  "<= 0.25 us, < eager"});
}

void keras_models(std::vector<Row>& rows, bool quick) {
  Tensor x = random::uniform({60, 28, 28}, 0, 1, 4);
  for (bool deep : {false, true}) {
    const std::vector<int64_t> widths = deep ? std::vector<int64_t>{784, 1000, 2000, 3000}
                                             : std::vector<int64_t>{784, 10, 20, 30};
    Mlp model(widths, 20);
    auto eager_call = [&](const Tensor& in) { return model(reshape(in, {60, 784})); };
    auto traced = function([&](Tensor in) { return eager_call(in); });
    const int calls = deep ? (quick ? 10 : 50) : (quick ? 200 : 1000);
    auto [e, g] = bench::seconds_per_call_paired([&] { Tensor y = eager_call(x); }, [&] { Tensor y = traced(x); },
                                                 calls / 5, 5);
    std::string peer = "n/a", ratio = "n/a";
#ifdef WEFT_HAVE_TORCH
    torch::NoGradGuard no_grad;
    TorchMlp tm(model);
    auto tx = torch::from_blob(x.data<float>(), {60, 28, 28});
    double t = bench::seconds_per_call([&] { auto y = tm(tx.reshape({60, 784})); }, calls, 3);
    peer = "libtorch " + us(t);
    ratio = fmt("%.2fx torch", g / t);
#endif
    const std::string name = deep ? "deep Dense 1000/2000/3000" : "shallow Dense 10/20/30";
    rows.push_back({name + ": eager", us(e), peer, "", ""});
    // As in the TensorFlow tutorial: tracing pays where per-op overhead dominates (the shallow
    // model); the deep one is GEMM-bound, and both modes run the same GEMMs.
    rows.push_back({name + ": traced", us(g), peer, ratio + fmt(", %.2fx eager", g / e),
                    deep ? "report (GEMM-bound, ~1x)" : "traced < eager"});
  }
}

void train_step(std::vector<Row>& rows, bool quick) {
  constexpr int64_t kBatch = 256;
  Tensor x = random::normal({kBatch, 784}, 0, 1, 1);
  Tensor y = cast(random::uniform({kBatch}, 0, 9.99, 2), int32);
  Mlp eager_model({784, 128, 128, 128, 10}, 0), traced_model({784, 128, 128, 128, 10}, 0);
  optim::SGD eager_sgd(0.01), traced_sgd(0.01);
  auto step = [](Mlp& m, optim::SGD& opt, const Tensor& xb, const Tensor& yb) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(yb, m(xb));
    auto vars = m.variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  auto traced = function([&](Tensor xb, Tensor yb) { return step(traced_model, traced_sgd, xb, yb); });
  auto& alloc = CpuAllocator::instance();
  auto peak_of = [&](auto&& f) {
    f();
    alloc.reset_peak();
    const int64_t base = alloc.stats().bytes_in_use;
    f();
    return alloc.stats().peak_bytes_in_use - base;
  };
  const int64_t peak_eager = peak_of([&] { step(eager_model, eager_sgd, x, y).item<float>(); });
  const int64_t peak_traced = peak_of([&] { traced(x, y).item<float>(); });
  const int calls = quick ? 50 : 200;
  auto [e, g] = bench::seconds_per_call_paired([&] { step(eager_model, eager_sgd, x, y).item<float>(); },
                                               [&] { traced(x, y).item<float>(); }, calls / 10, 10);
  std::string peer = "n/a", ratio = "n/a";
#ifdef WEFT_HAVE_TORCH
  double best = 1e30;
  for (int threads : {1, 2}) {
    torch::set_num_threads(threads);
    torch::manual_seed(0);
    torch::nn::Sequential net(torch::nn::Linear(784, 128), torch::nn::ReLU(), torch::nn::Linear(128, 128),
                              torch::nn::ReLU(), torch::nn::Linear(128, 128), torch::nn::ReLU(),
                              torch::nn::Linear(128, 10));
    torch::optim::SGD opt(net->parameters(), torch::optim::SGDOptions(0.01));
    auto tx = torch::randn({kBatch, 784});
    auto ty = torch::randint(0, 10, {kBatch}, torch::kLong);
    best = std::min(best, bench::seconds_per_call([&] {
      opt.zero_grad();
      auto loss = torch::nn::functional::cross_entropy(net->forward(tx), ty);
      loss.backward();
      opt.step();
      (void)loss.item<float>();
    }, calls));
  }
  torch::set_num_threads(host_topology().physical_cores);
  peer = "libtorch " + ms(best);
  ratio = fmt("%.2fx torch", g / best);
  rows.push_back({"train step MLP batch 256: eager", ms(e), peer, fmt("%.2fx torch", e / best), ""});
#else
  rows.push_back({"train step MLP batch 256: eager", ms(e), peer, "n/a", ""});
#endif
  rows.push_back({"train step MLP batch 256: traced", ms(g), peer, ratio, "<= 0.65x torch"});
  rows.push_back({"  peak memory per step eager / traced", fmt("%.2f MB", peak_eager / 1e6),
                  fmt("traced %.2f MB", peak_traced / 1e6), "", "traced <= eager"});
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  std::printf("weft eager vs traced: %d physical cores\n", host_topology().physical_cores);
#ifdef WEFT_HAVE_TORCH
  torch::set_num_threads(host_topology().physical_cores);
#endif
  std::vector<Row> rows;
  relu_add(rows, quick);
  keras_models(rows, quick);
  train_step(rows, quick);
  dense_60000(rows, quick);
  weft::bench::print_table("eager vs traced (best of several runs)", rows);
  return 0;
}
