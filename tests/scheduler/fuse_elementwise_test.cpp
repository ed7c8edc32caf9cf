// The fusion pass: which nodes it merges and which it must leave alone, and that every graph
// computes the same values before and after.
#include "scheduler/passes/fuse_elementwise.h"

#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstring>
#include <random>

#include "graph_test_util.h"
#include "kernels/defs/fused.h"
#include "runtime/tensor_internals.h"
#include "scheduler/executor.h"

namespace weft {
namespace {

using testing::add;
using testing::constant;
using testing::placeholder;

template <class T = float>
Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-2, 2);
  std::vector<T> v(static_cast<size_t>(shape.num_elements()));
  for (T& e : v) e = static_cast<T>(d(gen));
  return Tensor::from_host(dtype_v<T>, shape, v.data());
}

// Runs the graph's results with `values` fed to the placeholders `feeds`.
std::vector<Tensor> run(const GraphIR& g, const std::vector<int32_t>& feeds, const std::vector<Tensor>& values) {
  ExecutorSpec spec;
  for (int32_t f : feeds) spec.feeds.push_back({f, 0});
  spec.fetches = g.results;
  Executor exec(std::make_shared<const GraphIR>(g.clone()), spec);
  return exec.run(values);
}

int count(const GraphIR& g, const std::string& type) {
  int n = 0;
  for (int32_t id : g.node_ids()) n += g.node(id).type() == type;
  return n;
}

void expect_same_results(const std::vector<Tensor>& before, const std::vector<Tensor>& after, double tol) {
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) {
    ASSERT_EQ(before[i].shape(), after[i].shape()) << "result " << i;
    if (before[i].dtype() == DType::Float64) {
      EXPECT_EQ(before[i].to_vector<double>(), after[i].to_vector<double>()) << "result " << i;
    } else if (before[i].dtype() == DType::Int32) {
      EXPECT_EQ(before[i].to_vector<int32_t>(), after[i].to_vector<int32_t>()) << "result " << i;
    } else if (tol == 0) {
      EXPECT_EQ(before[i].to_vector<float>(), after[i].to_vector<float>()) << "result " << i;
    } else {
      const auto b = before[i].to_vector<float>(), a = after[i].to_vector<float>();
      for (size_t k = 0; k < a.size(); ++k)
        ASSERT_NEAR(a[k], b[k], tol * (1 + std::abs(b[k]))) << "result " << i << " at " << k;
    }
  }
}

// Fuses g, checks it is still a DAG, and that it computes what it did before, bitwise unless a
// tolerance is given (the banded GEMM of FusedMatMul may round differently).
int fuse_and_compare(GraphIR& g, const std::vector<int32_t>& feeds, const std::vector<Tensor>& values,
                     double tol = 0) {
  const std::vector<Tensor> before = run(g, feeds, values);
  const int removed = fuse_elementwise(g);
  EXPECT_NO_THROW(g.topological_order());
  expect_same_results(before, run(g, feeds, values), tol);
  return removed;
}

TEST(FuseElementwise, ReluOfSumBecomesOneNode) {
  GraphIR g;
  const int32_t a = placeholder(g, float32, {3}, "a"), b = placeholder(g, float32, {3}, "b");
  const int32_t sum = add(g, "Add", {{a, 0}, {b, 0}});
  const int32_t relu = add(g, "Relu", {{sum, 0}}, {}, "out");
  g.results = {{relu, 0}};
  const SourceLoc loc = g.node(relu).loc;
  EXPECT_EQ(g.num_nodes(), 4);
  EXPECT_EQ(fuse_and_compare(g, {a, b}, {random_tensor({3}, 1), random_tensor({3}, 2)}), 1);
  EXPECT_EQ(g.num_nodes(), 3);
  const Node* fused = g.find("out");
  ASSERT_NE(fused, nullptr);
  EXPECT_EQ(fused->type(), "FusedElementwise");
  EXPECT_EQ(fused->loc.line, loc.line);
  EXPECT_EQ(fused->loc.file, loc.file);
  EXPECT_EQ(g.results[0], (Endpoint{fused->id, 0}));
  EXPECT_EQ(g.find("Add"), nullptr);  // the removed node's name is free again
  EXPECT_EQ(g.unique_name("Add"), "Add");
}

