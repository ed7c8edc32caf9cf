// matmul of a batch of A's and one matrix B, as Dense on the last axis does (seed 004's Keras
// models on a [60, 28, 28] input): one GEMM over all of A's rows, eager and traced alike; its
// gradient, whose weight part is one [K, B*M] x [B*M, N] product; and a traced model of such
// layers, whose bias and relu still fuse into the product.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "runtime/graph.h"
#include "weft/weft.h"

namespace weft {
namespace {

// matmul(x, w) one [M, K] slice of x at a time, the results stacked: x's leading dims flattened.
template <class T>
std::vector<T> per_slice(const Tensor& x, const Tensor& w, bool ta, bool tb) {
  const Shape& s = x.shape();
  const int64_t rows = s[s.rank() - 2], cols = s[s.rank() - 1];
  const int64_t slices = s.num_elements() / (rows * cols);
  const std::vector<T> xv = x.to_vector<T>();
  std::vector<T> out;
  for (int64_t i = 0; i < slices; ++i) {
    const std::vector<T> part(xv.begin() + i * rows * cols, xv.begin() + (i + 1) * rows * cols);
    const std::vector<T> y = matmul(constant(part, Shape{rows, cols}), w, ta, tb).template to_vector<T>();
    out.insert(out.end(), y.begin(), y.end());
  }
  return out;
}

template <class T>
void expect_near(const std::vector<T>& got, const std::vector<T>& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  const double tol = std::is_same_v<T, float> ? 1e-5 : 1e-13;
  for (size_t i = 0; i < got.size(); ++i)
    ASSERT_NEAR(static_cast<double>(got[i]), static_cast<double>(want[i]), tol * (1 + std::abs(static_cast<double>(want[i]))))
        << what << " at " << i;
}

template <class T>
void check_fold(const Shape& x_shape, const Shape& w_shape, bool ta, bool tb, const std::string& what) {
  const DType dt = dtype_v<T>;
  const Tensor x = random::normal(x_shape, 0, 1, 31, dt), w = random::normal(w_shape, 0, 1, 32, dt);
  const Tensor eager = matmul(x, w, ta, tb);
  const std::vector<T> want = per_slice<T>(x, w, ta, tb);
  expect_near(eager.to_vector<T>(), want, what + ", eager");
  auto traced = function([&](Tensor in) { return matmul(in, w, ta, tb); });
  const Tensor t = traced(x);
  EXPECT_EQ(t.shape(), eager.shape()) << what;
  // The same kernel on the same shapes: the same bits.
  EXPECT_EQ(t.to_vector<T>(), eager.to_vector<T>()) << what << ", traced";
}

TEST(MatMulFold, BatchTimesMatrixEqualsPerSlice) {
  check_fold<float>({5, 7, 9}, {9, 6}, false, false, "[5,7,9] x [9,6]");
  check_fold<float>({5, 7, 9}, {6, 9}, false, true, "[5,7,9] x [6,9]^T");
  check_fold<float>({2, 3, 7, 9}, {9, 6}, false, false, "rank 4");
  check_fold<float>({5, 7, 9}, {1, 9, 6}, false, false, "B broadcast from a batch of one");
  check_fold<float>({5, 9, 7}, {9, 6}, true, false, "transpose_a: per slice, not folded");
  check_fold<double>({4, 33, 17}, {17, 40}, false, false, "float64");
  check_fold<float>({60, 28, 28}, {28, 10}, false, false, "seed 004's first layer");
  check_fold<float>({40, 64, 96}, {96, 130}, false, false, "large enough to be split over threads");
}

// Many small products, both operands batched (attention's, one per head): they run in parallel
// over the pool, and each has the bits of the same product computed on its own.
TEST(MatMulFold, BatchesOfSmallProductsEqualEachProductAlone) {
  for (bool tb : {false, true}) {
    const Tensor a = random::normal({48, 64, 32}, 0, 1, 41), b = random::normal(tb ? Shape{48, 64, 32} : Shape{48, 32, 64}, 0, 1, 42);
    const std::vector<float> all = matmul(a, b, false, tb).to_vector<float>();
    for (int64_t i = 0; i < 48; ++i) {
      const Tensor ai = reshape(slice(a, {i, 0, 0}, {1, -1, -1}), {64, 32});
      const Tensor bi = reshape(slice(b, {i, 0, 0}, {1, -1, -1}), tb ? Shape{64, 32} : Shape{32, 64});
      const std::vector<float> one = matmul(ai, bi, false, tb).to_vector<float>();
      for (size_t j = 0; j < one.size(); ++j)
        ASSERT_EQ(all[static_cast<size_t>(i) * one.size() + j], one[j]) << "batch " << i << " element " << j;
    }
  }
}

TEST(MatMulFold, IntegersFoldToo) {
  const Tensor x = cast(random::uniform({3, 4, 5}, -9, 9, 33), int32), w = cast(random::uniform({5, 2}, -9, 9, 34), int32);
  EXPECT_EQ(matmul(x, w).to_vector<int32_t>(), per_slice<int32_t>(x, w, false, false));
}

TEST(MatMulFold, GradientMatchesFiniteDifferences) {
  using testing::expect_gradients_match;
  const Tensor x = random::normal({3, 4, 5}, 0, 1, 35, float64);
  expect_gradients_match([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                         {x, random::normal({5, 2}, 0, 1, 36, float64)}, 1e-6, 1e-5, "x w");
  expect_gradients_match([](const std::vector<Tensor>& in) { return matmul(in[0], in[1], false, true); },
                         {x, random::normal({2, 5}, 0, 1, 37, float64)}, 1e-6, 1e-5, "x w^T");
  expect_gradients_match([](const std::vector<Tensor>& in) { return matmul(in[0], in[1]); },
                         {random::normal({2, 2, 3, 4}, 0, 1, 38, float64), random::normal({4, 3}, 0, 1, 39, float64)},
                         1e-6, 1e-5, "rank 4");
  expect_gradients_match([](const std::vector<Tensor>& in) { return matmul(in[0], in[1], true, false); },
                         {random::normal({3, 5, 4}, 0, 1, 40, float64), random::normal({5, 2}, 0, 1, 41, float64)},
                         1e-6, 1e-5, "transpose_a");
}

// The weight gradient of [B, M, K] x [K, N] is one [K, N] product over all B*M rows: no product
// of shape [B, K, N] to be summed afterwards, in the traced gradient.
TEST(MatMulFold, WeightGradientIsOneProduct) {
  const Tensor x = random::normal({6, 7, 5}, 0, 1, 42), w0 = random::normal({5, 3}, 0, 1, 43);
  for (bool tb : {false, true}) {
    const Tensor w = tb ? transpose(w0, {1, 0}) : w0;
    auto grad = function([&](Tensor in, Tensor weight) {
      GradientTape tape;
      tape.watch(weight);
      Tensor loss = reduce_sum(square(matmul(in, weight, false, tb)));
      return tape.gradient(loss, std::vector<Tensor>{weight})[0];
    });
    const Graph g = grad.graph(x, w);
    int batched = 0, products = 0;
    for (int32_t id : g.ir().node_ids()) {
      const Node& n = g.ir().node(id);
      if (n.type() != "MatMul" && n.type() != "FusedMatMul") continue;
      ++products;
      batched += n.outputs[0].shape == Shape{6, 5, 3} || n.outputs[0].shape == Shape{6, 3, 5};
    }
    EXPECT_GE(products, 2) << "forward and weight gradient";
    EXPECT_EQ(batched, 0) << (tb ? "tb" : "");
    // And its value, against the per-slice products summed.
    const Tensor got = grad(x, w);
    Tensor want = zeros(w.shape());
    const Tensor dy = mul(constant(2.f), matmul(x, w, false, tb));
    for (int64_t i = 0; i < 6; ++i) {
      const Tensor xi = reshape(slice(x, {i, 0, 0}, {1, 7, 5}), {7, 5}), di = reshape(slice(dy, {i, 0, 0}, {1, 7, 3}), {7, 3});
      want = add(want, tb ? matmul(di, xi, true, false) : matmul(xi, di, true, false));
    }
    expect_near(got.to_vector<float>(), want.to_vector<float>(), tb ? "dW, tb" : "dW");
  }
}

// Seed 004's shallow Keras model, Dense 10/20/30 applied to the last axis of [60, 28, 28]: traced,
// every layer is one FusedMatMul (bias and relu in its epilogue), and it computes what eager does.
TEST(MatMulFold, TracedShallowModelFusesAndMatchesEager) {
  const Tensor x = random::uniform({60, 28, 28}, 0, 1, 4);
  const std::vector<int64_t> widths{28, 10, 20, 30};
  std::vector<Tensor> w, b;
  for (size_t i = 0; i + 1 < widths.size(); ++i) {
    w.push_back(random::normal({widths[i], widths[i + 1]}, 0, 0.05, 20 + static_cast<int64_t>(i)));
    b.push_back(random::normal({widths[i + 1]}, 0, 0.05, 40 + static_cast<int64_t>(i)));
  }
  auto model = [&](Tensor h) {
    for (size_t i = 0; i < w.size(); ++i) {
      h = add(matmul(h, w[i]), b[i]);
      if (i + 1 < w.size()) h = relu(h);
    }
    return h;
  };
  auto traced = function([&](Tensor in) { return model(in); });
  const Tensor eager = model(x), t = traced(x);
  ASSERT_EQ(t.shape(), (Shape{60, 28, 30}));
  // The fused product is computed as the unfused one, and bias and relu as their kernels do.
  EXPECT_EQ(t.to_vector<float>(), eager.to_vector<float>()) << "traced against eager";
  const Graph g = traced.graph(x);
  int fused = 0, plain = 0;
  for (int32_t id : g.ir().node_ids()) {
    fused += g.ir().node(id).type() == "FusedMatMul";
    plain += g.ir().node(id).type() == "MatMul";
  }
  EXPECT_EQ(fused, 3);
  EXPECT_EQ(plain, 0);
}

}  // namespace
}  // namespace weft
