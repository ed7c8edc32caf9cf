// The transformer issue's benchmarks, beside libtorch in the same run. So far: the elementwise
// transcendental functions and softmax on 5 M float32 ([1667, 3000]), against libtorch on every
// core and against the machine's copy bandwidth (the better of libtorch's clone and weft's neg,
// both one read and one write of the tensor, as each function here is); and causal attention,
// forward and backward, the fused op against the composed ops, at sequences of 256 and 1024.
//
//   bench_transformers [--quick]
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <string>
#include <vector>

#ifdef WEFT_HAVE_TORCH
#include <torch/torch.h>
#endif

#include "bench/bench_util.h"
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
      {"gelu (exact), eager: 5 ops", [](const Tensor& t) { return gelu(t); },
#ifdef WEFT_HAVE_TORCH
       [](const torch::Tensor& t) { return torch::gelu(t); }
#endif
      },
      {"gelu (exact), traced", [](const Tensor& t) {
         static auto traced = function([](Tensor in) { return gelu(in); });  // one FusedElementwise
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
  return 0;
}
