// Eager fusion (api/eager_fusion.h): deferred elementwise ops give the separate ops' bits, a
// pending tensor is computed when read and every held one before any other kernel, inputs are
// read as they were when the op was called, and errors, threads and gradients behave as in plain
// eager mode. Run on the CPU with EagerFusion::All, the mechanism GPUs use by default.
#include <gtest/gtest.h>

#include <atomic>
#include <cstring>
#include <random>
#include <thread>
#include <vector>

#include "api/eager_fusion.h"
#include "reference.h"
#include "runtime/pending_value.h"
#include "runtime/tensor_internals.h"
#include "test_child_process.h"

namespace weft {
namespace {

class EagerFusionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_ = eager_fusion();
    set_eager_fusion(EagerFusion::All);
  }
  void TearDown() override { set_eager_fusion(saved_); }
  EagerFusion saved_ = EagerFusion::Gpus;
};

bool pending(const Tensor& t) { return !tensor_impl(t)->pending_done(); }

// What `program` gives in plain eager mode, every op run when called; the fixture's mode after.
template <class F>
Tensor plain_eager(F program) {
  set_eager_fusion(EagerFusion::Off);
  Tensor t = program();
  set_eager_fusion(EagerFusion::All);
  return t;
}

// Bits, not values: NaN must match NaN.
void expect_same_bits(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<float> g = got.to_vector<float>(), w = want.to_vector<float>();
  ASSERT_EQ(std::memcmp(g.data(), w.data(), g.size() * sizeof(float)), 0) << what;
}

Tensor data(Shape shape, uint64_t seed) {
  std::mt19937 rng(static_cast<uint32_t>(seed));
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<float> v(static_cast<size_t>(shape.num_elements()));
  for (float& x : v) x = normal(rng);
  return constant(v, shape);
}

TEST_F(EagerFusionTest, AChainStaysPendingUntilReadAndGivesTheSeparateOpsBits) {
  Tensor a = data(Shape{3, 5}, 1), b = data(Shape{3, 5}, 2), c = data(Shape{5}, 3);
  auto program = [&] { return tanh(relu(a + b) * c - exp(a) / (abs(b) + 1.f)); };
  Tensor y = program();
  EXPECT_TRUE(pending(y));
  set_eager_fusion(EagerFusion::Off);
  Tensor want = program();
  EXPECT_FALSE(pending(want));
  set_eager_fusion(EagerFusion::All);
  expect_same_bits(y, want, "tanh(relu(a + b) * c - exp(a) / (|b| + 1))");
  EXPECT_FALSE(pending(y));
}

TEST_F(EagerFusionTest, AnOperandStillHeldIsNotComputedByItsReaderAndGivesItsOwnValueLater) {
  Tensor a = data(Shape{8}, 4), b = data(Shape{8}, 5);
  const std::vector<float> av = a.to_vector<float>(), bv = b.to_vector<float>();
  Tensor t = a + b;
  Tensor y = relu(t);  // takes t's program: reading y does not write t
  std::vector<float> sum(8), relu_sum(8);
  for (size_t i = 0; i < 8; ++i) {
    sum[i] = av[i] + bv[i];
    relu_sum[i] = sum[i] > 0 ? sum[i] : 0.f;
  }
  EXPECT_EQ(y.to_vector<float>(), relu_sum);
  EXPECT_TRUE(pending(t));
  EXPECT_EQ(t.to_vector<float>(), sum);
  EXPECT_FALSE(pending(t));
}

TEST_F(EagerFusionTest, EveryHeldPendingTensorIsComputedBeforeAnyOtherKernelAndDroppedOnesNever) {
  Tensor a = data(Shape{4, 4}, 6);
  Tensor held = a * 2.f;
  (void)(a + 1.f);  // dropped at once: never computed
  EXPECT_TRUE(pending(held));
  Tensor m = matmul(a, a);  // not fusable: everything pending is settled first
  EXPECT_FALSE(pending(held));
  EXPECT_FALSE(any_pending());
  std::vector<float> av = a.to_vector<float>(), hv = held.to_vector<float>();
  for (size_t i = 0; i < av.size(); ++i) EXPECT_EQ(hv[i], av[i] * 2.f);
}

TEST_F(EagerFusionTest, AnInputWrittenThroughDataAfterTheOpIsReadAsItWasWhenTheOpWasCalled) {
  Tensor a = constant(std::vector<float>{1, 2, 3}, Shape{3});
  Tensor b = constant(std::vector<float>{10, 20, 30}, Shape{3});
  Tensor c = a + b;
  ASSERT_TRUE(pending(c));
  a.data<float>()[0] = 100.f;  // raw access settles every pending value first
  EXPECT_EQ(c.to_vector<float>(), (std::vector<float>{11, 22, 33}));
}

TEST_F(EagerFusionTest, AVariableUpdatedInPlaceAfterTheOpDoesNotChangeItsResult) {
  Variable v(constant(std::vector<float>{1, 2, 3}, Shape{3}), "v");
  Tensor doubled = v.value() * 2.f;
  ASSERT_TRUE(pending(doubled));
  v.assign_add(constant(std::vector<float>{1, 1, 1}, Shape{3}));
  EXPECT_EQ(doubled.to_vector<float>(), (std::vector<float>{2, 4, 6}));
  EXPECT_EQ(v.value().to_vector<float>(), (std::vector<float>{2, 3, 4}));
}

