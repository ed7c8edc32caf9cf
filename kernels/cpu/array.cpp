// CPU kernels of the array ops that copy: ConcatV2, Slice, Split, GatherV2, OneHot, and Print's write.
// Reshape, ExpandDims, Squeeze, Identity and StopGradient are views (kForwardsInput) and need no
// kernel; Transpose lives in transpose.cpp.
//
// Copies move contiguous runs with memcpy and are typed by element width only (copy_util.h), so
// one function serves all nine dtypes.
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "kernels/cpu/copy_util.h"
#include "kernels/cpu/index_errors.h"
#include "kernels/cuda/copy_geometry.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

int64_t normalized_axis(int64_t axis, int64_t rank) { return axis < 0 ? axis + rank : axis; }

int64_t product(const Shape& s, int64_t begin, int64_t end) {
  int64_t n = 1;
  for (int64_t i = begin; i < end; ++i) n *= s[i];
  return n;
}

// The output is `outer` rows, each the concatenation of one row-segment per input. Splitting by
// output bytes rather than by rows keeps every thread busy whether there are many small rows
// (axis = -1) or one huge row (axis = 0).
void concat_kernel(KernelContext& ctx) {
  const Tensor& out = ctx.output(0);
  if (out.size() == 0) return;
  const int64_t r = out.rank();
  const int64_t axis = normalized_axis(ctx.attrs.get<int64_t>("axis"), r);
  const int64_t elem = static_cast<int64_t>(dtype_size(out.dtype()));
  const int64_t outer = product(out.shape(), 0, axis);
  const size_t n = ctx.inputs.size();
  std::vector<int64_t> seg_bytes(n), seg_start(n + 1, 0);
  std::vector<const char*> src(n);
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = ctx.input(static_cast<int>(i));
    seg_bytes[i] = product(t.shape(), axis, r) * elem;
    seg_start[i + 1] = seg_start[i] + seg_bytes[i];
    src[i] = seg_bytes[i] ? static_cast<const char*>(raw_data(t)) : nullptr;
  }
  const int64_t row_bytes = seg_start[n];
  char* dst = static_cast<char*>(raw_data(out));
  ctx.pool().parallel_for(outer * row_bytes, kCopyGrainBytes, [&](int64_t begin, int64_t end) {
    int64_t row = begin / row_bytes;
    int64_t pos = begin % row_bytes;
    size_t seg = std::upper_bound(seg_start.begin(), seg_start.end(), pos) - seg_start.begin() - 1;
    for (int64_t b = begin; b < end;) {
      const int64_t take = std::min(seg_start[seg + 1] - pos, end - b);
      if (take > 0) std::memcpy(dst + b, src[seg] + row * seg_bytes[seg] + (pos - seg_start[seg]), take);
      b += take;
      pos += take;
      while (seg < n && pos == seg_start[seg + 1]) ++seg;  // also skips empty segments
      if (seg == n) {
        ++row;
        pos = 0;
        seg = 0;
        while (seg < n && seg_bytes[seg] == 0) ++seg;
      }
    }
  });
}

// The window of x starting at `begin` with out's shape, into out (Slice, and each part of Split).
void copy_window(KernelContext& ctx, const Tensor& x, const std::vector<int64_t>& begin, const Tensor& out) {
  if (out.size() == 0) return;
  const int64_t elem = static_cast<int64_t>(dtype_size(x.dtype()));

  // Dims merged where the inner neighbour is taken whole, inner first (shared with the CUDA
  // kernel): dims[0] is the contiguous run.
  const std::vector<cuda::SliceDim> dims = cuda::merged_slice_dims(x.shape(), begin, out.shape());

  const int64_t run = dims[0].take;  // elements per contiguous run
  int64_t base = dims[0].begin;
  int64_t stride = dims[0].size;
  Walk walk;  // over the outer collapsed dims; a: input offset
  std::vector<cuda::SliceDim> outer(dims.begin() + 1, dims.end());
  std::vector<int64_t> outer_strides(outer.size());
  for (size_t k = 0; k < outer.size(); ++k) {
    outer_strides[k] = stride;
    base += outer[k].begin * stride;
    stride *= outer[k].size;
  }
  for (size_t k = outer.size(); k-- > 0;) walk.add_dim(outer[k].take, outer_strides[k], 0);

  const char* in = static_cast<const char*>(raw_data(x)) + base * elem;
  char* dst = static_cast<char*>(raw_data(out));
  const int64_t run_bytes = run * elem;
  const int64_t rows = walk.count();
  if (rows == 1) {
    parallel_memcpy(ctx.pool(), dst, in, run_bytes);
    return;
  }
  ctx.pool().parallel_for(rows, std::max<int64_t>(1, kCopyGrainBytes / run_bytes), [&](int64_t b, int64_t e) {
    Walk w = walk;
    w.seek(b);
    for (int64_t row = b; row < e; ++row, w.next()) std::memcpy(dst + row * run_bytes, in + w.a * elem, run_bytes);
  });
}

void slice_kernel(KernelContext& ctx) {
  copy_window(ctx, ctx.input(0), ctx.attrs.get<std::vector<int64_t>>("begin"), ctx.output(0));
}

