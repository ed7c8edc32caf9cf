// CUDA Conv2D, Conv2DBackpropInput and Conv2DBackpropFilter through cuDNN 9's convolution API,
// with the CPU kernels' attributes and results (kernels/cpu/conv.cpp); and the depthwise
// convolution's three (DepthwiseConv2dNative...) as cuDNN's grouped convolution, a group per input
// channel (cudnnSetConvolutionGroupCount), its [kh, kw, C, M] filter the same bytes as a
// [kh, kw, 1, C * M] one.
//
// Layouts: images stay NHWC; filters are permuted from weft's [kh, kw, in, out] to cuDNN's NHWC
// filter layout [out, kh, kw, in] (and the filter gradient back) by conv_layout.cu. cuDNN pads
// symmetrically, so where the padding before and after differ (SAME with an odd total, uneven
// EXPLICIT) the image (or its gradient) is copied into a larger zeroed one holding the difference.
//
// Algorithms: chosen by cuDNN's heuristics (which follow the GPU, dtype and shape, never a timing),
// keeping only those cuDNN reports deterministic, so every replica computes the same bits; the
// choice is cached per problem. float32 runs in FP32 (CUDNN_FMA_MATH, never TF32, as MatMul does),
// float64 in FP64, float16 and bfloat16 accumulate in FP32. Workspaces and temporaries come from
// weft's allocator, ordered on the device's stream like every kernel's outputs.
#include <cudnn.h>

#include <algorithm>
#include <array>
#include <map>
#include <mutex>
#include <string>
#include <tuple>
#include <vector>

#include "kernels/conv_kernel_params.h"
#include "kernels/cuda/conv_layout.h"
#include "kernels/cuda/cudnn_handle.h"
#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/matmul_kernels.h"
#include "runtime/cuda/cuda_check.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/error.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

void check_copy(cudaError_t err, const KernelContext& ctx, const char* what) {
  if (err != cudaSuccess) throw Internal("[" + ctx.op.display + "] " + what + ": " + cudaGetErrorString(err));
}

struct DnnTypes {
  cudnnDataType_t data, compute;
  cudnnMathType_t math;
};

DnnTypes dnn_types(const KernelContext& ctx, DType dtype) {
  switch (dtype) {
    case DType::Float32: return {CUDNN_DATA_FLOAT, CUDNN_DATA_FLOAT, CUDNN_FMA_MATH};
    case DType::Float64: return {CUDNN_DATA_DOUBLE, CUDNN_DATA_DOUBLE, CUDNN_DEFAULT_MATH};
    case DType::Float16: return {CUDNN_DATA_HALF, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    case DType::BFloat16: return {CUDNN_DATA_BFLOAT16, CUDNN_DATA_FLOAT, CUDNN_TENSOR_OP_MATH};
    default: throw Internal("[" + ctx.op.display + "] no cuDNN type for " + std::string(dtype_name(dtype)));
  }
}

// cuDNN's descriptors, destroyed with the call.
struct TensorDesc {
  cudnnTensorDescriptor_t d = nullptr;
  TensorDesc(const KernelContext& ctx, cudnnDataType_t t, int64_t n, int64_t c, int64_t h, int64_t w) {
    check_dnn(cudnnCreateTensorDescriptor(&d), ctx, "cudnnCreateTensorDescriptor");
    check_dnn(cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NHWC, t, static_cast<int>(n), static_cast<int>(c),
                                         static_cast<int>(h), static_cast<int>(w)),
              ctx, "cudnnSetTensor4dDescriptor");
  }
  ~TensorDesc() { cudnnDestroyTensorDescriptor(d); }
  TensorDesc(const TensorDesc&) = delete;
  TensorDesc& operator=(const TensorDesc&) = delete;
};

