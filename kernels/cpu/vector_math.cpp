// Picks vector_math.h's variant for this CPU, and runs float64 through libm.
#include "kernels/cpu/vector_math.h"

#include <cmath>

#include "kernels/cpu/vector_math_variants.h"

namespace weft::cpu {

namespace {

bool cpu_has(VectorIsa isa) {
#if defined(__x86_64__)
  switch (isa) {
    case VectorIsa::kScalar: return true;
    case VectorIsa::kAvx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
    case VectorIsa::kAvx512: return __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return isa == VectorIsa::kScalar;
#endif
}

VectorIsa best_isa() {
  if (cpu_has(VectorIsa::kAvx512)) return VectorIsa::kAvx512;
  if (cpu_has(VectorIsa::kAvx2)) return VectorIsa::kAvx2;
  return VectorIsa::kScalar;
}

const VectorMathTable& best_table() {
  static const VectorMathTable* table = vector_math_table(best_isa());
  return *table;
}

// The logistic function, written so that the exponential never overflows.
double sigmoid64(double x) {
  const double e = std::exp(-std::abs(x));
  return (x >= 0 ? 1.0 : e) / (1.0 + e);
}

}  // namespace

const VectorMathTable* vector_math_table(VectorIsa isa) {
  if (!cpu_has(isa)) return nullptr;
  switch (isa) {
    case VectorIsa::kScalar: return vector_math_scalar();
    case VectorIsa::kAvx2: return vector_math_avx2();
    case VectorIsa::kAvx512: return vector_math_avx512();
  }
  return nullptr;
}

VectorIsa vector_math_isa() {
  static const VectorIsa isa = best_isa();
  return isa;
}

const char* vector_isa_name(VectorIsa isa) {
  switch (isa) {
    case VectorIsa::kScalar: return "scalar";
    case VectorIsa::kAvx2: return "avx2";
    case VectorIsa::kAvx512: return "avx512";
  }
  return "?";
}

void unary_math(UnaryMath f, const float* x, float* y, int64_t n) {
  const VectorMathTable& t = best_table();
  switch (f) {
    case UnaryMath::kExp: return t.exp(x, y, n);
    case UnaryMath::kLog: return t.log(x, y, n);
    case UnaryMath::kTanh: return t.tanh(x, y, n);
    case UnaryMath::kSigmoid: return t.sigmoid(x, y, n);
    case UnaryMath::kErf: return t.erf(x, y, n);
    case UnaryMath::kGelu: return t.gelu(x, y, n);
  }
}

void softmax_rows(bool log, const float* x, float* y, int64_t rows, int64_t n) {
  const VectorMathTable& t = best_table();
  (log ? t.log_softmax : t.softmax)(x, y, rows, n);
}

float row_max(const float* x, int64_t n) { return best_table().max(x, n); }

double exp_shifted_sum(bool log, const float* x, float* y, int64_t n, float m) {
  const VectorMathTable& t = best_table();
  return (log ? t.log_exp_sum : t.exp_sum)(x, y, n, m);
}

void finish_row(bool log, float* y, int64_t n, float f) {
  const VectorMathTable& t = best_table();
  (log ? t.subtract : t.scale)(y, n, f);
}

void unary_math(UnaryMath f, const double* x, double* y, int64_t n) {
  auto each = [&](auto fn) {
    for (int64_t i = 0; i < n; ++i) y[i] = fn(x[i]);
  };
  switch (f) {
    case UnaryMath::kExp: return each([](double v) { return std::exp(v); });
    case UnaryMath::kLog: return each([](double v) { return std::log(v); });
    case UnaryMath::kTanh: return each([](double v) { return std::tanh(v); });
    case UnaryMath::kSigmoid: return each(sigmoid64);
    case UnaryMath::kErf: return each([](double v) { return std::erf(v); });
    case UnaryMath::kGelu: return each([](double v) { return (v * 0.5) * (std::erf(v * 0.7071067811865476) + 1.0); });
  }
}

}  // namespace weft::cpu
