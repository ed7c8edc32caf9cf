// Loops shared by the elementwise CPU kernels. Same-shape and scalar operands run as flat loops
// the compiler vectorises; everything else goes through BroadcastPlan in contiguous runs.
#pragma once

#include <cstdint>

#include "kernels/cpu/broadcast_plan.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

template <class TI, class TO, class F>
void unary_loop(KernelContext& ctx, F f, int64_t grain = kCheapGrain) {
  const TI* __restrict x = static_cast<const TI*>(ctx.input(0).raw_data());
  TO* __restrict y = static_cast<TO*>(ctx.output(0).raw_data());
  ctx.pool().parallel_for(ctx.output(0).size(), grain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) y[i] = f(x[i]);
  });
}

template <class TI, class TO, class F>
void binary_loop(KernelContext& ctx, F f, int64_t grain = kCheapGrain) {
  const Tensor& a = ctx.input(0);
  const Tensor& b = ctx.input(1);
  const TI* __restrict pa = static_cast<const TI*>(a.raw_data());
  const TI* __restrict pb = static_cast<const TI*>(b.raw_data());
  TO* __restrict po = static_cast<TO*>(ctx.output(0).raw_data());
  const int64_t n = ctx.output(0).size();
  const int64_t na = a.size(), nb = b.size();
  ThreadPool& pool = ctx.pool();
  if (n == 0) return;
  if (na == n && nb == n) {
    pool.parallel_for(n, grain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = f(pa[i], pb[i]);
    });
  } else if (na == n && nb == 1) {
    const TI v = pb[0];
    pool.parallel_for(n, grain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = f(pa[i], v);
    });
  } else if (nb == n && na == 1) {
    const TI v = pa[0];
    pool.parallel_for(n, grain, [&](int64_t s, int64_t e) {
      for (int64_t i = s; i < e; ++i) po[i] = f(v, pb[i]);
    });
  } else {
    BroadcastPlan<2> plan(ctx.output(0).shape(), {&a.shape(), &b.shape()});
    const int64_t len = plan.inner;
    const bool ca = plan.inner_stride[0] != 0, cb = plan.inner_stride[1] != 0;
    int64_t row_grain = std::max<int64_t>(1, grain / std::max<int64_t>(len, 1));
    pool.parallel_for(plan.outer, row_grain, [&](int64_t s, int64_t e) {
      plan.for_rows(s, e, [&](int64_t o, const std::array<int64_t, 2>& off) {
        const TI* __restrict x = pa + off[0];
        const TI* __restrict y = pb + off[1];
        TO* __restrict z = po + o;
        if (ca && cb) {
          for (int64_t j = 0; j < len; ++j) z[j] = f(x[j], y[j]);
        } else if (ca) {
          const TI v = y[0];
          for (int64_t j = 0; j < len; ++j) z[j] = f(x[j], v);
        } else if (cb) {
          const TI v = x[0];
          for (int64_t j = 0; j < len; ++j) z[j] = f(v, y[j]);
        } else {
          const TO v = f(x[0], y[0]);
          for (int64_t j = 0; j < len; ++j) z[j] = v;
        }
      });
    });
  }
}

}  // namespace weft::cpu
