// TF1-style graphs: build with placeholders, run with a Session, feed and fetch by name; then
// train a model TF1-style, running the train op that apply_gradients returns as a target.
//
//   ./graph_session
#include <iostream>

#include <weft/weft.h>

using namespace weft;

int main() {
  Graph g;
  Variable w(constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), "w");
  {
    GraphScope scope(g);  // like `with g.as_default():`
    Tensor x = placeholder(float32, {-1, 3}, "x");
    NameScope layer("layer");
    Tensor y = identity(relu(matmul(x, w)), "y");
    identity(reduce_sum(y), "total");
    std::cout << "built " << y << "\n";
  }

  std::cout << "operations:\n";
  for (const Operation& op : g.operations())
    std::cout << "  " << op.name() << " (" << op.type() << ")  created at " << op.source_location().to_string()
              << "\n";

  Session sess(g);
  Tensor batch = constant({{1.f, 0.f, 0.f}, {0.f, 1.f, -1.f}});
  auto out = sess.run({{"x:0", batch}}, {"layer/y:0", "layer/total:0"});
  std::cout << "y = " << out[0] << "\ntotal = " << out[1] << "\n";

  // Fetch by handle, and override an intermediate tensor with a feed.
  Tensor y = g.tensor("layer/y:0");
  std::cout << "total with y fed directly: " << sess.run({{y, ones({1, 2})}}, {"layer/total"})[0] << "\n";

  // Running without feeding x fails, naming the placeholder.
  try {
    sess.run({"layer/y:0"});
  } catch (const InvalidArgument& e) {
    std::cout << "as expected: " << e.what() << "\n";
  }

  // TF1-style training: y = 3x - 1 learnt by a Dense layer, one train op run per step.
  Graph tg;
  nn::Dense line(1);
  optim::SGD sgd(0.1);
  Tensor loss;
  Operation train;
  {
    GraphScope scope(tg);
    Tensor x = placeholder(float32, {-1, 1}, "x");
    Tensor target = placeholder(float32, {-1, 1}, "target");
    GradientTape tape;
    loss = identity(reduce_mean(square(line(x) - target)), "loss");
    train = sgd.apply_gradients(tape.gradient(loss, line.trainable_variables()), line.trainable_variables());
  }
  Session trainer(tg);
  Tensor xs = constant(std::vector<float>{-1, 0, 1, 2}, Shape{4, 1});
  Tensor ys = constant(std::vector<float>{-4, -1, 2, 5}, Shape{4, 1});
  for (int step = 0; step <= 100; ++step) {
    auto fetched = trainer.run({{"x:0", xs}, {"target:0", ys}}, {loss}, {train});
    if (step % 25 == 0) std::cout << "step " << step << ": loss " << fetched[0].item<float>() << "\n";
  }
  // Fetching without the train op as a target runs no update.
  std::cout << "kernel " << line.kernel().value() << "\nbias " << line.bias().value() << "\n";
  return 0;
}
