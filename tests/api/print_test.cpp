// Printing tensors: the exact strings users see (API.md), hand-written here.
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>
#include <sstream>

#include "reference.h"
#include "runtime/symbolic.h"

namespace weft {
namespace {

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  return os.str();
}

TEST(Print, ApiExamples) {
  EXPECT_EQ(str(constant({1.f, 2.f, 3.f}) + 1), "Tensor([2 3 4], shape=(3,), dtype=float32)");
  EXPECT_EQ(str(constant(3.5)), "Tensor(3.5, shape=(), dtype=float64)");
}

TEST(Print, Scalars) {
  EXPECT_EQ(str(constant(7)), "Tensor(7, shape=(), dtype=int32)");
  EXPECT_EQ(str(constant(true)), "Tensor(True, shape=(), dtype=bool)");
  EXPECT_EQ(str(constant(-0.125f)), "Tensor(-0.125, shape=(), dtype=float32)");
}

TEST(Print, TwoDimsAlignedAndIndented) {
  EXPECT_EQ(str(constant({{1, 2}, {3, 4}})), "Tensor([[1 2]\n        [3 4]], shape=(2, 2), dtype=int32)");
  // Every cell takes the width of the widest, as in NumPy.
  EXPECT_EQ(str(constant({{1, -20}, {300, 4}})), "Tensor([[  1 -20]\n        [300   4]], shape=(2, 2), dtype=int32)");
  EXPECT_EQ(str(constant({{1.5, 2.0, -3.25}})), "Tensor([[  1.5     2 -3.25]], shape=(1, 3), dtype=float64)");
  EXPECT_EQ(format_values(constant({{1, 2}, {3, 4}})), "[[1 2]\n [3 4]]");
}

TEST(Print, Bool) {
  EXPECT_EQ(str(constant({true, false})), "Tensor([ True False], shape=(2,), dtype=bool)");
  EXPECT_EQ(str(constant({1, 5}) > 2), "Tensor([False  True], shape=(2,), dtype=bool)");
}

TEST(Print, ThreeDims) {
  EXPECT_EQ(str(constant({{{1, 2}, {3, 4}}, {{5, 6}, {7, 8}}})),
            "Tensor([[[1 2]\n"
            "         [3 4]]\n"
            "\n"
            "        [[5 6]\n"
            "         [7 8]]], shape=(2, 2, 2), dtype=int32)");
}

TEST(Print, Empty) {
  EXPECT_EQ(str(zeros({0})), "Tensor([], shape=(0,), dtype=float32)");
  // Like NumPy and TensorFlow: an empty tensor prints as [] whatever its rank.
  EXPECT_EQ(str(zeros({2, 0}, int32)), "Tensor([], shape=(2, 0), dtype=int32)");
  EXPECT_EQ(str(zeros({0, 3, 4})), "Tensor([], shape=(0, 3, 4), dtype=float32)");
  EXPECT_EQ(str(Tensor()), "Tensor(<empty handle>)");
}

TEST(Print, SpecialFloats) {
  EXPECT_EQ(str(constant({NAN, INFINITY, -INFINITY})), "Tensor([ nan  inf -inf], shape=(3,), dtype=float32)");
  EXPECT_EQ(str(constant({0.5f, -1.25f, 100.f})), "Tensor([  0.5 -1.25   100], shape=(3,), dtype=float32)");
  EXPECT_EQ(str(constant({0.1})), "Tensor([0.1], shape=(1,), dtype=float64)");
}

TEST(Print, SmallIntegerAndHalfTypes) {
  EXPECT_EQ(str(constant(std::vector<uint8_t>{0, 255}, Shape{2})), "Tensor([  0 255], shape=(2,), dtype=uint8)");
  EXPECT_EQ(str(constant(std::vector<int8_t>{-128, 127}, Shape{2})), "Tensor([-128  127], shape=(2,), dtype=int8)");
  EXPECT_EQ(str(cast(constant({1.f, 0.5f}), float16)), "Tensor([  1 0.5], shape=(2,), dtype=float16)");
  // The shortest decimal that reads back as the same 16-bit value, as NumPy prints float16.
  EXPECT_EQ(str(cast(constant({0.1f, 3.14159f}), float16)), "Tensor([ 0.1 3.14], shape=(2,), dtype=float16)");
  EXPECT_EQ(str(cast(constant({0.1f, 1000.f}), bfloat16)), "Tensor([ 0.1 1000], shape=(2,), dtype=bfloat16)");
}

TEST(Print, LargeIsSummarised) {
  EXPECT_EQ(str(range(2000)), "Tensor([   0    1    2 ... 1997 1998 1999], shape=(2000,), dtype=int32)");
  EXPECT_EQ(str(range(1000)).find("..."), std::string::npos) << "1000 elements are printed in full";
  std::vector<int32_t> v(10000);
  std::iota(v.begin(), v.end(), 0);
  EXPECT_EQ(str(constant(v, Shape{100, 100})),
            "Tensor([[   0    1    2 ...   97   98   99]\n"
            "        [ 100  101  102 ...  197  198  199]\n"
            "        [ 200  201  202 ...  297  298  299]\n"
            "        ...\n"
            "        [9700 9701 9702 ... 9797 9798 9799]\n"
            "        [9800 9801 9802 ... 9897 9898 9899]\n"
            "        [9900 9901 9902 ... 9997 9998 9999]], shape=(100, 100), dtype=int32)");
  // Only the long axis is cut.
  std::vector<int32_t> w(1202);
  std::iota(w.begin(), w.end(), 0);
  EXPECT_EQ(str(constant(w, Shape{2, 601})),
            "Tensor([[   0    1    2 ...  598  599  600]\n"
            "        [ 601  602  603 ... 1199 1200 1201]], shape=(2, 601), dtype=int32)");
}

TEST(Print, Symbolic) {
  auto ref = std::make_unique<SymbolicRef>();
  ref->node_name = "add";
  ref->output = 0;
  Tensor t = Tensor::symbolic(float32, Shape{3}, std::move(ref));
  EXPECT_EQ(str(t), "Tensor(\"add:0\", shape=(3,), dtype=float32)");
  auto ref2 = std::make_unique<SymbolicRef>();
  ref2->node_name = "MatMul_1";
  ref2->output = 1;
  EXPECT_EQ(str(Tensor::symbolic(float64, Shape{-1, 4}, std::move(ref2))),
            "Tensor(\"MatMul_1:1\", shape=(None, 4), dtype=float64)");
}

}  // namespace
}  // namespace weft
