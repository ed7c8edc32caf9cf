// CPU kernels of FusedBatchNorm, FusedBatchNormGrad, LayerNorm and LayerNormGrad
// (kernels/defs/normalization.cpp), for float32 and float64 x (float16 / bfloat16 through the
// float32 kernel: their parameters and statistics are float32 already, and only y / dx are
// rounded back).
//
// Batch normalisation:
// x is viewed as [rows, C] (every axis but the last is a row). Per-channel sums run in parallel
// over fixed blocks of rows, each block's sums kept apart and added in block order, so the result
// does not depend on the thread count; they accumulate in double whatever T is (a float32 sum
// over a large batch would lose the small variances). The statistics take one pass, as sums of
// d = x - K and d^2 with K one of the channel's values (the layer norm's method, below): plain
// E[x^2] - E[x]^2 would cancel when |mean| >> std, a second pass over x cost a third of the kernel.
// Then one parallel pass applies the per-channel affine map y = x * a + b, channels innermost.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/activation_attr.h"
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/elementwise_ops.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

// The row loops of every kernel here are cloned for AVX2 and AVX-512 (isa_clones.h), in double
// eight lanes at a time where SSE2 takes two, with the same bits on every CPU: on functions of
// their own (rows_into, each_row_of, layer_norm_rows, layer_norm_grad_rows) into which the
// kernels' lambdas inline. ResNet-20's batch norms took a sixth of its training step in SSE2.

struct RowsView {
  int64_t rows = 0, c = 0;
};
RowsView rows_view(const Tensor& x) {
  const Shape& s = x.shape();
  RowsView v;
  v.c = s[s.rank() - 1];
  v.rows = v.c > 0 ? x.size() / v.c : 0;
  return v;
}

// Rows per block: enough work for a task, fixed by the shape alone (never by the pool), so the
// blocks, and the order their sums are added in, are the same on every machine.
int64_t block_rows(const RowsView& v) { return std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(1, v.c)); }

// K per-channel sums over all rows: add(r, acc) adds row r's terms to acc[0 .. K*C). Returns the
// K*C totals.
// add(r, acc) for rows [r0, r1).
template <class Add>
WEFT_ISA_CLONES void rows_into(const Add& add, int64_t r0, int64_t r1, double* acc) {
  for (int64_t r = r0; r < r1; ++r) add(r, acc);
}

template <int K, class Add>
std::vector<double> channel_sums(ThreadPool& pool, const RowsView& v, Add add) {
  const int64_t per = block_rows(v);
  const int64_t blocks = (v.rows + per - 1) / per;
  const size_t width = static_cast<size_t>(K * v.c);
  std::vector<double> part(static_cast<size_t>(blocks) * width, 0.0);
  pool.parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      rows_into(add, b * per, std::min(v.rows, (b + 1) * per), part.data() + static_cast<size_t>(b) * width);
    }
  });
  std::vector<double> total(width, 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t i = 0; i < width; ++i) total[i] += part[static_cast<size_t>(b) * width + i];
  return total;
}

// f(r) for rows [r0, r1).
template <class F>
WEFT_ISA_CLONES void each_row_of(const F& f, int64_t r0, int64_t r1) {
  for (int64_t r = r0; r < r1; ++r) f(r);
}

// f(r) for every row, in parallel over rows.
template <class F>
void each_row(ThreadPool& pool, const RowsView& v, F f) {
  pool.parallel_for(v.rows, block_rows(v), [&](int64_t begin, int64_t end) { each_row_of(f, begin, end); });
}

