// CUDA kernels of the reduce ops, with the CPU kernels' semantics (kernels/cpu/reduce.cpp): Sum,
// Mean, Max, Min over the "axes" attribute (all dims when absent or empty), ArgMax over "axis"
// (int64 output, the first index of the largest value; the first NaN wins). Integer sums wrap
// around, integer means truncate toward zero, the mean of nothing is NaN (0 for integers), a max
// or min of nothing is refused, and NaN is sticky in Max and Min. float16 and bfloat16 are
// computed in float and rounded once.
//
// The input is seen as [outer, n, inner] (reduce_geometry.h): inner == 1 reduces contiguous rows,
// one thread (rows of a few elements), one warp (short rows) or one block each with warp shuffles; inner > 1 reduces columns, a block
// covering a tile of columns and a stripe of rows. Too little work for the GPU (a full reduction)
// is split along n into chunks whose partials a second pass combines. Reduced dims that do not
// merge into one group take a strided path, one warp per output element. Every combine happens in
// a fixed order: the same input gives the same bits on every run. Float sums accumulate in double
// (float32, float64) or float (16-bit types), so they differ from the CPU's order only in the last
// bits.
#include <cuda_runtime.h>

#include <cmath>
#include <limits>
#include <string>
#include <type_traits>
#include <variant>
#include <vector>

#include "kernels/cuda/cuda_kernels.h"
#include "kernels/cuda/device_half.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/elementwise_geometry.h"
#include "kernels/cuda/reduce_device.cuh"
#include "kernels/cuda/reduce_geometry.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cuda {

namespace {

template <class T>
using SumAcc = std::conditional_t<std::is_integral_v<T>, Wide<T>, std::conditional_t<kIs16BitFloat<T>, float, double>>;

// Reducers: identity(), load(x, index of x along the reduction), combine(a, b) (associative and,
// but for the rounding of float sums, commutative) and finalize(acc) -> Out.
template <class T>
struct SumReduce {
  using Acc = SumAcc<T>;
  using Out = T;
  static constexpr bool kHasIdentity = true;
  int64_t mean_count = 0;  // 0: Sum; else Mean, dividing by this
  __device__ Acc identity() const { return Acc(0); }
  __device__ Acc load(T x, int64_t) const { return static_cast<Acc>(to_compute(x)); }
  __device__ Acc combine(Acc a, Acc b) const { return a + b; }
  __device__ T finalize(Acc a) const {
    if constexpr (std::is_integral_v<T>) {
      return mean_count ? static_cast<T>(static_cast<T>(a) / mean_count) : static_cast<T>(a);
    } else {
      const Acc v = mean_count ? a / static_cast<Acc>(mean_count) : a;
      if constexpr (kIs16BitFloat<T>) return from_compute<T>(v);
      else return static_cast<T>(v);
    }
  }
  // The output of an empty reduction.
  T empty_value() const {
    if constexpr (std::is_integral_v<T>) return T(0);
    else if constexpr (std::is_same_v<T, Half>) return mean_count ? Half{0x7e00} : Half{0};
    else if constexpr (std::is_same_v<T, BFloat16>) return mean_count ? BFloat16{0x7fc0} : BFloat16{0};
    else return mean_count ? std::numeric_limits<T>::quiet_NaN() : T(0);
  }
};

template <class T, bool kMax>
struct ExtremeReduce {
  using Acc = Compute<T>;
  using Out = T;
  static constexpr bool kHasIdentity = false;
  int64_t mean_count = 0;  // unused
  __device__ Acc identity() const {
    if constexpr (std::is_integral_v<T>) {
      // The lowest and highest T, from the unsigned type's bits (numeric_limits is host code).
      const T lowest = static_cast<T>(Wide<T>(1) << (8 * sizeof(T) - 1));
      return kMax ? lowest : static_cast<T>(~static_cast<Wide<T>>(lowest));
    } else {
      return kMax ? -INFINITY : INFINITY;  // max(-inf, x) is x for every x, -inf and NaN included
    }
  }
  __device__ Acc load(T x, int64_t) const { return to_compute(x); }
  __device__ Acc combine(Acc a, Acc b) const {
    return (kMax ? dev_takes_max(b, a) : dev_takes_min(b, a)) ? b : a;
  }
  __device__ T finalize(Acc a) const { return from_compute<T>(a); }
  T empty_value() const { return T{}; }  // never used: an empty max is refused
};

template <class C>
struct ArgAcc {
  C value;
  int64_t index;  // -1: nothing seen yet
};

// Order-independent: the larger value wins, NaN beats every number, and between equals (or two
// NaNs) the smaller index wins, so any combine tree gives the CPU's first-index answer.
template <class T>
struct ArgMaxReduce {
  using Acc = ArgAcc<Compute<T>>;
  using Out = int64_t;
  int64_t mean_count = 0;  // unused
  __device__ Acc identity() const { return {Compute<T>(0), -1}; }
  __device__ Acc load(T x, int64_t i) const { return {to_compute(x), i}; }
  __device__ Acc combine(Acc a, Acc b) const {
    if (a.index < 0) return b;
    if (b.index < 0) return a;
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index < b.index ? a : b;
  }
  __device__ int64_t finalize(Acc a) const { return a.index; }
};

// The value of element x[i] as an accumulator: a partial of an earlier pass (In == Acc) as it is.
template <class R, class In>
__device__ __forceinline__ typename R::Acc load_as_acc(const R& r, In x, int64_t index) {
  if constexpr (std::is_same_v<In, typename R::Acc>) return x;
  else return r.load(x, index);
}

template <class R, bool kFinal>
using PassOut = std::conditional_t<kFinal, typename R::Out, typename R::Acc>;

template <class R, bool kFinal>
__device__ __forceinline__ PassOut<R, kFinal> pass_result(const R& r, typename R::Acc a) {
  if constexpr (kFinal) return r.finalize(a);
  else return a;
}

// Short rows (no chunks), one thread each: a warp's 32 rows are one contiguous run of memory.
template <class R, class In, bool kFinal>
__global__ void reduce_rows_thread_kernel(R r, const In* __restrict__ x, PassOut<R, kFinal>* __restrict__ y,
                                          int64_t rows, int64_t n) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t row = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; row < rows; row += stride) {
    const In* p = x + row * n;
    typename R::Acc acc = r.identity();
    for (int64_t j = 0; j < n; ++j) acc = r.combine(acc, load_as_acc(r, p[j], j));
    y[row] = pass_result<R, kFinal>(r, acc);
  }
}

