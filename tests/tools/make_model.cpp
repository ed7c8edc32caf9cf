// Writes the fixtures of the weft-run / weft-inspect tests into DIR:
//
//   DIR/model/                   a saved function, trained a few steps first: relu(x @ kernel + bias),
//                                its product with k, 3k - 1
//   DIR/effects_model/           a saved function that returns nothing, only adds to a variable
//   DIR/cnn_model/               a small CNN's inference (conv, batch norm, relu, max pool, dense),
//                                trained two steps first; its input DIR/images.npy (float32
//                                (3, 8, 8, 1)) and output DIR/cnn_expected.npy
//   DIR/x.npy, DIR/k.npy         its inputs (float32 (2, 4), int32 (2, 3))
//   DIR/expected_<i>.npy         what calling the function returned for output_i
//   DIR/x_int.npy, DIR/x_wide.npy, DIR/garbage.npy, DIR/bad_model/   for the error cases
//   DIR/fifo_graph.capnp         a graph whose ReadShardedBatch names DIR/fifo, a FIFO
//
// The expected outputs come from calling the traced function in this process, so weft-run must
// reproduce them bit for bit from the saved graph and values alone.
#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <vector>

#include <weft/weft.h>

#include "api/dispatch.h"
#include "runtime/npy.h"

using namespace weft;

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_model DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  try {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir / "bad_model");

    Variable kernel(random::normal({4, 3}, 0.0, 1.0, /*seed=*/11), "dense/kernel");
    Variable bias(constant({0.25f, -0.5f, 0.125f}), "dense/bias");
    auto model = weft::function([&](Tensor x, Tensor k) {
      Tensor y = relu(matmul(x, kernel) + bias);
      return std::vector<Tensor>{y, y * cast(k, float32), k * 3 - 1};
    });

    const std::vector<float> xs{0.5f, -1.f, 2.f, 0.25f, -0.75f, 1.5f, 0.f, -2.f};
    Tensor x = constant(xs, Shape{2, 4});
    Tensor k = constant({{1, 2, 3}, {-4, 5, -6}});

    // Trained first, so the saved values are the trained ones, not the initial ones.
    optim::Adam opt(0.05);
    Tensor target = constant({{1.f, 0.f, 2.f}, {0.f, 3.f, 1.f}});
    std::vector<Variable> vars{kernel, bias};
    for (int step = 0; step < 5; ++step) {
      GradientTape tape;
      Tensor loss = reduce_mean(square(relu(matmul(x, kernel) + bias) - target));
      opt.apply_gradients(tape.gradient(loss, vars), vars);
    }
    const std::vector<Tensor> expected = model(x, k);
    model.save((dir / "model").string(), x, k);

    // A function that returns nothing: weft-run runs its side effects.
    Variable total(constant({{0, 0, 0}, {0, 0, 0}}), "total");
    auto accumulate = weft::function([&](Tensor v) { total.assign_add(v); });
    accumulate.save((dir / "effects_model").string(), k);

    // A CNN as users write it, trained two steps so the moving statistics are not the initial ones.
    random::set_seed(5);
    nn::Sequential cnn{nn::Conv2D(4, {3, 3}, {.strides = {1, 1}, .padding = "same", .use_bias = false}),
                       nn::BatchNormalization(), nn::ReLU(), nn::MaxPool2D({2, 2}), nn::Flatten(), nn::Dense(3)};
    Tensor images = random::normal({3, 8, 8, 1}, 0.0, 1.0, /*seed=*/12);
    Tensor labels = constant({0, 2, 1});
    for (int step = 0; step < 2; ++step) {
      GradientTape tape;
      Tensor loss = nn::sparse_softmax_cross_entropy(labels, cnn(images, true));
      std::vector<Variable> cnn_vars = cnn.trainable_variables();
      opt.apply_gradients(tape.gradient(loss, cnn_vars), cnn_vars);
    }
    auto predict = weft::function([&](Tensor im) { return cnn(im, /*training=*/false); });
    const Tensor cnn_expected = predict(images);
    predict.save((dir / "cnn_model").string(), images);
    save_npy((dir / "images.npy").string(), images);
    save_npy((dir / "cnn_expected.npy").string(), cnn_expected);

    save_npy((dir / "x.npy").string(), x);
    save_npy((dir / "k.npy").string(), k);
    for (size_t i = 0; i < expected.size(); ++i)
      save_npy((dir / ("expected_" + std::to_string(i) + ".npy")).string(), expected[i]);

    save_npy((dir / "x_int.npy").string(), cast(x, int32));                 // right shape, wrong dtype
    save_npy((dir / "x_wide.npy").string(), constant(std::vector<float>(10, 1.f), Shape{2, 5}));  // wrong shape
    std::ofstream(dir / "garbage.npy") << "this is not a .npy file\n";
    std::ofstream(dir / "bad_model" / "graph.capnp") << "this is not a graph either\n";

    // A graph that reads files, named as FIFOs: inspecting it must open neither (it would wait for
    // a writer), running it must say it reads them and refuse them at once.
    const std::string fifo = (dir / "fifo").string();
    if (::mkfifo(fifo.c_str(), 0600) != 0) throw std::runtime_error("mkfifo " + fifo + " failed");
    Graph reader;
    {
      GraphScope scope(reader);
      const Attrs attrs{{"format", std::string("idx")}, {"features", fifo}, {"labels", fifo},
                        {"global_batch", int64_t{4}}, {"replica", int64_t{0}}, {"num_replicas", int64_t{1}},
                        {"seed", int64_t{-1}}, {"drop_remainder", false}, {"scale", 1.0},
                        {"source", std::string("fifo")}, {"example_shape", Shape{2, 2}}};
      identity(dispatch(op_def("ReadShardedBatch"), {}, attrs)[0], "output_0");
    }
    reader.save((dir / "fifo_graph.capnp").string());
  } catch (const std::exception& e) {
    std::cerr << "make_model: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
