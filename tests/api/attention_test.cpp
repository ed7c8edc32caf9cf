// scaled_dot_product_attention: against softmax(q k^T scale + mask) v written here in float64
// (causal, masked, unmasked, q and k of different lengths, sequences longer than one tile), against
// the composed ops in float32, gradients by finite differences (dropout included, by seed),
// causality, eager against traced, dropout by seed, 16-bit through float32, and bad input.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

struct Dims {
  int64_t b, h, sq, sk, d, dv;
};

using MaskFn = std::function<bool(int64_t b, int64_t h, int64_t i, int64_t j)>;

// out[b, h, i] = sum_j softmax_j(scale q_i . k_j over the visible j) v_j; zeros when none is.
std::vector<double> reference(const Dims& n, const std::vector<double>& q, const std::vector<double>& k,
                              const std::vector<double>& v, double scale, bool causal, const MaskFn& keep) {
  std::vector<double> out(static_cast<size_t>(n.b * n.h * n.sq * n.dv), 0.0);
  for (int64_t b = 0; b < n.b; ++b)
    for (int64_t h = 0; h < n.h; ++h)
      for (int64_t i = 0; i < n.sq; ++i) {
        const int64_t bh = b * n.h + h;
        std::vector<double> s(static_cast<size_t>(n.sk));
        std::vector<bool> seen(static_cast<size_t>(n.sk));
        double m = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < n.sk; ++j) {
          double dot = 0;
          for (int64_t c = 0; c < n.d; ++c) dot += q[(bh * n.sq + i) * n.d + c] * k[(bh * n.sk + j) * n.d + c];
          s[j] = dot * scale;
          seen[j] = (!causal || j <= i + n.sk - n.sq) && (!keep || keep(b, h, i, j));
          if (seen[j]) m = std::max(m, s[j]);
        }
        if (m == -std::numeric_limits<double>::infinity()) continue;
        double total = 0;
        for (int64_t j = 0; j < n.sk; ++j) total += seen[j] ? std::exp(s[j] - m) : 0.0;
        for (int64_t j = 0; j < n.sk; ++j) {
          if (!seen[j]) continue;
          const double p = std::exp(s[j] - m) / total;
          for (int64_t c = 0; c < n.dv; ++c) out[(bh * n.sq + i) * n.dv + c] += p * v[(bh * n.sk + j) * n.dv + c];
        }
      }
  return out;
}

struct Inputs {
  Tensor q, k, v;
};

Inputs inputs(const Dims& n, DType dt, int64_t seed) {
  return {random::normal({n.b, n.h, n.sq, n.d}, 0, 1, seed, dt), random::normal({n.b, n.h, n.sk, n.d}, 0, 1, seed + 1, dt),
          random::normal({n.b, n.h, n.sk, n.dv}, 0, 1, seed + 2, dt)};
}

void expect_matches_reference(const Dims& n, bool causal, const Tensor& mask, const MaskFn& keep,
                              const std::string& what) {
  const Inputs in = inputs(n, float64, 10);
  const double scale = 1.0 / std::sqrt(static_cast<double>(n.d));
  const Tensor got = scaled_dot_product_attention(in.q, in.k, in.v, {.causal = causal, .mask = mask});
  ASSERT_EQ(got.shape(), (Shape{n.b, n.h, n.sq, n.dv})) << what;
  const std::vector<double> want = reference(n, in.q.to_vector<double>(), in.k.to_vector<double>(),
                                             in.v.to_vector<double>(), scale, causal, keep);
  const std::vector<double> g = got.to_vector<double>();
  for (size_t i = 0; i < want.size(); ++i) ASSERT_NEAR(g[i], want[i], 1e-12) << what << " element " << i;
}

TEST(Attention, MatchesTheFormulaInFloat64) {
  const Dims small{2, 3, 5, 5, 4, 4};
  expect_matches_reference(small, false, Tensor(), nullptr, "unmasked");
  expect_matches_reference(small, true, Tensor(), nullptr, "causal");
  // q shorter and longer than k; v of another width.
  expect_matches_reference({1, 2, 3, 7, 4, 6}, false, Tensor(), nullptr, "Sq 3, Sk 7");
  expect_matches_reference({1, 2, 3, 7, 4, 6}, true, Tensor(), nullptr, "Sq 3, Sk 7 causal");
  expect_matches_reference({1, 2, 7, 3, 4, 2}, true, Tensor(), nullptr, "Sq 7, Sk 3 causal (early rows see none)");
  // Longer than a query block (64) and a key block (128), with ragged last blocks.
  expect_matches_reference({1, 2, 150, 150, 8, 8}, true, Tensor(), nullptr, "150 causal");
  expect_matches_reference({1, 1, 70, 200, 8, 5}, false, Tensor(), nullptr, "70 x 200");
  expect_matches_reference({1, 1, 70, 200, 8, 5}, true, Tensor(), nullptr, "70 x 200 causal");
}

