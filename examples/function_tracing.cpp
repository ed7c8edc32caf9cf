// weft::function, the tf.function of weft: trace once, run the graph many times.
//
//   ./function_tracing
//
// Shows when a function traces (and retraces), the two kinds of printing, a function with two
// results, and a whole training step traced into one graph.
#include <iostream>

#include <weft/weft.h>

using namespace weft;

int main() {
  // 1. Tracing happens on the first call with a given signature (dtypes and shapes).
  auto add_then_relu = function([](Tensor a, Tensor b) {
    std::cout << "  tracing add_then_relu with a = " << a << "\n";  // runs only while tracing
    return relu(a + b);
  });
  std::cout << "calling add_then_relu three times with float32 (3,) tensors:\n";
  for (int i = 0; i < 3; ++i) add_then_relu(constant({1.f, -2.f, 3.f}), constant({1.f, 1.f, 1.f}));
  std::cout << "calling it with a (2,) tensor: a new signature, so it traces again:\n";
  Tensor r = add_then_relu(constant({-1.f, 5.f}), constant({0.f, 0.f}));
  std::cout << "result " << r << "; tracing_count() = " << add_then_relu.tracing_count() << "\n\n";

  // 2. std::cout prints the symbolic tensor once, at trace time; print() is an op and prints on
  //    every call (to stderr).
  auto noisy = function([](Tensor x) {
    std::cout << "  (trace time) x + 1 is " << x + 1.f << "\n";
    return print(x + 1.f, "  (every call) x + 1 = ");
  });
  for (float v : {1.f, 2.f, 3.f}) noisy(constant({v}));
  std::cout << "noisy traced " << noisy.tracing_count() << " time(s) for 3 calls\n\n";

  // 3. Several results: calc(a, b, c) returns d = a*b + c and e = a*b*c.
  auto calc = function([](Tensor a, Tensor b, Tensor c) {
    Tensor ab = a * b;  // computed once in the graph, used twice
    return std::tuple<Tensor, Tensor>{ab + c, ab * c};
  });
  auto [d, e] = calc(constant(2.f), constant(3.f), constant(4.f));
  std::cout << "calc(2, 3, 4) -> d = " << d.item<float>() << ", e = " << e.item<float>() << "\n\n";

  // 4. A training step: forward, GradientTape, optimizer update, all in one graph.
  nn::Sequential model{nn::Dense(16, nn::relu), nn::Dense(1)};
  optim::SGD opt(0.05);
  auto train_step = function([&](Tensor x, Tensor y) {
    GradientTape tape;
    Tensor loss = reduce_mean(square(model(x, true) - y));
    auto vars = model.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  });
  Tensor x = random::uniform({64, 1}, -1, 1, 1);
  Tensor y = 3.f * x + 0.5f;
  for (int step = 0; step <= 200; ++step) {
    Tensor loss = train_step(x, y);
    if (step % 50 == 0) std::cout << "step " << step << "  loss " << loss.item<float>() << "\n";
  }
  std::cout << "train_step traced " << train_step.tracing_count() << " time(s); its graph has "
            << train_step.graph(x, y).num_nodes() << " nodes\n";
  return 0;
}
