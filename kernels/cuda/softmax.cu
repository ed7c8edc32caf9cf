// CUDA kernels of Softmax and LogSoftmax (kernels/cpu/nn.cpp: any "axis", default -1) and of
// SparseSoftmaxCrossEntropyWithLogits (kernels/cpu/loss.cpp: loss and backprop, and the refusal of
// labels outside [0, classes)), float32 and float64 as on the CPU, plus float16 and bfloat16
// computed in float and rounded once.
//
// The input is [outer, n, inner] with the axis in the middle. inner == 1: one warp per row (rows
// up to kWarpRowMax) or one block (or, for a few long rows, one block per chunk of a row, see
// softmax_split_rows), in three sweeps: the max (NaN-sticky), the sum of exp(x - max)
// (double for float32/float64, float for the 16-bit types), then the output, recomputing the
// exp instead of storing it (a stored exp would round a 16-bit output twice). inner > 1: one
// thread per column, whose loads are contiguous across a warp. Each element is read before it is
// written by the same thread, and the sweeps are separated by the group's combine, so the output
// may alias the input, as on the CPU.
#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise_launch.cuh"
#include "kernels/cuda/reduce_device.cuh"
#include "kernels/cuda/reduce_geometry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T>
using ExpSum = std::conditional_t<kIs16BitFloat<T>, float, double>;

template <class C>
struct MaxCombine {  // NaN-sticky
  __device__ C operator()(C a, C b) const { return dev_takes_max(b, a) ? b : a; }
};

template <class T, bool kLog, bool kWarp>
__global__ void softmax_rows_kernel(const T* x, T* y, int64_t rows, int64_t n) {
  using C = Compute<T>;
  using S = ExpSum<T>;
  __shared__ C max_scratch[32];
  __shared__ S sum_scratch[32];
  const RowGroup<kWarp> g;
  for (int64_t row = g.first; row < rows; row += g.stride) {  // uniform per group
    const T* px = x + row * n;
    T* py = y + row * n;
    C m = -INFINITY;
    for (int64_t j = g.lane; j < n; j += g.lanes) m = MaxCombine<C>{}(m, to_compute(px[j]));
    m = group_combine<kWarp>(m, MaxCombine<C>{}, max_scratch);
    S s = 0;
    for (int64_t j = g.lane; j < n; j += g.lanes) s += static_cast<S>(dev_exp(to_compute(px[j]) - m));
    s = group_combine<kWarp>(s, AddCombine{}, sum_scratch);
    if constexpr (kLog) {
      // (x - m) - log(s), never x - (m + log(s)): folding log(s) into a large m rounds it away.
      const C log_s = static_cast<C>(dev_log(s));
      for (int64_t j = g.lane; j < n; j += g.lanes) py[j] = from_compute<T>((to_compute(px[j]) - m) - log_s);
    } else {
      const C inv = static_cast<C>(S(1) / s);
      for (int64_t j = g.lane; j < n; j += g.lanes) py[j] = from_compute<T>(dev_exp(to_compute(px[j]) - m) * inv);
    }
  }
}

// Column t = (o, i) of [outer, n, inner]: elements o * n * inner + j * inner + i.
template <class T, bool kLog>
__global__ void softmax_columns_kernel(const T* x, T* y, int64_t outer, int64_t n, int64_t inner) {
  using C = Compute<T>;
  using S = ExpSum<T>;
  const int64_t columns = outer * inner, stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t t = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; t < columns; t += stride) {
    const int64_t base = (t / inner) * n * inner + t % inner;
    C m = -INFINITY;
    for (int64_t j = 0; j < n; ++j) m = MaxCombine<C>{}(m, to_compute(x[base + j * inner]));
    S s = 0;
    for (int64_t j = 0; j < n; ++j) s += static_cast<S>(dev_exp(to_compute(x[base + j * inner]) - m));
    if constexpr (kLog) {
      const C log_s = static_cast<C>(dev_log(s));
      for (int64_t j = 0; j < n; ++j) y[base + j * inner] = from_compute<T>((to_compute(x[base + j * inner]) - m) - log_s);
    } else {
      const C inv = static_cast<C>(S(1) / s);
      for (int64_t j = 0; j < n; ++j) y[base + j * inner] = from_compute<T>(dev_exp(to_compute(x[base + j * inner]) - m) * inv);
    }
  }
}

