// split and stack; nn::Embedding (lookups, its gradient summing repeated ids, weight tying, bad
// ids); nn::MultiHeadAttention (against the same computation written with its variables and the
// composed ops, causality, eager against traced, variables and paths).
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "gradient_check.h"
#include "weft/weft.h"

namespace weft {
namespace {

TEST(SplitStack, ValuesShapesAndGradients) {
  const Tensor x = reshape(range(0.0, 24.0), {2, 3, 4});
  const std::vector<Tensor> parts = split(x, 2, -1);
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].shape(), (Shape{2, 3, 2}));
  EXPECT_EQ(parts[1].to_vector<double>()[0], 2.0);
  const Tensor back = concat(parts, -1);
  EXPECT_EQ(back.to_vector<double>(), x.to_vector<double>());
  const Tensor s = stack({parts[0], parts[1]}, 0);
  EXPECT_EQ(s.shape(), (Shape{2, 2, 3, 2}));
  EXPECT_EQ(stack({parts[0], parts[1]}, -1).shape(), (Shape{2, 3, 2, 2}));
  testing::expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        std::vector<Tensor> p = split(in[0], 3, 1);
        return stack({mul(p[0], p[2]), p[1]}, 1);
      },
      {random::normal({2, 3, 2}, 0, 1, 3, float64)});
  EXPECT_THROW(split(x, 5, -1), InvalidArgument);
  EXPECT_THROW(split(x, 2, 3), InvalidArgument);
  EXPECT_THROW(stack({parts[0], x}, 0), InvalidArgument);
  EXPECT_THROW(stack({}, 0), InvalidArgument);
}

// split is one Split node: each part is the window a slice would take, along every axis (the
// middle one strided), eagerly and traced alike, in every dtype the copy moves; its gradient is
// the parts' gradients concatenated, zeros for a part that gets none.
TEST(SplitStack, SplitIsTheSlicesAlongEveryAxisEagerAndTraced) {
  const Tensor x = reshape(range(0.0f, 48.0f), {2, 6, 4});
  for (int64_t axis : {0, 1, 2, -1}) {
    const int64_t a = axis < 0 ? axis + 3 : axis, num = x.shape()[a];
    const std::vector<Tensor> parts = split(x, num, axis);
    auto traced = function([&](Tensor in) { return split(in, num, axis); });
    const std::vector<Tensor> traced_parts = traced(x);
    ASSERT_EQ(parts.size(), static_cast<size_t>(num));
    ASSERT_EQ(traced_parts.size(), static_cast<size_t>(num));
    for (int64_t k = 0; k < num; ++k) {
      std::vector<int64_t> begin(3, 0), size = {-1, -1, -1};
      begin[static_cast<size_t>(a)] = k;
      size[static_cast<size_t>(a)] = 1;
      const std::vector<float> want = slice(x, begin, size).to_vector<float>();
      EXPECT_EQ(parts[k].to_vector<float>(), want) << "axis " << axis << ", part " << k;
      EXPECT_EQ(traced_parts[k].to_vector<float>(), want) << "traced, axis " << axis << ", part " << k;
    }
  }
  for (DType dt : {int32, int64, float64, float16, bfloat16, uint8}) {
    const Tensor y = cast(x, dt);
    const std::vector<Tensor> parts = split(y, 2, 1);
    EXPECT_EQ(parts[1].dtype(), dt);
    EXPECT_EQ(cast(parts[1], float32).to_vector<float>(), slice(x, {0, 3, 0}, {-1, 3, -1}).to_vector<float>());
  }
  const Tensor w = random::normal({4, 3}, 0, 1, 5, float64);
  GradientTape tape;
  tape.watch(w);
  const std::vector<Tensor> p = split(w, 2, 0);
  const Tensor g = tape.gradient(reduce_sum(mul(p[1], p[1])), w);  // part 0 gets no gradient
  const std::vector<double> gv = g.to_vector<double>(), wv = w.to_vector<double>();
  for (size_t i = 0; i < gv.size(); ++i) EXPECT_EQ(gv[i], i < 6 ? 0.0 : 2 * wv[i]) << i;
  testing::expect_gradients_match(
      [](const std::vector<Tensor>& in) {
        GradientTape inner;  // the gradient's gradient: concat's gradient is slices
        inner.watch(in[0]);
        std::vector<Tensor> q = split(in[0], 2, 1);
        return inner.gradient(reduce_sum(mul(mul(q[0], q[1]), q[1])), in[0]);
      },
      {random::normal({2, 4}, 0, 1, 6, float64)});
}

