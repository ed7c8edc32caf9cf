// CPU kernel for SparseSoftmaxCrossEntropyWithLogits: one row at a time, max-subtracted.
#include <cmath>

#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/vector_math.h"
#include "kernels/register_all.h"
#include "kernels/cpu/via_float32.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

template <class T, class L>
void xent_rows(KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  const int64_t n = logits.shape()[0], c = logits.shape()[1];
  const T* x = static_cast<const T*>(raw_data(logits));
  const L* labels = static_cast<const L*>(raw_data(ctx.input(1)));
  T* loss = static_cast<T*>(raw_data(ctx.output(0)));
  T* back = static_cast<T*>(raw_data(ctx.output(1)));
  for (int64_t i = 0; i < n; ++i) {
    int64_t label = static_cast<int64_t>(labels[i]);
    if (label < 0 || label >= c)
      ctx.fail("label " + std::to_string(label) + " of example " + std::to_string(i) + " is outside [0, " +
               std::to_string(c) + ")");
  }
  ctx.pool().parallel_for(n, std::max<int64_t>(1, 4096 / std::max<int64_t>(c, 1)), [&](int64_t r0, int64_t r1) {
    for (int64_t i = r0; i < r1; ++i) {
      const T* row = x + i * c;
      T* brow = back + i * c;
      T mx = row[0];
      for (int64_t j = 1; j < c; ++j) mx = row[j] > mx ? row[j] : mx;
      for (int64_t j = 0; j < c; ++j) brow[j] = row[j] - mx;
      unary_math(UnaryMath::kExp, brow, brow, c);
      const T sum = sum_run(brow, c);
      const T inv = T(1) / sum;
      for (int64_t j = 0; j < c; ++j) brow[j] *= inv;
      const int64_t label = static_cast<int64_t>(labels[i]);
      loss[i] = std::log(sum) - (row[label] - mx);
      brow[label] -= T(1);
    }
  });
}

template <class T>
void xent_kernel(KernelContext& ctx) {
  switch (ctx.input(1).dtype()) {
    case DType::Int32: return xent_rows<T, int32_t>(ctx);
    case DType::Int64: return xent_rows<T, int64_t>(ctx);
    default: return xent_rows<T, uint8_t>(ctx);
  }
}

}  // namespace

void register_loss_kernels() {
  register_kernel("SparseSoftmaxCrossEntropyWithLogits", DeviceType::CPU, float32, xent_kernel<float>);
  register_kernel("SparseSoftmaxCrossEntropyWithLogits", DeviceType::CPU, float64, xent_kernel<double>);
  // 16-bit logits: the loss and its gradient both rounded from float32; the labels stay integers.
  register_via_float32("SparseSoftmaxCrossEntropyWithLogits");
}

}  // namespace weft::cpu