TEST(Attention, BooleanMasksBroadcast) {
  const Dims n{2, 2, 4, 6, 3, 3};
  // A key-padding mask [batch, 1, 1, Sk]: batch 0 keeps 4 keys, batch 1 keeps 2.
  std::vector<uint8_t> pad(12);
  for (int64_t b = 0; b < 2; ++b)
    for (int64_t j = 0; j < 6; ++j) pad[b * 6 + j] = j < (b == 0 ? 4 : 2);
  const Tensor padding = cast(constant(std::vector<int32_t>(pad.begin(), pad.end()), Shape{2, 1, 1, 6}), bool_);
  expect_matches_reference(n, false, padding, [&](int64_t b, int64_t, int64_t, int64_t j) { return pad[b * 6 + j] != 0; },
                           "key padding");
  // A full [Sq, Sk] mask, with a row that keeps nothing (its output is zeros).
  std::vector<int32_t> full(24);
  for (int64_t i = 0; i < 4; ++i)
    for (int64_t j = 0; j < 6; ++j) full[i * 6 + j] = i != 2 && (i + j) % 3 != 0;
  const Tensor m = cast(constant(full, Shape{4, 6}), bool_);
  expect_matches_reference(n, true, m, [&](int64_t, int64_t, int64_t i, int64_t j) { return full[i * 6 + j] != 0; },
                           "full mask with causal");
}

TEST(Attention, Float32EqualsTheComposedOps) {
  const Dims n{2, 4, 33, 33, 16, 16};
  const Inputs in = inputs(n, float32, 20);
  const Tensor fused = scaled_dot_product_attention(in.q, in.k, in.v, {.causal = true});
  std::vector<int32_t> tri(33 * 33);
  for (int64_t i = 0; i < 33; ++i)
    for (int64_t j = 0; j < 33; ++j) tri[i * 33 + j] = j <= i ? 0 : 1;
  const Tensor bias = mul(cast(constant(tri, Shape{33, 33}), float32), -1e30f);
  const Tensor scores = add(mul(matmul(in.q, transpose(in.k, {0, 1, 3, 2})), 0.25f), bias);
  const Tensor composed = matmul(softmax(scores, -1), in.v);
  const std::vector<float> a = fused.to_vector<float>(), b = composed.to_vector<float>();
  for (size_t i = 0; i < a.size(); ++i) ASSERT_NEAR(a[i], b[i], 2e-6 * std::max(1.0f, std::abs(b[i]))) << i;
}

TEST(Attention, GradientsMatchFiniteDifferences) {
  struct Case {
    Dims n;
    bool causal;
    bool masked;
    double dropout;
    const char* what;
  };
  const Case cases[] = {{{1, 2, 4, 4, 3, 3}, false, false, 0, "plain"},
                        {{1, 2, 4, 4, 3, 3}, true, false, 0, "causal"},
                        {{2, 1, 3, 5, 3, 2}, true, false, 0, "Sq 3, Sk 5 causal, Dv 2"},
                        {{1, 2, 4, 5, 2, 2}, false, true, 0, "masked, one row keeps nothing"},
                        {{1, 2, 4, 4, 3, 3}, true, false, 0.3, "causal with dropout by seed"}};
  for (const Case& c : cases) {
    const Inputs in = inputs(c.n, float64, 30);
    Tensor mask;
    if (c.masked) {
      std::vector<int32_t> m(static_cast<size_t>(c.n.sq * c.n.sk));
      for (int64_t i = 0; i < c.n.sq; ++i)
        for (int64_t j = 0; j < c.n.sk; ++j) m[i * c.n.sk + j] = i != 1 && (i + 2 * j) % 3 != 1;
      mask = cast(constant(m, Shape{c.n.sq, c.n.sk}), bool_);
    }
    const AttentionOptions o{.causal = c.causal, .mask = mask, .dropout = c.dropout, .seed = 99};
    testing::expect_gradients_match(
        [&](const std::vector<Tensor>& x) { return scaled_dot_product_attention(x[0], x[1], x[2], o); },
        {in.q, in.k, in.v}, 1e-6, 1e-6, c.what);
  }
}

