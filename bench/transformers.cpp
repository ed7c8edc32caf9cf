// The transformer issue's benchmarks, beside libtorch in the same run. So far: the elementwise
// transcendental functions and softmax on 5 M float32 ([1667, 3000]), against libtorch on every
// core and against the machine's copy bandwidth (the better of libtorch's clone and weft's neg,
// both one read and one write of the tensor, as each function here is); and causal attention,
// forward and backward, the fused op against the composed ops, at sequences of 256 and 1024; and
// a whole training step of nanoGPT's CPU configuration (examples/gpt_model.h: forward, backward,
// clipping, AdamW on a cosine schedule), eager and traced, beside PyTorch (bench/peers/
// nanogpt_torch.py, WEFT_BENCH_TORCH_PYTHON) and TensorFlow 2 Keras under tf.function
// (bench/peers/nanogpt_tf.py, WEFT_BENCH_PYTHON), each on every core. Times are medians of steps.
//
//   bench_transformers [--quick]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <chrono>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#ifdef WEFT_HAVE_TORCH
#include <torch/torch.h>
#endif

#include "bench/bench_util.h"
#include "bench/peer_runner.h"
#include "examples/gpt_model.h"
#include "runtime/device.h"
#include "weft/weft.h"

using namespace weft;
using weft::bench::fmt;

namespace {

constexpr int64_t kRows = 1667, kCols = 3000;  // 5.0 M floats, softmax over rows of 3000

struct Case {
  std::string name;
  std::function<Tensor(const Tensor&)> weft_fn;
#ifdef WEFT_HAVE_TORCH
  std::function<torch::Tensor(const torch::Tensor&)> torch_fn;
#endif
};

std::string ms(double s) { return s > 0 ? fmt("%.2f ms", s * 1e3) : "n/a"; }

// Causal self-attention on [4, 4, seq, 32] (nanoGPT's CPU configuration has 4 heads of 32),
// forward and the gradients of q, k and v: the fused op against the composed ops a user would
// otherwise write (scores, an additive -inf mask, softmax, the product with v).
double attention_step(bool fused, int64_t seq, int calls, int repeats) {
  const Tensor q = random::normal({4, 4, seq, 32}, 0, 1, 1), k = random::normal({4, 4, seq, 32}, 0, 1, 2);
  const Tensor v = random::normal({4, 4, seq, 32}, 0, 1, 3), w = random::normal({4, 4, seq, 32}, 0, 1, 4);
  std::vector<float> bias(static_cast<size_t>(seq * seq), 0.0f);
  for (int64_t i = 0; i < seq; ++i)
    for (int64_t j = i + 1; j < seq; ++j) bias[static_cast<size_t>(i * seq + j)] = -INFINITY;
  const Tensor mask = constant(bias, Shape{seq, seq});
  return bench::seconds_per_call(
      [&] {
        GradientTape tape;
        tape.watch(q);
        tape.watch(k);
        tape.watch(v);
        const Tensor o = fused ? scaled_dot_product_attention(q, k, v, {.causal = true})
                               : matmul(softmax(add(mul(matmul(q, k, false, true), 1.0f / std::sqrt(32.0f)), mask), -1), v);
        const std::vector<Tensor> g = tape.gradient(reduce_sum(mul(o, w)), {q, k, v});
        (void)g;  // eager: every op has run by now
      },
      calls, repeats);
}

}  // namespace