// Every op FusedElementwise has an opcode for (kernels/defs/fused.h) fuses with its reader, and
// the fused node gives the unfused chain's bits, float32 and float64, a broadcast operand and the
// NaN of a log or square root of a negative number included. An op added to the table is tested
// here without a line of its own.
TEST(FuseElementwise, EveryFusableOpFusesAndKeepsItsBits) {
  for (int code = 0; code < fused::kNumOpcodes; ++code) {
    const fused::OpcodeInfo& info = fused::kOpcodes[code];
    for (DType dt : {float32, float64}) {
      SCOPED_TRACE(std::string(info.op) + " " + std::string(dtype_name(dt)));
      auto sample = [dt](const Shape& s, uint32_t seed) {
        return dt == float32 ? random_tensor<float>(s, seed) : random_tensor<double>(s, seed);
      };
      // b, when the op takes it, broadcasts against a.
      GraphIR g;
      const bool binary = info.arity == 2;
      const int32_t a = placeholder(g, dt, {3, 40}, "a");
      const std::vector<int32_t> feeds = binary ? std::vector<int32_t>{a, placeholder(g, dt, {40}, "b")}
                                                : std::vector<int32_t>{a};
      const Tensor x = sample({3, 40}, 40 + code);
      const std::vector<Tensor> values =
          binary ? std::vector<Tensor>{x, sample({40}, 80 + code)} : std::vector<Tensor>{x};
      std::vector<Endpoint> ins;
      for (int32_t f : feeds) ins.push_back({f, 0});
      const int32_t op = add(g, info.op, ins);
      g.results = {{add(g, "Mul", {{op, 0}, {a, 0}}), 0}};
      const Tensor before = run(g, feeds, values)[0];
      EXPECT_EQ(fuse_elementwise(g), 1);
      EXPECT_EQ(count(g, "FusedElementwise"), 1);
      EXPECT_EQ(count(g, info.op), 0);
      const Tensor after = run(g, feeds, values)[0];
      ASSERT_EQ(before.shape(), after.shape());
      EXPECT_EQ(std::memcmp(raw_data(before), raw_data(after), before.nbytes()), 0);
    }
  }
}

TEST(FuseElementwise, LongChainWithBroadcastingIsOneNode) {
  // out = sqrt(abs(tanh(x * s + bias) - x)) + exp(-x) * maximum(x, 0.5), x of unknown batch size.
  GraphIR g;
  const int32_t x = placeholder(g, float32, {-1, 5}, "x");
  const int32_t bias = placeholder(g, float32, {5}, "bias");
  const int32_t s = constant(g, Tensor::from_host(float32, {}, std::vector<float>{1.5f}.data()));
  const int32_t half = constant(g, Tensor::from_host(float32, {1}, std::vector<float>{0.5f}.data()));
  const int32_t xs = add(g, "Mul", {{x, 0}, {s, 0}});
  const int32_t pre = add(g, "Add", {{xs, 0}, {bias, 0}});
  const int32_t t = add(g, "Tanh", {{pre, 0}});
  const int32_t d = add(g, "Sub", {{t, 0}, {x, 0}});
  const int32_t r = add(g, "Sqrt", {{add(g, "Abs", {{d, 0}}), 0}});
  const int32_t e = add(g, "Exp", {{add(g, "Neg", {{x, 0}}), 0}});
  const int32_t m = add(g, "Maximum", {{x, 0}, {half, 0}});
  const int32_t out = add(g, "Add", {{r, 0}, {add(g, "Mul", {{e, 0}, {m, 0}}), 0}});
  g.results = {{out, 0}};
  EXPECT_EQ(g.num_nodes(), 15);
  EXPECT_EQ(fuse_and_compare(g, {x, bias}, {random_tensor({8, 5}, 3), random_tensor({5}, 4)}), 10);
  EXPECT_EQ(g.num_nodes(), 5);  // x, bias, two constants, one fused node
  EXPECT_EQ(count(g, "FusedElementwise"), 1);
  EXPECT_EQ(g.node(g.results[0].node).inputs.size(), 4u);  // x, s, bias, half: each read once
}

