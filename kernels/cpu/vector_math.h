// weft's float32 transcendental functions, vectorised: the one implementation every CPU kernel
// uses for these ops (Exp, Log, Tanh, Sigmoid, Erf; FusedElementwise's opcodes; FusedMatMul's
// and FusedConv2D's activations; Softmax, LogSoftmax and the cross-entropy losses).
//
//   unary_math(UnaryMath::kExp, x, y, n);   // y[i] = exp(x[i]), float or double; y may be x
//
// float32 runs weft's own polynomials (vector_math_impl.h) on the widest vectors the CPU has
// (AVX-512, else AVX2 with FMA, else one lane at a time). Every lane computes the same sequence
// of correctly rounded IEEE operations (fused multiply-adds included), and a short tail is padded
// to a full vector, so AVX-512, AVX2 and the scalar fallback give the same bits for every input:
// a result does not depend on the machine, the thread count or where an element sits in the array.
// Accuracy against float64 (tests/kernels/vector_math_test.cpp measures it over a dense sample of
// every binade): exp, log and erf under 1.5 ulp, tanh under 2, sigmoid under 3. Special values follow libm: NaN
// in, NaN out; exp overflows to inf and underflows through the subnormals to 0; log of 0 is -inf
// and of a negative number NaN; tanh, sigmoid and erf saturate exactly at ±1, 0 and 1. gelu(x)
// is (x * 0.5) * (erf(x * sqrt(1/2)) + 1), those very operations in that order: the bits of the
// composed ops, in one pass (like PyTorch's, it has no ulp bound where 1 + erf cancels, x < -2).
//
// float64 calls libm one element at a time (its results are correctly rounded or nearly so on
// glibc, and no model here runs transcendentals in float64 hot loops).
#pragma once

#include <cstdint>

namespace weft::cpu {

enum class UnaryMath : uint8_t { kExp, kLog, kTanh, kSigmoid, kErf, kGelu };

void unary_math(UnaryMath f, const float* x, float* y, int64_t n);
void unary_math(UnaryMath f, const double* x, double* y, int64_t n);

// Softmax (log: log-softmax) of `rows` contiguous rows of n floats, 1 <= n <= kSoftmaxRowsMax, in
// one pass per row: the bits kernels/cpu/nn.cpp's separate steps (max_run, exp, sum_run, scale)
// give the same row, on every instruction set. y may be x.
inline constexpr int64_t kSoftmaxRowsMax = 256;
void softmax_rows(bool log, const float* x, float* y, int64_t rows, int64_t n);

// The steps of a longer row (or of a block of one), vectorised, with the bits of nn.cpp's
// separate loops: y = exp(x - m) (log: y = x - m), returning the sum of exp(x - m) taken in
// float over chunks of kSoftmaxChunk elements in sum_run's order (reduce_loops.h) and in double
// across chunks; then finish_row's y * f (log: y - f). y may be x. m is row_max's: max_run's
// value, NaN when x holds one (the sign of a zero max may differ, which changes no output).
inline constexpr int64_t kSoftmaxChunk = 1024;
float row_max(const float* x, int64_t n);  // n >= 1
double exp_shifted_sum(bool log, const float* x, float* y, int64_t n, float m);
void finish_row(bool log, float* y, int64_t n, float f);

// The instruction-set variants, for the tests that check they agree bit for bit.
enum class VectorIsa : uint8_t { kScalar, kAvx2, kAvx512 };
using FloatArrayFn = void (*)(const float* x, float* y, int64_t n);
using FloatRowsFn = void (*)(const float* x, float* y, int64_t rows, int64_t n);
using ShiftedSumFn = double (*)(const float* x, float* y, int64_t n, float m);
using FinishFn = void (*)(float* y, int64_t n, float f);
using RowMaxFn = float (*)(const float* x, int64_t n);
struct VectorMathTable {
  FloatArrayFn exp, log, tanh, sigmoid, erf, gelu;
  FloatRowsFn softmax, log_softmax;
  RowMaxFn max;                       // row_max
  ShiftedSumFn exp_sum, log_exp_sum;  // exp_shifted_sum without and with log
  FinishFn scale, subtract;           // finish_row without and with log
};
// The table for `isa`, or null when this CPU lacks the instruction set.
const VectorMathTable* vector_math_table(VectorIsa isa);
// The variant unary_math runs on this CPU.
VectorIsa vector_math_isa();
const char* vector_isa_name(VectorIsa isa);

}  // namespace weft::cpu
