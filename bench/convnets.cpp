// Convolutional networks: LeNet-5 and ResNet-20 training steps, eager and traced, beside libtorch
// (in this binary, on every core) and TensorFlow 2 Keras under tf.function (bench/peers/
// convnets_tf.py, through WEFT_BENCH_PYTHON), in the same run; one 3x3 64->64 convolution's
// forward pass and both gradients against the machine's float32 GEMM rate; and a MobileNet
// layer's depthwise convolution (forward and both gradients) beside libtorch's.
//
// Debian's OpenBLAS 0.3.21 mistakes some AVX-512 CPUs for a "Prescott" and runs generic kernels;
// libtorch's products would then be crippled. Unless OPENBLAS_CORETYPE is already set, this
// program sets it from the CPU's features (SkylakeX with AVX-512, else Haswell with AVX2) and runs
// itself again, so that every peer (and the GEMM row) runs OpenBLAS's tuned kernels.
//
//   bench_convnets [--quick] [--profile DIR]
//
// --profile DIR also writes the timeline of three traced steps of each network to
// DIR/lenet5.json and DIR/resnet20.json (open them in ui.perfetto.dev), making DIR if need be.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <system_error>
#include <string>
#include <vector>

#include <cblas.h>

#include "bench/bench_util.h"
#include "bench/convnet_models.h"
#include "bench/convnets_torch.h"
#include "bench/peer_runner.h"
#include "runtime/device.h"
#include "weft/weft.h"

extern "C" char* openblas_get_corename(void);
extern "C" void openblas_set_num_threads(int);

using namespace weft;
using weft::bench::fmt;

