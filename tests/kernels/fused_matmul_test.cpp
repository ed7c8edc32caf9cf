// FusedMatMul against a plain reference loop and against MatMul, Add and the activation run as
// separate kernels: every activation, transposes, both dtypes, outputs of one band and of several;
// and its "relu_grad" epilogue against MatMul then ReluGrad, on weft's GEMM and OpenBLAS's.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <random>
#include <string>
#include <vector>

#include "kernels/cpu/sgemm_choice.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/op_registry.h"
#include "runtime/tensor_internals.h"

namespace weft {
namespace {

Tensor run(const std::string& name, std::vector<Tensor> ins, const Attrs& attrs) {
  register_builtin_ops();
  const OpDef& op = op_registry().get(name);
  InferContext ic(op, ins, attrs);
  op.infer(ic);
  std::vector<Tensor> outs{Tensor::empty(ic.output(0).dtype, ic.output(0).shape)};
  KernelContext kc{op, ins, outs, attrs, *cpu_device()};
  KernelFn fn = op.kernel(DeviceType::CPU, ins[0].dtype());
  if (!fn) throw NotFound("no CPU kernel for " + name);
  fn(kc);
  return outs[0];
}

template <class T>
Tensor random_tensor(const Shape& shape, uint32_t seed) {
  std::mt19937 gen(seed);
  std::uniform_real_distribution<double> d(-1, 1);
  std::vector<T> v(static_cast<size_t>(shape.num_elements()));
  for (T& e : v) e = static_cast<T>(d(gen));
  return Tensor::from_host(dtype_v<T>, shape, v.data());
}

double activate(const std::string& act, double x) {
  if (act == "relu") return x < 0 ? 0 : x;
  if (act == "sigmoid") return 1 / (1 + std::exp(-x));
  if (act == "tanh") return std::tanh(x);
  return x;
}

struct Case {
  int64_t m, n, k;
  bool ta, tb;
  std::string act;
};

template <class T>
void check(const Case& c) {
  const Tensor a = random_tensor<T>(c.ta ? Shape{c.k, c.m} : Shape{c.m, c.k}, 1);
  const Tensor b = random_tensor<T>(c.tb ? Shape{c.n, c.k} : Shape{c.k, c.n}, 2);
  const Tensor bias = random_tensor<T>({c.n}, 3);
  const Attrs attrs{{"transpose_a", c.ta}, {"transpose_b", c.tb}, {"activation", c.act}};
  const Tensor got = run("FusedMatMul", {a, b, bias}, attrs);
  ASSERT_EQ(got.shape(), (Shape{c.m, c.n}));
  const std::string what = "m=" + std::to_string(c.m) + " n=" + std::to_string(c.n) + " k=" + std::to_string(c.k) +
                           (c.ta ? " ta" : "") + (c.tb ? " tb" : "") + " act='" + c.act + "'";

  // Reference loop, accumulated in double.
  const auto av = a.to_vector<T>(), bv = b.to_vector<T>(), biasv = bias.to_vector<T>(), gv = got.to_vector<T>();
  const double tol = std::is_same_v<T, float> ? 1e-4 : 1e-11;
  for (int64_t i = 0; i < c.m; ++i) {
    for (int64_t j = 0; j < c.n; ++j) {
      double s = 0;
      for (int64_t p = 0; p < c.k; ++p)
        s += static_cast<double>(av[static_cast<size_t>(c.ta ? p * c.m + i : i * c.k + p)]) *
             static_cast<double>(bv[static_cast<size_t>(c.tb ? j * c.k + p : p * c.n + j)]);
      const double want = activate(c.act, s + static_cast<double>(biasv[static_cast<size_t>(j)]));
      ASSERT_NEAR(static_cast<double>(gv[static_cast<size_t>(i * c.n + j)]), want, tol * (1 + std::abs(want)))
          << what << " at (" << i << ", " << j << ")";
    }
  }

  // The unfused chain it replaces.
  Tensor unfused = run("Add", {run("MatMul", {a, b}, {{"transpose_a", c.ta}, {"transpose_b", c.tb}}), bias}, {});
  if (c.act == "relu") unfused = run("Relu", {unfused}, {});
  if (c.act == "sigmoid") unfused = run("Sigmoid", {unfused}, {});
  if (c.act == "tanh") unfused = run("Tanh", {unfused}, {});
  const auto uv = unfused.to_vector<T>();
  for (size_t i = 0; i < uv.size(); ++i) {
    const double want = static_cast<double>(uv[i]);
    ASSERT_NEAR(static_cast<double>(gv[i]), want, tol * (1 + std::abs(want))) << what << " vs unfused at " << i;
  }
}

TEST(FusedMatMul, EveryActivationAndTransposeFloat32) {
  for (const std::string act : {"", "relu", "sigmoid", "tanh"})
    for (bool ta : {false, true})
      for (bool tb : {false, true}) check<float>({37, 19, 23, ta, tb, act});
}

TEST(FusedMatMul, Float64) {
  for (const std::string act : {"", "relu", "tanh"}) check<double>({29, 13, 41, false, true, act});
}

TEST(FusedMatMul, SeveralBandsOfRows) {
  // 1 MiB bands: 2048 rows of 128 floats each, so 5000 rows are three bands, the last one short.
  check<float>({5000, 128, 64, false, false, "relu"});
  check<float>({5000, 128, 64, true, false, "sigmoid"});
  check<double>({3000, 128, 16, false, true, "relu"});
}

// Rows narrower than kNarrowRowSpan go through the epilogue many at a time, against a repeated
// bias: a last group of fewer rows, one column, and widths around the span.
TEST(FusedMatMul, NarrowRowsKeepTheUnfusedBits) {
  for (const std::string act : {"", "relu", "sigmoid", "tanh"})
    for (int64_t n : {1, 6, 10, 255, 257}) check<float>({301, 7, n, false, false, act});
  check<double>({77, 5, 6, false, false, "relu"});
}

TEST(FusedMatMul, TinyAndEmpty) {
  check<float>({1, 1, 1, false, false, "relu"});
  check<float>({3, 2, 0, false, false, "sigmoid"});  // k = 0: the activation of the bias alone
  const Tensor a = Tensor::empty(float32, {0, 4}), b = random_tensor<float>({4, 3}, 4);
  EXPECT_EQ(run("FusedMatMul", {a, b, random_tensor<float>({3}, 5)}, {}).shape(), (Shape{0, 3}));
}

// A of rank 3 and 4 against a matrix: the leading dims are rows of one product, so the result
// is the rank-2 product of A viewed as a matrix, bit for bit, shaped like A.
TEST(FusedMatMul, LeadingDimsOfAAreRows) {
  for (const std::string act : {"", "relu", "tanh"}) {
    for (bool tb : {false, true}) {
      const Tensor a = random_tensor<float>({3, 2, 70, 24}, 20);
      const Tensor b = random_tensor<float>(tb ? Shape{40, 24} : Shape{24, 40}, 21);
      const Tensor bias = random_tensor<float>({40}, 22);
      const Attrs attrs{{"transpose_b", tb}, {"activation", act}};
      const Tensor got = run("FusedMatMul", {a, b, bias}, attrs);
      ASSERT_EQ(got.shape(), (Shape{3, 2, 70, 40}));
      const Tensor flat = run("FusedMatMul", {Tensor::from_host(float32, {420, 24}, a.to_vector<float>().data()), b, bias}, attrs);
      EXPECT_EQ(got.to_vector<float>(), flat.to_vector<float>()) << act << (tb ? " tb" : "");
    }
  }
  const Tensor a3 = random_tensor<double>({60, 28, 28}, 23), w = random_tensor<double>({28, 10}, 24);
  const Tensor got = run("FusedMatMul", {a3, w, random_tensor<double>({10}, 25)}, {{"activation", std::string("relu")}});
  EXPECT_EQ(got.shape(), (Shape{60, 28, 10}));
}

void expect_rejected(std::vector<Tensor> ins, const Attrs& attrs, const std::string& fragment) {
  try {
    run("FusedMatMul", std::move(ins), attrs);
    FAIL() << "expected InvalidArgument containing '" << fragment << "'";
  } catch (const InvalidArgument& e) {
    EXPECT_NE(std::string(e.what()).find("[fused_matmul]"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
  }
}

TEST(FusedMatMul, BadArgumentsAreRejected) {
  const Tensor a = random_tensor<float>({4, 5}, 6), b = random_tensor<float>({5, 3}, 7);
  const Tensor bias = random_tensor<float>({3}, 8);
  expect_rejected({a, b, random_tensor<float>({4}, 9)}, {}, "bias must have shape (3,)");
  expect_rejected({a, b, random_tensor<float>({1, 3}, 9)}, {}, "bias must have shape");
  expect_rejected({a, a, bias}, {}, "inner dimensions differ");
  expect_rejected({random_tensor<float>({2, 5, 4}, 10), b, bias}, {{"transpose_a", true}}, "ranks 2 x 2");
  expect_rejected({a, random_tensor<float>({1, 5, 3}, 10), bias}, {}, "ranks 2 x 2");
  expect_rejected({a, b, bias}, {{"activation", std::string("gelu")}}, "unknown activation 'gelu'");
  expect_rejected({a, b, random_tensor<double>({3}, 11)}, {}, "dtypes differ");
  const Attrs relu_grad{{"activation", std::string("relu_grad")}};
  expect_rejected({a, b, bias}, relu_grad, "relu_grad's x must have the product's shape (4, 3), got (3,)");
  expect_rejected({a, b, random_tensor<float>({3, 4}, 12)}, relu_grad, "relu_grad's x must have the product's shape");
}

// ReluGrad(A B, x) as one node: the product MatMul computes, then the ReluGrad kernel's
// selection, bit for bit, whichever GEMM computes the product (weft's own, pinned; OpenBLAS,
// pinned); x with NaN, zeros of both signs and negatives (all give +0), the product's NaN kept
// where x > 0; A of rank 3; float64 and float16 too.
template <class T>
void check_relu_grad(const Shape& a_shape, const Shape& b_shape, bool ta, bool tb, DType dtype = dtype_v<T>) {
  // Made in T (float or double), then cast to `dtype` (float16).
  auto as = [&](const Tensor& t) { return dtype == dtype_v<T> ? t : run("Cast", {t}, {{"dtype", dtype}}); };
  const Tensor a = as(random_tensor<T>(a_shape, 31)), b = as(random_tensor<T>(b_shape, 32));
  const Attrs mm_attrs{{"transpose_a", ta}, {"transpose_b", tb}};
  const Tensor product = run("MatMul", {a, b}, mm_attrs);
  std::vector<T> xv = random_tensor<T>(product.shape(), 33).template to_vector<T>();
  const T specials[] = {std::numeric_limits<T>::quiet_NaN(), T(0), -T(0), T(-1)};
  for (size_t i = 0; i < xv.size(); i += 5) xv[i] = specials[(i / 5) % 4];
  const Tensor x = as(Tensor::from_host(dtype_v<T>, product.shape(), xv.data()));
  Attrs attrs = mm_attrs;
  attrs.set("activation", std::string("relu_grad"));
  const Tensor got = run("FusedMatMul", {a, b, x}, attrs);
  const Tensor want = run("ReluGrad", {product, x}, {});
  ASSERT_EQ(got.shape(), want.shape());
  EXPECT_EQ(0, std::memcmp(raw_data(got), raw_data(want), want.nbytes()))
      << a_shape.to_string() << " x " << b_shape.to_string() << (ta ? " ta" : "") << (tb ? " tb" : "");
}

class SgemmPin {
 public:
  explicit SgemmPin(cpu::SgemmChoice c) : saved_(cpu::sgemm_choice()) { cpu::set_sgemm_choice(c); }
  ~SgemmPin() { cpu::set_sgemm_choice(saved_); }

 private:
  cpu::SgemmChoice saved_;
};

TEST(FusedMatMul, ReluGradIsTheProductThenReluGrad) {
  for (cpu::SgemmChoice choice : {cpu::SgemmChoice::kOwn, cpu::SgemmChoice::kBlas}) {
    SgemmPin pin(choice);
    for (bool ta : {false, true})
      for (bool tb : {false, true}) {
        check_relu_grad<float>(ta ? Shape{128, 256} : Shape{256, 128}, tb ? Shape{128, 128} : Shape{128, 128}, ta, tb);
        check_relu_grad<float>(ta ? Shape{23, 37} : Shape{37, 23}, tb ? Shape{19, 23} : Shape{23, 19}, ta, tb);
      }
    check_relu_grad<float>({3, 20, 24}, {24, 40}, false, false);  // rank-3 A: its leading dims are rows
    check_relu_grad<float>({300, 700}, {700, 50}, false, false);  // several K blocks
  }
  check_relu_grad<double>({29, 41}, {13, 41}, false, true);
  check_relu_grad<float>({30, 20}, {20, 16}, false, false, DType::Float16);
  // k = 0: the product is zeros, and so is its ReluGrad.
  check_relu_grad<float>({3, 0}, {0, 2}, false, false);
}

}  // namespace
}  // namespace weft