TEST(Embedding, LooksUpRowsAndSumsTheGradientOfRepeatedIds) {
  nn::Embedding emb(10, 4);
  const Tensor table = emb.embeddings().value();
  ASSERT_EQ(table.shape(), (Shape{10, 4}));
  const Tensor ids = constant(std::vector<int32_t>{3, 7, 3, 0, 9, 3}, Shape{2, 3});
  const Tensor y = emb(ids);
  ASSERT_EQ(y.shape(), (Shape{2, 3, 4}));
  const std::vector<float> t = table.to_vector<float>(), got = y.to_vector<float>();
  const int32_t idv[] = {3, 7, 3, 0, 9, 3};
  for (int i = 0; i < 6; ++i)
    for (int c = 0; c < 4; ++c) EXPECT_EQ(got[i * 4 + c], t[idv[i] * 4 + c]);
  GradientTape tape;
  const Tensor w = random::uniform({2, 3, 4}, 0.5, 1.5, 4);
  const Tensor g = tape.gradient(reduce_sum(mul(emb(ids), w)), emb.embeddings());
  const std::vector<float> gv = g.to_vector<float>(), wv = w.to_vector<float>();
  for (int r = 0; r < 10; ++r)
    for (int c = 0; c < 4; ++c) {
      float want = 0;
      for (int i = 0; i < 6; ++i)
        if (idv[i] == r) want += wv[i * 4 + c];
      EXPECT_FLOAT_EQ(gv[r * 4 + c], want) << "row " << r;
    }
  EXPECT_EQ(emb.trainable_variables().size(), 1u);
  EXPECT_THROW(emb(constant(std::vector<int32_t>{10}, Shape{1})), InvalidArgument);
  EXPECT_THROW(emb(constant(std::vector<float>{1.f}, Shape{1})), InvalidArgument);
  EXPECT_THROW(nn::Embedding(0, 4), InvalidArgument);
}

TEST(Embedding, TiedOutputProjectionTrains) {
  nn::Embedding emb(12, 8);
  const Tensor ids = constant(std::vector<int32_t>{1, 2, 3, 4}, Shape{4});
  const Tensor labels = constant(std::vector<int32_t>{2, 3, 4, 5}, Shape{4});
  optim::SGD opt(0.5);
  float first = 0, last = 0;
  for (int step = 0; step < 30; ++step) {
    GradientTape tape;
    const Tensor logits = matmul(emb(ids), emb.embeddings().value(), false, true);
    const Tensor loss = nn::sparse_softmax_cross_entropy(labels, logits);
    auto vars = emb.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    (step == 0 ? first : last) = loss.item<float>();
  }
  EXPECT_LT(last, first * 0.9f);
}