// T: x's (and, for float32 / float64, the parameters') element type.
template <class T>
void batch_norm_kernel(KernelContext& c) {
  const Tensor& xt = c.input(0);
  const RowsView v = rows_view(xt);
  const double eps = c.attrs.get_or<double>("epsilon", 1e-3);
  const bool training = c.attrs.get<bool>("is_training");
  const T* x = xt.data<T>();
  const T* scale = c.input(1).data<T>();
  const T* offset = c.input(2).data<T>();
  T* y = c.output(0).data<T>();
  T* mean_out = c.output(1).data<T>();
  T* var_out = c.output(2).data<T>();
  T* inv_out = c.output(3).data<T>();
  const size_t C = static_cast<size_t>(v.c);
  std::vector<double> mean(C), var(C);
  if (training) {
    const double m = static_cast<double>(v.rows);  // 0 rows: 0 / 0 gives NaN statistics, as TensorFlow's
    // One pass: sums of d = x - K and of d^2, K being the channel's value in the first row (the
    // shift that makes one pass sound; see the layer norm's statistics below).
    std::vector<double> shift(C, 0.0);
    if (v.rows > 0)
      for (size_t ch = 0; ch < C; ++ch) shift[ch] = static_cast<double>(x[ch]);
    const std::vector<double> sums = channel_sums<2>(c.pool(), v, [&](int64_t r, double* acc) {
      const T* row = x + r * v.c;
      for (int64_t ch = 0; ch < v.c; ++ch) {
        const double d = static_cast<double>(row[ch]) - shift[ch];
        acc[ch] += d;
        acc[v.c + ch] += d * d;
      }
    });
    for (size_t ch = 0; ch < C; ++ch) {
      const double mean_d = sums[ch] / m;
      mean[ch] = shift[ch] + mean_d;
      const double v2 = sums[C + ch] / m - mean_d * mean_d;
      var[ch] = v2 < 0 ? 0.0 : v2;  // rounding can leave a constant channel's -0.0000001; NaN stays
    }
  } else {
    const T* mean_in = c.input(3).data<T>();
    const T* var_in = c.input(4).data<T>();
    for (size_t ch = 0; ch < C; ++ch) {
      mean[ch] = static_cast<double>(mean_in[ch]);
      var[ch] = static_cast<double>(var_in[ch]);
    }
  }
  // y = (x - mean) * inv * scale + offset = x * a + b per channel.
  std::vector<T> a(C), b(C);
  for (size_t ch = 0; ch < C; ++ch) {
    const double inv = 1.0 / std::sqrt(var[ch] + eps);
    mean_out[ch] = static_cast<T>(mean[ch]);
    var_out[ch] = static_cast<T>(var[ch]);
    inv_out[ch] = static_cast<T>(inv);
    a[ch] = static_cast<T>(inv * static_cast<double>(scale[ch]));
    b[ch] = static_cast<T>(static_cast<double>(offset[ch]) - mean[ch] * inv * static_cast<double>(scale[ch]));
  }
  // With activation "relu", y = relu(x * a + b): ReluOp's bits, as the separate Relu's.
  auto affine = [&](auto relu) {
    each_row(c.pool(), v, [&](int64_t r) {
      const T* row = x + r * v.c;
      T* out = y + r * v.c;
      for (int64_t ch = 0; ch < v.c; ++ch) {
        const T z = row[ch] * a[ch] + b[ch];
        out[ch] = decltype(relu)::value ? ReluOp{}(z) : z;
      }
    });
  };
  if (relu_activation(c.attrs)) affine(std::true_type{});
  else affine(std::false_type{});
}