TEST(FuseElementwise, SharedIntermediateAndFloat64) {
  // u = (a + b) * (a + b) reads the sum twice; d = exp(u) - u reads u twice.
  GraphIR g;
  const int32_t a = placeholder(g, float64, {4, 3}, "a"), b = placeholder(g, float64, {4, 3}, "b");
  const int32_t sum = add(g, "Add", {{a, 0}, {b, 0}});
  const int32_t u = add(g, "Mul", {{sum, 0}, {sum, 0}});
  const int32_t d = add(g, "Sub", {{add(g, "Exp", {{u, 0}}), 0}, {u, 0}});
  g.results = {{d, 0}};
  EXPECT_EQ(fuse_and_compare(g, {a, b}, {random_tensor<double>({4, 3}, 5), random_tensor<double>({4, 3}, 6)}), 3);
  EXPECT_EQ(g.num_nodes(), 3);
}

TEST(FuseElementwise, DenseLayerBecomesFusedMatMul) {
  for (const char* act : {"Relu", "Sigmoid", "Tanh", ""}) {
    GraphIR g;
    const int32_t x = placeholder(g, float32, {-1, 6}, "x");
    const int32_t w = constant(g, random_tensor({6, 4}, 7));
    const int32_t bias = constant(g, random_tensor({4}, 8));
    const int32_t mm = add(g, "MatMul", {{x, 0}, {w, 0}});
    // The bias on the left for one of them: Add is commutative.
    const int32_t pre = std::string(act) == "Tanh" ? add(g, "Add", {{bias, 0}, {mm, 0}})
                                                   : add(g, "Add", {{mm, 0}, {bias, 0}});
    const int32_t out = *act ? add(g, act, {{pre, 0}}, {}, "dense") : pre;
    g.results = {{out, 0}};
    const int before = g.num_nodes();
    EXPECT_EQ(fuse_and_compare(g, {x}, {random_tensor({5, 6}, 9)}, 1e-6), *act ? 2 : 1) << act;
    EXPECT_EQ(g.num_nodes(), before - (*act ? 2 : 1));
    ASSERT_EQ(count(g, "FusedMatMul"), 1) << act;
    const Node& fused = g.node(g.results[0].node);
    EXPECT_EQ(fused.type(), "FusedMatMul");
    std::string want = act;
    for (char& c : want) c = static_cast<char>(std::tolower(c));
    EXPECT_EQ(fused.attrs.get<std::string>("activation"), want);
    if (*act) {
      EXPECT_EQ(fused.name, "dense");
    }
  }
}

