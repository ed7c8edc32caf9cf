// CPU kernels of the reduce ops.
//
// Every reduction runs as [outer, n, inner] -> [outer, inner] over the input in place: size-1 dims
// are dropped and neighbouring dims with the same role merged, so reducing the last axes is
// inner == 1 (contiguous runs, vectorised across lanes) and reducing leading axes streams whole
// rows into a row of accumulators. Axes that stay apart after merging ({0, 2} of rank 3) are
// reduced one group per pass, largest first, through a smaller temporary each time; no transpose.
//
// The work is cut into tasks by the shapes alone, never by the thread count, and long reductions
// combine their per-block partials in a fixed order: the same input gives the same bits on any
// machine.
#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "kernels/cpu/broadcast_plan.h"
#include "kernels/cpu/reduce_loops.h"
#include "kernels/cpu/via_float32.h"
#include "kernels/cuda/reduce_geometry.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

// Columns reduced together by one task when inner > 1: the accumulator row stays in L1.
constexpr int64_t kTile = 1024;
// Rows narrower than this many elements are added several at a time (reduce_contiguous).
constexpr int64_t kNarrowRow = 256;
// Elements one task reduces before a long reduction is split into blocks with separate partials.
constexpr int64_t kBlockElems = 1 << 15;

constexpr int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// float32 sums accumulate in double wherever partials meet (row streaming, block partials); runs
// of one row are summed pairwise in float first, which is accurate and twice as wide in SIMD.
template <class T>
using SumAcc = std::conditional_t<std::is_floating_point_v<T>, double, WrapInt<T>>;

template <class T>
struct SumReducer {
  using Acc = SumAcc<T>;
  using Out = T;
  static constexpr bool kHasIdentity = true;
  // Rows may be added in any fixed grouping (see reduce_contiguous's narrow rows).
  static constexpr bool kRegroupRows = true;
  static T empty_value() { return T(0); }
  static Acc run(const T* x, int64_t n, int64_t) { return static_cast<Acc>(sum_run(x, n)); }
  static void first_row(Acc* __restrict a, const T* __restrict x, int64_t len, int64_t) {
    for (int64_t i = 0; i < len; ++i) a[i] = static_cast<Acc>(x[i]);
  }
  static void add_row(Acc* __restrict a, const T* __restrict x, int64_t len, int64_t) {
    for (int64_t i = 0; i < len; ++i) a[i] += static_cast<Acc>(x[i]);
  }
  static Acc combine(Acc a, Acc b) { return a + b; }
  static T finalize(Acc a, int64_t) { return static_cast<T>(a); }
};

// Integer means truncate toward zero, as TensorFlow's do; the mean of nothing is NaN for floats
// and 0 for integers (which have no NaN).
template <class T>
struct MeanReducer : SumReducer<T> {
  using Acc = SumAcc<T>;
  static T empty_value() {
    if constexpr (std::is_floating_point_v<T>) return std::numeric_limits<T>::quiet_NaN();
    else return T(0);
  }
  static T finalize(Acc a, int64_t count) {
    if constexpr (std::is_floating_point_v<T>) return static_cast<T>(a / static_cast<double>(count));
    else return static_cast<T>(static_cast<T>(a) / count);
  }
};

template <class T, bool kMax>
struct ExtremeReducer {
  using Acc = T;
  using Out = T;
  static constexpr bool kHasIdentity = false;
  // The first of equal extremes (-0 before +0) must stay the first: rows keep their order.
  static constexpr bool kRegroupRows = false;
  static T empty_value() { return T(0); }
  static bool takes(T candidate, T current) {
    return kMax ? takes_max(candidate, current) : takes_min(candidate, current);
  }
  static Acc run(const T* x, int64_t n, int64_t) { return extreme_run<kMax>(x, n); }
  static void first_row(Acc* __restrict a, const T* __restrict x, int64_t len, int64_t) {
    std::copy(x, x + len, a);
  }
  static void add_row(Acc* __restrict a, const T* __restrict x, int64_t len, int64_t) {
    for (int64_t i = 0; i < len; ++i) a[i] = takes(x[i], a[i]) ? x[i] : a[i];
  }
  static Acc combine(Acc a, Acc b) { return takes(b, a) ? b : a; }
  static T finalize(Acc a, int64_t) { return a; }
};
template <class T>
using MaxReducer = ExtremeReducer<T, true>;
template <class T>
using MinReducer = ExtremeReducer<T, false>;