// With xhat = (x - mean) * inv, per channel: doffset = sum(dy), dscale = sum(dy * xhat), and
//   training:  dx = scale * inv * (dy - doffset / M - xhat * dscale / M)   (M: rows), the mean and
//              variance being functions of x;
//   inference: dx = dy * scale * inv, the statistics being constants.
// kRelu: activation "relu", dy being the gradient of relu(y) (the sixth input): ReluGrad(dy, y),
// the bits of the separate ReluGrad, computed where it is read instead of in a pass of its own.
// (A template parameter, not a test per element: the test kept the loops from vectorising.)
template <class T, bool kRelu>
void batch_norm_grad(KernelContext& c) {
  const RowsView v = rows_view(c.input(1));
  const bool training = c.attrs.get<bool>("is_training");
  const T* dy = c.input(0).data<T>();
  const T* x = c.input(1).data<T>();
  const T* scale = c.input(2).data<T>();
  const T* mean = c.input(3).data<T>();
  const T* inv = c.input(4).data<T>();
  T* dx = c.output(0).data<T>();
  T* dscale = c.output(1).data<T>();
  T* doffset = c.output(2).data<T>();
  const size_t C = static_cast<size_t>(v.c);
  const T* activated = kRelu ? c.input(5).data<T>() : nullptr;
  auto grad_at = [&](int64_t i) {
    if constexpr (kRelu) return relu_grad_masked(dy[i], activated[i]);
    else return dy[i];
  };
  const std::vector<double> sums = channel_sums<2>(c.pool(), v, [&](int64_t r, double* acc) {
    const T* row = x + r * v.c;
    for (int64_t ch = 0; ch < v.c; ++ch) {
      const double gd = static_cast<double>(grad_at(r * v.c + ch));
      acc[ch] += gd;
      acc[v.c + ch] += gd * (static_cast<double>(row[ch]) - static_cast<double>(mean[ch])) *
                       static_cast<double>(inv[ch]);
    }
  });
  // dx = dy * k + xhat * q + p per channel, with xhat = x * inv - mean * inv.
  std::vector<T> k(C), q(C), p(C), xa(C), xb(C);
  const double m = static_cast<double>(std::max<int64_t>(v.rows, 1));
  for (size_t ch = 0; ch < C; ++ch) {
    doffset[ch] = static_cast<T>(sums[ch]);
    dscale[ch] = static_cast<T>(sums[C + ch]);
    const double si = static_cast<double>(scale[ch]) * static_cast<double>(inv[ch]);
    k[ch] = static_cast<T>(si);
    q[ch] = static_cast<T>(training ? -si * sums[C + ch] / m : 0.0);
    p[ch] = static_cast<T>(training ? -si * sums[ch] / m : 0.0);
    xa[ch] = inv[ch];
    xb[ch] = static_cast<T>(-static_cast<double>(mean[ch]) * static_cast<double>(inv[ch]));
  }
  each_row(c.pool(), v, [&](int64_t r) {
    const T* row = x + r * v.c;
    T* out = dx + r * v.c;
    for (int64_t ch = 0; ch < v.c; ++ch)
      out[ch] = grad_at(r * v.c + ch) * k[ch] + (row[ch] * xa[ch] + xb[ch]) * q[ch] + p[ch];
  });
}

template <class T>
void batch_norm_grad_kernel(KernelContext& c) {
  if (!relu_activation(c.attrs)) return batch_norm_grad<T, false>(c);
  if (c.input(5).shape() != c.input(1).shape())
    c.fail("the activated y " + c.input(5).shape().to_string() + " does not match x " + c.input(1).shape().to_string());
  batch_norm_grad<T, true>(c);
}

// ---- Layer normalisation: x viewed as [rows, n], each row normalised on its own ----
//
// Statistics in one pass over the row, as sums of d = x - K and of d^2 in double, K being the
// row's first element: var = E[d^2] - E[d]^2. The shift is what makes one pass sound: the
// cancellation in E[d^2] - E[d]^2 grows with (mean - K)^2 / var, and K being one of the row's
// values, (mean - K)^2 <= n * var, so the relative error of var stays below about n^2 / kLanes
// double roundings (2^-28 for n = 2^14; n / kLanes when K is a typical value) however far the
// mean lies from zero, where plain sums of x and x^2 lose everything once |mean| >> std. For float32 (and 16-bit) rows d and d^2 are
// exact in double, so only the additions round. Welford's update would be as sound but costs a
// division (or a multiply by 1 / k) and a dependency per element.
//
// Every sum is kept in kLanes independent partial sums (one vector, Lanes), added in a fixed order
// at the end, so the bits depend neither on the instruction set nor on the thread count. Rows are split over the pool,
// each row computed whole by one thread.

constexpr int kLanes = 8;
// Rows of up to this many elements take the gradient's column sums (dgamma, dbeta) in the same
// pass as dx, each block of rows into its own partial sums (at most a byte per element of x);
// longer rows in a second pass, parallel over columns, which needs no partial sums.
constexpr int64_t kFusedColumnSumsMax = 2048;

