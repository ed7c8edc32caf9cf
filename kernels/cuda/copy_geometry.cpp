#include "kernels/cuda/copy_geometry.h"

#include <algorithm>
#include <limits>
#include <string>
#include <utility>

#include "runtime/error.h"

namespace weft::cuda {

namespace {

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();

void check_rank(size_t rank, std::string_view op, const std::string& what) {
  if (rank > static_cast<size_t>(kMaxCopyRank))
    throw InvalidArgument("[" + std::string(op) + "] the CUDA kernel supports at most " + std::to_string(kMaxCopyRank) +
                          " dims after merging, and " + what + " needs " + std::to_string(rank));
}

// Fills g's dims and strides from (dim, stride) pairs listed outer first; a scalar becomes one dim of 1.
void set_dims(StridedCopy& g, const std::vector<std::pair<int64_t, int64_t>>& dims) {
  g.rank = std::max<int>(1, static_cast<int>(dims.size()));
  g.dims[0] = 1;
  g.in_strides[0] = 0;
  for (size_t d = 0; d < dims.size(); ++d) {
    g.dims[d] = dims[d].first;
    g.in_strides[d] = dims[d].second;
  }
}

}  // namespace

int64_t strided_offset(const StridedCopy& g, int64_t i) {
  int64_t off = g.base;
  for (int d = g.rank - 1; d >= 0; --d) {
    off += (i % g.dims[d]) * g.in_strides[d];
    i /= g.dims[d];
  }
  return off;
}

TransposePlan simplify_transpose(const Shape& in, std::vector<int64_t> perm) {
  const int64_t r = in.rank();
  if (perm.empty())
    for (int64_t i = r - 1; i >= 0; --i) perm.push_back(i);
  for (int64_t& p : perm)
    if (p < 0) p += r;

  // Dims of size 1 decide nothing about the layout.
  std::vector<int64_t> renumber(static_cast<size_t>(r), -1);
  std::vector<int64_t> dims;
  for (int64_t i = 0; i < r; ++i)
    if (in[i] != 1) {
      renumber[static_cast<size_t>(i)] = static_cast<int64_t>(dims.size());
      dims.push_back(in[i]);
    }
  std::vector<int64_t> p;
  for (int64_t q : perm)
    if (renumber[static_cast<size_t>(q)] >= 0) p.push_back(renumber[static_cast<size_t>(q)]);

  // Runs of the output order that are consecutive input dims become one dim.
  std::vector<std::pair<int64_t, int64_t>> groups;  // [first, last] input dims, in output order
  for (int64_t q : p) {
    if (!groups.empty() && groups.back().second + 1 == q) groups.back().second = q;
    else groups.push_back({q, q});
  }
  std::vector<size_t> by_input(groups.size());
  for (size_t g = 0; g < groups.size(); ++g) by_input[g] = g;
  std::sort(by_input.begin(), by_input.end(), [&](size_t a, size_t b) { return groups[a].first < groups[b].first; });
  TransposePlan plan;
  plan.perm.resize(groups.size());
  for (size_t k = 0; k < by_input.size(); ++k) {
    const auto [first, last] = groups[by_input[k]];
    int64_t size = 1;
    for (int64_t q = first; q <= last; ++q) size *= dims[static_cast<size_t>(q)];
    plan.dims.push_back(size);
    plan.perm[by_input[k]] = static_cast<int64_t>(k);
  }
  return plan;
}

std::optional<BatchedTranspose> as_batched_transpose(const TransposePlan& plan) {
  const size_t r = plan.dims.size();
  if (r < 2 || plan.perm[r - 1] != static_cast<int64_t>(r - 2) || plan.perm[r - 2] != static_cast<int64_t>(r - 1))
    return std::nullopt;
  BatchedTranspose t;
  for (size_t i = 0; i + 2 < r; ++i) {
    if (plan.perm[i] != static_cast<int64_t>(i)) return std::nullopt;
    t.batch *= plan.dims[i];
  }
  t.rows = plan.dims[r - 2];
  t.cols = plan.dims[r - 1];
  return t;
}

StridedCopy transpose_copy(const TransposePlan& plan, std::string_view op) {
  const size_t r = plan.dims.size();
  check_rank(r, op, "this permutation");
  std::vector<int64_t> row_strides(r);
  int64_t n = 1;
  for (size_t k = r; k-- > 0;) {
    row_strides[k] = n;
    n *= plan.dims[k];
  }
  std::vector<std::pair<int64_t, int64_t>> dims;
  for (size_t d = 0; d < r; ++d) {
    const size_t q = static_cast<size_t>(plan.perm[d]);
    dims.push_back({plan.dims[q], row_strides[q]});
  }
  StridedCopy g;
  g.n = n;
  set_dims(g, dims);
  g.index32 = n <= kInt32Max;
  return g;
}

std::vector<SliceDim> merged_slice_dims(const Shape& in, const std::vector<int64_t>& begin, const Shape& out) {
  std::vector<SliceDim> merged;
  SliceDim cur{1, 0, 1};
  for (int64_t i = in.rank() - 1; i >= 0; --i) {
    const SliceDim d{in[i], begin[static_cast<size_t>(i)], out[i]};
    if (cur.begin == 0 && cur.take == cur.size) {
      cur = {d.size * cur.size, d.begin * cur.size, d.take * cur.size};
    } else {
      merged.push_back(cur);
      cur = d;
    }
  }
  merged.push_back(cur);
  return merged;
}

StridedCopy slice_copy(const Shape& in, const std::vector<int64_t>& begin, const Shape& out, std::string_view op) {
  const std::vector<SliceDim> merged = merged_slice_dims(in, begin, out);

  StridedCopy g;
  g.n = out.num_elements();
  std::vector<std::pair<int64_t, int64_t>> dims;  // outer first
  int64_t stride = 1;
  for (const SliceDim& d : merged) {
    g.base += d.begin * stride;
    // A dim taken once only moves the base; an empty output needs just its element count.
    if (d.take != 1 || g.n == 0) dims.push_back({d.take, stride});
    stride *= d.size;
  }
  std::reverse(dims.begin(), dims.end());
  if (g.n == 0) dims = {{0, 0}};
  check_rank(dims.size(), op, "this slice of " + in.to_string());
  set_dims(g, dims);
  g.index32 = g.n <= kInt32Max && in.num_elements() <= kInt32Max;
  return g;
}

PadGeometry pad_geometry(const Shape& in, const std::vector<int64_t>& paddings, std::string_view op) {
  struct Dim {
    int64_t in, before, after;
  };
  std::vector<Dim> merged;  // inner first
  Dim cur{1, 0, 0};
  for (int64_t i = in.rank() - 1; i >= 0; --i) {
    const Dim d{in[i], paddings[static_cast<size_t>(2 * i)], paddings[static_cast<size_t>(2 * i + 1)]};
    if (cur.before == 0 && cur.after == 0) {
      cur = {d.in * cur.in, d.before * cur.in, d.after * cur.in};
    } else {
      merged.push_back(cur);
      cur = d;
    }
  }
  merged.push_back(cur);

  struct Kept {
    int64_t out, before, in, stride;
  };
  std::vector<Kept> kept;  // outer first once reversed
  int64_t stride = 1, n = 1;
  for (const Dim& d : merged) {
    const int64_t out = d.before + d.in + d.after;
    n *= out;
    if (out != 1) kept.push_back({out, d.before, d.in, stride});  // out == 1: index 0, in == 1, no padding
    stride *= d.in;
  }
  std::reverse(kept.begin(), kept.end());
  if (kept.empty()) kept.push_back({1, 0, 1, 0});
  check_rank(kept.size(), op, "padding " + in.to_string());
  PadGeometry g;
  g.n = n;
  g.rank = static_cast<int>(kept.size());
  for (int d = 0; d < g.rank; ++d) {
    g.out_dims[d] = kept[d].out;
    g.before[d] = kept[d].before;
    g.in_dims[d] = kept[d].in;
    g.in_strides[d] = kept[d].stride;
  }
  g.index32 = n <= kInt32Max && in.num_elements() <= kInt32Max;
  return g;
}

int64_t pad_source(const PadGeometry& g, int64_t i) {
  int64_t off = 0;
  for (int d = g.rank - 1; d >= 0; --d) {
    const int64_t j = i % g.out_dims[d] - g.before[d];
    i /= g.out_dims[d];
    if (j < 0 || j >= g.in_dims[d]) return -1;
    off += j * g.in_strides[d];
  }
  return off;
}

ConcatGeometry concat_geometry(const std::vector<const Shape*>& inputs, int64_t axis) {
  ConcatGeometry g;
  g.outer = 1;
  const Shape& first = *inputs.front();
  for (int64_t i = 0; i < axis; ++i) g.outer *= first[i];
  for (const Shape* s : inputs) {
    int64_t w = 1;
    for (int64_t i = axis; i < s->rank(); ++i) w *= (*s)[i];
    g.offset.push_back(g.row);
    g.width.push_back(w);
    g.row += w;
  }
  return g;
}

}  // namespace weft::cuda
