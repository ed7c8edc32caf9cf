// Second-order gradients through scaled_dot_product_attention (the gradient of its gradient op,
// api/ops/attention_second_order.cpp): the gradient of sum(W * (dq, dk, dv)), the first gradients
// taken by an inner tape, against central differences in float64 (causal with Sq = Sk, Sq < Sk and
// Sq > Sk, broadcast masks with a row that keeps nothing, unmasked with Sq != Sk and Dv != D), with
// only some of the first gradients used or some inputs watched, against the composed ops over
// more than one kernel tile, eager against traced, 16-bit inputs, and dropout (whose mask
// AttentionDropoutMask gives, checked against its Philox definition).
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "api/dispatch.h"
#include "gradient_check.h"
#include "kernels/philox.h"
#include "weft/weft.h"

namespace weft {
namespace {

struct Dims {
  int64_t b, h, sq, sk, d, dv;
};

// q, k, v and an upstream gradient dout for the output.
std::vector<Tensor> inputs(const Dims& n, int64_t seed, DType dt = float64) {
  return {random::normal({n.b, n.h, n.sq, n.d}, 0, 1, seed, dt),
          random::normal({n.b, n.h, n.sk, n.d}, 0, 1, seed + 1, dt),
          random::normal({n.b, n.h, n.sk, n.dv}, 0, 1, seed + 2, dt),
          random::normal({n.b, n.h, n.sq, n.dv}, 0, 1, seed + 3, dt)};
}

using Attend = std::function<Tensor(const Tensor& q, const Tensor& k, const Tensor& v)>;

// dq, dk, dv of sum(attend(q, k, v) * dout), by a tape that whatever outer tape is active records.
std::vector<Tensor> first_gradients(const Attend& attend, const Tensor& q, const Tensor& k, const Tensor& v,
                                    const Tensor& dout) {
  GradientTape inner;
  inner.watch(q);
  inner.watch(k);
  inner.watch(v);
  return inner.gradient(reduce_sum(mul(attend(q, k, v), dout)), {q, k, v});
}

Tensor flat(const std::vector<Tensor>& parts) {
  std::vector<Tensor> f;
  for (const Tensor& p : parts) f.push_back(reshape(p, Shape{-1}));
  return concat(f, 0);
}

Attend fused(const AttentionOptions& o) {
  return [o](const Tensor& q, const Tensor& k, const Tensor& v) { return scaled_dot_product_attention(q, k, v, o); };
}

// The gradient of sum(W * (dq, dk, dv)) in q, k, v and dout against central differences.
void expect_second_order_matches(const Dims& n, const AttentionOptions& o, const std::string& what) {
  const Attend attend = fused(o);
  testing::expect_gradients_match(
      [&](const std::vector<Tensor>& x) { return flat(first_gradients(attend, x[0], x[1], x[2], x[3])); },
      inputs(n, 100), 1e-5, 1e-6, what);
}

Tensor bool_mask(const std::vector<int32_t>& keep, const Shape& shape) { return cast(constant(keep, shape), bool_); }

TEST(AttentionSecondOrder, CausalMatchesFiniteDifferences) {
  expect_second_order_matches({1, 2, 4, 4, 3, 3}, {.causal = true}, "causal, Sq = Sk");
  // Bottom-right alignment: query i sees keys 0 .. i + Sk - Sq.
  expect_second_order_matches({1, 2, 3, 5, 3, 2}, {.causal = true}, "causal, Sq 3 < Sk 5, Dv 2");
  expect_second_order_matches({1, 1, 5, 3, 2, 2}, {.causal = true}, "causal, Sq 5 > Sk 3: early rows see no key");
}

TEST(AttentionSecondOrder, BroadcastMasksMatchFiniteDifferences) {
  const Dims n{2, 1, 4, 5, 3, 3};
  // [1, 1, Sq, Sk], row 1 keeping nothing.
  std::vector<int32_t> full(20);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 5; ++j) full[i * 5 + j] = i != 1 && (i + 2 * j) % 3 != 1;
  expect_second_order_matches(n, {.mask = bool_mask(full, Shape{1, 1, 4, 5})}, "mask [1, 1, Sq, Sk], an empty row");
  expect_second_order_matches(n, {.causal = true, .mask = bool_mask(full, Shape{1, 1, 4, 5})},
                              "mask [1, 1, Sq, Sk] and causal");
  // A key-padding mask [Sk] with causal: the last key hidden from every row.
  expect_second_order_matches({1, 2, 4, 4, 2, 2}, {.causal = true, .mask = bool_mask({1, 1, 1, 0}, Shape{4})},
                              "mask [Sk] and causal");
  // [B, 1, 1, Sk]: batch 1 hides every key, so all its rows are empty.
  expect_second_order_matches(n, {.mask = bool_mask({1, 0, 1, 1, 0, 0, 0, 0, 0, 0}, Shape{2, 1, 1, 5})},
                              "mask [B, 1, 1, Sk], a batch with no key");
}

TEST(AttentionSecondOrder, UnmaskedMatchesFiniteDifferences) {
  expect_second_order_matches({2, 1, 3, 5, 4, 2}, {}, "unmasked, Sq 3, Sk 5, D 4, Dv 2");
  expect_second_order_matches({1, 2, 4, 2, 3, 5}, {.scale = 0.7}, "unmasked, Sq 4, Sk 2, Dv 5, scale 0.7");
}

// Only some of dq, dk, dv reach the objective (the others' gradients never arrive), and only some
// inputs are watched by the outer tape.
TEST(AttentionSecondOrder, PartialUseMatchesFiniteDifferences) {
  const Dims n{1, 2, 3, 4, 3, 2};
  const std::vector<Tensor> x = inputs(n, 200);
  const Attend attend = fused({.causal = true});
  for (int used = 0; used < 3; ++used) {
    testing::expect_gradients_match(
        [&](const std::vector<Tensor>& in) { return first_gradients(attend, in[0], in[1], in[2], in[3])[used]; }, x,
        1e-5, 1e-6, "only gradient " + std::to_string(used) + " used");
    for (int watched = 0; watched < 4; ++watched)
      testing::expect_gradients_match(
          [&](const std::vector<Tensor>& in) {
            std::vector<Tensor> all = x;
            all[watched] = in[0];
            return first_gradients(attend, all[0], all[1], all[2], all[3])[used];
          },
          {x[watched]}, 1e-5, 1e-6, "gradient " + std::to_string(used) + " by input " + std::to_string(watched));
  }
}

// The second-order gradients of sum(W * (dq, dk, dv)) in q, k, v and dout.
std::vector<Tensor> second_order(const Attend& attend, const std::vector<Tensor>& x, const Tensor& w) {
  GradientTape outer;
  for (const Tensor& t : x) outer.watch(t);
  const Tensor first = flat(first_gradients(attend, x[0], x[1], x[2], x[3]));
  return outer.gradient(reduce_sum(mul(first, w)), x);
}

// Longer than the kernels' query (64) and key (128) blocks, against softmax(q k^T scale + bias) v
// written with ops, which the tapes differentiate twice on their own.
TEST(AttentionSecondOrder, EqualsTheComposedOpsOverSeveralTiles) {
  const Dims n{1, 2, 70, 140, 8, 6};
  const std::vector<Tensor> x = inputs(n, 300);
  std::vector<int32_t> keep(140), tri(70 * 140);
  for (int64_t j = 0; j < 140; ++j) keep[j] = j % 7 != 3;
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 140; ++j) tri[i * 140 + j] = j <= i + 70 && keep[j];
  const double scale = 1.0 / std::sqrt(8.0);
  const Tensor bias = mul(sub(1.0, cast(constant(tri, Shape{70, 140}), float64)), -1e30);
  const Attend composed = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(softmax(add(mul(matmul(q, k, false, true), scale), bias), -1), v);
  };
  const Tensor w = random::uniform({2 * 70 * 8 + 2 * 140 * 8 + 2 * 140 * 6}, 0.5, 1.5, 301, float64);
  const std::vector<Tensor> got = second_order(fused({.causal = true, .mask = bool_mask(keep, Shape{140})}), x, w);
  const std::vector<Tensor> want = second_order(composed, x, w);
  for (size_t i = 0; i < 4; ++i) {
    ASSERT_EQ(got[i].shape(), x[i].shape()) << i;
    const std::vector<double> a = got[i].to_vector<double>(), b = want[i].to_vector<double>();
    for (size_t e = 0; e < a.size(); ++e)
      ASSERT_NEAR(a[e], b[e], 1e-10 * std::max(1.0, std::abs(b[e]))) << i << " " << e;
  }
}