struct LayerRows {
  int64_t rows = 0, n = 0;
};
LayerRows layer_rows(const Tensor& x, const Attrs& attrs) {
  const Shape& s = x.shape();
  int64_t axis = attrs.get_or<int64_t>("axis", -1);
  if (axis < 0) axis += s.rank();
  LayerRows v{1, 1};
  for (int64_t i = 0; i < s.rank(); ++i) (i < axis ? v.rows : v.n) *= s[i];
  return v;
}

// Rows per task: enough elements to be worth a thread, fixed by the shape alone.
int64_t rows_grain(const LayerRows& v) { return std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(1, v.n)); }

// kLanes partial sums as one vector (GCC's vector extension: a zmm register on AVX-512, two ymm on
// AVX2, four xmm on SSE2, the same lane-wise operations on each).
typedef double Lanes __attribute__((vector_size(kLanes * sizeof(double))));

double lanes_total(const Lanes& lanes) {
  double t = 0;
  for (int l = 0; l < kLanes; ++l) t += lanes[l];
  return t;
}

// p[0, kLanes) in double.
template <class T>
[[gnu::always_inline]] inline Lanes widen(const T* p) {
  if constexpr (std::is_same_v<T, double>) {
    Lanes v;
    std::memcpy(&v, p, sizeof v);
    return v;
  } else {
    typedef float Floats __attribute__((vector_size(kLanes * sizeof(float))));
    Floats f;
    std::memcpy(&f, p, sizeof f);
    return __builtin_convertvector(f, Lanes);
  }
}

[[gnu::always_inline]] inline Lanes load_lanes(const double* p) {
  Lanes v;
  std::memcpy(&v, p, sizeof v);
  return v;
}
[[gnu::always_inline]] inline void store_lanes(double* p, const Lanes& v) { std::memcpy(p, &v, sizeof v); }

// The mean and rstd of one row of n > 0 elements (see above for how).
template <class T>
[[gnu::always_inline]] inline void row_statistics(const T* x, int64_t n, double eps, double* mean, double* rstd) {
  const double shift = static_cast<double>(x[0]);
  Lanes s1 = {}, s2 = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const Lanes d = widen(x + j) - shift;
    s1 += d;
    s2 += d * d;
  }
  for (int l = 0; j < n; ++j, ++l) {
    const double d = static_cast<double>(x[j]) - shift;
    s1[l] += d;
    s2[l] += d * d;
  }
  const double m = lanes_total(s1) / static_cast<double>(n);
  const double var = std::max(lanes_total(s2) / static_cast<double>(n) - m * m, 0.0);
  *mean = shift + m;
  *rstd = 1.0 / std::sqrt(var + eps);
}

// LayerNorm's rows [r0, r1) of n elements.
template <class T>
WEFT_ISA_CLONES void layer_norm_rows(const T* x, const T* gamma, const T* beta, int64_t r0, int64_t r1,
                                     int64_t n, double eps, T* y, T* mean_out, T* rstd_out) {
  for (int64_t r = r0; r < r1; ++r) {
    if (n == 0) {  // an empty row has no statistics (0 / 0), as TensorFlow's moments
      mean_out[r] = rstd_out[r] = std::numeric_limits<T>::quiet_NaN();
      continue;
    }
    const T* row = x + r * n;
    double mean, rstd;
    row_statistics(row, n, eps, &mean, &rstd);
    mean_out[r] = static_cast<T>(mean);
    rstd_out[r] = static_cast<T>(rstd);
    // In T, the hot loop, with the mean as a pair m + m_lo: x - m is exact for x near the mean,
    // and m_lo restores what rounding the mean to T lost, which would otherwise be an error of
    // up to half an ulp of the mean in every output (5e-4 for a float32 row around 1e4 with
    // standard deviation 1). For float64, m_lo is 0.
    const T m = static_cast<T>(mean), m_lo = static_cast<T>(mean - static_cast<double>(m));
    const T rs = static_cast<T>(rstd);
    T* out = y + r * n;
    for (int64_t j = 0; j < n; ++j) out[j] = ((row[j] - m) - m_lo) * rs * gamma[j] + beta[j];
  }
}

