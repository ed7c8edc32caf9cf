// CPU kernels of the activation ops.
//
// Softmax and LogSoftmax work on [outer, n, inner] with the axis in the middle: inner == 1 (the
// last axis) normalises contiguous rows; otherwise a tile of up to kTile columns is normalised at
// once, streaming whole rows, so the column maxima and sums stay in L1 and no transpose is needed.
// Every loop reads an element before it writes the same element, so the output may alias the input.
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

constexpr int64_t kTile = 512;

template <class T>
void relu_kernel(KernelContext& ctx) {
  unary_loop<T, T>(ctx, [](T x) { return x < T(0) ? T(0) : x; });  // NaN passes through
}

// exp is only ever taken of a non-positive number, so it cannot overflow to inf and give inf/inf.
template <class T>
T stable_sigmoid(T x) {
  if (x >= T(0)) return T(1) / (T(1) + std::exp(-x));
  const T e = std::exp(x);
  return e / (T(1) + e);
}

template <class T>
void sigmoid_kernel(KernelContext& ctx) {
  unary_loop<T, T>(ctx, [](T x) { return stable_sigmoid(x); }, kExpensiveGrain);
}

template <class T>
void tanh_kernel(KernelContext& ctx) {
  unary_loop<T, T>(ctx, [](T x) { return std::tanh(x); }, kExpensiveGrain);
}

// The max is subtracted before exp, so the largest term is exp(0) = 1 and the sum is in [1, n].
template <class T, bool kLog>
void softmax_row(const T* x, T* y, int64_t n) {
  const T m = max_run(x, n);
  if constexpr (kLog) {
    double s = 0;  // exp dominates the cost; a double running sum is free and exact enough
    for (int64_t j = 0; j < n; ++j) {
      y[j] = x[j] - m;
      s += std::exp(y[j]);
    }
    const T log_s = static_cast<T>(std::log(s));
    for (int64_t j = 0; j < n; ++j) y[j] -= log_s;
  } else {
    for (int64_t j = 0; j < n; ++j) y[j] = std::exp(x[j] - m);
    const T inv = T(1) / sum_run(y, n);
    for (int64_t j = 0; j < n; ++j) y[j] *= inv;
  }
}

// Columns [0, len) of n rows `stride` apart.
template <class T, bool kLog>
void softmax_tile(const T* x, T* y, int64_t n, int64_t stride, int64_t len) {
  T m[kTile];
  double s[kTile];
  std::copy(x, x + len, m);
  for (int64_t j = 1; j < n; ++j) {
    const T* row = x + j * stride;
    for (int64_t i = 0; i < len; ++i) m[i] = takes_max(row[i], m[i]) ? row[i] : m[i];
  }
  std::fill(s, s + len, 0.0);
  for (int64_t j = 0; j < n; ++j) {
    const T* row = x + j * stride;
    T* out = y + j * stride;
    for (int64_t i = 0; i < len; ++i) {
      const T e = std::exp(row[i] - m[i]);
      if constexpr (!kLog) out[i] = e;
      s[i] += e;
    }
  }
  if constexpr (kLog) {
    // (x - m) - log(s), never x - (m + log(s)): folding log(s) into a large m rounds it away.
    T log_s[kTile];
    for (int64_t i = 0; i < len; ++i) log_s[i] = static_cast<T>(std::log(s[i]));
    for (int64_t j = 0; j < n; ++j) {
      const T* row = x + j * stride;
      T* out = y + j * stride;
      for (int64_t i = 0; i < len; ++i) out[i] = (row[i] - m[i]) - log_s[i];
    }
  } else {
    T inv[kTile];
    for (int64_t i = 0; i < len; ++i) inv[i] = static_cast<T>(1.0 / s[i]);
    for (int64_t j = 0; j < n; ++j) {
      T* out = y + j * stride;
      for (int64_t i = 0; i < len; ++i) out[i] *= inv[i];
    }
  }
}

template <class T, bool kLog>
void softmax_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Shape& shape = in.shape();
  const int64_t rank = shape.rank();
  int64_t axis = ctx.attrs.get_or<int64_t>("axis", -1);
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    ctx.fail("axis " + std::to_string(ctx.attrs.get_or<int64_t>("axis", -1)) +
             " is out of range for a tensor of rank " + std::to_string(rank));
  if (in.size() == 0) return;
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= shape[i];
  const int64_t n = shape[axis];
  const T* x = in.data<T>();
  T* y = ctx.output(0).data<T>();

  if (inner == 1) {
    ctx.pool().parallel_for(outer, std::max<int64_t>(1, kExpensiveGrain / n), [&](int64_t begin, int64_t end) {
      for (int64_t o = begin; o < end; ++o) softmax_row<T, kLog>(x + o * n, y + o * n, n);
    });
    return;
  }
  const int64_t tile = std::min(inner, kTile);
  const int64_t tiles = (inner + tile - 1) / tile;
  ctx.pool().parallel_for(outer * tiles, std::max<int64_t>(1, kExpensiveGrain / (n * tile)),
                          [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / tiles, i0 = (t % tiles) * tile;
      const int64_t offset = o * n * inner + i0;
      softmax_tile<T, kLog>(x + offset, y + offset, n, inner, std::min(tile, inner - i0));
    }
  });
}

}  // namespace

void register_nn_kernels() {
  register_kernel("Relu", DeviceType::CPU, float32, relu_kernel<float>);
  register_kernel("Relu", DeviceType::CPU, float64, relu_kernel<double>);
  register_kernel("Relu", DeviceType::CPU, int32, relu_kernel<int32_t>);
  register_kernel("Relu", DeviceType::CPU, int64, relu_kernel<int64_t>);
  register_kernel("Sigmoid", DeviceType::CPU, float32, sigmoid_kernel<float>);
  register_kernel("Sigmoid", DeviceType::CPU, float64, sigmoid_kernel<double>);
  register_kernel("Tanh", DeviceType::CPU, float32, tanh_kernel<float>);
  register_kernel("Tanh", DeviceType::CPU, float64, tanh_kernel<double>);
  register_kernel("Softmax", DeviceType::CPU, float32, softmax_kernel<float, false>);
  register_kernel("Softmax", DeviceType::CPU, float64, softmax_kernel<double, false>);
  register_kernel("LogSoftmax", DeviceType::CPU, float32, softmax_kernel<float, true>);
  register_kernel("LogSoftmax", DeviceType::CPU, float64, softmax_kernel<double, true>);
}

}  // namespace weft::cpu
