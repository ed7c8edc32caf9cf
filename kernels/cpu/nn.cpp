// CPU kernels of the activation ops.
//
// Softmax and LogSoftmax work on [outer, n, inner] with the axis in the middle: inner == 1 (the
// last axis) normalises contiguous rows; otherwise a tile of up to kTile columns is normalised at
// once, streaming whole rows, so the column maxima and sums stay in L1 and no transpose is needed.
// Every loop reads an element before it writes the same element, so the output may alias the input.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>
#include <vector>

#include "kernels/cpu/elementwise.h"
#include "kernels/cpu/elementwise_ops.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

constexpr int64_t kTile = 512;
constexpr int64_t kChunk = kSoftmaxChunk;
// Rows at least this long are split into blocks of kRowBlock elements, so that one long row (a
// large vocabulary, a full-tensor softmax) still spreads over the pool.
constexpr int64_t kLongRow = int64_t{1} << 16;
constexpr int64_t kRowBlock = int64_t{1} << 14;

// A row is normalised in three steps, each of which also works on one block of a long row: the
// max m; y = exp(x - m) (log: y = x - m) returning the block's sum of exp(x - m); then y scaled by
// 1 / sum (log: log(sum) subtracted). Subtracting the max first makes the largest term exp(0) = 1,
// so the sum is in [1, n] and never overflows.
template <class T, bool kLog>
double exp_block(const T* x, T* y, int64_t len, T m) {
  if constexpr (std::is_same_v<T, float>) {
    return exp_shifted_sum(kLog, x, y, len, m);  // the steps below, vectorised (vector_math.h)
  } else {
    // In chunks that stay in L1 between the subtraction, the exponentials and the sum. The chunk
    // sums (pairwise within a chunk) add up in double, in order.
    alignas(64) T e[kChunk];
    double s = 0;
    for (int64_t j0 = 0; j0 < len; j0 += kChunk) {
      const int64_t c = std::min(kChunk, len - j0);
      T* d = y + j0;
      for (int64_t j = 0; j < c; ++j) d[j] = x[j0 + j] - m;
      unary_math(UnaryMath::kExp, d, kLog ? e : d, c);
      s += static_cast<double>(sum_run(kLog ? e : d, c));
    }
    return s;
  }
}

// A row's (or block's) max: vectorised for float32 (vector_math.h's row_max), max_run otherwise.
template <class T>
T max_of(const T* x, int64_t n) {
  if constexpr (std::is_same_v<T, float>) return row_max(x, n);
  else return max_run(x, n);
}

template <class T, bool kLog>
T row_shift(double sum) {
  return static_cast<T>(kLog ? std::log(sum) : 1.0 / sum);
}

template <class T, bool kLog>
void scale_block(T* y, int64_t len, T shift) {
  if constexpr (std::is_same_v<T, float>) {
    finish_row(kLog, y, len, shift);
  } else if constexpr (kLog) {
    for (int64_t j = 0; j < len; ++j) y[j] -= shift;
  } else {
    for (int64_t j = 0; j < len; ++j) y[j] *= shift;
  }
}

template <class T, bool kLog>
void softmax_row(const T* x, T* y, int64_t n) {
  const double s = exp_block<T, kLog>(x, y, n, max_of(x, n));
  scale_block<T, kLog>(y, n, row_shift<T, kLog>(s));
}

// Short rows (a softmax over a few classes, attention over a short sequence): float32 rows in one
// pass each, in registers (vector_math.h's softmax_rows); float64 ones a group at a time, one
// exponential call over the whole group instead of one per row, whose fixed cost dominated rows of
// tens of elements. Each row's values and sum are those of softmax_row (the exponential is
// elementwise, the sums are sum_run's, and every row fits one chunk there), so the bits do not
// depend on the path.
template <class T, bool kLog>
void softmax_short_rows(const T* x, T* y, int64_t begin, int64_t end, int64_t n) {
  if constexpr (std::is_same_v<T, float>) {
    if (n <= kSoftmaxRowsMax) return softmax_rows(kLog, x + begin * n, y + begin * n, end - begin, n);
  }
  alignas(64) T e[kChunk];
  const int64_t group = std::max<int64_t>(1, kChunk / n);
  for (int64_t r0 = begin; r0 < end; r0 += group) {
    const int64_t rows = std::min(group, end - r0);
    T* yg = y + r0 * n;
    for (int64_t r = 0; r < rows; ++r) {
      const T* xr = x + (r0 + r) * n;
      const T m = max_run(xr, n);
      for (int64_t j = 0; j < n; ++j) yg[r * n + j] = xr[j] - m;
    }
    unary_math(UnaryMath::kExp, yg, kLog ? e : yg, rows * n);
    for (int64_t r = 0; r < rows; ++r) {
      const double sum = static_cast<double>(sum_run(kLog ? e + r * n : yg + r * n, n));
      scale_block<T, kLog>(yg + r * n, n, row_shift<T, kLog>(sum));
    }
  }
}

