// Variable: a handle to mutable state that works wherever a Tensor does.
#include <gtest/gtest.h>

#include <sstream>

#include "runtime/tensor_internals.h"
#include "weft/weft.h"

namespace weft {
namespace {

std::vector<float> values(const Tensor& t) { return t.to_vector<float>(); }

// The same expression applied to the Variable itself and to a plain Tensor of its value must
// agree: a Variable is only a different spelling of that Tensor.
template <class F>
void expect_same_as_tensor(const Variable& v, const Tensor& t, F f, const char* what) {
  Tensor a = f(v);
  Tensor b = f(t);
  ASSERT_EQ(a.shape(), b.shape()) << what;
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  Tensor a64 = cast(a, float64), b64 = cast(b, float64);
  EXPECT_EQ(a64.to_vector<double>(), b64.to_vector<double>()) << what;
}

TEST(Variable, WorksInEveryOperator) {
  Tensor init = constant({{0.5f, 1.5f}, {2.f, 4.f}});
  Variable w(init, "w");
  Tensor t = constant({{1.f, 2.f}, {3.f, 4.f}});
#define SAME(expr) expect_same_as_tensor(w, init, [&](const auto& v) { return expr; }, #expr)
  SAME(v + t);
  SAME(t + v);
  SAME(v + v);
  SAME(v + 1.f);
  SAME(2 + v);
  SAME(v - t);
  SAME(3.f - v);
  SAME(v * v);
  SAME(v * 2.0);
  SAME(t * v);
  SAME(v / t);
  SAME(1.f / v);
  SAME(-v);
  SAME(v < t);
  SAME(v <= 1.5f);
  SAME(v > t);
  SAME(2.f >= v);
#undef SAME
}

TEST(Variable, WorksInEveryOp) {
  Tensor init = constant({{0.5f, 1.5f, 2.f}, {2.f, 4.f, 0.25f}});
  Variable w(init, "w");
  Tensor t = constant({{1.f, 2.f, 3.f}, {3.f, 4.f, 5.f}});
  Tensor labels = constant({2, 0});
#define SAME(expr) expect_same_as_tensor(w, init, [&](const auto& v) { return expr; }, #expr)
  SAME(add(v, t));
  SAME(sub(t, v));
  SAME(mul(v, 3.f));
  SAME(div(v, v));
  SAME(pow(v, 2.f));
  SAME(maximum(v, t));
  SAME(minimum(t, v));
  SAME(equal(v, t));
  SAME(not_equal(v, 2.f));
  SAME(less(v, t));
  SAME(less_equal(v, t));
  SAME(greater(v, t));
  SAME(greater_equal(v, t));
  SAME(neg(v));
  SAME(abs(v));
  SAME(sign(v));
  SAME(exp(v));
  SAME(log(v));
  SAME(sqrt(v));
  SAME(rsqrt(v));
  SAME(square(v));
  SAME(where(greater(v, 1.f), v, t));
  SAME(cast(v, float64));
  SAME(relu(v));
  SAME(sigmoid(v));
  SAME(tanh(v));
  SAME(softmax(v));
  SAME(log_softmax(v, 0));
  SAME(matmul(v, t, false, true));
  SAME(matmul(t, v, true, false));
  SAME(reshape(v, {3, 2}));
  SAME(transpose(v));
  SAME(concat({v, t, v}, 1));
  SAME(slice(v, {0, 1}, {2, 2}));
  SAME(gather(v, constant({1, 0, 1})));
  SAME(expand_dims(v, 0));
  SAME(squeeze(expand_dims(v, 2), {2}));
  SAME(identity(v, ""));
  SAME(stop_gradient(v));
  SAME(reduce_sum(v));
  SAME(reduce_mean(v, {0}));
  SAME(reduce_max(v, {1}, true));
  SAME(reduce_min(v));
  SAME(argmax(v, 1));
  SAME(zeros_like(v));
  SAME(ones_like(v));
  SAME(nn::sparse_softmax_cross_entropy(labels, v));
  SAME(nn::mean_squared_error(t, v));
  SAME(nn::relu(v));
#undef SAME
  std::ostringstream a, b;
  a << w;
  b << init;
  EXPECT_EQ(a.str(), b.str());
}

TEST(Variable, TakesACopyOfItsInitialValue) {
  Tensor init = constant({1.f, 2.f});
  Variable w(init, "w");
  init.data<float>()[0] = 100.f;
  EXPECT_EQ(values(w), (std::vector<float>{1, 2}));
  EXPECT_EQ(w.name(), "w");
  EXPECT_TRUE(w.trainable());
  EXPECT_EQ(w.dtype(), float32);
  EXPECT_EQ(w.shape(), Shape{2});
  EXPECT_EQ(Variable(constant(1.0)).name(), "Variable");
  EXPECT_FALSE(Variable(constant(1.0), "frozen", false).trainable());
}

TEST(Variable, CopiesShareState) {
  Variable w(constant({1.f, 2.f}), "w");
  Variable copy = w;
  EXPECT_EQ(copy.id(), w.id());
  copy.assign(constant({5.f, 6.f}));
  EXPECT_EQ(values(w), (std::vector<float>{5, 6}));
  w.assign_add(constant({1.f, 1.f}));
  EXPECT_EQ(values(copy), (std::vector<float>{6, 7}));
  Variable other(constant({1.f, 2.f}), "w");
  EXPECT_NE(other.id(), w.id());
  std::vector<Variable> list{w};
  list[0].assign_sub(constant({6.f, 7.f}));
  EXPECT_EQ(values(w), (std::vector<float>{0, 0}));
}

TEST(Variable, AssignmentSemantics) {
  Variable w(constant({1.f, 2.f, 3.f}), "w");
  w.assign(constant({4.f, 5.f, 6.f}));
  EXPECT_EQ(values(w), (std::vector<float>{4, 5, 6}));
  w.assign_add(constant({1.f, 10.f, 100.f}));
  EXPECT_EQ(values(w), (std::vector<float>{5, 15, 106}));
  w.assign_sub(constant({5.f, 5.f, 6.f}));
  EXPECT_EQ(values(w), (std::vector<float>{0, 10, 100}));
  w.assign_add(w);  // an update that reads the variable itself
  EXPECT_EQ(values(w), (std::vector<float>{0, 20, 200}));
  w.assign(w * 0.5f);
  EXPECT_EQ(values(w), (std::vector<float>{0, 10, 100}));
  w.assign(w);
  EXPECT_EQ(values(w), (std::vector<float>{0, 10, 100}));
  // The assigned tensor is copied: changing it afterwards does not show through the variable.
  Tensor src = constant({7.f, 8.f, 9.f});
  w.assign(src);
  src.data<float>()[1] = -1.f;
  EXPECT_EQ(values(w), (std::vector<float>{7, 8, 9}));
  Tensor val = w.value();
  EXPECT_EQ(val.dtype(), float32);
  EXPECT_EQ(w.dtype(), float32);
}

TEST(Variable, MismatchedAssignmentsThrowAndLeaveTheValue) {
  Variable w(constant({1.f, 2.f}), "weights");
  try {
    w.assign(constant({1.f, 2.f, 3.f}));
    ADD_FAILURE() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("weights"), std::string::npos) << e.what();
  }
  EXPECT_THROW(w.assign(constant({1.0, 2.0})), InvalidArgument);
  EXPECT_THROW(w.assign(constant({1, 2})), InvalidArgument);
  EXPECT_THROW(w.assign(constant({{1.f, 2.f}})), InvalidArgument);
  EXPECT_THROW(w.assign(Tensor()), InvalidArgument);
  EXPECT_THROW(w.assign_add(constant({{1.f, 2.f}, {3.f, 4.f}})), InvalidArgument);
  EXPECT_THROW(w.assign_sub(constant({1.f, 2.f, 3.f})), InvalidArgument);
  EXPECT_THROW(w.assign_add(constant({1.0, 2.0})), InvalidArgument);
  EXPECT_THROW(w.assign_sub(constant({1, 2})), InvalidArgument);
  EXPECT_THROW(w.assign_add(Tensor()), InvalidArgument);
  EXPECT_EQ(values(w), (std::vector<float>{1, 2}));
  EXPECT_EQ(w.dtype(), float32);
  EXPECT_EQ(w.shape(), Shape{2});
}

TEST(Variable, AValueReadBeforeAnAssignmentKeepsItsContents) {
  Variable w(constant({1.f, 2.f}), "w");
  Tensor before_assign = w.value();
  Tensor implicit = w;
  Tensor view = reshape(w, {2, 1});
  w.assign(constant({3.f, 4.f}));
  EXPECT_EQ(values(before_assign), (std::vector<float>{1, 2}));
  EXPECT_EQ(values(implicit), (std::vector<float>{1, 2}));
  EXPECT_EQ(values(view), (std::vector<float>{1, 2}));
  Tensor before_add = w.value();
  w.assign_add(constant({1.f, 1.f}));
  Tensor before_sub = w.value();
  w.assign_sub(constant({10.f, 10.f}));
  Tensor before_update = w.value();
  Tensor u = w.value_for_update();
  u.data<float>()[0] = 42.f;
  EXPECT_EQ(values(before_add), (std::vector<float>{3, 4}));
  EXPECT_EQ(values(before_sub), (std::vector<float>{4, 5}));
  EXPECT_EQ(values(before_update), (std::vector<float>{-6, -5}));
  EXPECT_EQ(values(w), (std::vector<float>{42, -5}));
}

TEST(Variable, ValueForUpdateCopiesOnlyWhenShared) {
  Variable w(constant({1.f, 2.f, 3.f}), "w");
  const void* first = nullptr;
  {
    Tensor u = w.value_for_update();
    first = raw_data(u);
    u.data<float>()[2] = 30.f;
  }
  EXPECT_EQ(values(w), (std::vector<float>{1, 2, 30}));
  {
    Tensor u = w.value_for_update();
    EXPECT_EQ(raw_data(u), first) << "nothing else held the value: no copy";
  }
  Tensor held = w.value();
  Tensor u = w.value_for_update();
  EXPECT_NE(raw_data(u), raw_data(held)) << "a reader holds the value: the update gets a private copy";
  u.data<float>()[0] = -1.f;
  EXPECT_EQ(values(held), (std::vector<float>{1, 2, 30}));
  EXPECT_EQ(values(w), (std::vector<float>{-1, 2, 30}));
  // A view of the buffer counts as a holder too.
  Tensor v = reshape(w, {3, 1});
  w.value_for_update().data<float>()[1] = 9.f;
  EXPECT_EQ(values(v), (std::vector<float>{-1, 2, 30}));
  EXPECT_EQ(values(w), (std::vector<float>{-1, 9, 30}));
}

TEST(Variable, InPlaceAssignDoesNotLeakIntoOldReads) {
  Variable w(zeros({4}), "w");
  std::vector<Tensor> reads;
  for (int i = 0; i < 4; ++i) {
    reads.push_back(w.value());
    w.assign(fill({4}, static_cast<float>(i + 1)));
  }
  for (int i = 0; i < 4; ++i)
    EXPECT_EQ(values(reads[i]), std::vector<float>(4, static_cast<float>(i))) << "read " << i;
}

TEST(Variable, DefaultConstructedErrors) {
  Variable v;
  EXPECT_FALSE(v.defined());
  EXPECT_EQ(v.id(), nullptr);
  EXPECT_THROW(v.value(), FailedPrecondition);
  EXPECT_THROW(v.assign(constant(1.f)), FailedPrecondition);
  EXPECT_THROW(v.assign_add(constant(1.f)), FailedPrecondition);
  EXPECT_THROW(v.assign_sub(constant(1.f)), FailedPrecondition);
  EXPECT_THROW(v.value_for_update(), FailedPrecondition);
  EXPECT_THROW(v.name(), FailedPrecondition);
  EXPECT_THROW(v.trainable(), FailedPrecondition);
  EXPECT_THROW(v.shape(), FailedPrecondition);
  EXPECT_THROW(v.dtype(), FailedPrecondition);
  EXPECT_THROW(add(v, constant(1.f)), FailedPrecondition);
  EXPECT_THROW(Variable(Tensor(), "empty"), InvalidArgument);
  GradientTape tape;
  EXPECT_THROW(tape.gradient(constant(1.f), v), InvalidArgument);
}

}  // namespace
}  // namespace weft