namespace {

struct StepTimes {
  double eager = 0, traced = 0, torch = 0, tf = 0;
};

std::string profile_dir;  // --profile: where the traced steps' timelines go

template <class Body>
StepTimes time_weft(Body body, Tensor x, Tensor y, int calls, const std::string& name) {
  StepTimes t;
  auto traced = function([&](Tensor xb, Tensor yb) { return body(xb, yb); });
  auto eager = [&] { (void)body(x, y).template item<float>(); };
  auto graph = [&] { (void)traced(x, y).template item<float>(); };
  auto [e, g] = bench::seconds_per_call_paired(eager, graph, calls, 3);
  t.eager = e;
  t.traced = g;
  if (!profile_dir.empty()) {
    profiler::start();
    for (int i = 0; i < 3; ++i) graph();
    profiler::stop(profile_dir + "/" + name + ".json");
  }
  return t;
}

StepTimes lenet(int64_t batch, int calls) {
  random::set_seed(1);
  nn::Sequential model = bench::lenet5();
  optim::Adam opt(1e-3);
  auto body = [&](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
    auto vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  Tensor x = random::normal({batch, 28, 28, 1}, 0, 1, 2);
  Tensor y = cast(random::uniform({batch}, 0, 10, 3), int32);
  StepTimes t = time_weft(body, x, y, calls, "lenet5");
#ifdef WEFT_HAVE_TORCH
  torch::manual_seed(0);
  auto net = bench::torch_peer::lenet5();
  torch::optim::Adam topt(net->parameters(), torch::optim::AdamOptions(1e-3));
  auto tx = torch::randn({batch, 1, 28, 28});
  auto ty = torch::randint(0, 10, {batch}, torch::kLong);
  t.torch = bench::seconds_per_call([&] {
    topt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(tx), ty);
    loss.backward();
    topt.step();
    (void)loss.item<float>();
  }, calls, 3);
#endif
  return t;
}

StepTimes resnet20(int64_t batch, int calls) {
  random::set_seed(1);
  nn::Module model = bench::resnet20();
  optim::SGD opt(0.1, 0.9);
  auto body = [&](const Tensor& x, const Tensor& y) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
    auto vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  Tensor x = random::normal({batch, 32, 32, 3}, 0, 1, 2);
  Tensor y = cast(random::uniform({batch}, 0, 10, 3), int32);
  StepTimes t = time_weft(body, x, y, calls, "resnet20");
#ifdef WEFT_HAVE_TORCH
  torch::manual_seed(0);
  bench::torch_peer::ResNet20 net;
  net->train();
  torch::optim::SGD topt(net->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  auto tx = torch::randn({batch, 3, 32, 32});
  auto ty = torch::randint(0, 10, {batch}, torch::kLong);
  t.torch = bench::seconds_per_call([&] {
    topt.zero_grad();
    auto loss = torch::nn::functional::cross_entropy(net->forward(tx), ty);
    loss.backward();
    topt.step();
    (void)loss.item<float>();
  }, calls, 3);
#endif
  return t;
}

// The 3x3 64->64 convolution on 32x32, batch 64: forward, input gradient and filter gradient,
// 2*N*H*W*kh*kw*C*F flops each, in one traced function.
double conv_rate(int calls) {
  const int64_t n = 64, h = 32, w = 32, c = 64, f = 64;
  Tensor x = random::normal({n, h, w, c}, 0, 1, 1);
  Tensor k = random::normal({3, 3, c, f}, 0, 0.1, 2);
  Tensor dy = random::normal({n, h, w, f}, 0, 1, 3);
  auto passes = function([&](Tensor xb, Tensor kb, Tensor dyb) {
    Tensor y = conv2d(xb, kb, {1, 1}, "SAME");
    Tensor dx = conv2d_backprop_input({n, h, w, c}, kb, dyb, {1, 1}, "SAME");
    Tensor dk = conv2d_backprop_filter(xb, {3, 3, c, f}, dyb, {1, 1}, "SAME");
    return std::vector<Tensor>{y, dx, dk};
  });
  const double seconds = bench::seconds_per_call([&] { (void)passes(x, k, dy); }, calls);
  return 3 * 2.0 * n * h * w * 9 * c * f / seconds;
}

// A MobileNet layer's 3x3 depthwise convolution, [32, 56, 56, 64], stride 1, SAME: forward, input
// gradient and filter gradient in one traced function, beside libtorch's (the same three passes
// through autograd). Seconds per call of each.
struct DepthwiseTimes {
  double weft = 0, torch = 0;
};
DepthwiseTimes depthwise_times(int calls) {
  const int64_t n = 32, h = 56, w = 56, c = 64;
  Tensor x = random::normal({n, h, w, c}, 0, 1, 1);
  Tensor k = random::normal({3, 3, c, 1}, 0, 0.3, 2);
  Tensor dy = random::normal({n, h, w, c}, 0, 1, 3);
  auto passes = function([&](Tensor xb, Tensor kb, Tensor dyb) {
    Tensor y = depthwise_conv2d(xb, kb, {1, 1}, "SAME");
    Tensor dx = depthwise_conv2d_backprop_input({n, h, w, c}, kb, dyb, {1, 1}, "SAME");
    Tensor dk = depthwise_conv2d_backprop_filter(xb, {3, 3, c, 1}, dyb, {1, 1}, "SAME");
    return std::vector<Tensor>{y, dx, dk};
  });
  DepthwiseTimes t;
  t.weft = bench::seconds_per_call([&] { (void)passes(x, k, dy); }, calls);
#ifdef WEFT_HAVE_TORCH
  // libtorch at its best: the faster of its NCHW and channels-last layouts.
  for (auto format : {torch::MemoryFormat::Contiguous, torch::MemoryFormat::ChannelsLast}) {
    auto tx = torch::randn({n, c, h, w}).contiguous(format).requires_grad_();
    auto tk = torch::randn({c, 1, 3, 3}).requires_grad_();
    auto tdy = torch::randn({n, c, h, w}).contiguous(format);
    const double s = bench::seconds_per_call([&] {
      auto y = torch::nn::functional::conv2d(tx, tk, torch::nn::functional::Conv2dFuncOptions().padding(1).groups(c));
      auto grads = torch::autograd::grad({y}, {tx, tk}, {tdy});
      (void)grads[1].sum().item<float>();
    }, calls, 3);
    t.torch = t.torch > 0 ? std::min(t.torch, s) : s;
  }
#endif
  return t;
}

// The machine's float32 GEMM rate: the better of weft's matmul and OpenBLAS (on every core) on
// 2048^3.
double gemm_rate(std::string* who) {
  const int64_t n = 2048;
  Tensor a = random::normal({n, n}, 0, 1, 1), b = random::normal({n, n}, 0, 1, 2);
  std::vector<float> c(static_cast<size_t>(n * n));
  const double flops = 2.0 * n * n * n;
  const double weft_rate = flops / bench::seconds_per_call([&] { Tensor y = matmul(a, b); }, 3);
  openblas_set_num_threads(host_topology().physical_cores);
  const double blas_rate = flops / bench::seconds_per_call([&] {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasNoTrans, n, n, n, 1.f, a.data<float>(), n, b.data<float>(), n, 0.f,
                c.data(), n);
  }, 3);
  openblas_set_num_threads(1);  // weft keeps OpenBLAS single-threaded (kernels/cpu/gemm.h)
  *who = blas_rate > weft_rate ? std::string("OpenBLAS ") + openblas_get_corename() : "weft matmul";
  return std::max(weft_rate, blas_rate);
}

bool cpu_has_avx512() {
  __builtin_cpu_init();
  return __builtin_cpu_supports("avx512f");
}

std::string ms(double seconds) { return seconds > 0 ? fmt("%.1f ms", seconds * 1e3) : "n/a"; }
std::string ratio(double a, double b) { return b > 0 ? fmt("%.2fx", a / b) : "n/a"; }

}  // namespace