// Long rows, too few to fill the GPU with one block each, are cut into chunks (reduce_geometry's
// row_launch) and normalised in three passes of one block per chunk: the chunk maxima; the
// chunk sums of exp(x - max of the row); the outputs. Each block recombines the row's few partials
// itself, in a fixed order, so the numerics are the one-block kernel's: the same max, the same
// exps, a sum in another (fixed) order.
template <class C>
__device__ __forceinline__ C row_max_from(const C* __restrict__ part_max, int64_t row, int64_t chunks, C* scratch) {
  C m = -INFINITY;
  for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) m = MaxCombine<C>{}(m, part_max[row * chunks + c]);
  return block_combine(m, MaxCombine<C>{}, scratch);
}

struct ChunkOf {
  int64_t row, j0, len;
  __device__ ChunkOf(int64_t segment, int64_t n, int64_t chunks, int64_t chunk) {
    row = segment / chunks;
    j0 = (segment % chunks) * chunk;
    len = chunk < n - j0 ? chunk : n - j0;
  }
};

template <class T>
__global__ void softmax_chunk_max_kernel(const T* x, Compute<T>* __restrict__ part_max, int64_t segments, int64_t n,
                                         int64_t chunks, int64_t chunk) {
  using C = Compute<T>;
  __shared__ C scratch[32];
  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const ChunkOf k(seg, n, chunks, chunk);
    const T* px = x + k.row * n + k.j0;
    C m = -INFINITY;
    for (int64_t j = threadIdx.x; j < k.len; j += blockDim.x) m = MaxCombine<C>{}(m, to_compute(px[j]));
    m = block_combine(m, MaxCombine<C>{}, scratch);
    if (threadIdx.x == 0) part_max[seg] = m;
  }
}

template <class T>
__global__ void softmax_chunk_sum_kernel(const T* x, const Compute<T>* __restrict__ part_max,
                                         ExpSum<T>* __restrict__ part_sum, int64_t segments, int64_t n, int64_t chunks,
                                         int64_t chunk) {
  using C = Compute<T>;
  using S = ExpSum<T>;
  __shared__ C max_scratch[32];
  __shared__ S sum_scratch[32];
  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const ChunkOf k(seg, n, chunks, chunk);
    const C m = row_max_from(part_max, k.row, chunks, max_scratch);
    const T* px = x + k.row * n + k.j0;
    S s = 0;
    for (int64_t j = threadIdx.x; j < k.len; j += blockDim.x) s += static_cast<S>(dev_exp(to_compute(px[j]) - m));
    s = block_combine(s, AddCombine{}, sum_scratch);
    if (threadIdx.x == 0) part_sum[seg] = s;
  }
}

template <class T, bool kLog>
__global__ void softmax_chunk_write_kernel(const T* x, T* y, const Compute<T>* __restrict__ part_max,
                                           const ExpSum<T>* __restrict__ part_sum, int64_t segments, int64_t n,
                                           int64_t chunks, int64_t chunk) {
  using C = Compute<T>;
  using S = ExpSum<T>;
  __shared__ C max_scratch[32];
  __shared__ S sum_scratch[32];
  for (int64_t seg = blockIdx.x; seg < segments; seg += gridDim.x) {
    const ChunkOf k(seg, n, chunks, chunk);
    const C m = row_max_from(part_max, k.row, chunks, max_scratch);
    S s = 0;
    for (int64_t c = threadIdx.x; c < chunks; c += blockDim.x) s += part_sum[k.row * chunks + c];
    s = block_combine(s, AddCombine{}, sum_scratch);
    const T* px = x + k.row * n + k.j0;
    T* py = y + k.row * n + k.j0;
    if constexpr (kLog) {
      const C log_s = static_cast<C>(dev_log(s));
      for (int64_t j = threadIdx.x; j < k.len; j += blockDim.x) py[j] = from_compute<T>((to_compute(px[j]) - m) - log_s);
    } else {
      const C inv = static_cast<C>(S(1) / s);
      for (int64_t j = threadIdx.x; j < k.len; j += blockDim.x)
        py[j] = from_compute<T>(dev_exp(to_compute(px[j]) - m) * inv);
    }
  }
}

