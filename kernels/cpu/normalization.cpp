// CPU kernels of FusedBatchNorm and FusedBatchNormGrad (kernels/defs/normalization.cpp), for
// float32 and float64 x (float16 / bfloat16 through the float32 kernel: their [C] parameters and
// statistics are float32 already, and only y / dx are rounded back).
//
// x is viewed as [rows, C] (every axis but the last is a row). Per-channel sums run in parallel
// over fixed blocks of rows, each block's sums kept apart and added in block order, so the result
// does not depend on the thread count; they accumulate in double whatever T is (a float32 sum
// over a large batch would lose the small variances). The variance is the mean of squared
// deviations from the mean, taken in a second pass rather than E[x^2] - E[x]^2, which cancels.
// Then one parallel pass applies the per-channel affine map y = x * a + b, channels innermost.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

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
template <int K, class Add>
std::vector<double> channel_sums(ThreadPool& pool, const RowsView& v, Add add) {
  const int64_t per = block_rows(v);
  const int64_t blocks = (v.rows + per - 1) / per;
  const size_t width = static_cast<size_t>(K * v.c);
  std::vector<double> part(static_cast<size_t>(blocks) * width, 0.0);
  pool.parallel_for(blocks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t b = begin; b < end; ++b) {
      double* acc = part.data() + static_cast<size_t>(b) * width;
      for (int64_t r = b * per; r < std::min(v.rows, (b + 1) * per); ++r) add(r, acc);
    }
  });
  std::vector<double> total(width, 0.0);
  for (int64_t b = 0; b < blocks; ++b)
    for (size_t i = 0; i < width; ++i) total[i] += part[static_cast<size_t>(b) * width + i];
  return total;
}

// out[r, ch] = f(r, ch) in parallel over rows.
template <class F>
void each_row(ThreadPool& pool, const RowsView& v, F f) {
  pool.parallel_for(v.rows, block_rows(v), [&](int64_t begin, int64_t end) {
    for (int64_t r = begin; r < end; ++r) f(r);
  });
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
    const std::vector<double> sum = channel_sums<1>(c.pool(), v, [&](int64_t r, double* acc) {
      const T* row = x + r * v.c;
      for (int64_t ch = 0; ch < v.c; ++ch) acc[ch] += static_cast<double>(row[ch]);
    });
    for (size_t ch = 0; ch < C; ++ch) mean[ch] = sum[ch] / m;
    const std::vector<double> sq = channel_sums<1>(c.pool(), v, [&](int64_t r, double* acc) {
      const T* row = x + r * v.c;
      for (int64_t ch = 0; ch < v.c; ++ch) {
        const double d = static_cast<double>(row[ch]) - mean[ch];
        acc[ch] += d * d;
      }
    });
    for (size_t ch = 0; ch < C; ++ch) var[ch] = sq[ch] / m;
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
  each_row(c.pool(), v, [&](int64_t r) {
    const T* row = x + r * v.c;
    T* out = y + r * v.c;
    for (int64_t ch = 0; ch < v.c; ++ch) out[ch] = row[ch] * a[ch] + b[ch];
  });
}

// With xhat = (x - mean) * inv, per channel: doffset = sum(dy), dscale = sum(dy * xhat), and
//   training:  dx = scale * inv * (dy - doffset / M - xhat * dscale / M)   (M: rows), the mean and
//              variance being functions of x;
//   inference: dx = dy * scale * inv, the statistics being constants.
template <class T>
void batch_norm_grad_kernel(KernelContext& c) {
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
  const std::vector<double> sums = channel_sums<2>(c.pool(), v, [&](int64_t r, double* acc) {
    const T* g = dy + r * v.c;
    const T* row = x + r * v.c;
    for (int64_t ch = 0; ch < v.c; ++ch) {
      const double gd = static_cast<double>(g[ch]);
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
    const T* g = dy + r * v.c;
    const T* row = x + r * v.c;
    T* out = dx + r * v.c;
    for (int64_t ch = 0; ch < v.c; ++ch) out[ch] = g[ch] * k[ch] + (row[ch] * xa[ch] + xb[ch]) * q[ch] + p[ch];
  });
}

}  // namespace

void register_normalization_kernels() {
  register_kernel("FusedBatchNorm", DeviceType::CPU, float32, batch_norm_kernel<float>);
  register_kernel("FusedBatchNorm", DeviceType::CPU, float64, batch_norm_kernel<double>);
  register_kernel("FusedBatchNormGrad", DeviceType::CPU, float32, batch_norm_grad_kernel<float>);
  register_kernel("FusedBatchNormGrad", DeviceType::CPU, float64, batch_norm_grad_kernel<double>);
  register_via_float32({"FusedBatchNorm", "FusedBatchNormGrad"});
}

}  // namespace weft::cpu
