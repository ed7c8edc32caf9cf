// cast between all nine dtypes, against a reference that knows each conversion rule:
// float -> int truncates and saturates (NaN -> 0), int -> int wraps, anything -> bool is "!= 0",
// and float16 / bfloat16 results are correctly rounded from the exact source value.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <variant>

#include "half_reference.h"
#include "reference.h"

namespace weft {
namespace {

constexpr DType kAll[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};

// An element's exact value: a double for the float dtypes, an int64 for the others (uint8 and
// bool fit). int64 sources need the integer: not every int64 is a double.
using Exact = std::variant<double, int64_t>;

const double kFloatSources[] = {
    0.0, -0.0, 1.0, -1.0, 2.5, -2.5, 0.1, 0.7, -0.7, 127.0, 127.9, 128.0, 255.0, 255.5, 256.0, -128.0, -129.0,
    -128.9, 65504.0, 65519.0, 70000.0, 1e10, -1e10, 3e9, -3e9, 2147483647.0, 2147483648.0, -2147483649.0, 1e19,
    -1e19, 9.3e18, 1e-8, 1e-30, 1e300,
    // Exactly between two float16 (bfloat16) neighbours plus a hair that float32 cannot hold: only
    // a single correct rounding from double gets these right.
    1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40), 1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40),
    std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
    -std::numeric_limits<double>::infinity()};

const int64_t kIntSources[] = {0,   1,   -1,  2,    127,   128,    -128,  -129,   255,   256,   300,
                               -300, 65504, 70000, 2147483647, -2147483648LL, 4294967296LL + 5,
                               (int64_t{1} << 53) + 1, (int64_t{1} << 60) + (int64_t{1} << 52) + 1,
                               std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};

template <class T>
bool representable(int64_t v) {
  return v >= static_cast<int64_t>(std::numeric_limits<T>::lowest()) &&
         (std::is_same_v<T, int64_t> || v <= static_cast<int64_t>(std::numeric_limits<T>::max()));
}

// A source tensor of dtype `d` and the exact value of each of its elements.
Tensor make_source(DType d, std::vector<Exact>* exact) {
  std::vector<unsigned char> bytes;
  auto push = [&](const void* p, size_t n) {
    bytes.insert(bytes.end(), static_cast<const unsigned char*>(p), static_cast<const unsigned char*>(p) + n);
  };
  for (double v : kFloatSources) {
    if (d == float16) {
      uint16_t h = ref::to_half_bits(v);
      push(&h, 2);
      exact->push_back(ref::half_value(h));
    } else if (d == bfloat16) {
      uint16_t h = ref::to_bf16_bits(v);
      push(&h, 2);
      exact->push_back(ref::bf16_value(h));
    } else if (d == float32) {
      float f = static_cast<float>(v);
      push(&f, 4);
      exact->push_back(static_cast<double>(f));
    } else if (d == float64) {
      push(&v, 8);
      exact->push_back(v);
    }
  }
  for (int64_t v : kIntSources) {
    auto add = [&](auto typed) {
      using T = decltype(typed);
      if (!representable<T>(v)) return;
      T t = static_cast<T>(v);
      push(&t, sizeof t);
      exact->push_back(v);
    };
    if (d == int8) add(int8_t{});
    if (d == uint8) add(uint8_t{});
    if (d == int32) add(int32_t{});
    if (d == int64) add(int64_t{});
  }
  if (d == bool_) {
    for (bool b : {false, true, true, false}) {
      push(&b, 1);
      exact->push_back(int64_t{b});
    }
  }
  return Tensor::from_host(d, Shape{static_cast<int64_t>(exact->size())}, bytes.data());
}

// Two's-complement wrap of an integer to `bits` bits.
int64_t wrap(int64_t v, int bits, bool is_signed) {
  if (bits == 64) return v;
  uint64_t m = static_cast<uint64_t>(v) & ((uint64_t{1} << bits) - 1);
  if (is_signed && (m >> (bits - 1))) return static_cast<int64_t>(m) - (int64_t{1} << bits);
  return static_cast<int64_t>(m);
}

// float -> integer: NaN is 0, otherwise truncate toward zero and clamp to the type's range.
int64_t saturate(double v, int64_t lo, int64_t hi) {
  if (std::isnan(v)) return 0;
  double t = std::trunc(v);
  if (t <= static_cast<double>(lo)) return lo;
  if (t >= std::ldexp(1.0, 63) || static_cast<int64_t>(t) >= hi) return hi;
  return static_cast<int64_t>(t);
}