template <class T, bool kLog>
void softmax_split_rows(const KernelContext& ctx, const T* x, T* y, int64_t rows, int64_t n, const RowLaunch& l) {
  using C = Compute<T>;
  using S = ExpSum<T>;
  CudaContext& cu = cuda_context(ctx);
  const int64_t segments = rows * l.chunks;
  // [sums][maxima]: S is at least as wide as C, so both arrays stay aligned.
  Tensor part = Tensor::empty(uint8, Shape{segments * static_cast<int64_t>(sizeof(S) + sizeof(C))}, &ctx.device);
  S* part_sum = static_cast<S*>(raw_data(part));
  C* part_max = reinterpret_cast<C*>(part_sum + segments);
  const unsigned blocks = static_cast<unsigned>(l.blocks);
  softmax_chunk_max_kernel<T><<<blocks, kReduceThreads, 0, cu.stream>>>(x, part_max, segments, n, l.chunks, l.chunk);
  check_launch(ctx);
  softmax_chunk_sum_kernel<T>
      <<<blocks, kReduceThreads, 0, cu.stream>>>(x, part_max, part_sum, segments, n, l.chunks, l.chunk);
  check_launch(ctx);
  softmax_chunk_write_kernel<T, kLog>
      <<<blocks, kReduceThreads, 0, cu.stream>>>(x, y, part_max, part_sum, segments, n, l.chunks, l.chunk);
  check_launch(ctx);
}


template <class T, bool kLog>
void softmax_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Shape& shape = in.shape();
  const int64_t rank = shape.rank();
  const int64_t attr_axis = ctx.attrs.get_or<int64_t>("axis", -1);
  const int64_t axis = attr_axis < 0 ? attr_axis + rank : attr_axis;
  if (axis < 0 || axis >= rank)
    ctx.fail("axis " + std::to_string(attr_axis) + " is out of range for a tensor of rank " + std::to_string(rank));
  if (in.size() == 0) return;
  if (ctx.output(0).size() != in.size())
    ctx.fail("the output has " + std::to_string(ctx.output(0).size()) + " elements, the input " +
             std::to_string(in.size()));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= shape[i];
  const int64_t n = shape[axis];
  const T* x = static_cast<const T*>(raw_data(in));
  T* y = static_cast<T*>(raw_data(ctx.output(0)));
  CudaContext& cu = cuda_context(ctx);
  if (inner == 1 && n > kWarpRowMax) {
    const RowLaunch l = row_launch(outer, n, target_blocks(cu.sm_count));
    if (l.chunks > 1) return softmax_split_rows<T, kLog>(ctx, x, y, outer, n, l);
  }
  if (inner > 1) {
    const LaunchGeometry lg = launch_geometry(outer * inner);
    softmax_columns_kernel<T, kLog><<<lg.blocks, lg.threads, 0, cu.stream>>>(x, y, outer, n, inner);
  } else if (n <= kWarpRowMax) {
    softmax_rows_kernel<T, kLog, true>
        <<<static_cast<unsigned>(warp_item_blocks(outer)), kReduceThreads, 0, cu.stream>>>(x, y, outer, n);
  } else {
    softmax_rows_kernel<T, kLog, false>
        <<<static_cast<unsigned>(std::min(outer, kMaxReduceBlocks)), kReduceThreads, 0, cu.stream>>>(x, y, outer, n);
  }
  check_launch(ctx);
}

// The CPU's row max for the loss: row[0], then every later element larger than the running max,
// so a NaN first element gives NaN and later NaNs are skipped. Here: the max of the non-NaN
// elements (NaN never wins a combine), replaced by NaN when row[0] is NaN.
template <class C>
struct NumberMaxCombine {
  __device__ C operator()(C a, C b) const { return (b > a || a != a) ? b : a; }
};

// Row r of logits [rows, classes]: loss[r] = log(sum) - (x[label] - max), back[r] = softmax - one_hot.
// A label outside [0, classes) reports kErrorLabelOutOfRange and leaves the row's loss unwritten.
template <class T, class L, bool kWarp>
__global__ void xent_kernel(const T* __restrict__ x, const L* __restrict__ labels, T* __restrict__ loss,
                            T* __restrict__ back, int64_t rows, int64_t classes, int32_t* error) {
  using C = Compute<T>;
  using S = ExpSum<T>;
  __shared__ C max_scratch[32];
  __shared__ S sum_scratch[32];
  const RowGroup<kWarp> g;
  for (int64_t row = g.first; row < rows; row += g.stride) {
    const T* px = x + row * classes;
    T* pb = back + row * classes;
    const int64_t label = static_cast<int64_t>(labels[row]);
    const bool ok = label >= 0 && label < classes;
    if (!ok && g.lane == 0) report_error(error, kErrorLabelOutOfRange);
    C m = -INFINITY;
    for (int64_t j = g.lane; j < classes; j += g.lanes) m = NumberMaxCombine<C>{}(m, to_compute(px[j]));
    m = group_combine<kWarp>(m, NumberMaxCombine<C>{}, max_scratch);
    const C first = to_compute(px[0]);
    if (first != first) m = first;
    S s = 0;
    for (int64_t j = g.lane; j < classes; j += g.lanes) s += static_cast<S>(dev_exp(to_compute(px[j]) - m));
    s = group_combine<kWarp>(s, AddCombine{}, sum_scratch);
    const C inv = static_cast<C>(S(1) / s);
    for (int64_t j = g.lane; j < classes; j += g.lanes) {
      const C p = dev_exp(to_compute(px[j]) - m) * inv;
      pb[j] = from_compute<T>(j == label ? p - C(1) : p);
    }
    if (ok && g.lane == 0) loss[row] = from_compute<T>(static_cast<C>(dev_log(s)) - (to_compute(px[label]) - m));
  }
}