TEST(MultiHeadAttention, EqualsTheComputationWrittenOut) {
  nn::MultiHeadAttention mha(2, 3, {.causal = true});
  const Tensor x = random::normal({2, 5, 4}, 0, 1, 7, float64);
  const Tensor y = mha(x);
  ASSERT_EQ(y.shape(), (Shape{2, 5, 4}));
  const std::vector<Variable> vars = mha.trainable_variables();
  ASSERT_EQ(vars.size(), 4u);  // qkv kernel, bias; output kernel, bias
  EXPECT_EQ(vars[0].shape(), (Shape{4, 18}));
  const Tensor qkv = add(matmul(x, vars[0].value()), vars[1].value());
  std::vector<Tensor> heads;
  for (int64_t h = 0; h < 2; ++h) {
    auto part = [&](int64_t which) { return slice(qkv, {0, 0, which * 6 + h * 3}, {-1, -1, 3}); };
    const Tensor q = part(0), k = part(1), v = part(2);
    std::vector<double> tri(25);
    for (int i = 0; i < 5; ++i)
      for (int j = 0; j < 5; ++j) tri[i * 5 + j] = j <= i ? 0.0 : -1e300;
    const Tensor scores = add(mul(matmul(q, k, false, true), 1.0 / std::sqrt(3.0)), constant(tri, Shape{5, 5}));
    heads.push_back(matmul(softmax(scores, -1), v));
  }
  const Tensor want = add(matmul(concat(heads, -1), vars[2].value()), vars[3].value());
  const std::vector<double> a = y.to_vector<double>(), b = want.to_vector<double>();
  for (size_t i = 0; i < a.size(); ++i) EXPECT_NEAR(a[i], b[i], 1e-12) << i;
  const auto named = mha.named_variables();
  ASSERT_EQ(named.size(), 4u);
  EXPECT_EQ(named[0].first, "qkv/kernel");
  EXPECT_EQ(named[2].first, "output/kernel");
}

TEST(MultiHeadAttention, DecodingWithACacheEqualsTheFullCausalCall) {
  nn::MultiHeadAttention mha(2, 3, {.causal = true});
  const Tensor x = random::normal({2, 6, 4}, 0, 1, 11, float64);
  const std::vector<double> full = mha(x).to_vector<double>();
  // A prompt of two positions, then one position at a time: each output equals the full call's.
  nn::KeyValueCache cache;
  std::vector<Tensor> steps{mha(slice(x, {0, 0, 0}, {-1, 2, -1}), cache)};
  EXPECT_EQ(cache.length(), 2);
  for (int64_t t = 2; t < 6; ++t) steps.push_back(mha(slice(x, {0, t, 0}, {-1, 1, -1}), cache));
  EXPECT_EQ(cache.length(), 6);
  EXPECT_EQ(cache.key.shape(), (Shape{2, 2, 6, 3}));
  const std::vector<double> decoded = concat(steps, 1).to_vector<double>();
  ASSERT_EQ(decoded.size(), full.size());
  for (size_t i = 0; i < full.size(); ++i) EXPECT_NEAR(decoded[i], full[i], 1e-12) << i;
  // A cache of another layer's geometry is an InvalidArgument naming the shapes.
  nn::KeyValueCache wrong{random::normal({2, 3, 1, 3}, 0, 1, 1, float64), random::normal({2, 3, 1, 3}, 0, 1, 2, float64)};
  try {
    mha(slice(x, {0, 0, 0}, {-1, 1, -1}), wrong);
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("(2, 3, 1, 3)"), std::string::npos) << e.what();
  }
}

TEST(MultiHeadAttention, TracedTrainingStepEqualsEager) {
  const Tensor x = random::normal({3, 6, 8}, 0, 1, 9);
  auto make = [&] {
    nn::MultiHeadAttention m(2, 4, {.causal = true});
    random::set_seed(3);
    m(x);
    return m;
  };
  nn::MultiHeadAttention eager_m = make(), traced_m = make();
  optim::SGD eager_opt(0.1), traced_opt(0.1);
  auto step = [&](nn::MultiHeadAttention& m, optim::SGD& opt, const Tensor& in) {
    GradientTape tape;
    const Tensor loss = reduce_mean(square(m(in, true)));
    auto vars = m.trainable_variables();
    opt.apply_gradients(tape.gradient(loss, vars), vars);
    return loss;
  };
  auto traced = function([&](Tensor in) { return step(traced_m, traced_opt, in); });
  for (int i = 0; i < 3; ++i) EXPECT_EQ(step(eager_m, eager_opt, x).item<float>(), traced(x).item<float>()) << i;
  EXPECT_THROW(eager_m(random::normal({3, 6}, 0, 1, 1)), InvalidArgument);
}

}  // namespace
}  // namespace weft
