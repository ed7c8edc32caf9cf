// Eager op speed against its peers, in one run:
//   relu(a + b) on 4-element tensors (dispatch overhead)  vs libtorch eager (no-grad)
//   add on 16M floats (memory bandwidth)                   vs memcpy of the same bytes, libtorch
//   matmul 2048 x 2048 float32                             vs a direct cblas_sgemm call, libtorch
#include <cblas.h>

#include <cstring>
#include <vector>

#include "bench/bench_util.h"
#include "runtime/device.h"
#include "weft/weft.h"

#ifdef WEFT_HAVE_TORCH
#include <torch/torch.h>
#endif

using namespace weft;
using weft::bench::fmt;

int main() {
  std::vector<weft::bench::Row> rows;
  const int threads = host_topology().physical_cores;
  std::printf("weft eager ops benchmark: %d physical cores, pool of %d threads\n", threads,
              cpu_device()->pool().num_threads());
#ifdef WEFT_HAVE_TORCH
  torch::set_num_threads(threads);
  torch::NoGradGuard no_grad;
#endif

  {  // relu(a + b) on 4 elements
    Tensor a = constant({1.f, -2.f, 3.f, -4.f}), b = constant({0.5f, 0.5f, -5.f, 5.f});
    const int calls = 100000;
    double w = bench::seconds_per_call([&] { Tensor y = relu(a + b); }, calls);
    std::string peer = "n/a", ratio = "n/a";
#ifdef WEFT_HAVE_TORCH
    auto ta = torch::tensor({1.f, -2.f, 3.f, -4.f}), tb = torch::tensor({0.5f, 0.5f, -5.f, 5.f});
    double t = bench::seconds_per_call([&] { auto y = torch::relu(ta + tb); }, calls);
    peer = "libtorch " + fmt("%.3f us", t * 1e6);
    ratio = fmt("%.2fx torch", w / t);
#endif
    rows.push_back({"relu(a + b), 4 floats, per call", fmt("%.3f us", w * 1e6), peer, ratio, "<= 0.35 us"});
  }

  {  // the same with eager fusion on the CPU: relu(a + b) deferred, then computed as one kernel
    Tensor a = constant({1.f, -2.f, 3.f, -4.f}), b = constant({0.5f, 0.5f, -5.f, 5.f});
    set_eager_fusion(EagerFusion::All);
    double w = bench::seconds_per_call([&] { evaluate(relu(a + b)); }, 100000);
    set_eager_fusion(EagerFusion::Gpus);
    rows.push_back({"  with EagerFusion::All (one fused kernel)", fmt("%.3f us", w * 1e6), "", "",
                    "GPUs' default; off on CPUs"});
  }

  {  // a chain on 16M floats: one memory pass fused, three separate
    const int64_t n = int64_t{16} << 20;
    Tensor a = random::uniform({n}, 0, 1, 1), b = random::uniform({n}, 0, 1, 2), c = random::uniform({n}, 0, 1, 3);
    const double separate = bench::seconds_per_call([&] { Tensor y = relu(a * b - c); }, 10);
    set_eager_fusion(EagerFusion::All);
    const double fused = bench::seconds_per_call([&] { evaluate(relu(a * b - c)); }, 10);
    set_eager_fusion(EagerFusion::Gpus);
    std::string peer = "separate ops " + fmt("%.2f ms", separate * 1e3);
#ifdef WEFT_HAVE_TORCH
    auto ta = torch::rand({n}), tb = torch::rand({n}), tc = torch::rand({n});
    double t = bench::seconds_per_call([&] { auto y = torch::relu(ta * tb - tc); }, 10);
    peer += ", torch " + fmt("%.2f ms", t * 1e3);
#endif
    rows.push_back({"relu(a * b - c), 16M float32, EagerFusion::All", fmt("%.2f ms", fused * 1e3), peer,
                    fmt("%.2fx separate", fused / separate), "report"});
  }

  {  // add on 16M floats vs memcpy bandwidth
    const int64_t n = int64_t{16} << 20;
    Tensor a = random::uniform({n}, 0, 1, 1), b = random::uniform({n}, 0, 1, 2);
    std::vector<float> src(n, 1.f), dst(n);
    // The bandwidth limit is the better of a plain memcpy and one split over the same pool.
    double m1 = bench::seconds_per_call([&] { std::memcpy(dst.data(), src.data(), n * 4); }, 10);
    double m2 = bench::seconds_per_call([&] {
      cpu_device()->pool().parallel_for(n, 1 << 16, [&](int64_t s, int64_t e) {
        std::memcpy(dst.data() + s, src.data() + s, (e - s) * 4);
      });
    }, 10);
    double m = std::min(m1, m2);
    double w = bench::seconds_per_call([&] { Tensor y = a + b; }, 10);
    double memcpy_bw = 2.0 * n * 4 / m, add_bw = 3.0 * n * 4 / w;
    std::string peer = "memcpy " + fmt("%.1f GB/s", memcpy_bw / 1e9);
#ifdef WEFT_HAVE_TORCH
    auto ta = torch::rand({n}), tb = torch::rand({n});
    double t = bench::seconds_per_call([&] { auto y = ta + tb; }, 10);
    peer += ", torch " + fmt("%.2f ms", t * 1e3);
#endif
    rows.push_back({"add 16M float32 (" + fmt("%.2f ms", w * 1e3) + ")", fmt("%.1f GB/s", add_bw / 1e9), peer,
                    fmt("%.0f%% of memcpy", 100 * add_bw / memcpy_bw), ">= 80% of memcpy bandwidth"});
  }

  {  // matmul 2048^2
    const int64_t n = 2048;
    Tensor a = random::normal({n, n}, 0, 1, 1), b = random::normal({n, n}, 0, 1, 2);
    std::vector<float> c(n * n);
    const float* pa = a.data<float>();
    const float* pb = b.data<float>();
    double w = bench::seconds_per_call([&] { Tensor y = matmul(a, b); }, 3);
    // weft keeps OpenBLAS single-threaded and threads products itself (kernels/cpu/gemm.h); the
    // peer is OpenBLAS with its own threading over every core, then set back.
    openblas_set_num_threads(host_topology().physical_cores);
    double blas = bench::seconds_per_call(
        [&] { cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, pa, n, pb, n, 0.f, c.data(), n); }, 3);
    openblas_set_num_threads(1);
    double gf = 2.0 * n * n * n / 1e9;
    std::string peer = "cblas_sgemm " + fmt("%.1f GFLOP/s", gf / blas);
#ifdef WEFT_HAVE_TORCH
    auto ta = torch::randn({n, n}), tb = torch::randn({n, n});
    double t = bench::seconds_per_call([&] { auto y = torch::matmul(ta, tb); }, 3);
    peer += ", torch " + fmt("%.1f", gf / t);
#endif
    rows.push_back({"matmul 2048x2048 float32", fmt("%.1f GFLOP/s", gf / w), peer,
                    fmt("%.0f%% of cblas", 100 * blas / w), ">= 95% of cblas_sgemm"});
  }

  weft::bench::print_table("eager ops (best of 5 runs)", rows);
  return 0;
}