// The first index of the largest value; a NaN counts as larger than everything, so the first NaN
// wins (NumPy's rule, and consistent with reduce_max returning NaN).
template <class T>
struct ArgMaxReducer {
  struct Acc {
    T value;
    int64_t index;
  };
  using Out = int64_t;
  static constexpr bool kRegroupRows = false;  // first_row/add_row take the row's index
  // `current` is the earlier element: it keeps ties and is never displaced once it is NaN.
  static bool takes(T candidate, T current) { return takes_max(candidate, current) & (current == current); }
  static Acc run(const T* x, int64_t n, int64_t first) {
    const int64_t at = argmax_run(x, n);
    return {x[at], first + at};
  }
  static void first_row(Acc* a, const T* x, int64_t len, int64_t row) {
    for (int64_t i = 0; i < len; ++i) a[i] = {x[i], row};
  }
  static void add_row(Acc* a, const T* x, int64_t len, int64_t row) {
    for (int64_t i = 0; i < len; ++i)
      if (takes(x[i], a[i].value)) a[i] = {x[i], row};
  }
  static Acc combine(Acc a, Acc b) { return takes(b.value, a.value) ? b : a; }
  static int64_t finalize(Acc a, int64_t) { return a.index; }
};

// y[o, i] = R(x[o, 0..n, i]) for the dense [outer, n, inner] array x (n >= 1); `count` is handed
// to R::finalize (the divisor of a mean).
template <class R, class T>
void reduce_contiguous(ThreadPool& pool, const T* x, int64_t outer, int64_t n, int64_t inner, typename R::Out* y,
                       int64_t count) {
  using Acc = typename R::Acc;
  const int64_t tile = std::min(inner, kTile);
  const int64_t tiles = ceil_div(inner, tile);
  const int64_t rows_per_block = std::max<int64_t>(1, kBlockElems / tile);
  const int64_t blocks = ceil_div(n, rows_per_block);
  const int64_t task_elems = std::min(n, rows_per_block) * tile;
  const int64_t grain = std::max<int64_t>(1, kCheapGrain / task_elems);

  // Narrow rows (a convolution's bias gradient sums [N*H*W, C] with C = 6): a loop of `inner`
  // elements per row is all overhead, so `group` consecutive rows are added as one wide row of
  // group * inner lanes and the lanes are folded at the end. The grouping follows from the shape
  // alone, so the bits still do not depend on the machine or the thread count.
  const int64_t group = R::kRegroupRows && inner > 1 && inner < kNarrowRow ? kNarrowRow / inner : 1;

  // Reduces rows [r0, r0 + rows) of columns [i0, i0 + len) of outer row o into acc[0, len).
  auto reduce_block = [=](int64_t o, int64_t r0, int64_t rows, int64_t i0, int64_t len, Acc* acc) {
    const T* p = x + (o * n + r0) * inner + i0;
    if (inner == 1) {
      acc[0] = R::run(p, rows, r0);
      return;
    }
    if (group > 1 && rows >= 2 * group) {  // len == inner: a narrow row is one tile
      Acc wide[kNarrowRow];
      const int64_t width = group * inner, groups = rows / group;
      R::first_row(wide, p, width, r0);
      for (int64_t r = 1; r < groups; ++r) R::add_row(wide, p + r * width, width, r0);
      for (int64_t i = 0; i < inner; ++i) acc[i] = wide[i];
      for (int64_t k = 1; k < group; ++k)
        for (int64_t i = 0; i < inner; ++i) acc[i] = R::combine(acc[i], wide[k * inner + i]);
      for (int64_t r = groups * group; r < rows; ++r) R::add_row(acc, p + r * inner, inner, r0 + r);
      return;
    }
    R::first_row(acc, p, len, r0);
    for (int64_t r = 1; r < rows; ++r) R::add_row(acc, p + r * inner, len, r0 + r);
  };

  if (blocks == 1) {
    pool.parallel_for(outer * tiles, grain, [&](int64_t begin, int64_t end) {
      Acc acc[kTile];
      for (int64_t t = begin; t < end; ++t) {
        const int64_t o = t / tiles, i0 = (t % tiles) * tile, len = std::min(tile, inner - i0);
        reduce_block(o, 0, n, i0, len, acc);
        typename R::Out* dst = y + o * inner + i0;
        for (int64_t i = 0; i < len; ++i) dst[i] = R::finalize(acc[i], count);
      }
    });
    return;
  }

  // A long reduction: every block of rows leaves a partial, and the partials of one output are
  // combined in block order afterwards.
  auto partial = std::make_unique_for_overwrite<Acc[]>(static_cast<size_t>(outer * blocks * inner));
  Acc* part = partial.get();
  pool.parallel_for(outer * blocks * tiles, grain, [&](int64_t begin, int64_t end) {
    for (int64_t t = begin; t < end; ++t) {
      const int64_t o = t / (blocks * tiles), rest = t % (blocks * tiles);
      const int64_t blk = rest / tiles, i0 = (rest % tiles) * tile, len = std::min(tile, inner - i0);
      const int64_t r0 = blk * rows_per_block, rows = std::min(rows_per_block, n - r0);
      reduce_block(o, r0, rows, i0, len, part + (o * blocks + blk) * inner + i0);
    }
  });
  pool.parallel_for(outer * inner, std::max<int64_t>(1, kCheapGrain / blocks), [&](int64_t begin, int64_t end) {
    for (int64_t k = begin; k < end; ++k) {
      const Acc* p = part + (k / inner) * blocks * inner + k % inner;
      Acc a = p[0];
      for (int64_t b = 1; b < blocks; ++b) a = R::combine(a, p[b * inner]);
      y[k] = R::finalize(a, count);
    }
  });
}