// Rows too long for one task run each step block-parallel; the per-block partials are combined
// in block order, so the result does not depend on the thread count.
template <class T, bool kLog>
void softmax_long_rows(ThreadPool& pool, const T* x, T* y, int64_t outer, int64_t n) {
  const int64_t blocks = (n + kRowBlock - 1) / kRowBlock;
  std::vector<T> part_max(static_cast<size_t>(outer * blocks)), shift(static_cast<size_t>(outer));
  std::vector<double> part_sum(static_cast<size_t>(outer * blocks));
  auto each_block = [&](auto&& fn) {
    pool.parallel_for(outer * blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / blocks, j0 = (t % blocks) * kRowBlock;
        fn(t, o, o * n + j0, std::min(kRowBlock, n - j0));
      }
    });
  };
  each_block([&](int64_t t, int64_t, int64_t at, int64_t len) { part_max[t] = max_of(x + at, len); });
  for (int64_t o = 0; o < outer; ++o) {
    T m = part_max[o * blocks];
    for (int64_t b = 1; b < blocks; ++b) m = takes_max(part_max[o * blocks + b], m) ? part_max[o * blocks + b] : m;
    shift[o] = m;
  }
  each_block([&](int64_t t, int64_t o, int64_t at, int64_t len) {
    part_sum[t] = exp_block<T, kLog>(x + at, y + at, len, shift[o]);
  });
  for (int64_t o = 0; o < outer; ++o) {
    double s = 0;
    for (int64_t b = 0; b < blocks; ++b) s += part_sum[o * blocks + b];
    shift[o] = row_shift<T, kLog>(s);
  }
  each_block([&](int64_t, int64_t o, int64_t at, int64_t len) { scale_block<T, kLog>(y + at, len, shift[o]); });
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
    T e[kTile];
    for (int64_t i = 0; i < len; ++i) e[i] = row[i] - m[i];
    unary_math(UnaryMath::kExp, e, e, len);
    for (int64_t i = 0; i < len; ++i) {
      if constexpr (!kLog) out[i] = e[i];
      s[i] += e[i];
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

  if (inner == 1 && n >= kLongRow) {
    softmax_long_rows<T, kLog>(ctx.pool(), x, y, outer, n);
    return;
  }
  if (inner == 1) {
    ctx.pool().parallel_for(outer, std::max<int64_t>(1, kExpensiveGrain / n), [&](int64_t begin, int64_t end) {
      if (n <= kChunk / 4) {
        softmax_short_rows<T, kLog>(x, y, begin, end, n);
        return;
      }
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
  // The elementwise activations' scalar functions are elementwise_ops.h's, shared with
  // FusedElementwise; each registers float16 and bfloat16 too.
  register_float<ReluGradOp>("ReluGrad");
  register_numeric<ReluOp>("Relu");
  register_float<SigmoidOp>("Sigmoid");
  register_float<TanhOp>("Tanh");
  register_kernel("Softmax", DeviceType::CPU, float32, softmax_kernel<float, false>);
  register_kernel("Softmax", DeviceType::CPU, float64, softmax_kernel<double, false>);
  register_kernel("LogSoftmax", DeviceType::CPU, float32, softmax_kernel<float, true>);
  register_kernel("LogSoftmax", DeviceType::CPU, float64, softmax_kernel<double, true>);
  register_via_float32({"Softmax", "LogSoftmax"});
}

}  // namespace weft::cpu