// The CPU's message for the first label out of range (read back only once the GPU found one).
template <class L>
std::string first_bad_label(const KernelContext& ctx, int64_t classes) {
  const Tensor host = ctx.input(1).to(cpu_device());
  const L* labels = static_cast<const L*>(raw_data(host));
  for (int64_t i = 0; i < host.size(); ++i) {
    const int64_t label = static_cast<int64_t>(labels[i]);
    if (label < 0 || label >= classes)
      return "label " + std::to_string(label) + " of example " + std::to_string(i) + " is outside [0, " +
             std::to_string(classes) + ")";
  }
  return "a label is outside [0, " + std::to_string(classes) + ")";  // not reached: the GPU saw one
}

template <class T, class L>
void xent_rows(KernelContext& ctx) {
  const Tensor& logits = ctx.input(0);
  if (logits.shape().rank() != 2 || ctx.input(1).shape().rank() != 1 ||
      ctx.input(1).shape()[0] != logits.shape()[0])
    ctx.fail("the CUDA kernel needs logits (batch, classes) and labels (batch,), got " + logits.shape().to_string() +
             " and " + ctx.input(1).shape().to_string());
  const int64_t rows = logits.shape()[0], classes = logits.shape()[1];
  if (rows == 0) return;
  if (classes == 0)  // every label is out of range; the CPU reports the first
    ctx.fail(first_bad_label<L>(ctx, classes));
  CudaContext& cu = cuda_context(ctx);
  const T* x = static_cast<const T*>(raw_data(logits));
  const L* labels = static_cast<const L*>(raw_data(ctx.input(1)));
  T* loss = static_cast<T*>(raw_data(ctx.output(0)));
  T* back = static_cast<T*>(raw_data(ctx.output(1)));
  launch_checked(
      ctx,
      [&](int32_t* word) {
        if (classes <= kWarpRowMax)
          xent_kernel<T, L, true><<<static_cast<unsigned>(warp_item_blocks(rows)), kReduceThreads, 0, cu.stream>>>(
              x, labels, loss, back, rows, classes, word);
        else
          xent_kernel<T, L, false><<<static_cast<unsigned>(std::min(rows, kMaxReduceBlocks)), kReduceThreads, 0,
                                     cu.stream>>>(x, labels, loss, back, rows, classes, word);
        check_launch(ctx);
      },
      [&](int32_t code) {
        if (code == kErrorLabelOutOfRange) return first_bad_label<L>(ctx, classes);
        return "the CUDA kernel reported error code " + std::to_string(code);
      });
}

template <class T>
void xent_kernel_for(KernelContext& ctx) {
  switch (ctx.input(1).dtype()) {
    case DType::Int32: return xent_rows<T, int32_t>(ctx);
    case DType::Int64: return xent_rows<T, int64_t>(ctx);
    case DType::UInt8: return xent_rows<T, uint8_t>(ctx);
    default:
      ctx.fail("labels must be int32, int64 or uint8, got " + std::string(dtype_name(ctx.input(1).dtype())));
  }
}

template <class T>
void register_dtype(DType dt) {
  register_kernel("Softmax", DeviceType::CUDA, dt, softmax_kernel<T, false>);
  register_kernel("LogSoftmax", DeviceType::CUDA, dt, softmax_kernel<T, true>);
  register_kernel("SparseSoftmaxCrossEntropyWithLogits", DeviceType::CUDA, dt, xent_kernel_for<T>);
}

}  // namespace

void register_softmax_kernels() {
  register_dtype<float>(float32);
  register_dtype<double>(float64);
  register_dtype<Half>(float16);
  register_dtype<BFloat16>(bfloat16);
}

}  // namespace weft::cuda