struct DimGroup {
  int64_t size;
  bool reduced;
};

// Size-1 dims play no part in the layout; neighbours with the same role are one dim in memory.
std::vector<DimGroup> group_dims(const Shape& shape, const std::vector<char>& reduced) {
  std::vector<DimGroup> groups;
  for (int64_t i = 0; i < shape.rank(); ++i) {
    if (shape[i] == 1) continue;
    const bool r = reduced[i] != 0;
    if (!groups.empty() && groups.back().reduced == r) groups.back().size *= shape[i];
    else groups.push_back({shape[i], r});
  }
  return groups;
}

template <class T, template <class> class Reducer>
void reduce_kernel(KernelContext& ctx) {
  using R = Reducer<T>;
  const Tensor& in = ctx.input(0);
  const Shape& shape = in.shape();
  // Which dims the kernel reduces. The infer function has validated the axes already; this
  // guards a graph that was built or edited without it (shared with the CUDA kernel).
  const std::vector<char> reduced = cuda::reduced_mask(ctx, shape);
  int64_t count = 1;
  for (int64_t i = 0; i < shape.rank(); ++i)
    if (reduced[i]) count *= shape[i];
  if (count == 0 && !R::kHasIdentity)
    ctx.fail("cannot reduce over an empty axis (input shape " + shape.to_string() +
             "): the reduction has no identity");
  T* y = ctx.output(0).data<T>();
  const int64_t out_n = ctx.output(0).size();
  if (out_n == 0) return;
  if (count == 0) {
    std::fill(y, y + out_n, R::empty_value());
    return;
  }

  std::vector<DimGroup> groups = group_dims(shape, reduced);
  const T* src = in.data<T>();
  auto is_reduced = [](const DimGroup& g) { return g.reduced; };
  if (std::none_of(groups.begin(), groups.end(), is_reduced)) {  // only size-1 dims were reduced
    ctx.pool().parallel_for(out_n, kCheapGrain, [&](int64_t begin, int64_t end) {
      for (int64_t i = begin; i < end; ++i) y[i] = R::finalize(static_cast<typename R::Acc>(src[i]), 1);
    });
    return;
  }
  std::unique_ptr<T[]> temps[2];
  for (int pass = 0;; ++pass) {
    size_t g = groups.size();
    for (size_t i = 0; i < groups.size(); ++i)
      if (groups[i].reduced && (g == groups.size() || groups[i].size > groups[g].size)) g = i;
    int64_t outer = 1, inner = 1;
    for (size_t i = 0; i < g; ++i) outer *= groups[i].size;
    for (size_t i = g + 1; i < groups.size(); ++i) inner *= groups[i].size;
    const bool last = std::count_if(groups.begin(), groups.end(), is_reduced) == 1;
    if (last) {
      reduce_contiguous<R>(ctx.pool(), src, outer, groups[g].size, inner, y, count);
      return;
    }
    // An earlier pass's count of 1 leaves a mean's partial sums undivided until the last pass.
    std::unique_ptr<T[]>& dst = temps[pass % 2];
    dst = std::make_unique_for_overwrite<T[]>(static_cast<size_t>(outer * inner));
    reduce_contiguous<R>(ctx.pool(), src, outer, groups[g].size, inner, dst.get(), 1);
    src = dst.get();
    groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(g));
    if (g > 0 && g < groups.size()) {  // the kept groups on either side are now neighbours
      groups[g - 1].size *= groups[g].size;
      groups.erase(groups.begin() + static_cast<std::ptrdiff_t>(g));
    }
  }
}