// The median seconds of `steps` training steps of nanoGPT's CPU configuration (vocabulary 65),
// after `warmup` steps, on fixed random ids; traced with weft::function or eager.
double nanogpt_step(bool traced, int warmup, int steps) {
  random::set_seed(0);
  const gpt::Config config = gpt::Config::cpu(65);
  gpt::Gpt model(config);
  optim::CosineDecay schedule(1e-3, 1900, 0.1, 100);
  optim::AdamW optimizer = gpt::adamw(schedule);
  auto body = [&](Tensor x, Tensor y) { return gpt::train_step(model, optimizer, x, y).loss; };
  auto traced_step = function(body);
  const Tensor x = cast(random::uniform({config.batch, config.block_size}, 0, 65, 1), int32);
  const Tensor y = cast(random::uniform({config.batch, config.block_size}, 0, 65, 2), int32);
  std::vector<double> times;
  for (int i = 0; i < warmup + steps; ++i) {
    const auto t0 = std::chrono::steady_clock::now();
    const float loss = (traced ? traced_step(x, y) : body(x, y)).item<float>();
    const auto t1 = std::chrono::steady_clock::now();
    if (!std::isfinite(loss)) std::fprintf(stderr, "nanoGPT step: loss %f\n", static_cast<double>(loss));
    if (i >= warmup) times.push_back(std::chrono::duration<double>(t1 - t0).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  const int cores = host_topology().physical_cores;
  const int calls = quick ? 5 : 20, repeats = quick ? 3 : 7;
  const Tensor x = random::normal({kRows, kCols}, 0, 2, 1);
#ifdef WEFT_HAVE_TORCH
  torch::set_num_threads(cores);
  const torch::Tensor tx = torch::from_blob(const_cast<float*>(x.data<float>()), {kRows, kCols}).clone();
#endif
  __builtin_cpu_init();
  std::printf("transcendental functions on [%lld, %lld] float32; the CPU has %s; libtorch on %d threads\n",
              static_cast<long long>(kRows), static_cast<long long>(kCols),
              __builtin_cpu_supports("avx512f") ? "AVX-512" : __builtin_cpu_supports("avx2") ? "AVX2" : "neither AVX2 nor AVX-512",
              cores);

  const std::vector<Case> cases = {
      {"exp", [](const Tensor& t) { return exp(t); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::exp(t); }
#endif
      },
      {"tanh", [](const Tensor& t) { return tanh(t); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::tanh(t); }
#endif
      },
      {"sigmoid", [](const Tensor& t) { return sigmoid(t); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::sigmoid(t); }
#endif
      },
      {"erf", [](const Tensor& t) { return erf(t); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::erf(t); }
#endif
      },
      {"log (of |x|)", [](const Tensor& t) { return log(t); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::log(t); }
#endif
      },
      {"gelu (exact), eager", [](const Tensor& t) { return gelu(t); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::gelu(t); }
#endif
      },
      {"gelu (exact), traced", [](const Tensor& t) {
         static auto traced = function([](Tensor in) { return gelu(in); });  // one Gelu node
         return traced(t);
       },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::gelu(t); }
#endif
      },
      {"softmax, rows of 3000", [](const Tensor& t) { return softmax(t, -1); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::softmax(t, -1); }
#endif
      },
      {"log_softmax, rows of 3000", [](const Tensor& t) { return log_softmax(t, -1); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::log_softmax(t, -1); }
#endif
      },
  };

  const Tensor positive = abs(x);
  double copy = bench::seconds_per_call([&] { Tensor y = neg(x); }, calls, repeats);
#ifdef WEFT_HAVE_TORCH
  const torch::Tensor tpositive = tx.abs();
  copy = std::min(copy, bench::seconds_per_call([&] { torch::Tensor y = tx.clone(); }, calls, repeats));
#endif
  const double bytes = 2.0 * static_cast<double>(kRows * kCols) * sizeof(float);
  std::printf("copy: %.2f ms (%.1f GB/s read + write)\n", copy * 1e3, bytes / copy / 1e9);

  std::printf("\n| %-26s | %-10s | %-10s | %-12s | %-16s | %-15s |\n", "function", "weft", "libtorch",
              "weft / torch", "% of copy b/w", "goal");
  std::printf("|%s|%s|%s|%s|%s|%s|\n", std::string(28, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(14, '-').c_str(), std::string(18, '-').c_str(),
              std::string(17, '-').c_str());
  for (const Case& c : cases) {
    const bool takes_log = c.name.rfind("log (", 0) == 0;
    const Tensor& in = takes_log ? positive : x;
    const double w = bench::seconds_per_call([&] { Tensor y = c.weft_fn(in); }, calls, repeats);
    double t = 0;
#ifdef WEFT_HAVE_TORCH
    const torch::Tensor& tin = takes_log ? tpositive : tx;
    t = bench::seconds_per_call([&] { torch::Tensor y = c.torch_fn(tin); }, calls, repeats);
#endif
    std::printf("| %-26s | %-10s | %-10s | %-12s | %-16s | %-15s |\n", c.name.c_str(), ms(w).c_str(), ms(t).c_str(),
                t > 0 ? fmt("%.2fx", w / t).c_str() : "n/a", fmt("%.0f %%", 100.0 * copy / w).c_str(),
                "<= 0.5x, >= 50%");
  }

  std::printf("\n| %-44s | %-10s | %-10s | %-12s | %-8s |\n", "attention, causal, [4, 4, seq, 32], fwd + bwd",
              "fused op", "composed", "fused / comp", "goal");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(46, '-').c_str(), std::string(12, '-').c_str(),
              std::string(12, '-').c_str(), std::string(14, '-').c_str(), std::string(10, '-').c_str());
  for (int64_t seq : {256, 1024}) {
    const int n = seq > 512 ? (quick ? 1 : 3) : (quick ? 3 : 10);
    const double f = attention_step(true, seq, n, repeats), c = attention_step(false, seq, n, repeats);
    std::printf("| %-44s | %-10s | %-10s | %-12s | %-8s |\n", ("sequence " + std::to_string(seq)).c_str(),
                ms(f).c_str(), ms(c).c_str(), fmt("%.2fx", f / c).c_str(), "<= 0.5x");
  }

  // nanoGPT's CPU configuration, one training step: weft eager and traced, PyTorch, TensorFlow.
  const int warmup = quick ? 3 : 5, steps = quick ? 10 : 30;
  const double tokens = 12.0 * 64;
  const double eager = nanogpt_step(false, warmup, steps), traced = nanogpt_step(true, warmup, steps);
  auto peer = [&](const char* python_variable, const char* script, std::string* why_not) -> double {
    const auto r = bench::run_python_peer(bench::peer_python(python_variable), bench::peer_script(script),
                                          {"--steps", std::to_string(steps), "--warmup", std::to_string(warmup),
                                           "--threads", std::to_string(cores)},
                                          600, why_not);
    return r && r->count("step_ms") ? r->at("step_ms") / 1e3 : 0.0;
  };
  std::string torch_why, tf_why;
  // PyTorch at its best: Debian's torch runs OpenMP, whose threads spin between the many small
  // ops of this step; on a loaded machine that costs it up to 4x, so it also runs with passive
  // waiting, and the faster of the two counts.
  double torch_step = peer("WEFT_BENCH_TORCH_PYTHON", "nanogpt_torch.py", &torch_why);
  const char* wait_policy = std::getenv("OMP_WAIT_POLICY");
  if (!wait_policy) {
    setenv("OMP_WAIT_POLICY", "PASSIVE", 1);
    const double passive = peer("WEFT_BENCH_TORCH_PYTHON", "nanogpt_torch.py", &torch_why);
    unsetenv("OMP_WAIT_POLICY");
    std::printf("PyTorch: %s with OpenMP's default waiting, %s with OMP_WAIT_POLICY=PASSIVE\n", ms(torch_step).c_str(),
                ms(passive).c_str());
    if (passive > 0 && (torch_step <= 0 || passive < torch_step)) torch_step = passive;
  }
  const double tf_step = peer("WEFT_BENCH_PYTHON", "nanogpt_tf.py", &tf_why);
  std::printf("\nnanoGPT CPU configuration (4 layers, 4 heads, width 128, context 64, batch 12, vocabulary 65), "
              "one training step (forward, backward, clipping, AdamW), median of %d, %d threads\n", steps, cores);
  std::printf("| %-28s | %-10s | %-12s | %-12s | %-12s |\n", "", "step", "tokens/s", "weft traced /", "goal");
  std::printf("|%s|%s|%s|%s|%s|\n", std::string(30, '-').c_str(), std::string(12, '-').c_str(),
              std::string(14, '-').c_str(), std::string(14, '-').c_str(), std::string(14, '-').c_str());
  auto row = [&](const std::string& who, double s, const char* goal) {
    std::printf("| %-28s | %-10s | %-12s | %-12s | %-12s |\n", who.c_str(), ms(s).c_str(),
                s > 0 ? fmt("%.0f", tokens / s).c_str() : "n/a", s > 0 ? fmt("%.2fx", traced / s).c_str() : "n/a", goal);
  };
  row("weft, traced", traced, "");
  row("weft, eager", eager, "");
  row("PyTorch " + std::string(torch_step > 0 ? "" : "(n/a)"), torch_step, "<= 0.5x");
  row("TensorFlow 2, tf.function" + std::string(tf_step > 0 ? "" : " (n/a)"), tf_step, "<= 0.5x");
  if (torch_step <= 0) std::printf("PyTorch: %s\n", torch_why.c_str());
  if (tf_step <= 0) std::printf("TensorFlow: %s\n", tf_why.c_str());
  return 0;
}
