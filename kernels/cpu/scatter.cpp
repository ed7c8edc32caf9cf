// CPU kernel of UnsortedSegmentSum.
//
// data is viewed as `rows` rows of `inner` contiguous elements (rows = the elements of
// segment_ids); row i is added into output row ids[i]. Whole rows are added at a time, so the
// inner loop is a plain vectorisable `out[j] += in[j]`.
//
// Threads never share an output element, so no atomics are needed and every output element sums
// its rows in increasing i whatever the thread count: results are deterministic. Wide rows are
// split by column block (every task walks all rows over its columns), which stays balanced however
// the ids cluster; otherwise by segment range (every task walks all ids and adds the rows that
// land in its range), which zero-fills contiguous memory, what dominates when there are more
// segments than rows (the gradient of a small gather from a large table). Narrow rows run on one
// thread: rescanning the ids would cost as much as the adds it shares out.
#include <algorithm>
#include <cstring>
#include <type_traits>

#include "kernels/cpu/copy_util.h"
#include "kernels/cpu/index_errors.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

// Below this many added elements a single thread finishes before a second one would start.
constexpr int64_t kSerialElements = int64_t{1} << 15;
// Rows at least this wide are split by columns: each task then still adds runs long enough to
// vectorise, and the tasks need not each rescan all ids.
constexpr int64_t kColumnSplitWidth = 1024;
// Rows narrower than this are not split by segment: each task's scan of all ids (a compare and a
// mispredicted branch per id) would cost more than the adds it saves.
constexpr int64_t kSegmentSplitWidth = 32;

// Integer sums wrap (as TensorFlow's do) instead of overflowing, which would be undefined.
template <class T>
inline T wrapping_add(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return static_cast<T>(static_cast<U>(a) + static_cast<U>(b));
  } else {
    return a + b;
  }
}

template <class T>
inline void add_run(T* __restrict out, const T* __restrict in, int64_t n) {
  for (int64_t j = 0; j < n; ++j) out[j] = wrapping_add(out[j], in[j]);
}

template <class T, class I>
void segment_sum_typed(KernelContext& ctx) {
  const Tensor& data = ctx.input(0);
  const Tensor& ids_t = ctx.input(1);
  const Tensor& out_t = ctx.output(0);
  const int64_t segments = ctx.attrs.get<int64_t>("num_segments");
  const int64_t rows = ids_t.size();
  const I* ids = rows ? static_cast<const I*>(raw_data(ids_t)) : nullptr;
  // Checked before anything is written, so a bad id leaves no half-summed output behind.
  if (const int64_t i = first_out_of_range(ids, rows, segments); i >= 0)
    ctx.fail(segment_id_message(i, ids_t.shape(), static_cast<int64_t>(ids[i]), segments));
  if (out_t.size() == 0) return;
  T* out = static_cast<T*>(raw_data(out_t));
  const int64_t inner = out_t.size() / segments;
  const T* in = data.size() ? static_cast<const T*>(raw_data(data)) : nullptr;
  ThreadPool& pool = ctx.pool();

  const bool by_columns = inner >= kColumnSplitWidth && segments <= rows;
  if (rows * inner <= kSerialElements || pool.num_threads() == 1 || (!by_columns && inner < kSegmentSplitWidth)) {
    std::fill(out, out + out_t.size(), T{});
    for (int64_t i = 0; i < rows; ++i) add_run(out + static_cast<int64_t>(ids[i]) * inner, in + i * inner, inner);
    return;
  }

  if (by_columns) {
    // Blocks of whole cache lines, so neighbouring tasks do not write the same line.
    const int64_t line = std::max<int64_t>(1, 64 / static_cast<int64_t>(sizeof(T)));
    const int64_t blocks = (inner + line - 1) / line;
    const int64_t grain = std::max<int64_t>(1, kSerialElements / (std::max(rows, segments) * line));
    pool.parallel_for(blocks, grain, [&](int64_t b, int64_t e) {
      const int64_t c0 = b * line, c1 = std::min(inner, e * line), w = c1 - c0;
      for (int64_t s = 0; s < segments; ++s) std::fill(out + s * inner + c0, out + s * inner + c1, T{});
      for (int64_t i = 0; i < rows; ++i)
        add_run(out + static_cast<int64_t>(ids[i]) * inner + c0, in + i * inner + c0, w);
    });
    return;
  }

  // Each task owns the output rows [s0, s1); rescanning the ids costs `rows` reads per task,
  // small beside the rows * inner adds the split shares out.
  const int64_t per_segment = inner + rows * inner / segments;  // its fill plus its share of the adds
  const int64_t grain = std::max<int64_t>(1, kSerialElements / per_segment);
  pool.parallel_for(segments, grain, [&](int64_t s0, int64_t s1) {
    std::fill(out + s0 * inner, out + s1 * inner, T{});
    for (int64_t i = 0; i < rows; ++i) {
      const int64_t s = static_cast<int64_t>(ids[i]);
      if (s >= s0 && s < s1) add_run(out + s * inner, in + i * inner, inner);
    }
  });
}

template <class T>
void segment_sum_kernel(KernelContext& ctx) {
  if (ctx.input(1).dtype() == DType::Int64) segment_sum_typed<T, int64_t>(ctx);
  else segment_sum_typed<T, int32_t>(ctx);
}

}  // namespace

void register_scatter_kernels() {
  register_kernel("UnsortedSegmentSum", DeviceType::CPU, float32, segment_sum_kernel<float>);
  register_kernel("UnsortedSegmentSum", DeviceType::CPU, float64, segment_sum_kernel<double>);
  register_kernel("UnsortedSegmentSum", DeviceType::CPU, int32, segment_sum_kernel<int32_t>);
  register_kernel("UnsortedSegmentSum", DeviceType::CPU, int64, segment_sum_kernel<int64_t>);
}

}  // namespace weft::cpu