// Dense on the last axis of a rank-3 input: MatMul of [B, M, K] and a matrix, then bias and
// relu. FusedMatMul folds B into its rows, so the three become one node; not under transpose_a
// (whose batches' rows are scattered) nor with a batched B.
TEST(FuseElementwise, DenseOnTheLastAxisOfARank3Input) {
  GraphIR g;
  const int32_t x = placeholder(g, float32, {-1, 28, 28}, "x");
  const int32_t mm = add(g, "MatMul", {{x, 0}, {constant(g, random_tensor({28, 10}, 30)), 0}});
  const int32_t out = add(g, "Relu", {{add(g, "Add", {{mm, 0}, {constant(g, random_tensor({10}, 31)), 0}}), 0}});
  g.results = {{out, 0}};
  EXPECT_EQ(fuse_and_compare(g, {x}, {random_tensor({6, 28, 28}, 32)}, 1e-6), 2);
  EXPECT_EQ(count(g, "FusedMatMul"), 1);
  EXPECT_EQ(g.node(g.results[0].node).outputs[0].shape, (Shape{-1, 28, 10}));

  GraphIR t;
  const int32_t xt = placeholder(t, float32, {5, 6, 7}, "x");
  const int32_t mmt = add(t, "MatMul", {{xt, 0}, {constant(t, random_tensor({6, 4}, 33)), 0}}, {{"transpose_a", true}});
  t.results = {{add(t, "Add", {{mmt, 0}, {constant(t, random_tensor({4}, 34)), 0}}), 0}};
  fuse_and_compare(t, {xt}, {random_tensor({5, 6, 7}, 35)});
  EXPECT_EQ(count(t, "FusedMatMul"), 0);

  GraphIR bb;
  const int32_t xb = placeholder(bb, float32, {5, 7, 6}, "x");
  const int32_t mmb = add(bb, "MatMul", {{xb, 0}, {constant(bb, random_tensor({5, 6, 4}, 36)), 0}});
  bb.results = {{add(bb, "Add", {{mmb, 0}, {constant(bb, random_tensor({4}, 37)), 0}}), 0}};
  fuse_and_compare(bb, {xb}, {random_tensor({5, 7, 6}, 38)});
  EXPECT_EQ(count(bb, "FusedMatMul"), 0);
}

TEST(FuseElementwise, TwoDenseLayersAndAnElementwiseTail) {
  // sigmoid(relu(x w1 + b1) w2 + b2) * 2 - 1: two FusedMatMul; the tail mul/sub fuse together.
  GraphIR g;
  const int32_t x = placeholder(g, float32, {7, 6}, "x");
  const int32_t mm1 = add(g, "MatMul", {{x, 0}, {constant(g, random_tensor({6, 5}, 10)), 0}});
  const int32_t h = add(g, "Relu", {{add(g, "Add", {{mm1, 0}, {constant(g, random_tensor({5}, 11)), 0}}), 0}});
  const int32_t w2 = constant(g, random_tensor({3, 5}, 12));
  const int32_t mm2 = add(g, "MatMul", {{h, 0}, {w2, 0}}, {{"transpose_b", true}});
  const int32_t y = add(g, "Sigmoid", {{add(g, "Add", {{mm2, 0}, {constant(g, random_tensor({3}, 13)), 0}}), 0}});
  const int32_t two = constant(g, Tensor::from_host(float32, {}, std::vector<float>{2.f}.data()));
  const int32_t one = constant(g, Tensor::from_host(float32, {}, std::vector<float>{1.f}.data()));
  const int32_t out = add(g, "Sub", {{add(g, "Mul", {{y, 0}, {two, 0}}), 0}, {one, 0}});
  g.results = {{out, 0}};
  EXPECT_EQ(fuse_and_compare(g, {x}, {random_tensor({7, 6}, 14)}, 1e-6), 5);
  EXPECT_EQ(count(g, "FusedMatMul"), 2);
  EXPECT_EQ(count(g, "FusedElementwise"), 1);
  EXPECT_EQ(count(g, "MatMul") + count(g, "Add") + count(g, "Relu"), 0);
}