// Part k is the window that starts k parts along the axis.
void split_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  const int64_t rank = x.shape().rank();
  int64_t axis = ctx.attrs.get<int64_t>("axis");
  if (axis < 0) axis += rank;
  std::vector<int64_t> begin(static_cast<size_t>(rank), 0);
  for (size_t k = 0; k < ctx.outputs.size(); ++k) {
    copy_window(ctx, x, begin, ctx.outputs[k]);
    begin[static_cast<size_t>(axis)] += ctx.outputs[k].shape()[axis];
  }
}

template <class I>
void gather_typed(KernelContext& ctx) {
  const Tensor& params = ctx.input(0);
  const Tensor& indices = ctx.input(1);
  const Tensor& out = ctx.output(0);
  const int64_t axis = normalized_axis(ctx.attrs.get_or<int64_t>("axis", 0), params.rank());
  const int64_t limit = params.shape()[axis];
  const int64_t count = indices.size();
  const I* idx = static_cast<const I*>(count ? raw_data(indices) : nullptr);
  if (const int64_t j = first_out_of_range(idx, count, limit); j >= 0)
    ctx.fail(gather_index_message(j, indices.shape(), static_cast<int64_t>(idx[j]), axis, params.shape(), limit));
  if (out.size() == 0) return;

  const int64_t elem = static_cast<int64_t>(dtype_size(params.dtype()));
  const int64_t inner_bytes = product(params.shape(), axis + 1, params.rank()) * elem;
  const int64_t pieces = out.size() * elem / inner_bytes;  // outer * count
  const char* src = static_cast<const char*>(raw_data(params));
  char* dst = static_cast<char*>(raw_data(out));
  const int64_t grain = std::max<int64_t>(1, kCopyGrainBytes / inner_bytes);
  if (inner_bytes == elem) {
    // Gathering single elements: a typed move beats a memcpy call per element.
    visit_element_width(static_cast<size_t>(elem), [&](auto w) {
      using W = decltype(w);
      ctx.pool().parallel_for(pieces, grain, [&](int64_t b, int64_t e) {
        const char* row = src + (b / count) * limit * elem;
        for (int64_t p = b, j = b % count; p < e; ++p) {
          copy_element<W>(dst + p * elem, row + static_cast<int64_t>(idx[j]) * elem);
          if (++j == count) {
            j = 0;
            row += limit * elem;
          }
        }
      });
    });
    return;
  }
  ctx.pool().parallel_for(pieces, grain, [&](int64_t b, int64_t e) {
    const char* row = src + (b / count) * limit * inner_bytes;
    for (int64_t p = b, j = b % count; p < e; ++p) {
      std::memcpy(dst + p * inner_bytes, row + static_cast<int64_t>(idx[j]) * inner_bytes, inner_bytes);
      if (++j == count) {
        j = 0;
        row += limit * inner_bytes;
      }
    }
  });
}

void gather_kernel(KernelContext& ctx) {
  if (ctx.input(1).dtype() == DType::Int64) gather_typed<int64_t>(ctx);
  else gather_typed<int32_t>(ctx);
}

template <class I>
void one_hot_kernel(KernelContext& ctx) {
  const Tensor& indices = ctx.input(0);
  const int64_t depth = ctx.attrs.get<int64_t>("depth");
  const int64_t count = indices.size();
  if (count == 0 || depth == 0) return;
  const I* idx = static_cast<const I*>(raw_data(indices));
  float* out = static_cast<float*>(raw_data(ctx.output(0)));
  ctx.pool().parallel_for(count, std::max<int64_t>(1, kCopyGrainBytes / (depth * 4)), [&](int64_t b, int64_t e) {
    std::fill(out + b * depth, out + e * depth, 0.f);
    for (int64_t j = b; j < e; ++j) {
      const int64_t v = static_cast<int64_t>(idx[j]);
      if (v >= 0 && v < depth) out[j * depth + v] = 1.f;
    }
  });
}

void print_kernel(KernelContext& ctx) {
  std::string line = ctx.attrs.get_or<std::string>("message", "");
  if (!line.empty() && !std::isspace(static_cast<unsigned char>(line.back()))) line += ' ';
  // Continuation lines of a matrix line up under its first bracket, as in Tensor's operator<<.
  line += format_values(ctx.input(0), static_cast<int>(line.size()));
  line += '\n';
  // One write per run, so prints from concurrent graph nodes do not interleave mid-line.
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
}

}  // namespace

void register_array_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) {
    const DType dt = static_cast<DType>(d);
    register_kernel("ConcatV2", DeviceType::CPU, dt, concat_kernel);
    register_kernel("Slice", DeviceType::CPU, dt, slice_kernel);
    register_kernel("Split", DeviceType::CPU, dt, split_kernel);
    register_kernel("GatherV2", DeviceType::CPU, dt, gather_kernel);
    register_kernel("Print", DeviceType::CPU, dt, print_kernel);
  }
  register_kernel("OneHot", DeviceType::CPU, int8, one_hot_kernel<int8_t>);
  register_kernel("OneHot", DeviceType::CPU, uint8, one_hot_kernel<uint8_t>);
  register_kernel("OneHot", DeviceType::CPU, int32, one_hot_kernel<int32_t>);
  register_kernel("OneHot", DeviceType::CPU, int64, one_hot_kernel<int64_t>);
  register_transpose_kernels();
}

}  // namespace weft::cpu