int main(int argc, char** argv) {
  if (!std::getenv("OPENBLAS_CORETYPE")) {
    setenv("OPENBLAS_CORETYPE", cpu_has_avx512() ? "SkylakeX" : "Haswell", 1);
    execv("/proc/self/exe", argv);  // OpenBLAS reads it when it loads; on failure go on untuned
  }
  bool quick = false;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--quick") {
      quick = true;
    } else if (arg == "--profile" && i + 1 < argc) {
      profile_dir = argv[++i];
      std::error_code error;  // made here, so that a bad folder is said before minutes of runs
      std::filesystem::create_directories(profile_dir, error);
      if (error) {
        std::fprintf(stderr, "bench_convnets: --profile %s: cannot make the folder: %s\n", profile_dir.c_str(),
                     error.message().c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "usage: bench_convnets [--quick] [--profile DIR]\n");
      return 2;
    }
  }
  const int cores = host_topology().physical_cores;
#ifdef WEFT_HAVE_TORCH
  torch::set_num_threads(cores);
#endif
  std::printf("OpenBLAS core %s, %d cores; libtorch on %d threads\n", openblas_get_corename(), cores, cores);

  std::string why_no_tf;
  auto tf = bench::run_python_peer(bench::peer_python("WEFT_BENCH_PYTHON"), bench::peer_script("convnets_tf.py"),
                                   quick ? std::vector<std::string>{"--quick"} : std::vector<std::string>{}, 900,
                                   &why_no_tf);

  const int calls = quick ? 5 : 20;
  StepTimes le = lenet(256, calls);
  StepTimes rn = resnet20(64, quick ? 3 : 10);
  if (tf) {
    le.tf = (*tf)["lenet_step_ms"] / 1e3;
    rn.tf = (*tf)["resnet20_step_ms"] / 1e3;
  }
  std::string gemm_who;
  const double conv = conv_rate(quick ? 5 : 20);
  const double gemm = gemm_rate(&gemm_who);
  const DepthwiseTimes dw = depthwise_times(quick ? 5 : 20);

  std::vector<bench::Row> rows;
  auto add = [&](const std::string& name, const StepTimes& t, int64_t batch, const char* goal) {
    rows.push_back({name + " eager", ms(t.eager), "", "", ""});
    rows.push_back({name + " traced", ms(t.traced), "libtorch " + ms(t.torch), ratio(t.traced, t.torch) + " torch", goal});
    rows.push_back({name + " traced", fmt("%.0f img/s", batch / t.traced), "TF " + ms(t.tf), ratio(t.traced, t.tf) + " TF", goal});
  };
  add("LeNet-5 step, batch 256", le, 256, "<= 0.5x both");
  add("ResNet-20 step, batch 64", rn, 64, "<= 0.8x both");
  rows.push_back({"conv 3x3 64->64 32x32 b64 fwd+2 grads", fmt("%.0f GFLOP/s", conv / 1e9),
                  gemm_who + " " + fmt("%.0f GFLOP/s", gemm / 1e9), fmt("%.0f%% of GEMM", 100 * conv / gemm),
                  ">= 80% of GEMM"});
  rows.push_back({"depthwise 3x3 [32,56,56,64] fwd+2 grads", ms(dw.weft), "libtorch " + ms(dw.torch),
                   ratio(dw.weft, dw.torch) + " torch", "(no goal)"});
  bench::print_table("convolutional networks, training steps (best of rounds; CPU)", rows);
  if (!tf) std::printf("TensorFlow: n/a (%s)\n", why_no_tf.c_str());
  return 0;
}
