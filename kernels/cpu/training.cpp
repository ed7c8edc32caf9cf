// CPU kernels of the fused optimizer updates (in place on their inputs), and of GlobalSquaredNorm.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/isa_clones.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

// Rate `index` of those after the op's tensors: that input (a float64 scalar computed in the
// graph) when there is one, else the attribute.
double rate(const KernelContext& ctx, int index, const char* attr) {
  const int input = ctx.op.min_inputs + index;
  if (static_cast<int>(ctx.inputs.size()) > input) return ctx.inputs[static_cast<size_t>(input)].item<double>();
  return ctx.attrs.get<double>(attr);
}

double learning_rate(const KernelContext& ctx) { return rate(ctx, 0, "lr"); }

template <class T>
T* writable(const Tensor& t) {
  return static_cast<T*>(raw_data(t));  // these ops own their inputs' buffers by contract
}

template <class T>
void gradient_descent(KernelContext& ctx) {
  T* w = writable<T>(ctx.input(0));
  const T* g = static_cast<const T*>(raw_data(ctx.input(1)));
  const T lr = static_cast<T>(learning_rate(ctx));
  ctx.pool().parallel_for(ctx.input(0).size(), kCheapGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) w[i] -= lr * g[i];
  });
}

template <class T>
void momentum(KernelContext& ctx) {
  T* w = writable<T>(ctx.input(0));
  T* acc = writable<T>(ctx.input(1));
  const T* g = static_cast<const T*>(raw_data(ctx.input(2)));
  const T lr = static_cast<T>(learning_rate(ctx));
  const T mu = static_cast<T>(ctx.attrs.get<double>("momentum"));
  const bool nesterov = ctx.attrs.get<bool>("nesterov");
  // Keras' formulation: velocity = mu * velocity - lr * g; w += velocity (or the Nesterov step).
  ctx.pool().parallel_for(ctx.input(0).size(), kCheapGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) {
      acc[i] = mu * acc[i] - lr * g[i];
      w[i] += nesterov ? mu * acc[i] - lr * g[i] : acc[i];
    }
  });
}

// The update loops are cloned for AVX2 and AVX-512 (isa_clones.h): Adam's square root and
// division per element made it compute-bound at four lanes. Same bits on every CPU.
//
// Adam's step, and with kDecay AdamW's in Keras' order: the decay (decay = lr * weight_decay)
// first, from the variable before this step, then Adam's step.
template <bool kDecay, class T>
WEFT_ISA_CLONES void adam_range(T* w, T* m, T* v, const T* g, T lr, T decay, T b1, T b2, T eps, int64_t b,
                                int64_t e) {
  for (int64_t i = b; i < e; ++i) {
    const T start = kDecay ? w[i] - decay * w[i] : w[i];
    m[i] = b1 * m[i] + (T(1) - b1) * g[i];
    v[i] = b2 * v[i] + (T(1) - b2) * g[i] * g[i];
    w[i] = start - lr * m[i] / (std::sqrt(v[i]) + eps);
  }
}

// The squares of x[0, n) summed in double, element i into lane i % 8, the lanes added in order.
template <class T>
WEFT_ISA_CLONES double squares_sum(const T* x, int64_t n) {
  typedef double Lanes __attribute__((vector_size(8 * sizeof(double))));
  Lanes acc = {};
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    Lanes d;
    for (int l = 0; l < 8; ++l) d[l] = static_cast<double>(x[i + l]);
    acc += d * d;
  }
  for (int l = 0; i < n; ++i, ++l) {
    const double d = static_cast<double>(x[i]);
    acc[l] += d * d;
  }
  double s = 0;
  for (int l = 0; l < 8; ++l) s += acc[l];
  return s;
}

// ApplyAdam, and with kDecay ApplyAdamW (its decay rate the second rate input or attribute).
template <class T, bool kDecay>
void adam(KernelContext& ctx) {
  T* w = writable<T>(ctx.input(0));
  T* m = writable<T>(ctx.input(1));
  T* v = writable<T>(ctx.input(2));
  const T* g = static_cast<const T*>(raw_data(ctx.input(3)));
  const T lr = static_cast<T>(learning_rate(ctx));  // already bias-corrected
  const T decay = kDecay ? static_cast<T>(rate(ctx, 1, "decay")) : T(0);
  const T b1 = static_cast<T>(ctx.attrs.get<double>("beta1"));
  const T b2 = static_cast<T>(ctx.attrs.get<double>("beta2"));
  const T eps = static_cast<T>(ctx.attrs.get<double>("epsilon"));
  ctx.pool().parallel_for(ctx.input(0).size(), kCheapGrain / 4,
                          [&](int64_t b, int64_t e) { adam_range<kDecay>(w, m, v, g, lr, decay, b1, b2, eps, b, e); });
}

// Every input cut into blocks of a fixed size, each block summed in float64 by one task (eight
// lanes, squares_sum) and the block sums added in order: the same bits whatever the number of
// threads and the instruction set.
template <class T>
void global_squared_norm(KernelContext& ctx) {
  constexpr int64_t kBlock = int64_t{1} << 14;
  struct Block {
    const T* data;
    int64_t size;
  };
  std::vector<Block> blocks;
  for (const Tensor& x : ctx.inputs) {
    const T* p = static_cast<const T*>(raw_data(x));
    for (int64_t at = 0; at < x.size(); at += kBlock) blocks.push_back({p + at, std::min(kBlock, x.size() - at)});
  }
  std::vector<double> sums(blocks.size());
  ctx.pool().parallel_for(static_cast<int64_t>(blocks.size()), 1, [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const Block& block = blocks[static_cast<size_t>(k)];
      sums[static_cast<size_t>(k)] = squares_sum(block.data, block.size);
    }
  });
  double total = 0;
  for (double s : sums) total += s;
  *static_cast<T*>(raw_data(ctx.output(0))) = static_cast<T>(total);
}

}  // namespace

void register_training_kernels() {
  register_kernel("ApplyGradientDescent", DeviceType::CPU, float32, gradient_descent<float>);
  register_kernel("ApplyGradientDescent", DeviceType::CPU, float64, gradient_descent<double>);
  register_kernel("ApplyMomentum", DeviceType::CPU, float32, momentum<float>);
  register_kernel("ApplyMomentum", DeviceType::CPU, float64, momentum<double>);
  register_kernel("ApplyAdam", DeviceType::CPU, float32, adam<float, false>);
  register_kernel("ApplyAdam", DeviceType::CPU, float64, adam<double, false>);
  register_kernel("ApplyAdamW", DeviceType::CPU, float32, adam<float, true>);
  register_kernel("ApplyAdamW", DeviceType::CPU, float64, adam<double, true>);
  register_kernel("GlobalSquaredNorm", DeviceType::CPU, float32, global_squared_norm<float>);
  register_kernel("GlobalSquaredNorm", DeviceType::CPU, float64, global_squared_norm<double>);
  register_via_float32("GlobalSquaredNorm");
}

}  // namespace weft::cpu