TEST(AttentionSecondOrder, TracedEqualsEager) {
  const Dims n{2, 2, 9, 12, 8, 4};
  for (DType dt : {float32, float64}) {
    const std::vector<Tensor> x = inputs(n, 400, dt);
    const Tensor w = random::uniform({2 * 2 * (9 * 8 + 12 * 8 + 12 * 4)}, 0.5, 1.5, 401, dt);
    const Attend attend = fused({.causal = true, .mask = bool_mask({1, 1, 0, 1, 1, 1, 1, 1, 1, 1, 1, 1}, Shape{12})});
    const std::vector<Tensor> eager = second_order(attend, x, w);
    auto traced =
        function([&](Tensor q, Tensor k, Tensor v, Tensor dout) { return second_order(attend, {q, k, v, dout}, w); });
    const std::vector<Tensor> t = traced(x[0], x[1], x[2], x[3]);
    ASSERT_EQ(t.size(), eager.size());
    for (size_t i = 0; i < t.size(); ++i) {
      ASSERT_EQ(t[i].shape(), eager[i].shape()) << i;
      const std::vector<double> a = cast(t[i], float64).to_vector<double>();
      const std::vector<double> b = cast(eager[i], float64).to_vector<double>();
      EXPECT_EQ(a, b) << dtype_name(dt) << " gradient " << i;
    }
  }
}

