// Host-side geometry of the CUDA data-movement kernels (Transpose, Slice, Pad, ConcatV2): which
// input element each output element comes from, with dims merged wherever the layout allows.
// Plain C++ with no CUDA in it, so it is built and unit-tested in every configuration, GPU or not
// (tests/kernels/copy_geometry_test.cpp).
//
//   StridedCopy g = transpose_copy(simplify_transpose(x.shape(), perm), "transpose");
//   // output element i (row-major over g.dims) is input element strided_offset(g, i)
#pragma once

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "runtime/shape.h"

namespace weft::cuda {

// Dims left after merging; kernel arguments are fixed-size structs. Only permutations or slices
// that keep this many dims apart after merging are refused.
inline constexpr int kMaxCopyRank = 16;

// Output element i, as a row-major multi-index over dims, reads input element
//   base + sum_d index_d(i) * in_strides[d].
struct StridedCopy {
  int rank = 0;                 // merged output dims (>= 1)
  int64_t n = 0;                // output elements
  int64_t base = 0;             // input offset of output element 0
  int64_t dims[kMaxCopyRank] = {};
  int64_t in_strides[kMaxCopyRank] = {};
  bool index32 = false;         // every output index and input offset fits in int32
};

// The input offset of output element i under g, computed as the kernel does (a CPU reference).
int64_t strided_offset(const StridedCopy& g, int64_t i);

// A permutation with dims of size 1 dropped and runs of input dims that stay adjacent and in
// order in the output merged, as the CPU kernel does: (N, C, H, W) -> (N, H, W, C) becomes
// dims (N, C, H*W) with perm (0, 2, 1).
struct TransposePlan {
  std::vector<int64_t> dims;  // merged input dims
  std::vector<int64_t> perm;  // output dim i is merged input dim perm[i]
};
// `perm` as the Transpose attribute gives it: empty for reversing, negative entries counted from
// the end. The caller has validated it (the op's shape inference does).
TransposePlan simplify_transpose(const Shape& in, std::vector<int64_t> perm);

// A batch of matrix transposes: input (batch, rows, cols) to output (batch, cols, rows), both
// row-major. What a plan whose last two merged dims swap and whose other dims keep their order is.
struct BatchedTranspose {
  int64_t batch = 1, rows = 0, cols = 0;
};
std::optional<BatchedTranspose> as_batched_transpose(const TransposePlan& plan);

// The general form of a plan. InvalidArgument("[op] ...") beyond kMaxCopyRank merged dims.
StridedCopy transpose_copy(const TransposePlan& plan, std::string_view op);

// The dims of a slice of `in` starting at `begin` with output shape `out`, inner first, each merged
// into its inner neighbour when that neighbour is taken whole (the run it covers is then
// contiguous in the input too). Shared with the CPU's Slice (kernels/cpu/array.cpp).
struct SliceDim {
  int64_t size, begin, take;
};
std::vector<SliceDim> merged_slice_dims(const Shape& in, const std::vector<int64_t>& begin, const Shape& out);

// Slice of `in` starting at `begin` with output shape `out` (already validated). Dims taken whole
// are merged into their outer neighbour; dims of output size 1 only move the base.
StridedCopy slice_copy(const Shape& in, const std::vector<int64_t>& begin, const Shape& out, std::string_view op);

// Pad with zeros: output element i, as a multi-index over out_dims, reads input offset
// sum_d (index_d - before[d]) * in_strides[d] when every index_d - before[d] is in [0, in_dims[d]),
// and is zero otherwise.
struct PadGeometry {
  int rank = 0;
  int64_t n = 0;  // output elements
  int64_t out_dims[kMaxCopyRank] = {};
  int64_t before[kMaxCopyRank] = {};
  int64_t in_dims[kMaxCopyRank] = {};
  int64_t in_strides[kMaxCopyRank] = {};
  bool index32 = false;
};
// `paddings` as the Pad attribute gives it (before_0, after_0, before_1, ...), validated. `in` must
// not be empty (an empty input pads to all zeros, which needs no geometry). Dims whose inner
// neighbour is not padded are merged into it, as on the CPU.
PadGeometry pad_geometry(const Shape& in, const std::vector<int64_t>& paddings, std::string_view op);
// The input offset output element i reads, or -1 where it is padding (a CPU reference).
int64_t pad_source(const PadGeometry& g, int64_t i);

// ConcatV2 along `axis` (normalised): the output is `outer` rows of `row` elements; input k fills
// columns [offset[k], offset[k] + width[k]) of every row.
struct ConcatGeometry {
  int64_t outer = 0, row = 0;
  std::vector<int64_t> width, offset;
};
ConcatGeometry concat_geometry(const std::vector<const Shape*>& inputs, int64_t axis);

}  // namespace weft::cuda