// Row segments, one warp each: segment s is chunk s % chunks of row s / chunks of the dense
// [rows, n] input; y[s] is its result (a partial unless kFinal, which needs chunks == 1).
template <class R, class In, bool kFinal>
__global__ void reduce_rows_warp_kernel(R r, const In* __restrict__ x, PassOut<R, kFinal>* __restrict__ y,
                                        int64_t segments, int64_t n, int64_t chunks, int64_t chunk) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x >> 5;
  const int64_t first = int64_t(blockIdx.x) * warps_per_block + (threadIdx.x >> 5);
  const int64_t stride = int64_t(gridDim.x) * warps_per_block;
  auto combine = [&](typename R::Acc a, typename R::Acc b) { return r.combine(a, b); };
  for (int64_t s = first; s < segments; s += stride) {  // uniform per warp
    const int64_t row = s / chunks, j0 = (s % chunks) * chunk;
    const int64_t len = chunk < n - j0 ? chunk : n - j0;
    const In* p = x + row * n + j0;
    typename R::Acc acc = r.identity();
    for (int64_t j = lane; j < len; j += 32) acc = r.combine(acc, load_as_acc(r, p[j], j0 + j));
    acc = warp_combine(acc, combine);
    if (lane == 0) y[s] = pass_result<R, kFinal>(r, acc);
  }
}

