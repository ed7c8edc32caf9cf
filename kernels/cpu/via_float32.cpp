// The 16-bit CPU kernels computed through float32 (see via_float32.h for why).
#include "kernels/cpu/via_float32.h"

#include <string>
#include <vector>

#include "kernels/cpu/broadcast_plan.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

bool is_16bit(DType d) { return d == DType::Float16 || d == DType::BFloat16; }

// A 16-bit tensor as a new float32 one on the same device (exact: every 16-bit value is a float).
Tensor widen(const Tensor& x, KernelContext& c) {
  Tensor w = Tensor::empty(DType::Float32, x.shape(), &c.device);
  float* out = static_cast<float*>(raw_data(w));
  const uint16_t* in = static_cast<const uint16_t*>(raw_data(x));
  const bool half = x.dtype() == DType::Float16;
  c.pool().parallel_for(x.size(), kCheapGrain, [&](int64_t b, int64_t e) {
    if (half)
      for (int64_t i = b; i < e; ++i) out[i] = half_to_float(Half{in[i]});
    else
      for (int64_t i = b; i < e; ++i) out[i] = bfloat16_to_float(BFloat16{in[i]});
  });
  return w;
}

// Rounds a float32 result into the preallocated 16-bit output, once, to nearest even: the same
// rounding as Cast, so the result is exactly cast(op(cast(x, float32)), dtype).
void narrow(const Tensor& wide, Tensor& out, KernelContext& c) {
  const float* in = static_cast<const float*>(raw_data(wide));
  uint16_t* o = static_cast<uint16_t*>(raw_data(out));
  const bool half = out.dtype() == DType::Float16;
  c.pool().parallel_for(out.size(), kCheapGrain, [&](int64_t b, int64_t e) {
    if (half)
      for (int64_t i = b; i < e; ++i) o[i] = float_to_half(in[i]).bits;
    else
      for (int64_t i = b; i < e; ++i) o[i] = float_to_bfloat16(in[i]).bits;
  });
}

// One function serves every op and both 16-bit dtypes: a KernelFn is a plain function pointer, so
// it finds the op's float32 kernel through the context rather than capturing it. Every input is
// widened before any output is written, so an output that reuses an input's buffer (the executor's
// in-place reuse) is safe.
void via_float32_kernel(KernelContext& c) {
  const KernelFn f32 = c.op.kernel(DeviceType::CPU, DType::Float32);
  std::vector<Tensor> ins(c.inputs.begin(), c.inputs.end());
  for (Tensor& x : ins)
    if (is_16bit(x.dtype())) x = widen(x, c);
  std::vector<Tensor> outs(c.outputs.begin(), c.outputs.end());
  for (Tensor& y : outs)
    if (is_16bit(y.dtype())) y = Tensor::empty(DType::Float32, y.shape(), &c.device);
  KernelContext wide{c.op, ins, outs, c.attrs, c.device, c.run, c.execution};
  f32(wide);
  for (size_t i = 0; i < outs.size(); ++i)
    if (is_16bit(c.outputs[i].dtype())) narrow(outs[i], c.outputs[i], c);
}

}  // namespace

void register_via_float32(std::string_view name) {
  const OpDef* op = op_registry().find(name);
  if (!op) throw InvalidArgument("register_via_float32: no op " + std::string(name));
  if (!op->kernel(DeviceType::CPU, DType::Float32))
    throw InvalidArgument("register_via_float32: " + std::string(name) +
                          " has no float32 CPU kernel to compute float16 and bfloat16 through");
  if (op->has(kSetsOutputs) || op->has(kForwardsInput))
    throw InvalidArgument("register_via_float32: " + std::string(name) +
                          " sets or forwards its outputs; the adapter needs preallocated outputs");
  register_kernel(name, DeviceType::CPU, DType::Float16, via_float32_kernel);
  register_kernel(name, DeviceType::CPU, DType::BFloat16, via_float32_kernel);
}

}  // namespace weft::cpu