struct FilterDesc {
  cudnnFilterDescriptor_t d = nullptr;
  FilterDesc(const KernelContext& ctx, cudnnDataType_t t, const ConvParams& p) {
    check_dnn(cudnnCreateFilterDescriptor(&d), ctx, "cudnnCreateFilterDescriptor");
    // With groups, cuDNN's filter holds each output channel's own group's inputs only.
    check_dnn(cudnnSetFilter4dDescriptor(d, t, CUDNN_TENSOR_NHWC, static_cast<int>(p.f), static_cast<int>(p.group_in()),
                                         static_cast<int>(p.kh), static_cast<int>(p.kw)),
              ctx, "cudnnSetFilter4dDescriptor");
  }
  ~FilterDesc() { cudnnDestroyFilterDescriptor(d); }
  FilterDesc(const FilterDesc&) = delete;
  FilterDesc& operator=(const FilterDesc&) = delete;
};

// The symmetric padding cuDNN applies and what the copy into a larger image adds before it.
struct Padding {
  int64_t sym_h = 0, sym_w = 0, extra_top = 0, extra_bottom = 0, extra_left = 0, extra_right = 0;
  int64_t hp = 0, wp = 0;  // the image's height and width as cuDNN sees it
  bool copied() const { return extra_top || extra_bottom || extra_left || extra_right; }
};

Padding padding_of(const ConvParams& p) {
  Padding d;
  d.sym_h = std::min(p.g.pad_top, p.g.pad_bottom);
  d.sym_w = std::min(p.g.pad_left, p.g.pad_right);
  d.extra_top = p.g.pad_top - d.sym_h;
  d.extra_bottom = p.g.pad_bottom - d.sym_h;
  d.extra_left = p.g.pad_left - d.sym_w;
  d.extra_right = p.g.pad_right - d.sym_w;
  d.hp = p.h + d.extra_top + d.extra_bottom;
  d.wp = p.w + d.extra_left + d.extra_right;
  return d;
}

struct ConvDesc {
  cudnnConvolutionDescriptor_t d = nullptr;
  ConvDesc(const KernelContext& ctx, const DnnTypes& t, const ConvParams& p, const Padding& pad) {
    check_dnn(cudnnCreateConvolutionDescriptor(&d), ctx, "cudnnCreateConvolutionDescriptor");
    // TensorFlow's convolution is a cross-correlation (the filter is not flipped).
    check_dnn(cudnnSetConvolution2dDescriptor(d, static_cast<int>(pad.sym_h), static_cast<int>(pad.sym_w),
                                              static_cast<int>(p.win.stride_h), static_cast<int>(p.win.stride_w),
                                              static_cast<int>(p.win.dilation_h), static_cast<int>(p.win.dilation_w),
                                              CUDNN_CROSS_CORRELATION, t.compute),
              ctx, "cudnnSetConvolution2dDescriptor");
    check_dnn(cudnnSetConvolutionMathType(d, t.math), ctx, "cudnnSetConvolutionMathType");
    if (p.groups > 1)
      check_dnn(cudnnSetConvolutionGroupCount(d, static_cast<int>(p.groups)), ctx, "cudnnSetConvolutionGroupCount");
  }
  ~ConvDesc() { cudnnDestroyConvolutionDescriptor(d); }
  ConvDesc(const ConvDesc&) = delete;
  ConvDesc& operator=(const ConvDesc&) = delete;
};

enum class Pass { kForward, kBackwardData, kBackwardFilter };

// What an algorithm choice depends on.
struct AlgoKey {
  Pass pass;
  int device;
  DType dtype;
  std::array<int64_t, 10> dims;   // n hp wp c kh kw f oh ow groups
  std::array<int64_t, 6> window;  // symmetric pads, strides, dilations
  auto tie() const { return std::tie(pass, device, dtype, dims, window); }
  bool operator<(const AlgoKey& o) const { return tie() < o.tie(); }
};

struct Algo {
  int algo = 0;  // the pass's cudnnConvolution*Algo_t
  cudnnMathType_t math = CUDNN_DEFAULT_MATH;
};

std::mutex g_algo_mu;
std::map<AlgoKey, Algo> g_algos;  // guarded by g_algo_mu; one entry per distinct layer shape