template <class T>
void layer_norm_kernel(KernelContext& c) {
  const LayerRows v = layer_rows(c.input(0), c.attrs);
  const double eps = c.attrs.get_or<double>("epsilon", 1e-5);
  const T* x = c.input(0).data<T>();
  const T* gamma = c.input(1).data<T>();
  const T* beta = c.input(2).data<T>();
  T* y = c.output(0).data<T>();
  T* mean_out = c.output(1).data<T>();
  T* rstd_out = c.output(2).data<T>();
  c.pool().parallel_for(v.rows, rows_grain(v), [&](int64_t begin, int64_t end) {
    layer_norm_rows(x, gamma, beta, begin, end, v.n, eps, y, mean_out, rstd_out);
  });
}

// The gradient of one row. With xhat = (x - mean) * rstd and g = dy * gamma,
//   dx = rstd * (g - mean(g) - xhat * mean(g * xhat)),
// the mean and rstd being functions of the row. kColumnSums: also adds the row's dy * xhat and
// dy to dgamma and dbeta (in double). xhat comes from the saved mean, rounded to T as PyTorch's
// is: for float32 rows whose mean is thousands of standard deviations from zero that costs the
// gradient a few digits, a relative error of the order of the input's own rounding there.
// Recovering it (the forward's m_lo) would take another pass over the row.
template <bool kColumnSums, class T>
[[gnu::always_inline]] inline void layer_norm_grad_row(const T* dy, const T* x, const T* gamma, T mean_t, T rstd_t, int64_t n, T* dx, double* dgamma,
                         double* dbeta) {
  const double mean = static_cast<double>(mean_t), rstd = static_cast<double>(rstd_t);
  Lanes sg = {}, sgx = {};
  int64_t j = 0;
  for (; j + kLanes <= n; j += kLanes) {
    const Lanes d = widen(dy + j);
    const Lanes xh = (widen(x + j) - mean) * rstd;
    const Lanes g = d * widen(gamma + j);
    sg += g;
    sgx += g * xh;
    if constexpr (kColumnSums) {
      store_lanes(dgamma + j, load_lanes(dgamma + j) + d * xh);
      store_lanes(dbeta + j, load_lanes(dbeta + j) + d);
    }
  }
  // The tail, element l of it into lane l: the lambda keeps the vector loop's operations.
  auto term = [&](int64_t j, int l) {
    const double d = static_cast<double>(dy[j]);
    const double xh = (static_cast<double>(x[j]) - mean) * rstd;
    const double g = d * static_cast<double>(gamma[j]);
    sg[l] += g;
    sgx[l] += g * xh;
    if constexpr (kColumnSums) {
      dgamma[j] += d * xh;
      dbeta[j] += d;
    }
  };
  for (int l = 0; j < n; ++j, ++l) term(j, l);
  const T a = static_cast<T>(lanes_total(sg) / static_cast<double>(n));
  const T b = static_cast<T>(lanes_total(sgx) / static_cast<double>(n));
  for (int64_t k = 0; k < n; ++k) {
    const T xh = (x[k] - mean_t) * rstd_t;
    dx[k] = rstd_t * (dy[k] * gamma[k] - a - xh * b);
  }
}

// The gradient of rows [r0, r1), their column sums (kColumnSums) into dgamma and dbeta.
template <bool kColumnSums, class T>
WEFT_ISA_CLONES void layer_norm_grad_rows(
    const T* dy, const T* x, const T* gamma, const T* mean, const T* rstd, int64_t r0, int64_t r1, int64_t n, T* dx,
    double* dgamma, double* dbeta) {
  for (int64_t r = r0; r < r1; ++r)
    layer_norm_grad_row<kColumnSums>(dy + r * n, x + r * n, gamma, mean[r], rstd[r], n, dx + r * n, dgamma, dbeta);
}