TEST(Attention, ALaterTokenChangesNoEarlierOutput) {
  const Dims n{1, 2, 100, 100, 8, 8};
  const Inputs in = inputs(n, float32, 40);
  const Tensor before = scaled_dot_product_attention(in.q, in.k, in.v, {.causal = true});
  // Change token 70's query, key and value.
  auto bump = [](const Tensor& t) {
    std::vector<float> v = t.to_vector<float>();
    const int64_t w = t.shape()[3];
    for (int64_t h = 0; h < 2; ++h)
      for (int64_t c = 0; c < w; ++c) v[(h * 100 + 70) * w + c] += 3.0f;
    return constant(v, t.shape());
  };
  const Tensor after = scaled_dot_product_attention(bump(in.q), bump(in.k), bump(in.v), {.causal = true});
  const std::vector<float> a = before.to_vector<float>(), b = after.to_vector<float>();
  for (int64_t h = 0; h < 2; ++h)
    for (int64_t i = 0; i < 100; ++i) {
      bool same = true;
      for (int64_t c = 0; c < 8; ++c) same &= a[(h * 100 + i) * 8 + c] == b[(h * 100 + i) * 8 + c];
      if (i < 70) EXPECT_TRUE(same) << "head " << h << " row " << i << " changed";
      else EXPECT_FALSE(same) << "head " << h << " row " << i << " did not change";
    }
}

TEST(Attention, TracedEqualsEagerForwardAndGradient) {
  const Dims n{2, 2, 70, 70, 16, 16};
  const Inputs in = inputs(n, float32, 50);
  auto fn = [](const Tensor& q, const Tensor& k, const Tensor& v) {
    GradientTape tape;
    tape.watch(q);
    tape.watch(k);
    tape.watch(v);
    const Tensor o = scaled_dot_product_attention(q, k, v, {.causal = true});
    std::vector<Tensor> g = tape.gradient(reduce_sum(mul(o, o)), {q, k, v});
    return std::vector<Tensor>{o, g[0], g[1], g[2]};
  };
  const std::vector<Tensor> eager = fn(in.q, in.k, in.v);
  auto traced = function([&](Tensor q, Tensor k, Tensor v) { return fn(q, k, v); });
  const std::vector<Tensor> t = traced(in.q, in.k, in.v);
  ASSERT_EQ(t.size(), eager.size());
  for (size_t i = 0; i < t.size(); ++i) EXPECT_EQ(t[i].to_vector<float>(), eager[i].to_vector<float>()) << i;
}

// The CPU gradient takes one task per head when there are at least as many heads as threads, and
// two passes over blocks otherwise; both add each element's tiles in one order, so a head's
// gradient is the same bits alone (two passes, on a pool of two or more threads) and beside five
// others (one task each): over several blocks of keys and queries, causal with more keys than
// queries, unmasked, and with dropout.
TEST(Attention, AHeadsGradientIsTheSameBitsAloneAndBesideOthers) {
  struct Case {
    int64_t sq, sk;
    bool causal;
    double dropout;
  };
  for (const Case& c : {Case{200, 200, true, 0.0}, Case{150, 300, true, 0.0}, Case{130, 260, false, 0.0},
                        Case{200, 200, true, 0.2}}) {
    SCOPED_TRACE("sq " + std::to_string(c.sq) + " sk " + std::to_string(c.sk) + (c.causal ? " causal" : "") +
                 " dropout " + std::to_string(c.dropout));
    const Inputs many = inputs(Dims{1, 6, c.sq, c.sk, 16, 16}, float32, 90);
    const Tensor w = random::normal({1, 6, c.sq, 16}, 0, 1, 93);
    auto grads = [&](const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& dout) {
      GradientTape tape;
      tape.watch(q);
      tape.watch(k);
      tape.watch(v);
      const Tensor o = scaled_dot_product_attention(q, k, v, {.causal = c.causal, .dropout = c.dropout, .seed = 5});
      return tape.gradient(reduce_sum(mul(o, dout)), {q, k, v});
    };
    auto head0 = [](const Tensor& t) { return slice(t, {0, 0, 0, 0}, {1, 1, t.shape()[2], t.shape()[3]}); };
    const std::vector<Tensor> all = grads(many.q, many.k, many.v, w);
    const std::vector<Tensor> alone = grads(head0(many.q), head0(many.k), head0(many.v), head0(w));
    for (size_t i = 0; i < 3; ++i)
      EXPECT_EQ(alone[i].to_vector<float>(), head0(all[i]).to_vector<float>()) << "gradient " << i;
  }
}

