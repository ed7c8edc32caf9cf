// CPU Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter, and the depthwise convolution's three
// (DepthwiseConv2dNative...): the same kernels, which differ only in how they read the problem
// (conv_kernel_params.h; a depthwise one is a grouped convolution, a group per channel). float32
// goes to oneDNN where it has a real implementation for the problem (conv_onednn.h), else to
// weft's reference (conv_reference.h); float64 always to the reference; float16 and bfloat16
// through the float32 kernel (via_float32.h).
#include <algorithm>
#include <string>
#include <type_traits>

#include "kernels/conv_kernel_params.h"
#include "kernels/cpu/bias_epilogue.h"
#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/conv_onednn.h"
#include "kernels/cpu/conv_reference.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

template <class T>
const T* in(const KernelContext& ctx, int i) {
  return static_cast<const T*>(raw_data(ctx.input(i)));
}
template <class T>
T* out(const KernelContext& ctx) {
  return static_cast<T*>(raw_data(ctx.output(0)));
}

// Conv2D's output into output 0: oneDNN's for float32 where it takes the problem, which also runs
// `epilogue` on each chunk of images as it is written (then true), else the reference (false).
template <class T, ConvParamsOf kParams = conv_kernel_params>
bool conv2d_forward(KernelContext& ctx, const OutputRows& epilogue = {}) {
  const ConvParams p = kParams(ctx, ctx.input(0).shape(), ctx.input(1).shape());
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv2d(ctx.pool(), p, in<T>(ctx, 0), in<T>(ctx, 1), out<T>(ctx), epilogue)) return true;
  }
  conv2d_reference<T>(ctx.pool(), p, in<T>(ctx, 0), in<T>(ctx, 1), out<T>(ctx));
  return false;
}

template <class T, ConvParamsOf kParams = conv_kernel_params>
void conv2d_kernel(KernelContext& ctx) {
  conv2d_forward<T, kParams>(ctx);
}

// FusedConv2D: Conv2D's kernel, then FusedMatMul's epilogue (bias_epilogue.h) over its output
// rows, so a traced function keeps its eager run's bits (not in oneDNN's epilogue: see
// conv_onednn.h). It saves the unfused graph's second buffer and node; on oneDNN the epilogue
// runs on each chunk of images as it is written, not in a second pass over the whole output.
template <class T>
void fused_conv2d_kernel(KernelContext& ctx) {
  const Act act = parse_activation(ctx);
  if (act != Act::kNone && act != Act::kRelu) ctx.fail("FusedConv2D takes no activation but relu");
  const Tensor& y = ctx.output(0);
  const int64_t f = y.shape()[3];
  const T* bias = in<T>(ctx, 2);
  if constexpr (std::is_same_v<T, float>) {
    if (conv2d_forward<T>(ctx, [&](float* rows, int64_t r0, int64_t r1) { epilogue_rows(rows, bias, r0, r1, f, act); }))
      return;
  } else {
    conv2d_forward<T>(ctx);
  }
  if (y.size() == 0) return;
  T* rows = out<T>(ctx);
  ctx.pool().parallel_for(y.size() / f, std::max<int64_t>(1, kCheapGrain / f), [&](int64_t r0, int64_t r1) {
    epilogue_rows(rows, bias, r0, r1, f, act);
  });
}

template <class T, ConvParamsOf kParams = conv_kernel_params>
void backprop_input_kernel(KernelContext& ctx) {
  const ConvParams p = kParams(ctx, ctx.output(0).shape(), ctx.input(0).shape());
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv2d_backprop_input(ctx.pool(), p, in<T>(ctx, 0), in<T>(ctx, 1), out<T>(ctx))) return;
  }
  conv2d_backprop_input_reference<T>(ctx.pool(), p, in<T>(ctx, 0), in<T>(ctx, 1), out<T>(ctx));
}

template <class T, ConvParamsOf kParams = conv_kernel_params>
void backprop_filter_kernel(KernelContext& ctx) {
  const ConvParams p = kParams(ctx, ctx.input(0).shape(), ctx.output(0).shape());
  if constexpr (std::is_same_v<T, float>) {
    if (onednn_conv2d_backprop_filter(ctx.pool(), p, in<T>(ctx, 0), in<T>(ctx, 1), out<T>(ctx))) return;
  }
  conv2d_backprop_filter_reference<T>(ctx.pool(), p, in<T>(ctx, 0), in<T>(ctx, 1), out<T>(ctx));
}

}  // namespace

void register_conv_kernels() {
  register_kernel("Conv2D", DeviceType::CPU, float32, conv2d_kernel<float>);
  register_kernel("Conv2D", DeviceType::CPU, float64, conv2d_kernel<double>);
  register_kernel("FusedConv2D", DeviceType::CPU, float32, fused_conv2d_kernel<float>);
  register_kernel("FusedConv2D", DeviceType::CPU, float64, fused_conv2d_kernel<double>);
  register_kernel("Conv2DBackpropInput", DeviceType::CPU, float32, backprop_input_kernel<float>);
  register_kernel("Conv2DBackpropInput", DeviceType::CPU, float64, backprop_input_kernel<double>);
  register_kernel("Conv2DBackpropFilter", DeviceType::CPU, float32, backprop_filter_kernel<float>);
  register_kernel("Conv2DBackpropFilter", DeviceType::CPU, float64, backprop_filter_kernel<double>);
  constexpr ConvParamsOf kDepthwise = depthwise_kernel_params;
  register_kernel("DepthwiseConv2dNative", DeviceType::CPU, float32, conv2d_kernel<float, kDepthwise>);
  register_kernel("DepthwiseConv2dNative", DeviceType::CPU, float64, conv2d_kernel<double, kDepthwise>);
  register_kernel("DepthwiseConv2dNativeBackpropInput", DeviceType::CPU, float32,
                  backprop_input_kernel<float, kDepthwise>);
  register_kernel("DepthwiseConv2dNativeBackpropInput", DeviceType::CPU, float64,
                  backprop_input_kernel<double, kDepthwise>);
  register_kernel("DepthwiseConv2dNativeBackpropFilter", DeviceType::CPU, float32,
                  backprop_filter_kernel<float, kDepthwise>);
  register_kernel("DepthwiseConv2dNativeBackpropFilter", DeviceType::CPU, float64,
                  backprop_filter_kernel<double, kDepthwise>);
  register_via_float32({"Conv2D", "FusedConv2D", "Conv2DBackpropInput", "Conv2DBackpropFilter",
                        "DepthwiseConv2dNative", "DepthwiseConv2dNativeBackpropInput",
                        "DepthwiseConv2dNativeBackpropFilter"});
}

}  // namespace weft::cpu