// Row segments as above, one block each.
template <class R, class In, bool kFinal>
__global__ void reduce_rows_block_kernel(R r, const In* __restrict__ x, PassOut<R, kFinal>* __restrict__ y,
                                         int64_t segments, int64_t n, int64_t chunks, int64_t chunk) {
  __shared__ typename R::Acc scratch[32];
  auto combine = [&](typename R::Acc a, typename R::Acc b) { return r.combine(a, b); };
  for (int64_t s = blockIdx.x; s < segments; s += gridDim.x) {  // uniform per block
    const int64_t row = s / chunks, j0 = (s % chunks) * chunk;
    const int64_t len = chunk < n - j0 ? chunk : n - j0;
    const In* p = x + row * n + j0;
    typename R::Acc acc = r.identity();
    for (int64_t j = threadIdx.x; j < len; j += blockDim.x) acc = r.combine(acc, load_as_acc(r, p[j], j0 + j));
    acc = block_combine(acc, combine, scratch);
    if (threadIdx.x == 0) y[s] = pass_result<R, kFinal>(r, acc);
  }
}

// Columns: tile t covers columns [ct * cols, + cols) of outer row o and rows chunk c of n; thread
// (tx, ty) = (threadIdx.x % cols, threadIdx.x / cols) walks rows ty, ty + rows_per_block, ... of
// its column; the tile's rows_per_block partials per column are then combined in shared memory.
// y[(o * chunks + c) * inner + i] is the result (a partial unless kFinal, which needs chunks == 1).
template <class R, class In, bool kFinal>
__global__ void reduce_columns_kernel(R r, const In* __restrict__ x, PassOut<R, kFinal>* __restrict__ y,
                                      int64_t outer, int64_t n, int64_t inner, int cols, int64_t col_tiles,
                                      int64_t chunks, int64_t chunk) {
  using Acc = typename R::Acc;
  extern __shared__ __align__(16) unsigned char column_smem[];
  Acc* sh = reinterpret_cast<Acc*>(column_smem);  // blockDim.x accumulators
  const int tx = threadIdx.x % cols, ty = threadIdx.x / cols, rows_per_block = blockDim.x / cols;
  const int64_t tiles = outer * col_tiles * chunks;
  for (int64_t t = blockIdx.x; t < tiles; t += gridDim.x) {  // uniform per block
    const int64_t o = t / (col_tiles * chunks), rest = t % (col_tiles * chunks);
    const int64_t ct = rest / chunks, c = rest % chunks;
    const int64_t i = ct * cols + tx;
    const int64_t r0 = c * chunk, r1 = n < r0 + chunk ? n : r0 + chunk;
    Acc acc = r.identity();
    if (i < inner) {
      const In* p = x + o * n * inner + i;
      for (int64_t row = r0 + ty; row < r1; row += rows_per_block) acc = r.combine(acc, load_as_acc(r, p[row * inner], row));
    }
    sh[threadIdx.x] = acc;
    __syncthreads();
    for (int half = rows_per_block / 2; half > 0; half >>= 1) {  // rows_per_block is a power of two
      if (ty < half) sh[threadIdx.x] = r.combine(sh[threadIdx.x], sh[threadIdx.x + half * cols]);
      __syncthreads();
    }
    if (ty == 0 && i < inner) y[(o * chunks + c) * inner + i] = pass_result<R, kFinal>(r, sh[tx]);
    __syncthreads();  // sh is rewritten by the next tile
  }
}

// Reduced groups that stay apart: one warp per output element, the warp's lanes walking the
// reduced elements (row-major over the reduced groups, so neighbouring lanes read neighbouring
// elements wherever the innermost group is reduced).
template <class R, class T>
__global__ void reduce_strided_kernel(R r, const T* __restrict__ x, typename R::Out* __restrict__ y, ReducePlan p) {
  const int lane = threadIdx.x & 31;
  const int64_t warps_per_block = blockDim.x >> 5;
  const int64_t stride = int64_t(gridDim.x) * warps_per_block;
  auto combine = [&](typename R::Acc a, typename R::Acc b) { return r.combine(a, b); };
  for (int64_t o = int64_t(blockIdx.x) * warps_per_block + (threadIdx.x >> 5); o < p.out_n; o += stride) {
    int64_t base = 0;
    for (int64_t rem = o, d = p.kept_rank - 1; d >= 0; --d) {
      base += (rem % p.kept_dims[d]) * p.kept_strides[d];
      rem /= p.kept_dims[d];
    }
    typename R::Acc acc = r.identity();
    for (int64_t k = lane; k < p.count; k += 32) {
      int64_t off = 0;
      for (int64_t rem = k, d = p.red_rank - 1; d >= 0; --d) {
        off += (rem % p.red_dims[d]) * p.red_strides[d];
        rem /= p.red_dims[d];
      }
      acc = r.combine(acc, r.load(x[base + off], k));
    }
    acc = warp_combine(acc, combine);
    if (lane == 0) y[o] = r.finalize(acc);
  }
}