TEST(Attention, DropoutIsReproducibleBySeed) {
  const Dims n{2, 2, 16, 16, 8, 8};
  const Inputs in = inputs(n, float32, 60);
  auto run = [&](double rate, std::optional<int64_t> seed) {
    return scaled_dot_product_attention(in.q, in.k, in.v, {.dropout = rate, .seed = seed}).to_vector<float>();
  };
  EXPECT_EQ(run(0.2, 5), run(0.2, 5));
  EXPECT_NE(run(0.2, 5), run(0.2, 6));
  EXPECT_NE(run(0.2, std::nullopt), run(0.2, std::nullopt)) << "unseeded draws a new mask per call";
  EXPECT_EQ(run(0.0, 5), scaled_dot_product_attention(in.q, in.k, in.v).to_vector<float>());
  // With v all ones, each output is the kept probability mass, scaled by 1 / (1 - rate): its
  // mean over many rows is 1.
  const Tensor ones_v = ones({4, 4, 64, 64});
  const Tensor qq = random::normal({4, 4, 64, 64}, 0, 1, 61), kk = random::normal({4, 4, 64, 64}, 0, 1, 62);
  const float mean = reduce_mean(scaled_dot_product_attention(qq, kk, ones_v, {.dropout = 0.25, .seed = 3})).item<float>();
  EXPECT_NEAR(mean, 1.0f, 0.02f);
}

TEST(Attention, SixteenBitThroughFloat32) {
  const Dims n{1, 2, 9, 9, 8, 8};
  const Inputs in = inputs(n, float32, 70);
  for (DType dt : {float16, bfloat16}) {
    const Tensor q = cast(in.q, dt), k = cast(in.k, dt), v = cast(in.v, dt);
    const Tensor got = scaled_dot_product_attention(q, k, v, {.causal = true});
    ASSERT_EQ(got.dtype(), dt);
    const Tensor want = cast(scaled_dot_product_attention(cast(q, float32), cast(k, float32), cast(v, float32),
                                                          {.causal = true}), dt);
    EXPECT_EQ(cast(got, float32).to_vector<float>(), cast(want, float32).to_vector<float>()) << dtype_name(dt);
  }
}

TEST(Attention, BadInputNamesTheOpAndTheShapes) {
  const Tensor q = random::normal({1, 2, 4, 8}, 0, 1, 1), k = random::normal({1, 2, 5, 8}, 0, 1, 2);
  const Tensor v = random::normal({1, 2, 5, 8}, 0, 1, 3);
  auto message = [](const std::function<void()>& f) {
    try {
      f();
    } catch (const InvalidArgument& e) {
      return std::string(e.what());
    }
    return std::string("no InvalidArgument");
  };
  const std::string dims = message([&] { scaled_dot_product_attention(q, random::normal({1, 2, 5, 6}, 0, 1, 4), v); });
  EXPECT_NE(dims.find("[scaled_dot_product_attention]"), std::string::npos) << dims;
  EXPECT_NE(dims.find("head_dim"), std::string::npos) << dims;
  EXPECT_NE(dims.find("(1, 2, 5, 6)"), std::string::npos) << dims;
  const std::string mask = message([&] {
    scaled_dot_product_attention(q, k, v, {.mask = cast(ones({3, 5}, int32), bool_)});
  });
  EXPECT_NE(mask.find("does not broadcast"), std::string::npos) << mask;
  EXPECT_NE(mask.find("(3, 5)"), std::string::npos) << mask;
  const std::string not_bool = message([&] { scaled_dot_product_attention(q, k, v, {.mask = ones({4, 5})}); });
  EXPECT_NE(not_bool.find("bool"), std::string::npos) << not_bool;
  const std::string rank = message([&] { scaled_dot_product_attention(ones({2, 4, 8}), ones({2, 5, 8}), ones({2, 5, 8})); });
  EXPECT_NE(rank.find("[batch, heads, seq, head_dim]"), std::string::npos) << rank;
  const std::string lengths = message([&] { scaled_dot_product_attention(q, k, random::normal({1, 2, 6, 8}, 0, 1, 5)); });
  EXPECT_NE(lengths.find("same sequence length"), std::string::npos) << lengths;
  const std::string rate = message([&] { scaled_dot_product_attention(q, k, v, {.dropout = 1.0}); });
  EXPECT_NE(rate.find("dropout"), std::string::npos) << rate;
}

}  // namespace
}  // namespace weft