TEST_F(EagerFusionTest, BroadcastOperandsSquaresAndLongChains) {
  Tensor row = data(Shape{4}, 7), grid = data(Shape{3, 4}, 8);
  auto program = [&] {
    Tensor r = sigmoid(row) + 1.f;  // pending of shape {4}: an input of the {3, 4} op, not inlined
    Tensor x = r * grid;
    Tensor y = x * x - x;           // x's program taken once
    for (int i = 0; i < 40; ++i) y = y * 0.5f + x;  // past the register bound: runs in parts
    return y;
  };
  Tensor got = program();
  Tensor want = plain_eager(program);
  expect_same_bits(got, want, "broadcast and long chain");
}

TEST_F(EagerFusionTest, OperandsSharingInputsAndChainsPastTheInputBound) {
  std::vector<Tensor> in;
  for (int i = 0; i < 12; ++i) in.push_back(data(Shape{2, 3}, 20 + static_cast<uint64_t>(i)));
  auto program = [&] {
    Tensor left = (in[0] + in[1]) * (in[1] - in[2]);  // two inlined operands sharing in[1]
    Tensor right = in[2] * in[3] - in[4] / (abs(in[5]) + 1.f);
    Tensor y = relu(left) + right;                     // both chains renumbered into one program
    for (size_t i = 6; i < in.size(); ++i) y = y * in[i];  // past eight inputs: runs in parts
    return y;
  };
  Tensor got = program();
  EXPECT_TRUE(pending(got));
  Tensor want = plain_eager(program);
  expect_same_bits(got, want, "shared inputs, twelve inputs");
}

TEST_F(EagerFusionTest, IntegerAndNonElementwiseOpsRunAtOnce) {
  Tensor i = constant(std::vector<int32_t>{1, 2, 3}, Shape{3});
  EXPECT_FALSE(pending(i + i));
  Tensor f = data(Shape{2, 2}, 9);
  EXPECT_FALSE(pending(reduce_sum(f)));
  EXPECT_TRUE(pending(f + f));
}

TEST_F(EagerFusionTest, ShapeErrorsAreRaisedWhenTheOpIsCalled) {
  Tensor a = data(Shape{3}, 10), b = data(Shape{4}, 11);
  EXPECT_THROW((void)(a + b), InvalidArgument);
}

TEST_F(EagerFusionTest, GradientsMatchPlainEagerMode) {
  auto grads = [&] {
    Variable w(constant(std::vector<float>{0.5f, -1.f, 2.f}, Shape{3}), "w");
    Tensor x = constant(std::vector<float>{1.f, 2.f, -3.f}, Shape{3});
    GradientTape tape;
    Tensor loss = reduce_sum(tanh(w.value() * x + 1.f) * sigmoid(x - w.value()));
    return tape.gradient(loss, std::vector<Variable>{w})[0];
  };
  Tensor got = grads();
  Tensor want = plain_eager(grads);
  expect_same_bits(got, want, "gradient");
}

TEST_F(EagerFusionTest, PendingTensorsFeedFunctionsAndSessions) {
  Tensor a = data(Shape{2, 3}, 12), b = data(Shape{2, 3}, 13);
  auto f = function([](Tensor x) { return relu(x) * 3.f; });
  Tensor x = a - b;
  ASSERT_TRUE(pending(x));
  Tensor got = f(x);
  Tensor want = plain_eager([&] { return relu(a - b) * 3.f; });
  expect_same_bits(got, want, "function of a pending tensor");
}

TEST_F(EagerFusionTest, ThreadsReadingAndMakingPendingTensorsAgree) {
  Tensor a = data(Shape{64}, 14), b = data(Shape{64}, 15);
  const std::vector<float> want = plain_eager([&] { return relu(a * b) + a; }).to_vector<float>();
  Tensor shared = relu(a * b) + a;  // read by every thread at once
  std::atomic<int> wrong{0};
  std::vector<std::thread> threads;
  for (int k = 0; k < 4; ++k)
    threads.emplace_back([&] {
      for (int i = 0; i < 200; ++i) {
        Tensor own = relu(a * b) + a;
        if (i % 3 == 0) (void)matmul(reshape(a, Shape{8, 8}), reshape(b, Shape{8, 8}));
        if (own.to_vector<float>() != want || shared.to_vector<float>() != want) ++wrong;
      }
    });
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(wrong.load(), 0);
}

TEST_F(EagerFusionTest, OffRunsEveryOpAtOnce) {
  set_eager_fusion(EagerFusion::Off);
  Tensor a = data(Shape{3}, 16);
  EXPECT_FALSE(pending(a + a));
  set_eager_fusion(EagerFusion::Gpus);
  EXPECT_FALSE(pending(a + a));  // a CPU tensor
}

TEST(EagerFusionEnvironment, AnUnknownModeIsAnErrorNamingIt) {
  const pid_t pid = testing::spawn_test_child("EagerFusionEnvironment.ChildReadsTheMode", {"WEFT_EAGER_FUSION=sometimes"});
  EXPECT_EQ(testing::wait_test_child(pid, std::chrono::seconds(60)), "");
}

TEST(EagerFusionEnvironment, ChildReadsTheMode) {
  const char* v = std::getenv("WEFT_EAGER_FUSION");
  if (!v || std::string(v) != "sometimes") GTEST_SKIP() << "run by AnUnknownModeIsAnErrorNamingIt";
  try {
    (void)eager_fusion();
    FAIL() << "no error";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("WEFT_EAGER_FUSION='sometimes'"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace weft