// A backward pass's product read only as a ReluGrad's gradient: one FusedMatMul "relu_grad", with
// the relu's x as its third input, computing the same bits.
TEST(FuseElementwise, MatMulThenReluGradBecomesFusedMatMul) {
  for (bool tb : {false, true}) {
    GraphIR g;
    const int32_t dz = placeholder(g, float32, {8, 6}, "dz"), h = placeholder(g, float32, {8, 4}, "h");
    const int32_t w = constant(g, random_tensor(tb ? Shape{4, 6} : Shape{6, 4}, 40));
    const int32_t mm = add(g, "MatMul", {{dz, 0}, {w, 0}}, {{"transpose_b", tb}});
    const int32_t rg = add(g, "ReluGrad", {{mm, 0}, {h, 0}}, {}, "relu_grad");
    g.results = {{rg, 0}};
    Tensor hv = random_tensor({8, 4}, 42);
    EXPECT_EQ(fuse_and_compare(g, {dz, h}, {random_tensor({8, 6}, 41), hv}), 1);
    ASSERT_EQ(count(g, "FusedMatMul"), 1);
    EXPECT_EQ(count(g, "MatMul") + count(g, "ReluGrad"), 0);
    const Node& fused = g.node(g.results[0].node);
    EXPECT_EQ(fused.name, "relu_grad");
    EXPECT_EQ(fused.attrs.get<std::string>("activation"), "relu_grad");
    EXPECT_EQ(fused.attrs.get<bool>("transpose_b"), tb);
    EXPECT_EQ(fused.inputs[2], (Endpoint{h, 0}));
  }
}

// Left alone: a product that is the ReluGrad's x rather than its gradient, a product read
// elsewhere too, a GPU's product. An unknown batch dim fuses (ReluGrad's shapes are equal when it
// runs, and FusedMatMul checks x's).
TEST(FuseElementwise, ReluGradFusesOnlyWhereTheEpilogueComputesTheSame) {
  auto graph = [](Shape dz_shape, bool product_as_x, bool second_reader, const char* device) {
    auto g = std::make_unique<GraphIR>();
    const int32_t dz = placeholder(*g, float32, dz_shape, "dz"), h = placeholder(*g, float32, {dz_shape[0], 4}, "h");
    const int32_t mm = add(*g, "MatMul", {{dz, 0}, {constant(*g, random_tensor({6, 4}, 43)), 0}});
    const int32_t rg = product_as_x ? add(*g, "ReluGrad", {{h, 0}, {mm, 0}}) : add(*g, "ReluGrad", {{mm, 0}, {h, 0}});
    g->node(mm).requested_device = g->node(rg).requested_device = device;
    g->results = {{rg, 0}};
    if (second_reader) g->results.push_back({add(*g, "Neg", {{mm, 0}}), 0});
    return g;
  };
  EXPECT_EQ(count(*graph({8, 6}, false, false, ""), "MatMul"), 1);  // (the graph as built)
  for (auto* g : {graph({8, 6}, true, false, "").release(), graph({8, 6}, false, true, "").release(),
                  graph({8, 6}, false, false, "/gpu:0").release()}) {
    std::unique_ptr<GraphIR> owned(g);
    fuse_elementwise(*owned);
    EXPECT_EQ(count(*owned, "FusedMatMul"), 0);
    EXPECT_EQ(count(*owned, "MatMul"), 1);
    EXPECT_EQ(count(*owned, "ReluGrad"), 1);
  }
  for (const Shape& dz : {Shape{8, 6}, Shape{-1, 6}}) {
    auto fusable = graph(dz, false, false, "/cpu:0");
    fuse_elementwise(*fusable);
    EXPECT_EQ(count(*fusable, "FusedMatMul"), 1) << dz.to_string();
  }
}