// 16-bit inputs are worked in float32 and their gradients given back in their own dtype.
TEST(AttentionSecondOrder, SixteenBitThroughFloat32) {
  const Dims n{1, 2, 5, 6, 4, 4};
  const std::vector<Tensor> x = inputs(n, 600, float32);
  const Tensor w = random::uniform({2 * (5 * 4 + 6 * 4 + 6 * 4)}, 0.5, 1.5, 601, float32);
  const Attend attend = fused({.causal = true});
  const std::vector<Tensor> want = second_order(attend, x, w);
  for (DType dt : {float16, bfloat16}) {
    std::vector<Tensor> low;
    for (const Tensor& t : x) low.push_back(cast(t, dt));
    const std::vector<Tensor> got = second_order(attend, low, cast(w, dt));
    for (size_t i = 0; i < 4; ++i) {
      ASSERT_EQ(got[i].dtype(), dt) << i;
      const std::vector<float> a = cast(got[i], float32).to_vector<float>(), b = want[i].to_vector<float>();
      for (size_t e = 0; e < a.size(); ++e)
        EXPECT_NEAR(a[e], b[e], 0.1 * std::max(1.0f, std::abs(b[e])))
            << dtype_name(dt) << " gradient " << i << " " << e;
    }
  }
}

// The mask the fused kernels draw for (seed, rate), as AttentionDropoutMask gives it.
Tensor dropout_mask(const Tensor& q, const Tensor& k, int64_t seed, double rate) {
  return dispatch(op_def("AttentionDropoutMask"), std::vector<Tensor>{q, k, constant(seed)}, {{"dropout", rate}})[0];
}

// The mask against its definition written here: element e = ((b H + h) Sq + i) Sk + j is kept
// (1 / (1 - rate)) when the float of word e % 4 of Philox block e / 4 is at least the rate.
TEST(AttentionDropoutMask, MatchesThePhiloxDraws) {
  const Tensor q = zeros({2, 3, 5, 4}, float64), k = zeros({2, 3, 7, 4}, float64);
  const double rate = 0.3;
  const std::vector<double> got = dropout_mask(q, k, 99, rate).to_vector<double>();
  ASSERT_EQ(got.size(), 2u * 3 * 5 * 7);
  const Philox4x32 philox(99);
  int64_t kept = 0;
  for (uint64_t e = 0; e < got.size(); ++e) {
    const bool keep = unit_float(philox(e / 4)[e % 4]) >= static_cast<float>(rate);
    EXPECT_EQ(got[e], keep ? 1.0 / (1.0 - rate) : 0.0) << e;
    kept += keep;
  }
  EXPECT_GT(kept, 0);
  EXPECT_LT(kept, static_cast<int64_t>(got.size()));
  // float32 draws the same mask.
  const std::vector<float> f = dropout_mask(cast(q, float32), cast(k, float32), 99, rate).to_vector<float>();
  for (size_t e = 0; e < got.size(); ++e) EXPECT_EQ(f[e] != 0, got[e] != 0) << e;
  auto traced = function([&](Tensor a, Tensor b) { return dropout_mask(a, b, 99, rate); });
  EXPECT_EQ(traced(q, k).to_vector<double>(), got);
  // Bad input names the op and what is wrong.
  try {
    dropout_mask(q, zeros({2, 3, 7}, float64), 99, rate);
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("attention_dropout_mask"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("k (2, 3, 7)"), std::string::npos) << e.what();
  }
  EXPECT_THROW(dropout_mask(q, k, 99, 0.0), InvalidArgument);
}

