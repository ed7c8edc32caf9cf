// The transformer issue's benchmarks, beside libtorch in the same run. So far: the elementwise
// transcendental functions and softmax on 5 M float32 ([1667, 3000]), against libtorch on every
// core and against the machine's copy bandwidth (the better of libtorch's clone and weft's neg,
// both one read and one write of the tensor, as each function here is).
//
//   bench_transformers [--quick]
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
  return 0;
}
