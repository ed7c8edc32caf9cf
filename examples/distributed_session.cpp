// A TF1-style model split over the tasks of a cluster: the first layer on task 1, the second on
// task 2, the loss and the optimizer's bookkeeping placed by weft; trained through one Session.
// Tensors move between the tasks over MPI; only step ids travel on the control channel.
//
//   weft-launch -np 3 ./distributed_session        # or: mpirun -np 3 ./distributed_session
//   ./distributed_session                          # a cluster of one process: same program
#include <cmath>
#include <iostream>

#include <weft/weft.h>

using namespace weft;

int main(int argc, char** argv) {
  Cluster cluster = cluster::init(argc, argv);  // tasks other than the chief serve from here
  std::cout << "cluster of " << cluster.num_tasks() << " tasks:\n";
  for (const DeviceInfo& d : cluster.devices()) std::cout << "  " << d.name << "\n";
  // Task t by its full name ("/job:worker/replica:0/task:1"), whatever jobs the spec has.
  auto task = [&](int t) { return cluster.task_names()[static_cast<size_t>(t % cluster.num_tasks())]; };

  // y = sin(x0) + cos(x1) on a grid, learnt by a two-layer MLP.
  std::vector<float> xv, yv;
  for (int i = 0; i < 256; ++i) {
    const float a = static_cast<float>(i % 16) / 8.f - 1.f, b = static_cast<float>(i / 16) / 8.f - 1.f;
    xv.insert(xv.end(), {a, b});
    yv.push_back(std::sin(2 * a) + std::cos(2 * b));
  }
  const Tensor xs = Tensor::from_host(float32, {256, 2}, xv.data());
  const Tensor ys = Tensor::from_host(float32, {256, 1}, yv.data());

  Graph g;
  nn::Dense hidden(64, nn::tanh), out(1);
  optim::Adam adam(0.01);
  Tensor loss;
  Operation train;
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {-1, 2}, "x");
    Tensor y = placeholder(float32, {-1, 1}, "y");
    GradientTape tape;
    Tensor h, pred;
    {
      DeviceScope on(task(1));
      h = hidden(x);
    }
    {
      DeviceScope on(task(2));
      pred = out(h);
    }
    loss = identity(reduce_mean(square(pred - y)), "loss");
    std::vector<Variable> vars = hidden.trainable_variables();
    for (const Variable& v : out.trainable_variables()) vars.push_back(v);
    train = adam.apply_gradients(tape.gradient(loss, vars), vars);
  }

  Session sess(g, cluster);
  for (int step = 0; step <= 300; ++step) {
    const float l = sess.run({{"x:0", xs}, {"y:0", ys}}, {loss}, {train})[0].item<float>();
    if (step % 50 == 0) std::cout << "step " << step << ": loss " << l << "\n";
  }
  std::cout << "placement:\n";
  int shown = 0;
  for (const auto& [node, device] : sess.placement())
    if (shown++ < 8) std::cout << "  " << node << " -> " << device << "\n";
  return 0;
}
