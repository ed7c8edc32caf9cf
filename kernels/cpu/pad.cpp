// CPU kernel of Pad. Zero is all-zero bytes in every dtype (floats, halves, ints, bool), so the
// kernel moves bytes only, typed by element width at most: one function for all nine dtypes.
//
// Dims whose inner neighbours are not padded are merged into them first, so the input is
// copied in the longest contiguous runs the paddings allow. The output is then walked row by
// row (a row = one run plus its before/after padding), each row written exactly once: with
// memset/memcpy when rows are wide, element by element when they are narrow.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/copy_util.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

// Rows at least this long are written with memset/memcpy; shorter ones element by element.
constexpr int64_t kWideRowBytes = 64;

struct PadDim {
  int64_t in, before, after;
  int64_t out() const { return before + in + after; }
};

void pad_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const Tensor& out_t = ctx.output(0);
  if (out_t.size() == 0) return;
  const auto& p = ctx.attrs.get<std::vector<int64_t>>("paddings");
  const int64_t elem = static_cast<int64_t>(dtype_size(x.dtype()));
  char* dst = static_cast<char*>(raw_data(out_t));
  if (x.size() == 0) {  // all padding; from here on every input dim is >= 1
    ctx.pool().parallel_for(out_t.size() * elem, kCopyGrainBytes,
                            [&](int64_t b, int64_t e) { std::memset(dst + b, 0, e - b); });
    return;
  }

  // Collapsed dims, innermost first; dims[0] is the run.
  std::vector<PadDim> dims;
  PadDim cur{1, 0, 0};
  for (int64_t i = x.rank() - 1; i >= 0; --i) {
    const PadDim d{x.shape()[i], p[2 * i], p[2 * i + 1]};
    if (cur.before == 0 && cur.after == 0) {
      cur = {d.in * cur.in, d.before * cur.in, d.after * cur.in};
    } else {
      dims.push_back(cur);
      cur = d;
    }
  }
  dims.push_back(cur);

  const PadDim run = dims[0];
  const int64_t before_bytes = run.before * elem, in_bytes = run.in * elem, after_bytes = run.after * elem;
  const int64_t row_bytes = run.out() * elem;
  // Outer dims, outermost first, with the input's stride (in elements) of each.
  std::vector<PadDim> outer(dims.rbegin(), dims.rend() - 1);
  std::vector<int64_t> in_stride(outer.size());
  int64_t stride = run.in, rows = 1;
  for (size_t k = outer.size(); k-- > 0;) {
    in_stride[k] = stride;
    stride *= outer[k].in;
    rows *= outer[k].out();
  }
  const char* src = static_cast<const char*>(raw_data(x));

  if (rows == 1) {
    // One row (padding of the outermost non-trivial dim only): the three parts are each big.
    if (before_bytes) std::memset(dst, 0, before_bytes);
    parallel_memcpy(ctx.pool(), dst + before_bytes, src, in_bytes);
    if (after_bytes) std::memset(dst + before_bytes + in_bytes, 0, after_bytes);
    return;
  }

  // Calls write_row(row pointer, its input run or null when the row is all padding) for every
  // output row, in parallel. Rows are visited in groups along the innermost outer dim, so the
  // per-row work is a few register operations: stores through char* may alias anything in
  // memory, so the loop keeps what it reads in locals rather than in vectors.
  const PadDim last = outer.back();
  const int64_t last_out = last.out(), last_before = last.before, last_in = last.in;
  const int64_t last_step = in_stride.back() * elem;
  auto for_rows = [&](auto&& write_row) {
    ctx.pool().parallel_for(rows, std::max<int64_t>(1, kCopyGrainBytes / row_bytes), [&](int64_t b, int64_t e) {
      // A private copy: its captures then live in registers, which the row stores cannot alias.
      auto write = write_row;
      // The multi-index over the outer dims but the last, of the group holding row b; then
      // advanced like an odometer, one step per group.
      const size_t groups_rank = outer.size() - 1;
      std::vector<int64_t> idx(groups_rank);
      for (int64_t k = static_cast<int64_t>(groups_rank) - 1, g = b / last_out; k >= 0; --k) {
        idx[k] = g % outer[k].out();
        g /= outer[k].out();
      }
      for (int64_t row = b; row < e;) {
        bool inside = true;
        int64_t offset = 0;
        for (size_t k = 0; k < groups_rank && inside; ++k) {
          const int64_t i = idx[k] - outer[k].before;
          inside = i >= 0 && i < outer[k].in;
          offset += i * in_stride[k];
        }
        const char* group_src = inside ? src + offset * elem : nullptr;
        const int64_t t0 = row % last_out, t1 = std::min(last_out, t0 + (e - row));
        char* d = dst + row * row_bytes;
        for (int64_t t = t0; t < t1; ++t, d += row_bytes) {
          const int64_t i = t - last_before;
          write(d, group_src && i >= 0 && i < last_in ? group_src + i * last_step : nullptr);
        }
        row += t1 - t0;
        for (size_t k = groups_rank; k-- > 0;) {
          if (++idx[k] < outer[k].out()) break;
          idx[k] = 0;
        }
      }
    });
  };

  if (row_bytes >= kWideRowBytes) {
    for_rows([=](char* d, const char* s) {
      if (!s) {
        std::memset(d, 0, row_bytes);
        return;
      }
      if (before_bytes) std::memset(d, 0, before_bytes);
      std::memcpy(d + before_bytes, s, in_bytes);
      if (after_bytes) std::memset(d + before_bytes + in_bytes, 0, after_bytes);
    });
    return;
  }
  // Narrow rows (padding the last dim of a tall tensor): one element-sized move per element, each
  // from the input or from a zero, chosen without a branch. Three loops (zeros, copy, zeros)
  // would each be turned into a memset or memcpy call of a few bytes.
  visit_element_width(static_cast<size_t>(elem), [&](auto w) {
    using W = decltype(w);
    const int64_t before = run.before, in = run.in, out = run.out();
    for_rows([=](char* d, const char* s) {
      const W zero{};
      const char* z = reinterpret_cast<const char*>(&zero);
      const int64_t hi = s ? before + in : 0;
      for (int64_t j = 0; j < out; ++j) {
        const bool from_input = j >= before && j < hi;
        copy_element<W>(d + j * sizeof(W), from_input ? s + (j - before) * static_cast<int64_t>(sizeof(W)) : z);
      }
    });
  });
}

}  // namespace

void register_pad_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) register_kernel("Pad", DeviceType::CPU, static_cast<DType>(d), pad_kernel);
}

}  // namespace weft::cpu