// The first deterministic algorithm of cuDNN's heuristic ranking; `fallback` (deterministic and
// general) when it ranks none. float32 never takes a tensor-op (TF32) one.
template <class Perf>
Algo pick(const std::vector<Perf>& perf, int returned, DType dtype, int fallback, cudnnMathType_t math) {
  for (int i = 0; i < returned; ++i) {
    const Perf& r = perf[static_cast<size_t>(i)];
    if (r.status != CUDNN_STATUS_SUCCESS || r.determinism != CUDNN_DETERMINISTIC) continue;
    if (dtype == DType::Float32 && r.mathType != CUDNN_FMA_MATH && r.mathType != CUDNN_DEFAULT_MATH) continue;
    return {static_cast<int>(r.algo), r.mathType};
  }
  return {fallback, math};
}

struct Problem {
  const KernelContext& ctx;
  CudaContext& cu;
  cudnnHandle_t handle;
  DType dtype;
  DnnTypes types;
  ConvParams p;
  Padding pad;
  TensorDesc x, y;
  FilterDesc w;
  ConvDesc conv;

  Problem(const KernelContext& c, CudaContext& cuda, DType t, const ConvParams& params)
      : ctx(c), cu(cuda), handle(dnn_handle(c, cuda)), dtype(t), types(dnn_types(c, t)), p(params),
        pad(padding_of(params)), x(c, types.data, p.n, p.c, pad.hp, pad.wp), y(c, types.data, p.n, p.f, p.oh, p.ow),
        w(c, types.data, p), conv(c, types, p, pad) {
    int n = 0, ch = 0, oh = 0, ow = 0;
    check_dnn(cudnnGetConvolution2dForwardOutputDim(conv.d, x.d, w.d, &n, &ch, &oh, &ow), ctx,
              "cudnnGetConvolution2dForwardOutputDim");
    if (oh != p.oh || ow != p.ow)
      throw Internal("[" + ctx.op.display + "] cuDNN's output " + std::to_string(oh) + " x " + std::to_string(ow) +
                     " differs from weft's " + std::to_string(p.oh) + " x " + std::to_string(p.ow));
  }

  AlgoKey key(Pass pass) const {
    return {pass, cu.device, dtype, {p.n, pad.hp, pad.wp, p.c, p.kh, p.kw, p.f, p.oh, p.ow, p.groups},
            {pad.sym_h, pad.sym_w, p.win.stride_h, p.win.stride_w, p.win.dilation_h, p.win.dilation_w}};
  }

