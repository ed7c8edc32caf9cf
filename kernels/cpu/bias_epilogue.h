// The epilogue FusedMatMul (fused.cpp) and FusedConv2D (conv.cpp) apply to the rows of their
// product C [rows, n]: act(row + bias) with the functions of the unfused Add and activation
// kernels (elementwise_ops.h's; vector_math.h's for sigmoid and tanh), so a fused node has the
// bits of the ops it replaced, or, for FusedMatMul's "relu_grad", ReluGrad's mask by the relu's x.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>
#include <variant>

#include "kernels/cpu/elementwise_ops.h"
#include "kernels/cpu/vector_math.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

enum class Act : uint8_t { kNone, kRelu, kSigmoid, kTanh, kReluGrad };

template <class T, class F>
inline void add_bias_in_place(T* __restrict row, const T* __restrict bias, int64_t n, F f) {
  for (int64_t j = 0; j < n; ++j) row[j] = f(AddOp{}(row[j], bias[j]));
}

// ReluGrad(C, x) over a row of C and of x, with the ReluGrad kernel's function.
template <class T>
inline void relu_grad_row(T* __restrict row, const T* __restrict x, int64_t n) {
  for (int64_t j = 0; j < n; ++j) row[j] = ReluGradOp{}(row[j], x[j]);
}

// Rows narrower than this are taken several at a time (see epilogue_rows).
inline constexpr int64_t kNarrowRowSpan = 256;

// The epilogue over rows [r0, r1) of C (n columns): `operand` is the bias, or for kReluGrad the
// relu's x, of C's shape.
//
// Narrow rows (a first convolution's 6 channels, a 10-class Dense) are taken `per` at a time,
// as one span of per * n values against the bias repeated `per` times: a loop over 6 values
// does not vectorise, one over 96 does. Each value gets the same operation either way.
template <class T>
inline void epilogue_rows(T* c, const T* operand, int64_t r0, int64_t r1, int64_t n, Act act) {
  if (n <= 0) return;
  const int64_t per = act == Act::kReluGrad ? 1 : std::max<int64_t>(1, kNarrowRowSpan / n);
  T tiled[kNarrowRowSpan];
  const T* bias = operand;
  if (per > 1) {
    for (int64_t i = 0; i < per * n; ++i) tiled[i] = operand[i % n];
    bias = tiled;
  }
  for (int64_t r = r0; r < r1; r += per) {
    T* row = c + r * n;
    const int64_t span = std::min(per, r1 - r) * n;
    switch (act) {
      case Act::kNone: add_bias_in_place(row, bias, span, [](T x) { return x; }); break;
      case Act::kRelu: add_bias_in_place(row, bias, span, ReluOp{}); break;
      case Act::kSigmoid:
        add_bias_in_place(row, bias, span, [](T x) { return x; });
        unary_math(UnaryMath::kSigmoid, row, row, span);
        break;
      case Act::kTanh:
        add_bias_in_place(row, bias, span, [](T x) { return x; });
        unary_math(UnaryMath::kTanh, row, row, span);
        break;
      case Act::kReluGrad: relu_grad_row(row, operand + r * n, n); break;
    }
  }
}

// The node's "activation" attribute.
inline Act parse_activation(const KernelContext& ctx) {
  const AttrValue* v = ctx.attrs.find("activation");
  const std::string* s = v ? std::get_if<std::string>(v) : nullptr;
  if (!s || s->empty()) return Act::kNone;
  if (*s == "relu") return Act::kRelu;
  if (*s == "sigmoid") return Act::kSigmoid;
  if (*s == "tanh") return Act::kTanh;
  if (*s == "relu_grad") return Act::kReluGrad;
  ctx.fail("unknown activation '" + *s + "'");
}

}  // namespace weft::cpu