template <class T>
void layer_norm_grad_kernel(KernelContext& c) {
  const LayerRows v = layer_rows(c.input(1), c.attrs);
  const T* dy = c.input(0).data<T>();
  const T* x = c.input(1).data<T>();
  const T* gamma = c.input(2).data<T>();
  const T* mean = c.input(3).data<T>();
  const T* rstd = c.input(4).data<T>();
  T* dx = c.output(0).data<T>();
  T* dgamma = c.output(1).data<T>();
  T* dbeta = c.output(2).data<T>();
  const size_t n = static_cast<size_t>(v.n);
  std::vector<double> totals(2 * n, 0.0);  // dgamma's, then dbeta's
  if (v.n <= kFusedColumnSumsMax) {
    // Blocks of rows fixed by the shape, each adding into its own partial sums, which are then
    // added in block order: the same bits on any number of threads.
    const int64_t per = rows_grain(v);
    const int64_t blocks = v.n > 0 ? (v.rows + per - 1) / per : 0;
    std::vector<double> part(static_cast<size_t>(blocks) * 2 * n, 0.0);
    c.pool().parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
      for (int64_t b = begin; b < end; ++b) {
        double* acc = part.data() + static_cast<size_t>(b) * 2 * n;
        layer_norm_grad_rows<true>(dy, x, gamma, mean, rstd, b * per, std::min(v.rows, (b + 1) * per), v.n, dx, acc,
                                   acc + n);
      }
    });
    for (int64_t b = 0; b < blocks; ++b)
      for (size_t i = 0; i < 2 * n; ++i) totals[i] += part[static_cast<size_t>(b) * 2 * n + i];
  } else {
    c.pool().parallel_for(v.rows, rows_grain(v), [&](int64_t begin, int64_t end) {
      layer_norm_grad_rows<false>(dy, x, gamma, mean, rstd, begin, end, v.n, dx, nullptr, nullptr);
    });
    // Each column's sums over the rows in row order, whatever the split of the columns.
    c.pool().parallel_for(v.n, std::max<int64_t>(1, kCheapGrain / std::max<int64_t>(1, v.rows)),
                          [&](int64_t begin, int64_t end) {
                            for (int64_t r = 0; r < v.rows; ++r) {
                              const double m = static_cast<double>(mean[r]), rs = static_cast<double>(rstd[r]);
                              const T* g = dy + r * v.n;
                              const T* row = x + r * v.n;
                              for (int64_t j = begin; j < end; ++j) {
                                const double d = static_cast<double>(g[j]);
                                totals[j] += d * ((static_cast<double>(row[j]) - m) * rs);
                                totals[n + j] += d;
                              }
                            }
                          });
  }
  for (size_t j = 0; j < n; ++j) {
    dgamma[j] = static_cast<T>(totals[j]);
    dbeta[j] = static_cast<T>(totals[n + j]);
  }
}

}  // namespace

void register_normalization_kernels() {
  register_kernel("FusedBatchNorm", DeviceType::CPU, float32, batch_norm_kernel<float>);
  register_kernel("FusedBatchNorm", DeviceType::CPU, float64, batch_norm_kernel<double>);
  register_kernel("FusedBatchNormGrad", DeviceType::CPU, float32, batch_norm_grad_kernel<float>);
  register_kernel("FusedBatchNormGrad", DeviceType::CPU, float64, batch_norm_grad_kernel<double>);
  register_kernel("LayerNorm", DeviceType::CPU, float32, layer_norm_kernel<float>);
  register_kernel("LayerNorm", DeviceType::CPU, float64, layer_norm_kernel<double>);
  register_kernel("LayerNormGrad", DeviceType::CPU, float32, layer_norm_grad_kernel<float>);
  register_kernel("LayerNormGrad", DeviceType::CPU, float64, layer_norm_grad_kernel<double>);
  register_via_float32({"FusedBatchNorm", "FusedBatchNormGrad", "LayerNorm", "LayerNormGrad"});
}

}  // namespace weft::cpu