// The expected element as raw bytes of the target dtype.
std::vector<unsigned char> expected_bytes(const Exact& x, DType to) {
  const bool is_int = std::holds_alternative<int64_t>(x);
  const int64_t i = is_int ? std::get<int64_t>(x) : 0;
  const double f = is_int ? 0.0 : std::get<double>(x);
  std::vector<unsigned char> out(dtype_size(to));
  auto put = [&](auto v) { std::memcpy(out.data(), &v, sizeof v); };
  auto as_int = [&](int bits, bool sgn, int64_t lo, int64_t hi) {
    return is_int ? wrap(i, bits, sgn) : saturate(f, lo, hi);
  };
  switch (to) {
    case DType::Bool: put(static_cast<uint8_t>(is_int ? i != 0 : (std::isnan(f) || f != 0.0))); break;
    case DType::Float64: put(is_int ? static_cast<double>(i) : f); break;  // one rounding (int64)
    case DType::Float32: put(is_int ? static_cast<float>(i) : static_cast<float>(f)); break;
    case DType::Float16:
    case DType::BFloat16: {
      // An int64 is exact in x86-64's long double. When it is not exact in double, round it to
      // double "to odd" (truncate, then set the last bit): that can never land on a tie of the
      // 16-bit format, so the correct rounding of the double is that of the integer.
      long double exact_v = is_int ? static_cast<long double>(i) : f;
      double v = static_cast<double>(exact_v);
      if (static_cast<long double>(v) != exact_v) {
        if (std::fabs(static_cast<long double>(v)) > std::fabs(exact_v)) v = std::nextafter(v, 0.0);
        uint64_t u;
        std::memcpy(&u, &v, 8);
        u |= 1;
        std::memcpy(&v, &u, 8);
      }
      put(to == DType::Float16 ? ref::to_half_bits(v) : ref::to_bf16_bits(v));
      break;
    }
    case DType::Int8: put(static_cast<int8_t>(as_int(8, true, -128, 127))); break;
    case DType::UInt8: put(static_cast<uint8_t>(as_int(8, false, 0, 255))); break;
    case DType::Int32:
      put(static_cast<int32_t>(as_int(32, true, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max())));
      break;
    case DType::Int64:
      put(as_int(64, true, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()));
      break;
  }
  return out;
}

bool is_nan_bytes(const unsigned char* p, DType d) {
  uint16_t h;
  switch (d) {
    case DType::Float16: std::memcpy(&h, p, 2); return ref::is_half_nan(h);
    case DType::BFloat16: std::memcpy(&h, p, 2); return ref::is_bf16_nan(h);
    case DType::Float32: { float f; std::memcpy(&f, p, 4); return std::isnan(f); }
    case DType::Float64: { double f; std::memcpy(&f, p, 8); return std::isnan(f); }
    default: return false;
  }
}

TEST(Cast, AllPairsOfDTypes) {
  for (DType from : kAll) {
    std::vector<Exact> exact;
    Tensor src = make_source(from, &exact);
    for (DType to : kAll) {
      SCOPED_TRACE(std::string(dtype_name(from)) + " -> " + std::string(dtype_name(to)));
      Tensor out = cast(src, to);
      ASSERT_EQ(out.dtype(), to);
      ASSERT_EQ(out.shape(), src.shape());
      std::vector<unsigned char> got(out.nbytes());
      out.copy_to_host(got.data());
      size_t w = dtype_size(to);
      for (size_t k = 0; k < exact.size(); ++k) {
        std::vector<unsigned char> want = expected_bytes(exact[k], to);
        const unsigned char* g = got.data() + k * w;
        if (is_nan_bytes(want.data(), to)) {
          EXPECT_TRUE(is_nan_bytes(g, to)) << "element " << k << " should be NaN";
          continue;
        }
        EXPECT_EQ(std::memcmp(g, want.data(), w), 0)
            << "element " << k << " (" << (std::holds_alternative<double>(exact[k]) ? std::get<double>(exact[k])
                                                                                    : std::get<int64_t>(exact[k]))
            << ") converted wrongly";
      }
    }
  }
}

TEST(Cast, HandPickedRules) {
  Tensor f = constant({1.9f, -1.9f, 3e9f, -3e9f, NAN, INFINITY, -INFINITY, 300.7f, -5.5f});
  EXPECT_EQ(cast(f, int32).to_vector<int32_t>(),
            (std::vector<int32_t>{1, -1, 2147483647, -2147483647 - 1, 0, 2147483647, -2147483647 - 1, 300, -5}));
  EXPECT_EQ(cast(f, uint8).to_vector<uint8_t>(), (std::vector<uint8_t>{1, 0, 255, 0, 0, 255, 0, 255, 0}));
  EXPECT_EQ(cast(f, bool_).to_vector<bool>(), (std::vector<bool>{true, true, true, true, true, true, true, true, true}));
  EXPECT_EQ(cast(constant({300, -1, 128}), int8).to_vector<int8_t>(), (std::vector<int8_t>{44, -1, -128}));
  EXPECT_EQ(cast(constant({300, -1, 128}), uint8).to_vector<uint8_t>(), (std::vector<uint8_t>{44, 255, 128}));
  EXPECT_EQ(cast(constant({true, false}), float32).to_vector<float>(), (std::vector<float>{1.f, 0.f}));
  // float64 -> float16 must round once: 1 + 2^-11 + 2^-40 is nearer 1 + 2^-10 than 1.
  EXPECT_EQ(cast(constant(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)), float16).item<Half>().bits, 0x3c01);
  EXPECT_EQ(cast(constant(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)), bfloat16).item<BFloat16>().bits, 0x3f81);
  EXPECT_EQ(cast(cast(constant(0.5f), float16), float32).item<float>(), 0.5f);
}

TEST(Cast, SameDTypeAndShapes) {
  Tensor x = constant({1.f, 2.f});
  EXPECT_TRUE(cast(x, float32).same_as(x));
  for (const Shape& s : ref::unary_cases()) {
    Tensor y = cast(fill(s, 3), float64);
    EXPECT_EQ(y.shape(), s);
    for (double v : y.to_vector<double>()) ASSERT_EQ(v, 3.0);
  }
}

}  // namespace
}  // namespace weft
