// Writes the seed corpus of graph_fuzz: a few small valid graph files covering the format's
// features, and damaged copies of them. Run it again when the format changes:
//
//   build-asan/tests/fuzz/make_graph_seeds tests/fuzz/corpus/graph
//
// Seeds are kept small (a few KB) so that libFuzzer mutates structure, not bulk.
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>
#include <vector>

#include <weft/weft.h>

#include "runtime/graph_format.h"

using namespace weft;

namespace {

void write(const std::filesystem::path& dir, const std::string& name, const std::string& bytes) {
  std::ofstream(dir / name, std::ios::binary) << bytes;
}

// A TF1-style graph: placeholders of two dtypes, a variable, matmul, relu, casts, a reduction.
std::string dense_graph() {
  Graph g;
  Variable w(constant({{1.f, 2.f}, {3.f, 4.f}, {5.f, 6.f}}), "dense/kernel");
  {
    GraphScope scope(g);
    Tensor x = placeholder(float32, {-1, 3}, "x");
    Tensor k = placeholder(int32, {2}, "k");
    NameScope layer("dense");
    Tensor y = identity(relu(matmul(x, w)) * cast(k, float32), "y");
    identity(reduce_sum(y, {1}), "total");
  }
  return encode_graph(g.ir());
}

// A traced function with cond and while_loop: nested subgraphs.
std::string control_flow_graph() {
  auto f = weft::function([](Tensor x) {
    Tensor y = cond(reduce_sum(x) > 0.f, [&] { return x * 2.f; }, [&] { return -x; });
    std::vector<Tensor> r = while_loop([](const std::vector<Tensor>& v) { return v[0] < 3; },
                                       [](const std::vector<Tensor>& v) -> std::vector<Tensor> {
                                         return {v[0] + 1, v[1] * 0.5f};
                                       },
                                       {constant(0), y});
    return r[1];
  });
  Tensor x = constant({1.f, -2.f, 3.f});
  return encode_graph(f.graph(x).ir());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::cerr << "usage: make_graph_seeds DIR\n";
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  try {
    std::filesystem::create_directories(dir);
    const std::string dense = dense_graph();
    const std::string flow = control_flow_graph();
    write(dir, "dense.capnp", dense);
    write(dir, "control_flow.capnp", flow);

    // Damaged copies: cut short, a flipped byte in the middle, a wrong magic, a forged segment
    // count (the first word of the Cap'n Proto message after the 8-byte magic).
    write(dir, "bad_truncated.capnp", dense.substr(0, dense.size() / 2));
    std::string flipped = flow;
    flipped[flipped.size() / 2] = static_cast<char>(flipped[flipped.size() / 2] ^ 0x5A);
    write(dir, "bad_flipped.capnp", flipped);
    std::string magic = dense;
    magic[0] = 'X';
    write(dir, "bad_magic.capnp", magic);
    std::string segments = dense;
    segments[8] = '\x00';  // 4097 segments, whose table alone would outrun the file
    segments[9] = '\x10';
    write(dir, "bad_segment_count.capnp", segments);
    std::cout << "wrote " << dense.size() << " and " << flow.size() << " byte graphs and 4 damaged copies to "
              << dir.string() << "\n";
  } catch (const std::exception& e) {
    std::cerr << "make_graph_seeds: " << e.what() << "\n";
    return 1;
  }
  return 0;
}
