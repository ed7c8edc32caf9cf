// Optimizers against the Keras update rules, written out here in plain loops.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "weft/weft.h"

namespace weft {
namespace {

const std::vector<double> kInit = {0.5, -1.0, 2.0, 0.0, 3.0, -0.25};
const Shape kShape{2, 3};

// Three different gradients, one per step.
std::vector<double> grad_at(int step) {
  std::vector<double> g(kInit.size());
  for (size_t i = 0; i < g.size(); ++i) g[i] = std::sin(1.7 * static_cast<double>(i) + step) * (step + 1);
  return g;
}

struct Reference {
  std::vector<double> w = kInit, m = std::vector<double>(kInit.size()), v = std::vector<double>(kInit.size());
};

void sgd_step(Reference& r, const std::vector<double>& g, double lr, double mu, bool nesterov) {
  for (size_t i = 0; i < g.size(); ++i) {
    if (mu == 0) {
      r.w[i] -= lr * g[i];
      continue;
    }
    r.m[i] = mu * r.m[i] - lr * g[i];
    r.w[i] += nesterov ? mu * r.m[i] - lr * g[i] : r.m[i];
  }
}

void adam_step(Reference& r, const std::vector<double>& g, int t, double lr, double b1, double b2, double eps) {
  const double lr_t = lr * std::sqrt(1 - std::pow(b2, t)) / (1 - std::pow(b1, t));
  for (size_t i = 0; i < g.size(); ++i) {
    r.m[i] = b1 * r.m[i] + (1 - b1) * g[i];
    r.v[i] = b2 * r.v[i] + (1 - b2) * g[i] * g[i];
    r.w[i] -= lr_t * r.m[i] / (std::sqrt(r.v[i]) + eps);
  }
}

void expect_near(const std::vector<double>& got, const std::vector<double>& want, double tol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << what << " element " << i;
}

std::vector<double> as_doubles(const Tensor& t) { return cast(t, float64).to_vector<double>(); }

TEST(Optimizers, SgdMatchesReference) {
  for (DType dtype : {float64, float32}) {
    Variable w(cast(constant(kInit, kShape), dtype), "w");
    optim::SGD sgd(0.1);
    Reference ref;
    for (int t = 1; t <= 3; ++t) {
      sgd.apply_gradients({cast(constant(grad_at(t), kShape), dtype)}, {w});
      sgd_step(ref, grad_at(t), 0.1, 0, false);
      expect_near(as_doubles(w), ref.w, dtype == float64 ? 1e-14 : 1e-6, "sgd step " + std::to_string(t));
    }
    EXPECT_EQ(sgd.iterations(), 3);
    EXPECT_TRUE(sgd.variables().empty()) << "plain SGD keeps no slots";
    EXPECT_FALSE(sgd.slot(w, "momentum").defined());
    EXPECT_EQ(w.dtype(), dtype);
  }
}

TEST(Optimizers, MomentumAndNesterovMatchReference) {
  for (bool nesterov : {false, true})
    for (DType dtype : {float64, float32}) {
      Variable w(cast(constant(kInit, kShape), dtype), "w");
      optim::SGD sgd(0.05, 0.9, nesterov);
      Reference ref;
      for (int t = 1; t <= 3; ++t) {
        sgd.apply_gradients({cast(constant(grad_at(t), kShape), dtype)}, {w});
        sgd_step(ref, grad_at(t), 0.05, 0.9, nesterov);
        std::string what = std::string(nesterov ? "nesterov" : "momentum") + " step " + std::to_string(t);
        expect_near(as_doubles(w), ref.w, dtype == float64 ? 1e-14 : 1e-6, what);
        expect_near(as_doubles(sgd.slot(w, "momentum")), ref.m, dtype == float64 ? 1e-14 : 1e-6, what + " velocity");
      }
      Variable slot = sgd.slot(w, "momentum");
      EXPECT_EQ(slot.name(), "w/momentum");
      EXPECT_FALSE(slot.trainable());
      EXPECT_EQ(slot.shape(), kShape);
      EXPECT_EQ(slot.dtype(), dtype);
      ASSERT_EQ(sgd.variables().size(), 1u);
      EXPECT_EQ(sgd.variables()[0].id(), slot.id());
    }
}

TEST(Optimizers, AdamMatchesReference) {
  const double lr = 0.01, b1 = 0.8, b2 = 0.95, eps = 1e-7;
  for (DType dtype : {float64, float32}) {
    Variable w(cast(constant(kInit, kShape), dtype), "w");
    optim::Adam adam(lr, b1, b2, eps);
    Reference ref;
    for (int t = 1; t <= 3; ++t) {
      adam.apply_gradients({cast(constant(grad_at(t), kShape), dtype)}, {w});
      adam_step(ref, grad_at(t), t, lr, b1, b2, eps);
      double tol = dtype == float64 ? 1e-14 : 1e-6;
      std::string what = "adam step " + std::to_string(t) + " " + std::string(dtype_name(dtype));
      expect_near(as_doubles(w), ref.w, tol, what);
      expect_near(as_doubles(adam.slot(w, "m")), ref.m, tol, what + " m");
      expect_near(as_doubles(adam.slot(w, "v")), ref.v, tol * 10, what + " v");
    }
    EXPECT_EQ(adam.iterations(), 3);
    EXPECT_EQ(adam.slot(w, "m").name(), "w/m");
    EXPECT_EQ(adam.slot(w, "v").name(), "w/v");
    EXPECT_FALSE(adam.slot(w, "momentum").defined());
    ASSERT_EQ(adam.variables().size(), 2u);
    EXPECT_EQ(adam.variables()[0].name(), "w/m");
    EXPECT_EQ(adam.variables()[1].name(), "w/v");
  }
}

TEST(Optimizers, AdamDefaultsAreKeras) {
  Variable w(constant(kInit, kShape), "w");
  optim::Adam adam;  // 1e-3, 0.9, 0.999, 1e-7
  EXPECT_DOUBLE_EQ(adam.learning_rate(), 1e-3);
  Reference ref;
  for (int t = 1; t <= 3; ++t) {
    adam.apply_gradients({constant(grad_at(t), kShape)}, {w});
    adam_step(ref, grad_at(t), t, 1e-3, 0.9, 0.999, 1e-7);
  }
  expect_near(w.value().to_vector<double>(), ref.w, 1e-14, "adam defaults");
  // Gradients small enough that epsilon dominates: Keras adds eps to sqrt(v) as it is, where the
  // "epsilon hat" form of the Adam paper's section 2 would scale it by sqrt(1 - beta2^t).
  Variable z(constant({1.0, -1.0}), "z");
  optim::Adam fresh(0.5);
  Reference rz;
  rz.w = {1.0, -1.0};
  rz.m = rz.v = {0, 0};
  for (int t = 1; t <= 3; ++t) {
    std::vector<double> g = {1e-7 * t, -3e-8};
    fresh.apply_gradients({constant(g)}, {z});
    adam_step(rz, g, t, 0.5, 0.9, 0.999, 1e-7);
  }
  expect_near(z.value().to_vector<double>(), rz.w, 1e-14, "adam with eps-sized gradients");
  EXPECT_GT(std::abs(rz.w[0] - 1.0), 1e-3) << "the reference should move noticeably";
}

TEST(Optimizers, SeveralVariablesKeepTheirOwnSlots) {
  Variable a(constant({1.0, 2.0}), "a"), b(constant({{3.0}}), "b");
  optim::Adam adam(0.1);
  Reference ra, rb;
  ra.w = {1.0, 2.0};
  ra.m = ra.v = {0, 0};
  rb.w = {3.0};
  rb.m = rb.v = {0};
  for (int t = 1; t <= 3; ++t) {
    std::vector<double> ga = {0.1 * t, -0.2}, gb = {1.0 / t};
    adam.apply_gradients({constant(ga), constant(gb, Shape{1, 1})}, {a, b});
    adam_step(ra, ga, t, 0.1, 0.9, 0.999, 1e-7);
    adam_step(rb, gb, t, 0.1, 0.9, 0.999, 1e-7);
  }
  expect_near(a.value().to_vector<double>(), ra.w, 1e-14, "a");
  expect_near(b.value().to_vector<double>(), rb.w, 1e-14, "b");
  std::vector<std::string> names;
  for (const Variable& v : adam.variables()) names.push_back(v.name());
  EXPECT_EQ(names, (std::vector<std::string>{"a/m", "a/v", "b/m", "b/v"}));
  // Copies of an optimizer share its state.
  optim::Optimizer copy = adam;
  copy.apply_gradients({constant({0.0, 0.0}), Tensor()}, {a, b});
  EXPECT_EQ(adam.iterations(), 4);
}

TEST(Optimizers, UndefinedGradientLeavesTheVariableAlone) {
  Variable a(constant({1.0, 2.0}), "a"), b(constant({5.0}), "b");
  optim::SGD sgd(0.5, 0.9);
  sgd.apply_gradients({Tensor(), constant({2.0})}, {a, b});
  EXPECT_EQ(a.value().to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(b.value().to_vector<double>(), (std::vector<double>{4}));
  EXPECT_FALSE(sgd.slot(a, "momentum").defined());
  EXPECT_TRUE(sgd.slot(b, "momentum").defined());
  EXPECT_EQ(sgd.iterations(), 1);
  optim::Adam adam(0.1);
  adam.apply_gradients({Tensor()}, {a});
  EXPECT_EQ(a.value().to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_TRUE(adam.variables().empty());
}

TEST(Optimizers, MismatchedArgumentsThrowBeforeChangingAnything) {
  Variable a(constant({1.0, 2.0}), "a"), b(constant({5.0}), "b");
  for (optim::Optimizer opt : {optim::Optimizer(optim::SGD(0.1)), optim::Optimizer(optim::SGD(0.1, 0.5)),
                               optim::Optimizer(optim::Adam(0.1))}) {
    EXPECT_THROW(opt.apply_gradients({constant({1.0, 1.0}), constant({1.0, 1.0})}, {a, b}), InvalidArgument);
    EXPECT_THROW(opt.apply_gradients({constant({1.0, 1.0}), constant({{1.0}})}, {a, b}), InvalidArgument);
    EXPECT_THROW(opt.apply_gradients({constant({1.0, 1.0}), constant({1.f})}, {a, b}), InvalidArgument);
    EXPECT_THROW(opt.apply_gradients({constant({1.0, 1.0})}, {a, b}), InvalidArgument);
    EXPECT_THROW(opt.apply_gradients({constant({1.0, 1.0})}, {Variable()}), InvalidArgument);
    EXPECT_EQ(opt.iterations(), 0);
    EXPECT_TRUE(opt.variables().empty());
  }
  EXPECT_EQ(a.value().to_vector<double>(), (std::vector<double>{1, 2}));
  EXPECT_EQ(b.value().to_vector<double>(), (std::vector<double>{5}));
  try {
    optim::SGD(0.1).apply_gradients({constant({1.0, 2.0, 3.0})}, {a});
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("'a'"), std::string::npos) << e.what();
  }
}

TEST(Optimizers, BadHyperparameters) {
  EXPECT_THROW(optim::SGD(-0.1), InvalidArgument);
  EXPECT_THROW(optim::SGD{std::numeric_limits<double>::quiet_NaN()}, InvalidArgument);
  EXPECT_THROW(optim::SGD(0.1, 1.5), InvalidArgument);
  EXPECT_THROW(optim::SGD(0.1, -0.5), InvalidArgument);
  EXPECT_THROW(optim::Adam(0.1, 1.0), InvalidArgument);
  EXPECT_THROW(optim::Adam(0.1, 0.9, 1.0), InvalidArgument);
  EXPECT_THROW(optim::Adam(0.1, 0.9, 0.999, 0.0), InvalidArgument);
  EXPECT_THROW(optim::Adam{std::numeric_limits<double>::infinity()}, InvalidArgument);
}

TEST(Optimizers, LearningRateCanChange) {
  Variable w(constant({1.0}), "w");
  optim::SGD sgd(0.1);
  sgd.apply_gradients({constant({1.0})}, {w});
  sgd.set_learning_rate(0.5);
  EXPECT_DOUBLE_EQ(sgd.learning_rate(), 0.5);
  sgd.apply_gradients({constant({1.0})}, {w});
  EXPECT_DOUBLE_EQ(w.value().item<double>(), 1.0 - 0.1 - 0.5);
}

TEST(Optimizers, UpdatesDoNotChangeValuesReadBefore) {
  for (optim::Optimizer opt : {optim::Optimizer(optim::SGD(0.1)), optim::Optimizer(optim::SGD(0.1, 0.9)),
                               optim::Optimizer(optim::Adam(0.1))}) {
    Variable w(constant({1.0, 2.0}), "w");
    Tensor before = w.value();
    Tensor view = reshape(w, {2, 1});
    opt.apply_gradients({constant({1.0, 1.0})}, {w});
    EXPECT_EQ(before.to_vector<double>(), (std::vector<double>{1, 2}));
    EXPECT_EQ(view.to_vector<double>(), (std::vector<double>{1, 2}));
    EXPECT_LT(w.value().to_vector<double>()[0], 1.0);
    // The slot a caller read keeps its contents too.
    for (const Variable& slot : opt.variables()) {
      Tensor s = slot.value();
      std::vector<double> was = s.to_vector<double>();
      opt.apply_gradients({constant({1.0, 1.0})}, {w});
      EXPECT_EQ(s.to_vector<double>(), was) << slot.name();
    }
  }
}

TEST(Optimizers, GradientAliasingTheVariable) {
  // A gradient that is the variable's own value (d(w^2/2)/dw = w): the update must read the
  // gradient before it writes the variable.
  Variable w(constant({2.0, -4.0}), "w");
  optim::SGD sgd(0.25);
  sgd.apply_gradients({w.value()}, {w});
  EXPECT_EQ(w.value().to_vector<double>(), (std::vector<double>{1.5, -3.0}));
  optim::SGD momentum(0.25, 0.5);
  momentum.apply_gradients({w.value()}, {w});
  EXPECT_EQ(w.value().to_vector<double>(), (std::vector<double>{1.5 - 0.375, -3.0 + 0.75}));
}

}  // namespace
}  // namespace weft
