// constant, zeros, ones, fill, range.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>

#include "half_reference.h"
#include "reference.h"

namespace weft {
namespace {

constexpr DType kAll[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};

TEST(Constant, Scalars) {
  Tensor f = constant(3.f);
  EXPECT_EQ(f.dtype(), float32);
  EXPECT_EQ(f.shape(), Shape{});
  EXPECT_EQ(f.rank(), 0);
  EXPECT_EQ(f.size(), 1);
  EXPECT_EQ(f.item<float>(), 3.f);
  EXPECT_EQ(constant(2.5).dtype(), float64);
  EXPECT_EQ(constant(7).item<int32_t>(), 7);
  EXPECT_EQ(constant(int64_t{1} << 40).item<int64_t>(), int64_t{1} << 40);
  EXPECT_EQ(constant(uint8_t{200}).item<uint8_t>(), 200);
  EXPECT_EQ(constant(int8_t{-5}).item<int8_t>(), -5);
  EXPECT_EQ(constant(true).item<bool>(), true);
  EXPECT_EQ(constant(Half{0x3c00}).dtype(), float16);
  EXPECT_EQ(constant(BFloat16{0x3f80}).item<BFloat16>().bits, 0x3f80);
  EXPECT_EQ(f.name(), "");
  EXPECT_FALSE(f.is_symbolic());
}

TEST(Constant, OneTwoAndThreeDims) {
  Tensor v = constant({1.f, 2.f, 3.f});
  EXPECT_EQ(v.shape(), Shape{3});
  EXPECT_EQ(v.to_vector<float>(), (std::vector<float>{1, 2, 3}));

  Tensor m = constant({{1, 2, 3}, {4, 5, 6}});
  EXPECT_EQ(m.dtype(), int32);
  EXPECT_EQ(m.shape(), (Shape{2, 3}));
  EXPECT_EQ(m.to_vector<int32_t>(), (std::vector<int32_t>{1, 2, 3, 4, 5, 6}));

  Tensor c = constant({{{1.0, 2.0}}, {{3.0, 4.0}}, {{5.0, 6.0}}});
  EXPECT_EQ(c.shape(), (Shape{3, 1, 2}));
  EXPECT_EQ(c.to_vector<double>(), (std::vector<double>{1, 2, 3, 4, 5, 6}));

  Tensor b = constant({true, false, true});
  EXPECT_EQ(b.dtype(), bool_);
  EXPECT_EQ(b.to_vector<bool>(), (std::vector<bool>{true, false, true}));
  Tensor b2 = constant({{true}, {false}});
  EXPECT_EQ(b2.shape(), (Shape{2, 1}));
  EXPECT_EQ(b2.to_vector<bool>(), (std::vector<bool>{true, false}));
  Tensor b3 = constant({{{false, true}}});
  EXPECT_EQ(b3.to_vector<bool>(), (std::vector<bool>{false, true}));
}

TEST(Constant, VectorAndShape) {
  std::vector<int64_t> data(24);
  for (size_t i = 0; i < data.size(); ++i) data[i] = static_cast<int64_t>(i * i);
  Tensor t = constant(data, Shape{2, 3, 4});
  EXPECT_EQ(t.shape(), (Shape{2, 3, 4}));
  EXPECT_EQ(t.to_vector<int64_t>(), data);
  EXPECT_EQ(constant(std::vector<double>{1, 2}).shape(), Shape{2});
  EXPECT_EQ(constant(std::vector<bool>{true, false, false, true}, Shape{2, 2}).to_vector<bool>(),
            (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(constant(std::vector<float>{}, Shape{0, 4}).size(), 0);
  EXPECT_EQ(constant(std::vector<float>{5}, Shape{}).item<float>(), 5.f);
  std::vector<uint16_t> bits = {0x3c00, 0xc000};
  std::vector<Half> halves = {Half{bits[0]}, Half{bits[1]}};
  Tensor h = constant(halves, Shape{2});
  EXPECT_EQ(h.dtype(), float16);
  EXPECT_EQ(cast(h, float32).to_vector<float>(), (std::vector<float>{1.f, -2.f}));
}

TEST(Constant, BadInputThrows) {
  std::string msg = ref::error_message<InvalidArgument>([] { constant({{1, 2}, {3}}); });
  EXPECT_TRUE(ref::contains(msg, "[constant]")) << msg;
  EXPECT_THROW(constant({{{1, 2}}, {{3, 4}, {5, 6}}}), InvalidArgument);  // ragged planes
  EXPECT_THROW(constant({{{1, 2}}, {{3}}}), InvalidArgument);             // ragged rows
  msg = ref::error_message<InvalidArgument>([] { constant(std::vector<float>{1, 2, 3}, Shape{2, 2}); });
  EXPECT_TRUE(ref::contains(msg, "[constant]") && ref::contains(msg, "(2, 2)")) << msg;
  EXPECT_THROW(constant(std::vector<float>{1}, Shape{-1}), InvalidArgument);
  EXPECT_THROW(constant(std::vector<float>{}, Shape{-1, 0}), InvalidArgument);
}

// The bit pattern of `v` converted to dtype d, built without weft's conversions.
std::vector<unsigned char> bytes_of(double v, DType d) {
  std::vector<unsigned char> b(dtype_size(d));
  auto put = [&](auto x) { std::memcpy(b.data(), &x, sizeof x); };
  switch (d) {
    case DType::Float16: put(ref::to_half_bits(v)); break;
    case DType::BFloat16: put(ref::to_bf16_bits(v)); break;
    case DType::Float32: put(static_cast<float>(v)); break;
    case DType::Float64: put(v); break;
    case DType::Int8: put(static_cast<int8_t>(v)); break;
    case DType::UInt8: put(static_cast<uint8_t>(v)); break;
    case DType::Int32: put(static_cast<int32_t>(v)); break;
    case DType::Int64: put(static_cast<int64_t>(v)); break;
    case DType::Bool: put(static_cast<uint8_t>(v != 0)); break;
  }
  return b;
}

void expect_all(const Tensor& t, double v) {
  std::vector<unsigned char> want = bytes_of(v, t.dtype());
  std::vector<unsigned char> got(t.nbytes());
  if (!got.empty()) t.copy_to_host(got.data());
  for (int64_t i = 0; i < t.size(); ++i)
    ASSERT_EQ(std::memcmp(got.data() + i * want.size(), want.data(), want.size()), 0) << "element " << i;
}

TEST(Fill, ZerosOnesForAllDTypes) {
  for (DType d : kAll) {
    for (const Shape& s : {Shape{}, Shape{5}, Shape{3, 0}, Shape{33, 17}, Shape{1 << 18}}) {
      SCOPED_TRACE(std::string(dtype_name(d)) + " " + s.to_string());
      Tensor z = zeros(s, d), o = ones(s, d);
      EXPECT_EQ(z.dtype(), d);
      EXPECT_EQ(z.shape(), s);
      EXPECT_EQ(o.shape(), s);
      expect_all(z, 0);
      expect_all(o, 1);
      expect_all(zeros_like(o), 0);
      expect_all(ones_like(z), 1);
      EXPECT_EQ(ones_like(z).dtype(), d);
    }
  }
  EXPECT_EQ(zeros({2, 3}).dtype(), float32);
}

TEST(Fill, ValuesAndDTypes) {
  Tensor f = fill({2, 3}, 7);
  EXPECT_EQ(f.dtype(), int32);
  EXPECT_EQ(f.to_vector<int32_t>(), std::vector<int32_t>(6, 7));
  EXPECT_EQ(fill({2}, 2.5).to_vector<double>(), (std::vector<double>{2.5, 2.5}));
  EXPECT_EQ(fill({3}, true).to_vector<bool>(), (std::vector<bool>{true, true, true}));
  EXPECT_EQ(fill({}, int8_t{-3}).item<int8_t>(), -3);
  EXPECT_EQ(fill({2}, constant(uint8_t{9})).to_vector<uint8_t>(), (std::vector<uint8_t>{9, 9}));
  expect_all(fill({4}, constant(Half{ref::to_half_bits(-0.5)})), -0.5);
  std::string msg = ref::error_message<InvalidArgument>([] { fill({2, -1}, 1.f); });
  EXPECT_TRUE(ref::contains(msg, "[fill]") && ref::contains(msg, "negative")) << msg;
  EXPECT_THROW(fill({2}, constant({1.f, 2.f})), InvalidArgument);  // value must be a scalar
  EXPECT_THROW(zeros({-3}), InvalidArgument);
}

TEST(Range, Values) {
  EXPECT_EQ(range(0, 10, 3).to_vector<int32_t>(), (std::vector<int32_t>{0, 3, 6, 9}));
  EXPECT_EQ(range(5).to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4}));
  EXPECT_EQ(range(2, 5).to_vector<int32_t>(), (std::vector<int32_t>{2, 3, 4}));
  EXPECT_EQ(range(10, 0, -3).to_vector<int32_t>(), (std::vector<int32_t>{10, 7, 4, 1}));
  EXPECT_EQ(range(-1, -4, -1).to_vector<int32_t>(), (std::vector<int32_t>{-1, -2, -3}));
  EXPECT_EQ(range(int64_t{0}, int64_t{3}).to_vector<int64_t>(), (std::vector<int64_t>{0, 1, 2}));
  EXPECT_EQ(range(0.0, 1.0, 0.25).to_vector<double>(), (std::vector<double>{0, 0.25, 0.5, 0.75}));
  EXPECT_EQ(range(1.f, 0.f, -0.5f).to_vector<float>(), (std::vector<float>{1.f, 0.5f}));
  Tensor tenths = range(0.f, 1.f, 0.1f);
  ASSERT_EQ(tenths.shape(), Shape{10});
  std::vector<float> t = tenths.to_vector<float>();
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(t[i], i * 0.1, 1e-6);
  EXPECT_EQ(range(3, 3).shape(), Shape{0});
  EXPECT_EQ(range(0, 1 << 20).to_vector<int32_t>().back(), (1 << 20) - 1);
  EXPECT_EQ(range(int64_t{1} << 40, (int64_t{1} << 40) + 2).to_vector<int64_t>(),
            (std::vector<int64_t>{int64_t{1} << 40, (int64_t{1} << 40) + 1}));
}

TEST(Range, Errors) {
  std::string msg = ref::error_message<InvalidArgument>([] { range(0, 10, 0); });
  EXPECT_TRUE(ref::contains(msg, "[range]") && ref::contains(msg, "delta")) << msg;
  EXPECT_THROW(range(10, 0, 1), InvalidArgument);   // wrong direction
  EXPECT_THROW(range(0, 10, -1), InvalidArgument);  // wrong direction
  EXPECT_THROW(range(0.0, std::numeric_limits<double>::infinity(), 1.0), InvalidArgument);
  EXPECT_THROW(range(uint8_t{0}, uint8_t{5}), InvalidArgument);  // dtype without a kernel
}

}  // namespace
}  // namespace weft