template <class T>
void argmax_kernel(KernelContext& ctx) {
  const Tensor& in = ctx.input(0);
  const Shape& shape = in.shape();
  const int64_t rank = shape.rank();
  int64_t axis = ctx.attrs.get<int64_t>("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank)
    ctx.fail("axis " + std::to_string(ctx.attrs.get<int64_t>("axis")) + " is out of range for a tensor of rank " +
             std::to_string(rank));
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= shape[i];
  for (int64_t i = axis + 1; i < rank; ++i) inner *= shape[i];
  const int64_t n = shape[axis];
  if (n == 0) ctx.fail("cannot take the argmax over an empty axis (input shape " + shape.to_string() + ")");
  if (outer * inner == 0) return;
  reduce_contiguous<ArgMaxReducer<T>>(ctx.pool(), in.data<T>(), outer, n, inner, ctx.output(0).data<int64_t>(), 1);
}

template <template <class> class Reducer>
void register_reduction(const char* op) {
  register_kernel(op, DeviceType::CPU, float32, reduce_kernel<float, Reducer>);
  register_kernel(op, DeviceType::CPU, float64, reduce_kernel<double, Reducer>);
  register_kernel(op, DeviceType::CPU, int32, reduce_kernel<int32_t, Reducer>);
  register_kernel(op, DeviceType::CPU, int64, reduce_kernel<int64_t, Reducer>);
}

}  // namespace

void register_reduce_kernels() {
  register_reduction<SumReducer>("Sum");
  register_reduction<MeanReducer>("Mean");
  register_reduction<MaxReducer>("Max");
  register_reduction<MinReducer>("Min");
  register_kernel("ArgMax", DeviceType::CPU, float32, argmax_kernel<float>);
  register_kernel("ArgMax", DeviceType::CPU, float64, argmax_kernel<double>);
  register_kernel("ArgMax", DeviceType::CPU, int32, argmax_kernel<int32_t>);
  register_kernel("ArgMax", DeviceType::CPU, int64, argmax_kernel<int64_t>);
  // float16 and bfloat16 accumulate in float32, as on the GPU, and round the result once.
  register_via_float32({"Sum", "Mean", "Max", "Min", "ArgMax"});
}

}  // namespace weft::cpu