// With an unknown batch dim, the fused node computes the same bits, and an x whose shape turns out
// to differ from the product's is refused by name, as the unfused ReluGrad refuses it.
TEST(FuseElementwise, ReluGradWithAnUnknownBatchDim) {
  GraphIR g;
  const int32_t dz = placeholder(g, float32, {-1, 6}, "dz"), h = placeholder(g, float32, {-1, 4}, "h");
  const int32_t mm = add(g, "MatMul", {{dz, 0}, {constant(g, random_tensor({6, 4}, 44)), 0}});
  g.results = {{add(g, "ReluGrad", {{mm, 0}, {h, 0}}), 0}};
  EXPECT_EQ(fuse_and_compare(g, {dz, h}, {random_tensor({5, 6}, 45), random_tensor({5, 4}, 46)}), 1);
  ASSERT_EQ(count(g, "FusedMatMul"), 1);
  try {
    run(g, {dz, h}, {random_tensor({5, 6}, 45), random_tensor({1, 4}, 46)});
    ADD_FAILURE() << "an x of another shape ran";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("relu_grad's x must have the product's shape (5, 4), got (1, 4)"), std::string::npos)
        << e.what();
  }
}

TEST(FuseElementwise, MatMulWithOtherReadersIsNotFused) {
  GraphIR g;
  const int32_t x = placeholder(g, float32, {2, 3}, "x");
  const int32_t mm = add(g, "MatMul", {{x, 0}, {constant(g, random_tensor({3, 4}, 15)), 0}});
  const int32_t out = add(g, "Relu", {{add(g, "Add", {{mm, 0}, {constant(g, random_tensor({4}, 16)), 0}}), 0}});
  g.results = {{out, 0}, {mm, 0}};  // the raw product is wanted too
  EXPECT_EQ(fuse_and_compare(g, {x}, {random_tensor({2, 3}, 17)}), 1);  // only add + relu fuse
  EXPECT_EQ(count(g, "FusedMatMul"), 0);
  EXPECT_EQ(count(g, "MatMul"), 1);
  EXPECT_EQ(count(g, "FusedElementwise"), 1);
}

TEST(FuseElementwise, IntermediateThatIsAResultIsKept) {
  // s = a + b is a result; exp(-s) fuses without it.
  GraphIR g;
  const int32_t a = placeholder(g, float32, {6}, "a"), b = placeholder(g, float32, {6}, "b");
  const int32_t s = add(g, "Add", {{a, 0}, {b, 0}}, {}, "s");
  const int32_t out = add(g, "Exp", {{add(g, "Neg", {{s, 0}}), 0}});
  g.results = {{s, 0}, {out, 0}};
  EXPECT_EQ(fuse_and_compare(g, {a, b}, {random_tensor({6}, 18), random_tensor({6}, 19)}), 1);
  ASSERT_NE(g.find("s"), nullptr);
  EXPECT_EQ(g.find("s")->type(), "Add");
  EXPECT_EQ(g.results[0], (Endpoint{s, 0}));
  EXPECT_EQ(g.node(g.results[1].node).inputs, (std::vector<Endpoint>{{s, 0}}));
}

TEST(FuseElementwise, IntermediateWithAReaderOutsideIsKept) {
  // t = a * b feeds both relu(t) + 1 and a softmax: t stays, the rest fuses.
  GraphIR g;
  const int32_t a = placeholder(g, float32, {2, 4}, "a"), b = placeholder(g, float32, {2, 4}, "b");
  const int32_t t = add(g, "Mul", {{a, 0}, {b, 0}}, {}, "t");
  const int32_t one = constant(g, Tensor::from_host(float32, {}, std::vector<float>{1.f}.data()));
  const int32_t r = add(g, "Add", {{add(g, "Relu", {{t, 0}}), 0}, {one, 0}});
  const int32_t sm = add(g, "Softmax", {{t, 0}});
  g.results = {{r, 0}, {sm, 0}};
  EXPECT_EQ(fuse_and_compare(g, {a, b}, {random_tensor({2, 4}, 20), random_tensor({2, 4}, 21)}), 1);
  EXPECT_EQ(g.find("t")->type(), "Mul");
  EXPECT_EQ(count(g, "FusedElementwise"), 1);
}

