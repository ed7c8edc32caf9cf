// CPU kernel of Pad. Zero is all-zero bytes in every dtype (floats, halves, ints, bool), so the
// kernel moves bytes only: memset for the padding, memcpy for the input, one function for all
// nine dtypes.
//
// Dims whose inner neighbours are not padded are merged into them first, so the input is
// copied in the longest contiguous runs the paddings allow. The output is then walked row by
// row (a row = one run plus its before/after padding), each row written exactly once.
#include <algorithm>
#include <cstring>

#include "kernels/cpu/copy_util.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

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
  char* dst = static_cast<char*>(out_t.raw_data());
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
  const char* src = static_cast<const char*>(x.raw_data());

  if (rows == 1) {
    // One row (padding of the outermost non-trivial dim only): the three parts are each big.
    if (before_bytes) std::memset(dst, 0, before_bytes);
    parallel_memcpy(ctx.pool(), dst + before_bytes, src, in_bytes);
    if (after_bytes) std::memset(dst + before_bytes + in_bytes, 0, after_bytes);
    return;
  }

  ctx.pool().parallel_for(rows, std::max<int64_t>(1, kCopyGrainBytes / row_bytes), [&](int64_t b, int64_t e) {
    // The multi-index of row b over the outer dims, then advanced like an odometer.
    std::vector<int64_t> idx(outer.size());
    for (int64_t k = static_cast<int64_t>(outer.size()) - 1, r = b; k >= 0; --k) {
      idx[k] = r % outer[k].out();
      r /= outer[k].out();
    }
    for (int64_t row = b; row < e; ++row) {
      char* d = dst + row * row_bytes;
      bool inside = true;
      int64_t offset = 0;
      for (size_t k = 0; k < outer.size() && inside; ++k) {
        const int64_t i = idx[k] - outer[k].before;
        inside = i >= 0 && i < outer[k].in;
        offset += i * in_stride[k];
      }
      if (inside) {
        if (before_bytes) std::memset(d, 0, before_bytes);
        std::memcpy(d + before_bytes, src + offset * elem, in_bytes);
        if (after_bytes) std::memset(d + before_bytes + in_bytes, 0, after_bytes);
      } else {
        std::memset(d, 0, row_bytes);
      }
      for (size_t k = outer.size(); k-- > 0;) {
        if (++idx[k] < outer[k].out()) break;
        idx[k] = 0;
      }
    }
  });
}

}  // namespace

void register_pad_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) register_kernel("Pad", DeviceType::CPU, static_cast<DType>(d), pad_kernel);
}

}  // namespace weft::cpu