  Algo algo(Pass pass) {
    const AlgoKey k = key(pass);
    {
      std::lock_guard<std::mutex> lock(g_algo_mu);
      if (auto it = g_algos.find(k); it != g_algos.end()) return it->second;
    }
    Algo a;
    int returned = 0;
    if (pass == Pass::kForward) {
      std::vector<cudnnConvolutionFwdAlgoPerf_t> perf(CUDNN_CONVOLUTION_FWD_ALGO_COUNT);
      check_dnn(cudnnGetConvolutionForwardAlgorithm_v7(handle, x.d, w.d, conv.d, y.d, static_cast<int>(perf.size()),
                                                       &returned, perf.data()),
                ctx, "cudnnGetConvolutionForwardAlgorithm_v7");
      a = pick(perf, returned, dtype, CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM, types.math);
    } else if (pass == Pass::kBackwardData) {
      std::vector<cudnnConvolutionBwdDataAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_DATA_ALGO_COUNT);
      check_dnn(cudnnGetConvolutionBackwardDataAlgorithm_v7(handle, w.d, y.d, conv.d, x.d,
                                                            static_cast<int>(perf.size()), &returned, perf.data()),
                ctx, "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      a = pick(perf, returned, dtype, CUDNN_CONVOLUTION_BWD_DATA_ALGO_1, types.math);
    } else {
      std::vector<cudnnConvolutionBwdFilterAlgoPerf_t> perf(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_COUNT);
      check_dnn(cudnnGetConvolutionBackwardFilterAlgorithm_v7(handle, x.d, y.d, conv.d, w.d,
                                                              static_cast<int>(perf.size()), &returned, perf.data()),
                ctx, "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      a = pick(perf, returned, dtype, CUDNN_CONVOLUTION_BWD_FILTER_ALGO_1, types.math);
    }
    std::lock_guard<std::mutex> lock(g_algo_mu);
    if (g_algos.size() >= 1024) g_algos.clear();  // bounded: ever new shapes start again
    g_algos.emplace(k, a);
    return a;
  }

  // A temporary on the GPU from weft's allocator; freed when it goes out of scope, which the
  // stream-ordered allocator makes safe while queued work still uses it.
  Tensor temp(DType t, Shape shape) const { return Tensor::empty(t, std::move(shape), &ctx.device); }

  Tensor workspace(size_t bytes) const { return temp(DType::UInt8, Shape{static_cast<int64_t>(std::max<size_t>(bytes, 1))}); }

  // alpha = 1, beta = 0, typed as cuDNN wants them: double for double data, float otherwise.
  const void* one() const { return dtype == DType::Float64 ? static_cast<const void*>(&kOneD) : &kOneF; }
  const void* zero() const { return dtype == DType::Float64 ? static_cast<const void*>(&kZeroD) : &kZeroF; }
  static constexpr double kOneD = 1, kZeroD = 0;
  static constexpr float kOneF = 1, kZeroF = 0;

  size_t elem() const { return dtype_size(dtype); }

  // weft's [kh, kw, c, f] filter as cuDNN's [f, kh, kw, c] (c the channels per group).
  Tensor filter_to_krsc(const Tensor& hwio) const {
    const int64_t c = p.group_in();
    Tensor out = temp(dtype, Shape{p.f, p.kh, p.kw, c});
    Copy4d g;
    const int64_t dims[4] = {p.f, p.kh, p.kw, c};
    const int64_t strides[4] = {1, p.kw * c * p.f, c * p.f, p.f};
    for (int d = 0; d < 4; ++d) g.out_dims[d] = g.in_dims[d] = dims[d], g.in_strides[d] = strides[d];
    check_copy(copy4d(g, raw_data(hwio), raw_data(out), elem(), cu.stream), ctx, "filter layout copy");
    return out;
  }

  // cuDNN's [f, kh, kw, c] filter gradient into weft's [kh, kw, c, f].
  void filter_from_krsc(const Tensor& krsc, const Tensor& hwio) const {
    const int64_t c = p.group_in();
    Copy4d g;
    const int64_t dims[4] = {p.kh, p.kw, c, p.f};
    const int64_t strides[4] = {p.kw * c, c, 1, p.kh * p.kw * c};
    for (int d = 0; d < 4; ++d) g.out_dims[d] = g.in_dims[d] = dims[d], g.in_strides[d] = strides[d];
    check_copy(copy4d(g, raw_data(krsc), raw_data(hwio), elem(), cu.stream), ctx, "filter layout copy");
  }

  // The image inside a zeroed [n, hp, wp, c] one, offset by the extra top rows and left columns.
  Tensor padded_image(const Tensor& image) const {
    Tensor out = temp(dtype, Shape{p.n, pad.hp, pad.wp, p.c});
    Copy4d g;
    const int64_t out_dims[4] = {p.n, pad.hp, pad.wp, p.c}, in_dims[4] = {p.n, p.h, p.w, p.c};
    const int64_t strides[4] = {p.h * p.w * p.c, p.w * p.c, p.c, 1}, before[4] = {0, pad.extra_top, pad.extra_left, 0};
    for (int d = 0; d < 4; ++d)
      g.out_dims[d] = out_dims[d], g.in_dims[d] = in_dims[d], g.in_strides[d] = strides[d], g.before[d] = before[d];
    check_copy(copy4d(g, raw_data(image), raw_data(out), elem(), cu.stream), ctx, "padding copy");
    return out;
  }

  // The inverse: the [n, h, w, c] image inside a padded one's gradient.
  void crop_image(const Tensor& padded, const Tensor& image) const {
    Copy4d g;
    const int64_t out_dims[4] = {p.n, p.h, p.w, p.c}, in_dims[4] = {p.n, pad.hp, pad.wp, p.c};
    const int64_t strides[4] = {pad.hp * pad.wp * p.c, pad.wp * p.c, p.c, 1};
    const int64_t before[4] = {0, -pad.extra_top, -pad.extra_left, 0};
    for (int d = 0; d < 4; ++d)
      g.out_dims[d] = out_dims[d], g.in_dims[d] = in_dims[d], g.in_strides[d] = strides[d], g.before[d] = before[d];
    check_copy(copy4d(g, raw_data(padded), raw_data(image), elem(), cu.stream), ctx, "cropping copy");
  }
};


// Empty problems, which cuDNN's descriptors refuse: true when the output is settled (nothing to
// write, or zeros, the sum over nothing).
bool settled_if_empty(const KernelContext& ctx, CudaContext& cu, const ConvParams& p) {
  const Tensor& out = ctx.output(0);
  if (out.size() == 0) return true;
  if (p.n > 0 && p.c > 0 && p.f > 0) return false;
  check_cuda(cudaMemsetAsync(raw_data(out), 0, out.nbytes(), cu.stream), "conv2d: zero the output");
  return true;
}

template <ConvParamsOf kParams = conv_kernel_params>
void conv2d(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const ConvParams params = kParams(ctx, ctx.input(0).shape(), ctx.input(1).shape());
  if (settled_if_empty(ctx, cu, params)) return;
  Problem pr(ctx, cu, ctx.input(0).dtype(), params);
  const Algo a = pr.algo(Pass::kForward);
  check_dnn(cudnnSetConvolutionMathType(pr.conv.d, a.math), ctx, "cudnnSetConvolutionMathType");
  const auto algo = static_cast<cudnnConvolutionFwdAlgo_t>(a.algo);
  size_t bytes = 0;
  check_dnn(cudnnGetConvolutionForwardWorkspaceSize(pr.handle, pr.x.d, pr.w.d, pr.conv.d, pr.y.d, algo, &bytes), ctx,
            "cudnnGetConvolutionForwardWorkspaceSize");
  const Tensor ws = pr.workspace(bytes);
  const Tensor filter = pr.filter_to_krsc(ctx.input(1));
  const Tensor image = pr.pad.copied() ? pr.padded_image(ctx.input(0)) : ctx.input(0);
  check_dnn(cudnnConvolutionForward(pr.handle, pr.one(), pr.x.d, raw_data(image), pr.w.d, raw_data(filter),
                                    pr.conv.d, algo, raw_data(ws), bytes, pr.zero(), pr.y.d,
                                    raw_data(ctx.output(0))),
            ctx, "cudnnConvolutionForward");
}

// FusedConv2D: the convolution, then the bias and relu in one pass over its output (the kernel
// FusedMatMul's epilogue uses, with the expressions of the CPU's).
void fused_conv2d(KernelContext& ctx) {
  conv2d<>(ctx);
  const std::string& act = ctx.attrs.get_or<std::string>("activation", "");
  if (act != "" && act != "relu") ctx.fail("unknown activation '" + act + "'");
  const Tensor& y = ctx.output(0);
  if (y.size() == 0) return;
  const int64_t f = y.shape()[3];
  launch_bias_activation(y.dtype(), raw_data(y), raw_data(ctx.input(2)), y.size() / f, f,
                         act == "relu" ? Activation::kRelu : Activation::kNone, cuda_context(ctx).stream);
  check_launch(ctx);
}

template <ConvParamsOf kParams = conv_kernel_params>
void backprop_input(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const ConvParams params = kParams(ctx, ctx.output(0).shape(), ctx.input(0).shape());
  if (settled_if_empty(ctx, cu, params)) return;
  Problem pr(ctx, cu, ctx.input(0).dtype(), params);
  const Algo a = pr.algo(Pass::kBackwardData);
  check_dnn(cudnnSetConvolutionMathType(pr.conv.d, a.math), ctx, "cudnnSetConvolutionMathType");
  const auto algo = static_cast<cudnnConvolutionBwdDataAlgo_t>(a.algo);
  size_t bytes = 0;
  check_dnn(cudnnGetConvolutionBackwardDataWorkspaceSize(pr.handle, pr.w.d, pr.y.d, pr.conv.d, pr.x.d, algo, &bytes),
            ctx, "cudnnGetConvolutionBackwardDataWorkspaceSize");
  const Tensor ws = pr.workspace(bytes);
  const Tensor filter = pr.filter_to_krsc(ctx.input(0));
  const Tensor dx = pr.pad.copied() ? pr.temp(pr.dtype, Shape{params.n, pr.pad.hp, pr.pad.wp, params.c}) : ctx.output(0);
  check_dnn(cudnnConvolutionBackwardData(pr.handle, pr.one(), pr.w.d, raw_data(filter), pr.y.d,
                                         raw_data(ctx.input(1)), pr.conv.d, algo, raw_data(ws), bytes, pr.zero(),
                                         pr.x.d, raw_data(dx)),
            ctx, "cudnnConvolutionBackwardData");
  if (pr.pad.copied()) pr.crop_image(dx, ctx.output(0));
}

template <ConvParamsOf kParams = conv_kernel_params>
void backprop_filter(KernelContext& ctx) {
  CudaContext& cu = cuda_context(ctx);
  const ConvParams params = kParams(ctx, ctx.input(0).shape(), ctx.output(0).shape());
  if (settled_if_empty(ctx, cu, params)) return;
  Problem pr(ctx, cu, ctx.input(0).dtype(), params);
  const Algo a = pr.algo(Pass::kBackwardFilter);
  check_dnn(cudnnSetConvolutionMathType(pr.conv.d, a.math), ctx, "cudnnSetConvolutionMathType");
  const auto algo = static_cast<cudnnConvolutionBwdFilterAlgo_t>(a.algo);
  size_t bytes = 0;
  check_dnn(cudnnGetConvolutionBackwardFilterWorkspaceSize(pr.handle, pr.x.d, pr.y.d, pr.conv.d, pr.w.d, algo,
                                                           &bytes),
            ctx, "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  const Tensor ws = pr.workspace(bytes);
  const Tensor image = pr.pad.copied() ? pr.padded_image(ctx.input(0)) : ctx.input(0);
  const Tensor dw = pr.temp(pr.dtype, Shape{params.f, params.kh, params.kw, params.group_in()});
  check_dnn(cudnnConvolutionBackwardFilter(pr.handle, pr.one(), pr.x.d, raw_data(image), pr.y.d,
                                           raw_data(ctx.input(1)), pr.conv.d, algo, raw_data(ws), bytes, pr.zero(),
                                           pr.w.d, raw_data(dw)),
            ctx, "cudnnConvolutionBackwardFilter");
  pr.filter_from_krsc(dw, ctx.output(0));
}

}  // namespace

void register_conv_kernels() {
  for (DType t : {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16}) {
    register_kernel("Conv2D", DeviceType::CUDA, t, conv2d<>);
    register_kernel("FusedConv2D", DeviceType::CUDA, t, fused_conv2d);
    register_kernel("Conv2DBackpropInput", DeviceType::CUDA, t, backprop_input<>);
    register_kernel("Conv2DBackpropFilter", DeviceType::CUDA, t, backprop_filter<>);
    register_kernel("DepthwiseConv2dNative", DeviceType::CUDA, t, conv2d<depthwise_kernel_params>);
    register_kernel("DepthwiseConv2dNativeBackpropInput", DeviceType::CUDA, t, backprop_input<depthwise_kernel_params>);
    register_kernel("DepthwiseConv2dNativeBackpropFilter", DeviceType::CUDA, t,
                    backprop_filter<depthwise_kernel_params>);
  }
}

}  // namespace weft::cuda