TEST(FuseElementwise, NonFusableOpInTheMiddleSplitsTheChain) {
  // neg(relu(print(softmax(a * b + c)))): a*b+c fuses, softmax and print stay, relu+neg fuse.
  GraphIR g;
  const int32_t a = placeholder(g, float32, {3, 4}, "a"), b = placeholder(g, float32, {3, 4}, "b");
  const int32_t c = placeholder(g, float32, {4}, "c");
  const int32_t pre = add(g, "Add", {{add(g, "Mul", {{a, 0}, {b, 0}}), 0}, {c, 0}});
  const int32_t sm = add(g, "Softmax", {{pre, 0}});
  const int32_t pr = add(g, "Print", {{sm, 0}}, {{"message", std::string("fusion test: ")}});
  const int32_t out = add(g, "Neg", {{add(g, "Relu", {{pr, 0}}), 0}});
  g.results = {{out, 0}};
  EXPECT_EQ(g.num_nodes(), 9);
  const std::vector<Tensor> values{random_tensor({3, 4}, 22), random_tensor({3, 4}, 23), random_tensor({4}, 24)};
  EXPECT_EQ(fuse_and_compare(g, {a, b, c}, values), 2);
  EXPECT_EQ(g.num_nodes(), 7);
  EXPECT_EQ(count(g, "FusedElementwise"), 2);
  EXPECT_EQ(count(g, "Softmax"), 1);
  EXPECT_EQ(count(g, "Print"), 1);
}

TEST(FuseElementwise, IntegersAndSmallerIntermediatesAreLeftAlone) {
  GraphIR g;
  const int32_t i = placeholder(g, int32, {4}, "i");
  const int32_t ri = add(g, "Neg", {{add(g, "Abs", {{i, 0}}), 0}});
  // exp(v) for a (4,) v added to a (3, 4) x: exp would run three times per element if fused.
  const int32_t x = placeholder(g, float32, {3, 4}, "x"), v = placeholder(g, float32, {4}, "v");
  const int32_t rx = add(g, "Add", {{x, 0}, {add(g, "Exp", {{v, 0}}), 0}});
  g.results = {{ri, 0}, {rx, 0}};
  int32_t iv[4] = {1, -2, 3, -4};
  EXPECT_EQ(fuse_and_compare(g, {i, x, v},
                             {Tensor::from_host(int32, {4}, iv), random_tensor({3, 4}, 25), random_tensor({4}, 26)}),
            0);
}

TEST(FuseElementwise, ControlEdgesMoveToTheFusedNode) {
  // before -> (control) sum; relu(sum) fused; a softmax that must run after sum gets the fused node.
  GraphIR g;
  const int32_t a = placeholder(g, float32, {5}, "a"), b = placeholder(g, float32, {5}, "b");
  const int32_t before = add(g, "NoOp", {}, {}, "before");
  const int32_t sum = add(g, "Add", {{a, 0}, {b, 0}});
  g.add_control_input(sum, before);
  const int32_t out = add(g, "Relu", {{sum, 0}});
  const int32_t after = add(g, "Softmax", {{out, 0}}, {}, "after");
  g.add_control_input(after, sum);
  g.results = {{after, 0}};
  EXPECT_EQ(fuse_and_compare(g, {a, b}, {random_tensor({5}, 27), random_tensor({5}, 28)}), 1);
  const Node& fused = g.node(g.find("after")->inputs[0].node);
  EXPECT_EQ(fused.type(), "FusedElementwise");
  EXPECT_EQ(fused.control_inputs, std::vector<int32_t>{before});
  EXPECT_EQ(g.find("after")->control_inputs, std::vector<int32_t>{fused.id});
}

