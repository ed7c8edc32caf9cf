// The Fashion-MNIST demo (examples/train_fashion_mnist.cpp) trained data-parallel over a cluster:
// the same model, optimizer, global batch and epochs, with one replica per task (or per device).
// Each replica reads its shard of every global batch from Debian's files on its own task, so the
// chief sends no training data; gradients are all-reduced in buckets; the chief's model holds the
// trained weights, evaluated at the end as in one process.
//
//   weft-launch -np 4 ./train_fashion_mnist_distributed [--epochs 5] [--batch 32]
//   mpirun -np 4 ./train_fashion_mnist_distributed      # the same
//   ./train_fashion_mnist_distributed                   # a cluster of one process
//
// Expect the single-process demo's test accuracy (about 0.88 after 5 epochs).
#include <weft/weft.h>

#include <cmath>
#include <cstdio>
#include <string>
#include <tuple>

using namespace weft;

namespace {

struct Options {
  int epochs = 5;
  int64_t batch = 32;  // the global batch, split over the replicas
  double learning_rate = 1e-3;
  int64_t seed = 42;
  double decay = 0.7;
  std::string data = "/usr/share/datasets/fashion-mnist";
  std::string trace;  // write a timeline of the first steps here
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&]() -> std::string {
      if (i + 1 >= argc) throw InvalidArgument("missing value after " + a);
      return argv[++i];
    };
    if (a == "--epochs") o.epochs = std::stoi(value());
    else if (a == "--batch") o.batch = std::stoll(value());
    else if (a == "--lr") o.learning_rate = std::stod(value());
    else if (a == "--seed") o.seed = std::stoll(value());
    else if (a == "--decay") o.decay = std::stod(value());
    else if (a == "--data") o.data = value();
    else if (a == "--timeline") o.trace = value();
    else throw InvalidArgument("unknown argument " + a + " (known: --epochs --batch --lr --decay --seed --data --timeline)");
  }
  return o;
}

}  // namespace

int main(int argc, char** argv) try {
  Cluster cluster = cluster::init(argc, argv);  // tasks other than the chief serve from here
  const Options opt = parse(argc, argv);
  distribute::DataParallel dp(cluster);
  std::printf("%d replicas on %d tasks\n", dp.num_replicas(), cluster.num_tasks());

  // The chief standardises with the training set's pixel mean and deviation, as the demo does.
  const std::string dir = opt.data;
  auto train = data::load_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  auto test = data::load_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  Tensor pixels = cast(train.first, float32);
  const float mean = reduce_mean(pixels).item<float>();
  const float stddev = std::sqrt(reduce_mean(square(sub(pixels, mean))).item<float>());

  // Every task reads its replicas' rows of each global batch from its own copy of the files.
  auto input = data::ShardedInput::idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz",
                                       opt.batch)
                   .shuffle(opt.seed);

  random::set_seed(opt.seed);
  nn::Sequential model{nn::Dense(128, nn::relu), nn::Dense(128, nn::relu), nn::Dense(10)};
  optim::Adam optimizer(opt.learning_rate);
  auto step = dp.function([&](Tensor images, Tensor labels) {
    Tensor x = div(sub(reshape(images, {-1, 784}), mean), stddev);
    GradientTape tape;
    Tensor logits = model(x, /*training=*/true);
    Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
    std::vector<Variable> vars = model.trainable_variables();
    optimizer.apply_gradients(tape.gradient(loss, vars), vars);
    Tensor accuracy = reduce_mean(cast(equal(cast(argmax(logits, 1), int32), labels), float32));
    return std::make_tuple(loss, accuracy);
  });

  const int64_t steps = input.batches_per_epoch();
  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    if (epoch > 1) optimizer.set_learning_rate(optimizer.learning_rate() * opt.decay);
    utils::Progbar bar(steps, "Epoch " + std::to_string(epoch) + "/" + std::to_string(opt.epochs));
    double loss_sum = 0, acc_sum = 0;
    for (int64_t s = 1; s <= steps; ++s) {
      if (epoch == 1 && s == 2 && !opt.trace.empty()) profiler::start();
      auto [loss, accuracy] = step(input);
      if (epoch == 1 && s == 11 && !opt.trace.empty()) profiler::stop(opt.trace);
      loss_sum += loss.item<float>();
      acc_sum += accuracy.item<float>();
      bar.update(s, {{"loss", loss_sum / static_cast<double>(s)}, {"accuracy", acc_sum / static_cast<double>(s)}});
    }
  }
  Tensor x_test = div(sub(cast(reshape(test.first, {-1, 784}), float32), mean), stddev);
  Tensor hits = cast(equal(cast(argmax(model(x_test), 1), int32), cast(test.second, int32)), float32);
  std::printf("test accuracy: %.4f\n", static_cast<double>(reduce_mean(hits).item<float>()));
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_fashion_mnist_distributed: %s\n", e.what());
  return 1;
}