template <class T>
__global__ void fill_kernel(T* __restrict__ y, int64_t n, T value) {
  for (int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = value;
}

// A device buffer for `count` partials, freed when the returned tensor goes (the allocator orders
// the free after the queued kernels on the stream).
template <class Acc>
Tensor partials(const KernelContext& ctx, int64_t count) {
  return Tensor::empty(uint8, Shape{count * static_cast<int64_t>(sizeof(Acc))}, &ctx.device);
}

template <class R, class In, bool kFinal>
void launch_rows(const KernelContext& ctx, const R& r, const In* x, PassOut<R, kFinal>* y, int64_t rows, int64_t n,
                 const RowLaunch& l) {
  CudaContext& cu = cuda_context(ctx);
  const int64_t segments = rows * l.chunks;
  if (l.thread_per_segment)  // chunks == 1
    reduce_rows_thread_kernel<R, In, kFinal><<<static_cast<unsigned>(l.blocks), kReduceThreads, 0, cu.stream>>>(
        r, x, y, rows, n);
  else if (l.warp_per_segment)
    reduce_rows_warp_kernel<R, In, kFinal><<<static_cast<unsigned>(l.blocks), kReduceThreads, 0, cu.stream>>>(
        r, x, y, segments, n, l.chunks, l.chunk);
  else
    reduce_rows_block_kernel<R, In, kFinal><<<static_cast<unsigned>(l.blocks), kReduceThreads, 0, cu.stream>>>(
        r, x, y, segments, n, l.chunks, l.chunk);
  check_launch(ctx);
}

template <class R, class In, bool kFinal>
void launch_columns(const KernelContext& ctx, const R& r, const In* x, PassOut<R, kFinal>* y, int64_t outer, int64_t n,
                    int64_t inner, const ColumnLaunch& l) {
  CudaContext& cu = cuda_context(ctx);
  reduce_columns_kernel<R, In, kFinal>
      <<<static_cast<unsigned>(l.blocks), kReduceThreads, kReduceThreads * sizeof(typename R::Acc), cu.stream>>>(
          r, x, y, outer, n, inner, l.cols, l.col_tiles, l.chunks, l.chunk);
  check_launch(ctx);
}

// y = R over the plan's reduced elements of x (count >= 1, out_n >= 1).
template <class R, class T>
void run_reduction(const KernelContext& ctx, const R& r, const ReducePlan& p, const T* x, typename R::Out* y) {
  using Acc = typename R::Acc;
  CudaContext& cu = cuda_context(ctx);
  if (!p.contiguous) {
    reduce_strided_kernel<R, T><<<static_cast<unsigned>(warp_item_blocks(p.out_n)), kReduceThreads, 0, cu.stream>>>(
        r, x, y, p);
    check_launch(ctx);
    return;
  }
  const int64_t target = target_blocks(cu.sm_count);
  if (p.inner == 1) {
    const RowLaunch l = row_launch(p.outer, p.n, target);
    if (l.chunks == 1) return launch_rows<R, T, true>(ctx, r, x, y, p.outer, p.n, l);
    Tensor part = partials<Acc>(ctx, p.outer * l.chunks);
    Acc* acc = static_cast<Acc*>(raw_data(part));
    launch_rows<R, T, false>(ctx, r, x, acc, p.outer, p.n, l);
    // Chunks are few (at most the target block count): the second pass never splits again.
    const RowLaunch l2 = row_launch(p.outer, l.chunks, 0);
    launch_rows<R, Acc, true>(ctx, r, acc, y, p.outer, l.chunks, l2);
    return;
  }
  const ColumnLaunch l = column_launch(p.outer, p.n, p.inner, target);
  if (l.chunks == 1) return launch_columns<R, T, true>(ctx, r, x, y, p.outer, p.n, p.inner, l);
  Tensor part = partials<Acc>(ctx, p.outer * l.chunks * p.inner);
  Acc* acc = static_cast<Acc*>(raw_data(part));
  launch_columns<R, T, false>(ctx, r, x, acc, p.outer, p.n, p.inner, l);
  const ColumnLaunch l2 = column_launch(p.outer, l.chunks, p.inner, 0);
  launch_columns<R, Acc, true>(ctx, r, acc, y, p.outer, l.chunks, p.inner, l2);
}

template <class R, class T>
void reduce_kernel(KernelContext& ctx, R r) {
  const Tensor& in = ctx.input(0);
  const Shape& shape = in.shape();
  const ReducePlan p = reduce_plan(shape, reduced_mask(ctx, shape), ctx.op.display);
  if (p.count == 0 && !R::kHasIdentity)
    ctx.fail("cannot reduce over an empty axis (input shape " + shape.to_string() + "): the reduction has no identity");
  T* y = static_cast<T*>(raw_data(ctx.output(0)));
  if (p.out_n == 0) return;
  if (ctx.output(0).size() != p.out_n)
    ctx.fail("the output has " + std::to_string(ctx.output(0).size()) + " elements, the reduction of " +
             shape.to_string() + " gives " + std::to_string(p.out_n));
  if (p.count == 0) {
    CudaContext& cu = cuda_context(ctx);
    const LaunchGeometry lg = launch_geometry(p.out_n);
    fill_kernel<T><<<lg.blocks, lg.threads, 0, cu.stream>>>(y, p.out_n, r.empty_value());
    check_launch(ctx);
    return;
  }
  r.mean_count = r.mean_count ? p.count : 0;
  run_reduction(ctx, r, p, static_cast<const T*>(raw_data(in)), y);
}

template <class T>
void sum_kernel(KernelContext& ctx) { reduce_kernel<SumReduce<T>, T>(ctx, SumReduce<T>{0}); }
template <class T>
void mean_kernel(KernelContext& ctx) { reduce_kernel<SumReduce<T>, T>(ctx, SumReduce<T>{1}); }
template <class T>
void max_kernel(KernelContext& ctx) { reduce_kernel<ExtremeReduce<T, true>, T>(ctx, {}); }
template <class T>
void min_kernel(KernelContext& ctx) { reduce_kernel<ExtremeReduce<T, false>, T>(ctx, {}); }

template <class T>
void argmax_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Shape& shape = in.shape();
  const int64_t rank = shape.rank();
  const int64_t attr_axis = ctx.attrs.get<int64_t>("axis");
  const int64_t axis = attr_axis < 0 ? attr_axis + rank : attr_axis;
  if (axis < 0 || axis >= rank)
    ctx.fail("axis " + std::to_string(attr_axis) + " is out of range for a tensor of rank " + std::to_string(rank));
  if (shape[axis] == 0) ctx.fail("cannot take the argmax over an empty axis (input shape " + shape.to_string() + ")");
  std::vector<char> mask(static_cast<size_t>(rank), 0);
  mask[axis] = 1;
  const ReducePlan p = reduce_plan(shape, mask, ctx.op.display);  // one reduced dim: always contiguous
  if (p.out_n == 0) return;
  run_reduction(ctx, ArgMaxReduce<T>{}, p, static_cast<const T*>(raw_data(in)),
                static_cast<int64_t*>(raw_data(ctx.output(0))));
}

template <class T>
void register_dtype(DType dt) {
  register_kernel("Sum", DeviceType::CUDA, dt, sum_kernel<T>);
  register_kernel("Mean", DeviceType::CUDA, dt, mean_kernel<T>);
  register_kernel("Max", DeviceType::CUDA, dt, max_kernel<T>);
  register_kernel("Min", DeviceType::CUDA, dt, min_kernel<T>);
  register_kernel("ArgMax", DeviceType::CUDA, dt, argmax_kernel<T>);
}

}  // namespace

void register_reduce_kernels() {
  register_dtype<float>(float32);
  register_dtype<double>(float64);
  register_dtype<int32_t>(int32);
  register_dtype<int64_t>(int64);
  register_dtype<Half>(float16);
  register_dtype<BFloat16>(bfloat16);
}

}  // namespace weft::cuda
