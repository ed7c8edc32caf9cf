// Train a small MLP on Fashion-MNIST, eagerly, the way a Keras user would:
//
//   ./train_fashion_mnist [--epochs 5] [--batch 32] [--data /usr/share/datasets/fashion-mnist]
//
// The data comes from Debian's dataset-fashion-mnist package. Expect about 0.88 test accuracy
// after 5 epochs.
#include <weft/weft.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

using namespace weft;

namespace {

struct Options {
  int epochs = 5;
  int64_t batch = 32;
  double learning_rate = 1e-3;
  int64_t seed = 42;
  double decay = 0.7;  // learning rate multiplier per epoch (Keras' LearningRateScheduler)
  std::string data = "/usr/share/datasets/fashion-mnist";
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
    else throw InvalidArgument("unknown argument " + a + " (known: --epochs --batch --lr --decay --seed --data)");
  }
  return o;
}

// uint8 images (N, 28, 28) -> float32 (N, 784) standardised with the training set's pixel mean
// and deviation (a small, reliable gain for an MLP); uint8 labels -> int32.
std::pair<Tensor, Tensor> prepare(const std::pair<Tensor, Tensor>& raw, float mean, float stddev) {
  Tensor x = div(sub(cast(reshape(raw.first, {-1, 784}), float32), mean), stddev);
  return {x, cast(raw.second, int32)};
}

double accuracy(const Tensor& logits, const Tensor& labels) {
  Tensor hits = cast(equal(cast(argmax(logits, 1), int32), labels), float32);
  return reduce_mean(hits).item<float>();
}

}  // namespace

int main(int argc, char** argv) try {
  Options opt = parse(argc, argv);
  auto train = data::load_idx(opt.data + "/train-images-idx3-ubyte.gz", opt.data + "/train-labels-idx1-ubyte.gz");
  auto test = data::load_idx(opt.data + "/t10k-images-idx3-ubyte.gz", opt.data + "/t10k-labels-idx1-ubyte.gz");
  Tensor pixels = cast(train.first, float32);
  float mean = reduce_mean(pixels).item<float>();
  float stddev = std::sqrt(reduce_mean(square(sub(pixels, mean))).item<float>());
  auto [x_train, y_train] = prepare(train, mean, stddev);
  auto [x_test, y_test] = prepare(test, mean, stddev);
  std::printf("Fashion-MNIST: %lld training and %lld test images\n", static_cast<long long>(x_train.shape()[0]),
              static_cast<long long>(x_test.shape()[0]));

  random::set_seed(opt.seed);
  nn::Sequential model{nn::Dense(128, nn::relu), nn::Dense(128, nn::relu), nn::Dense(10)};
  optim::Adam optimizer(opt.learning_rate);
  auto dataset = data::Dataset::from_tensors({x_train, y_train}).shuffle(60000, opt.seed).batch(opt.batch).prefetch(2);
  const int64_t steps = dataset.cardinality();

  for (int epoch = 1; epoch <= opt.epochs; ++epoch) {
    if (epoch > 1) optimizer.set_learning_rate(optimizer.learning_rate() * opt.decay);
    utils::Progbar bar(steps, "Epoch " + std::to_string(epoch) + "/" + std::to_string(opt.epochs));
    double loss_sum = 0, acc_sum = 0;
    int64_t step = 0;
    for (const std::vector<Tensor>& batch : dataset) {
      GradientTape tape;
      Tensor logits = model(batch[0], /*training=*/true);
      Tensor loss = nn::sparse_softmax_cross_entropy(batch[1], logits);
      std::vector<Variable> vars = model.trainable_variables();
      optimizer.apply_gradients(tape.gradient(loss, vars), vars);
      loss_sum += loss.item<float>();
      acc_sum += accuracy(logits, batch[1]);
      ++step;
      bar.update(step, {{"loss", loss_sum / step}, {"accuracy", acc_sum / step}});
    }
  }
  double test_acc = accuracy(model(x_test), y_test);
  std::printf("test accuracy: %.4f\n", test_acc);
  return 0;
} catch (const std::exception& e) {
  std::fprintf(stderr, "train_fashion_mnist: %s\n", e.what());
  return 1;
}
