// The five seed programs of ../shared/SEEDS.md as written (their shapes and layers; call counts
// scaled down), eager and traced, beside TensorFlow 2 in the same run.
//
// TensorFlow's side is bench/seeds_tf.py, run first with the interpreter named by
// WEFT_BENCH_PYTHON (scripts/bench points it at its private environment with tensorflow-cpu).
// Without it, or when TensorFlow does not import, weft is reported alone.
//
//   1. add_then_relu: relu(a + b) on 4 floats (seed 004's exercise)
//   2. seed 000: four Dense layers 784-128-128-128-10 over 60000x784, returning the logits
//   3. seed 004 shallow: Keras Dense(10, relu), Dense(20, relu), Dense(30, softmax) called on
//      [60, 28, 28] (Dense on the last axis), the activations as the seed writes them
//   4. seed 004 deep: Dense 1000/2000/3000, relu, relu, softmax, on the same input
//   5. the MLP training step, batch 256, SGD, tape inside the step
// Pass --quick for fewer calls.
#include <array>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "runtime/device.h"
#include "weft/weft.h"

using namespace weft;
using weft::bench::fmt;

namespace {

struct Times {
  double eager = 0, traced = 0;
};

// TensorFlow's times per program, or nothing when it cannot run here.
std::map<std::string, Times> tensorflow_times(bool quick, std::string& version, std::string& why_absent) {
  const char* python = std::getenv("WEFT_BENCH_PYTHON");
  if (!python || !*python) {
    why_absent = "WEFT_BENCH_PYTHON unset (scripts/bench sets it)";
    return {};
  }
  const std::string command = std::string("'") + python + "' '" WEFT_SOURCE_DIR "/bench/seeds_tf.py'" +
                              (quick ? " --quick" : "") + " 2>/dev/null";
  std::unique_ptr<FILE, int (*)(FILE*)> pipe(popen(command.c_str(), "r"), pclose);
  if (!pipe) {
    why_absent = "could not start " + std::string(python);
    return {};
  }
  std::string output;
  std::array<char, 4096> buf;
  while (fgets(buf.data(), buf.size(), pipe.get())) output += buf.data();
  // The JSON is the last non-empty line; TensorFlow may print before it.
  while (!output.empty() && output.back() == '\n') output.pop_back();
  const std::string last_line = output.substr(output.rfind('\n') == std::string::npos ? 0 : output.rfind('\n') + 1);
  const auto parsed = nlohmann::json::parse(last_line, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) {
    why_absent = "TensorFlow did not run (is tensorflow-cpu installed for " + std::string(python) + "?)";
    return {};
  }
  std::map<std::string, Times> out;
  for (const auto& [name, v] : parsed.items()) {
    if (name == "_version") {
      version = v.get<std::string>();
    } else if (v.is_object()) {
      out[name] = {v.value("eager", 0.0), v.value("traced", 0.0)};
    }
  }
  return out;
}

template <class Eager, class Traced>
Times paired(Eager&& eager, Traced&& traced, int calls, int rounds) {
  auto [e, t] = bench::seconds_per_call_paired(eager, traced, std::max(1, calls / rounds), rounds);
  return {e, t};
}

Times add_then_relu(bool quick) {
  Tensor a = constant({1.f, -2.f, 3.f, -4.f}), b = constant({0.5f, 0.5f, -5.f, 5.f});
  auto traced = function([](Tensor p, Tensor q) { return relu(p + q); });
  return paired([&] { Tensor y = relu(a + b); }, [&] { Tensor y = traced(a, b); }, quick ? 20000 : 100000, 20);
}

// Dense layers of `widths` with relu between them and `last` (none: the logits) on the last one.
nn::Sequential dense_stack(const std::vector<int64_t>& widths, nn::Activation last = nullptr) {
  std::vector<nn::Module> layers;
  for (size_t i = 0; i < widths.size(); ++i)
    layers.push_back(nn::Dense(widths[i], i + 1 < widths.size() ? nn::Activation(nn::relu) : last));
  return nn::Sequential(std::move(layers));
}

Times seed000_forward(bool quick) {
  Tensor x = random::uniform({60000, 784}, 0, 1, 3);
  nn::Sequential model = dense_stack({128, 128, 128, 10});
  auto traced = function([&](Tensor in) { return model(in); });
  return paired([&] { Tensor y = model(x); }, [&] { Tensor y = traced(x); }, quick ? 2 : 6, quick ? 2 : 3);
}

Times seed004(bool deep, bool quick) {
  Tensor x = random::uniform({60, 28, 28}, 0, 1, 4);
  const std::vector<int64_t> widths = deep ? std::vector<int64_t>{1000, 2000, 3000} : std::vector<int64_t>{10, 20, 30};
  nn::Sequential model = dense_stack(widths, nn::softmax);
  auto traced = function([&](Tensor in) { return model(in); });
  const int calls = deep ? (quick ? 2 : 6) : (quick ? 500 : 2000);
  return paired([&] { Tensor y = model(x); }, [&] { Tensor y = traced(x); }, calls, deep ? (quick ? 2 : 3) : 10);
}

Times mlp_train_step(bool quick) {
  Tensor x = random::normal({256, 784}, 0, 1, 1);
  Tensor y = cast(random::uniform({256}, 0, 9.99, 2), int32);
  nn::Sequential eager_model = dense_stack({128, 128, 128, 10});
  nn::Sequential traced_model = dense_stack({128, 128, 128, 10});
  optim::SGD eager_sgd(0.01), traced_sgd(0.01);
  auto step = [](nn::Sequential& m, optim::SGD& opt, const Tensor& xb, const Tensor& yb) {
    GradientTape tape;
    Tensor loss = nn::sparse_softmax_cross_entropy(yb, m(xb, true));
    auto vars = m.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  auto traced = function([&](Tensor xb, Tensor yb) { return step(traced_model, traced_sgd, xb, yb); });
  return paired([&] { step(eager_model, eager_sgd, x, y).item<float>(); }, [&] { traced(x, y).item<float>(); },
                quick ? 50 : 200, 10);
}

std::string time_text(double s) {
  if (s <= 0) return "n/a";
  if (s < 1e-3) return fmt("%.2f us", s * 1e6);
  return fmt("%.2f ms", s * 1e3);
}

}  // namespace

int main(int argc, char** argv) {
  const bool quick = argc > 1 && std::string(argv[1]) == "--quick";
  std::string tf_version, why_absent;
  // TensorFlow first, alone on the machine: running it beside weft would slow both.
  const std::map<std::string, Times> tf = tensorflow_times(quick, tf_version, why_absent);
  std::printf("weft seeds: %d physical cores; TensorFlow %s\n", host_topology().physical_cores,
              tf.empty() ? ("absent: " + why_absent).c_str() : tf_version.c_str());

  struct Program {
    std::string key, name, goal;
    double goal_ratio;  // weft traced / TensorFlow traced
    Times weft;
  };
  std::vector<Program> programs = {
      {"add_then_relu", "add_then_relu, 4 floats", "<= 0.005x TF", 0.005, add_then_relu(quick)},
      {"seed000_forward", "seed 000 forward, 60000x784", "<= 0.8x TF", 0.8, seed000_forward(quick)},
      {"seed004_shallow", "seed 004 shallow, [60,28,28]", "<= 0.1x TF, <= weft eager", 0.1, seed004(false, quick)},
      {"seed004_deep", "seed 004 deep, [60,28,28]", "<= 0.9x TF", 0.9, seed004(true, quick)},
      {"mlp_train_step", "MLP training step, batch 256", "<= 0.55x TF", 0.55, mlp_train_step(quick)},
  };

  std::printf("\n| %-30s | %-11s | %-11s | %-11s | %-11s | %-13s | %-26s | %-4s |\n", "program", "TF eager", "TF traced",
              "weft eager", "weft traced", "traced / TF", "goal for weft traced", "met");
  std::printf("|%s|%s|%s|%s|%s|%s|%s|%s|\n", std::string(32, '-').c_str(), std::string(13, '-').c_str(),
              std::string(13, '-').c_str(), std::string(13, '-').c_str(), std::string(13, '-').c_str(),
              std::string(15, '-').c_str(), std::string(28, '-').c_str(), std::string(6, '-').c_str());
  for (const Program& p : programs) {
    const auto it = tf.find(p.key);
    const Times peer = it == tf.end() ? Times{} : it->second;
    std::string ratio = "n/a", met = "n/a";
    if (peer.traced > 0) {
      const double r = p.weft.traced / peer.traced;
      ratio = fmt("%.4fx", r);
      bool ok = r <= p.goal_ratio;
      if (p.key == "seed004_shallow") ok = ok && p.weft.traced <= p.weft.eager;
      met = ok ? "yes" : "no";
    }
    std::printf("| %-30s | %-11s | %-11s | %-11s | %-11s | %-13s | %-26s | %-4s |\n", p.name.c_str(),
                time_text(peer.eager).c_str(), time_text(peer.traced).c_str(), time_text(p.weft.eager).c_str(),
                time_text(p.weft.traced).c_str(), ratio.c_str(), p.goal.c_str(), met.c_str());
  }
  return 0;
}