// With dropout, against central differences (the seed fixes the mask).
TEST(AttentionSecondOrder, DropoutMatchesFiniteDifferences) {
  expect_second_order_matches({1, 2, 4, 4, 3, 3}, {.causal = true, .dropout = 0.3, .seed = 7}, "causal, dropout 0.3");
  expect_second_order_matches({2, 1, 3, 5, 4, 2},
                              {.mask = bool_mask({1, 0, 1, 1, 1}, Shape{5}), .dropout = 0.5, .seed = 11},
                              "mask [Sk], dropout 0.5, Sq 3, Sk 5, Dv 2");
}

// With dropout over several kernel tiles: the fused first and second orders against
// softmax(...) F v written with ops and F from AttentionDropoutMask, which also shows that the
// mask is the one the fused forward and gradient kernels drew.
TEST(AttentionSecondOrder, DropoutEqualsTheComposedOpsOverSeveralTiles) {
  const Dims n{1, 2, 70, 140, 8, 6};
  const std::vector<Tensor> x = inputs(n, 700);
  const double scale = 1.0 / std::sqrt(8.0), rate = 0.25;
  const int64_t seed = 42;
  const Tensor keep = dropout_mask(x[0], x[1], seed, rate);
  std::vector<int32_t> tri(70 * 140);
  for (int64_t i = 0; i < 70; ++i)
    for (int64_t j = 0; j < 140; ++j) tri[i * 140 + j] = j <= i + 70;
  const Tensor bias = mul(sub(1.0, cast(constant(tri, Shape{70, 140}), float64)), -1e30);
  const Attend composed = [&](const Tensor& q, const Tensor& k, const Tensor& v) {
    return matmul(mul(softmax(add(mul(matmul(q, k, false, true), scale), bias), -1), keep), v);
  };
  const Attend attend = fused({.causal = true, .dropout = rate, .seed = seed});
  auto expect_near = [](const Tensor& got, const Tensor& want, const std::string& what) {
    ASSERT_EQ(got.shape(), want.shape()) << what;
    const std::vector<double> a = got.to_vector<double>(), b = want.to_vector<double>();
    for (size_t e = 0; e < a.size(); ++e) ASSERT_NEAR(a[e], b[e], 1e-10 * std::max(1.0, std::abs(b[e]))) << what << " " << e;
  };
  expect_near(attend(x[0], x[1], x[2]), composed(x[0], x[1], x[2]), "forward");
  const std::vector<Tensor> f1 = first_gradients(attend, x[0], x[1], x[2], x[3]);
  const std::vector<Tensor> c1 = first_gradients(composed, x[0], x[1], x[2], x[3]);
  for (size_t i = 0; i < 3; ++i) expect_near(f1[i], c1[i], "first order " + std::to_string(i));
  const Tensor w = random::uniform({2 * 70 * 8 + 2 * 140 * 8 + 2 * 140 * 6}, 0.5, 1.5, 701, float64);
  const std::vector<Tensor> got = second_order(attend, x, w), want = second_order(composed, x, w);
  for (size_t i = 0; i < 4; ++i) expect_near(got[i], want[i], "second order " + std::to_string(i));
}

TEST(AttentionSecondOrder, DropoutTracedEqualsEager) {
  const Dims n{1, 2, 9, 12, 8, 4};
  const std::vector<Tensor> x = inputs(n, 800, float32);
  const Tensor w = random::uniform({2 * (9 * 8 + 12 * 8 + 12 * 4)}, 0.5, 1.5, 801, float32);
  const Attend attend = fused({.causal = true, .dropout = 0.2, .seed = 5});
  const std::vector<Tensor> eager = second_order(attend, x, w);
  auto traced =
      function([&](Tensor q, Tensor k, Tensor v, Tensor dout) { return second_order(attend, {q, k, v, dout}, w); });
  const std::vector<Tensor> t = traced(x[0], x[1], x[2], x[3]);
  ASSERT_EQ(t.size(), eager.size());
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i].to_vector<float>(), eager[i].to_vector<float>()) << i;
}

}  // namespace
}  // namespace weft
