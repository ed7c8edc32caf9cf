// Shape: inline and heap storage, copies and moves between them, printing, element counts.
#include <gtest/gtest.h>

#include <utility>
#include <vector>

#include "runtime/shape.h"

namespace weft {
namespace {

std::vector<int64_t> dims_of(const Shape& s) { return {s.begin(), s.end()}; }

TEST(Shape, InlineBasics) {
  Shape s{2, 3, 4};
  EXPECT_EQ(s.rank(), 3);
  EXPECT_EQ(s[0], 2);
  EXPECT_EQ(s[2], 4);
  EXPECT_EQ(s.num_elements(), 24);
  EXPECT_TRUE(s.is_fully_defined());
  EXPECT_EQ(s.to_vector(), (std::vector<int64_t>{2, 3, 4}));
  EXPECT_EQ(s.dims().size(), 3u);
  s[1] = 5;
  EXPECT_EQ(s.num_elements(), 40);
}

TEST(Shape, ScalarAndZeroSize) {
  Shape scalar;
  EXPECT_EQ(scalar.rank(), 0);
  EXPECT_EQ(scalar.num_elements(), 1);
  EXPECT_EQ(Shape({3, 0, 2}).num_elements(), 0);
  EXPECT_EQ(Shape{0}.num_elements(), 0);
}

TEST(Shape, MoreThanSixDims) {
  std::vector<int64_t> d = {2, 1, 3, 1, 2, 2, 5, 7};
  Shape s(d);
  EXPECT_EQ(s.rank(), 8);
  EXPECT_EQ(dims_of(s), d);
  EXPECT_EQ(s.num_elements(), 2 * 3 * 2 * 2 * 5 * 7);
  EXPECT_EQ(s.to_string(), "(2, 1, 3, 1, 2, 2, 5, 7)");

  Shape copy = s;  // heap -> fresh
  EXPECT_EQ(copy, s);
  copy[7] = 9;  // copies must not share storage
  EXPECT_EQ(s[7], 7);

  Shape moved = std::move(copy);
  EXPECT_EQ(moved.rank(), 8);
  EXPECT_EQ(moved[7], 9);
  EXPECT_EQ(copy.rank(), 0);  // NOLINT(bugprone-use-after-move): moved-from is empty by contract
}

TEST(Shape, PushBackGrowsPastInlineCapacity) {
  Shape s;
  std::vector<int64_t> want;
  for (int64_t i = 1; i <= 20; ++i) {
    s.push_back(i);
    want.push_back(i);
    ASSERT_EQ(dims_of(s), want) << "after " << i << " pushes";
  }
  Shape span_made{std::span<const int64_t>(want.data(), want.size())};
  EXPECT_EQ(span_made, s);
}

TEST(Shape, AssignBetweenInlineAndHeap) {
  Shape big(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7});
  Shape small{9, 8};
  Shape a = small;
  a = big;  // inline -> heap
  EXPECT_EQ(a, big);
  a = small;  // heap -> smaller; contents must follow
  EXPECT_EQ(a, small);
  EXPECT_EQ(a.rank(), 2);
  a = std::move(big);  // take the heap block
  EXPECT_EQ(a.rank(), 7);
  EXPECT_EQ(a[6], 7);
  Shape b{1};
  b = std::move(a);
  EXPECT_EQ(b.rank(), 7);
  b = std::move(small);  // heap-holding target receives an inline shape
  EXPECT_EQ(dims_of(b), (std::vector<int64_t>{9, 8}));
  b.push_back(1);
  EXPECT_EQ(dims_of(b), (std::vector<int64_t>{9, 8, 1}));
  const Shape& self = b;
  b = self;  // self-assignment keeps the value
  EXPECT_EQ(dims_of(b), (std::vector<int64_t>{9, 8, 1}));
}

TEST(Shape, ToString) {
  EXPECT_EQ(Shape{3}.to_string(), "(3,)");
  EXPECT_EQ(Shape{}.to_string(), "()");
  EXPECT_EQ((Shape{2, 3}).to_string(), "(2, 3)");
  EXPECT_EQ((Shape{-1, 3}).to_string(), "(None, 3)");
  EXPECT_EQ(Shape{-1}.to_string(), "(None,)");
  EXPECT_EQ((Shape{0, 5}).to_string(), "(0, 5)");
}

TEST(Shape, Equality) {
  EXPECT_EQ((Shape{2, 3}), (Shape{2, 3}));
  EXPECT_NE((Shape{2, 3}), (Shape{3, 2}));
  EXPECT_NE((Shape{2, 3}), (Shape{2, 3, 1}));
  EXPECT_NE(Shape{1}, Shape{});
  EXPECT_EQ(Shape{}, Shape{});
  EXPECT_EQ(Shape(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}), Shape(std::vector<int64_t>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(Shape, UnknownDims) {
  Shape s{-1, 3};
  EXPECT_EQ(s.num_elements(), -1);
  EXPECT_FALSE(s.is_fully_defined());
  EXPECT_EQ((Shape{0, -1}).num_elements(), -1);  // unknown wins over zero: the size is not known
  EXPECT_TRUE((Shape{0, 4}).is_fully_defined());
}

}  // namespace
}  // namespace weft