TEST(FuseElementwise, ControlDependentUpstreamBlocksFusion) {
  // A node that must run after `sum` but feeds the group's root: fusing would make a cycle.
  GraphIR g;
  const int32_t a = placeholder(g, float32, {5}, "a"), b = placeholder(g, float32, {5}, "b");
  const int32_t sum = add(g, "Add", {{a, 0}, {b, 0}});
  const int32_t sm = add(g, "Softmax", {{b, 0}});
  g.add_control_input(sm, sum);
  const int32_t out = add(g, "Mul", {{add(g, "Relu", {{sum, 0}}), 0}, {sm, 0}});
  g.results = {{out, 0}};
  fuse_and_compare(g, {a, b}, {random_tensor({5}, 29), random_tensor({5}, 30)});
  EXPECT_EQ(g.node(sum).type(), "Add");  // still there, with its control edge
  EXPECT_EQ(g.node(sm).control_inputs, std::vector<int32_t>{sum});
}

// On a GPU an elementwise chain fuses (the CUDA FusedElementwise gives the separate CUDA ops'
// bits: tests/gpu/fused_test.cpp), and the fused node keeps the chain's devices.
TEST(FuseElementwise, ElementwiseChainsOnAGpuFuseThere) {
  GraphIR g;
  const int32_t a = placeholder(g, float32, {3}, "a"), b = placeholder(g, float32, {3}, "b");
  const int32_t sum = add(g, "Add", {{a, 0}, {b, 0}});
  const int32_t out = add(g, "Relu", {{sum, 0}});
  for (int32_t id : {sum, out}) {
    g.node(id).requested_device = "/gpu:0";
    g.node(id).assigned_device = "/job:localhost/replica:0/task:0/device:GPU:0";
  }
  g.results = {{out, 0}};
  EXPECT_EQ(fuse_elementwise(g), 1);
  ASSERT_EQ(count(g, "FusedElementwise"), 1);
  const Node& fused = g.node(g.results[0].node);
  EXPECT_EQ(fused.type(), "FusedElementwise");
  EXPECT_EQ(fused.requested_device, "/gpu:0");
  EXPECT_EQ(fused.assigned_device, "/job:localhost/replica:0/task:0/device:GPU:0");
}

// A chain split between a GPU and the CPU fuses on neither side across the boundary.
TEST(FuseElementwise, ChainsDoNotFuseAcrossDevices) {
  GraphIR g;
  const int32_t a = placeholder(g, float32, {3}, "a"), b = placeholder(g, float32, {3}, "b");
  const int32_t sum = add(g, "Add", {{a, 0}, {b, 0}});
  const int32_t out = add(g, "Relu", {{sum, 0}});
  g.node(sum).requested_device = "/gpu:0";
  g.node(out).requested_device = "/cpu:0";
  g.results = {{out, 0}};
  EXPECT_EQ(fuse_elementwise(g), 0);
  EXPECT_EQ(count(g, "Add") + count(g, "Relu"), 2);
}

// On a GPU a dense layer's product stays a MatMul (a FusedMatMul could take another cuBLASLt
// algorithm than the eager product, and other bits); its bias and relu fuse as elementwise.
TEST(FuseElementwise, DenseLayersOnAGpuKeepTheirMatMul) {
  GraphIR g;
  const int32_t x = placeholder(g, float32, {-1, 6}, "x");
  const int32_t w = constant(g, random_tensor({6, 4}, 7));
  const int32_t bias = constant(g, random_tensor({4}, 8));
  const int32_t mm = add(g, "MatMul", {{x, 0}, {w, 0}});
  const int32_t pre = add(g, "Add", {{mm, 0}, {bias, 0}});
  const int32_t out = add(g, "Relu", {{pre, 0}});
  for (int32_t id : {mm, pre, out}) g.node(id).requested_device = "/device:GPU:0";
  g.results = {{out, 0}};
  EXPECT_EQ(fuse_elementwise(g), 1);
  EXPECT_EQ(count(g, "FusedMatMul"), 0);
  EXPECT_EQ(count(g, "MatMul"), 1);
  ASSERT_EQ(count(g, "FusedElementwise"), 1);
  EXPECT_EQ(g.node(g.results[0].node).requested_device, "/device:GPU:0");
}

}  // namespace
}  // namespace weft
