// CPU kernel of Transpose.
//
// The permutation is first simplified: dims of size 1 are dropped and input dims that stay
// adjacent and in order in the output are merged, so (N, C, H, W) -> (N, H, W, C) becomes a batch
// of (C, H*W) matrix transposes. What remains is one of:
//   - at most one dim: a plain copy;
//   - the input's innermost dim stays innermost: contiguous rows, one memcpy each;
//   - otherwise: cache-blocked 2-D tiles between the input's innermost dim (contiguous reads) and
//     the output's innermost dim (contiguous writes), repeated over the remaining outer dims.
#include <algorithm>
#include <utility>

#include "kernels/cpu/copy_util.h"
#include "kernels/cuda/copy_geometry.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::cpu {

namespace {

struct Plan {
  std::vector<int64_t> dims;  // collapsed input dims
  std::vector<int64_t> perm;  // output dim i is input dim perm[i]
};

// The merging is shared with the CUDA kernel (kernels/cuda/copy_geometry.h, plain C++ built in
// every configuration), so both devices see the same simplified permutation.
Plan simplify(const Shape& in, std::vector<int64_t> perm) {
  cuda::TransposePlan p = cuda::simplify_transpose(in, std::move(perm));
  return {std::move(p.dims), std::move(p.perm)};
}

// The input's innermost dim keeps its place: copy whole rows.
void copy_rows(KernelContext& ctx, const Plan& plan, size_t elem) {
  const int64_t r = static_cast<int64_t>(plan.dims.size());
  const std::vector<int64_t> in_strides = row_major_strides(plan.dims);
  Walk walk;
  for (int64_t i = 0; i + 1 < r; ++i) walk.add_dim(plan.dims[plan.perm[i]], in_strides[plan.perm[i]], 0);
  const int64_t row_bytes = plan.dims[r - 1] * static_cast<int64_t>(elem);
  const char* in = static_cast<const char*>(raw_data(ctx.input(0)));
  char* out = static_cast<char*>(raw_data(ctx.output(0)));
  ctx.pool().parallel_for(walk.count(), std::max<int64_t>(1, kCopyGrainBytes / row_bytes),
                          [&](int64_t begin, int64_t end) {
    Walk w = walk;
    w.seek(begin);
    for (int64_t row = begin; row < end; ++row, w.next())
      std::memcpy(out + row * row_bytes, in + w.a * static_cast<int64_t>(elem), row_bytes);
  });
}

// Tiles of about kTileElems elements fit in L1 for both the strided reads and the writes.
constexpr int64_t kTileEdge = 32;
constexpr int64_t kTileElems = kTileEdge * kTileEdge;

template <class W>
void copy_tiles(KernelContext& ctx, const Plan& plan) {
  const int64_t r = static_cast<int64_t>(plan.dims.size());
  const std::vector<int64_t> in_strides = row_major_strides(plan.dims);
  std::vector<int64_t> out_dims(r);
  for (int64_t i = 0; i < r; ++i) out_dims[i] = plan.dims[plan.perm[i]];
  const std::vector<int64_t> out_strides = row_major_strides(out_dims);

  // a: the output's innermost dim (contiguous writes); b: the input's innermost dim.
  const int64_t q = std::find(plan.perm.begin(), plan.perm.end(), r - 1) - plan.perm.begin();
  const int64_t size_a = out_dims[r - 1], in_stride_a = in_strides[plan.perm[r - 1]];
  const int64_t size_b = out_dims[q], out_stride_b = out_strides[q];
  Walk outer;  // a: input offset, b: output offset
  for (int64_t i = 0; i < r - 1; ++i)
    if (i != q) outer.add_dim(out_dims[i], in_strides[plan.perm[i]], out_strides[i]);

  // Narrow matrices get long tiles so a tile still holds about kTileElems elements.
  const int64_t tile_b = std::min(size_b, kTileEdge);
  const int64_t tile_a = std::max(kTileEdge, kTileElems / tile_b);
  const int64_t blocks_a = (size_a + tile_a - 1) / tile_a;
  const int64_t blocks_b = (size_b + tile_b - 1) / tile_b;
  const int64_t tiles = outer.count() * blocks_a * blocks_b;
  const int64_t tile_bytes = tile_a * tile_b * static_cast<int64_t>(sizeof(W));
  constexpr int64_t w = sizeof(W);

  const char* in = static_cast<const char*>(raw_data(ctx.input(0)));
  char* out = static_cast<char*>(raw_data(ctx.output(0)));
  ctx.pool().parallel_for(tiles, std::max<int64_t>(1, kCopyGrainBytes / tile_bytes), [&](int64_t begin, int64_t end) {
    Walk o = outer;
    for (int64_t t = begin; t < end; ++t) {
      // Tiles run along a fastest, so consecutive tiles continue the same output rows.
      const int64_t ba = t % blocks_a;
      const int64_t bb = (t / blocks_a) % blocks_b;
      const int64_t ob = t / (blocks_a * blocks_b);
      if (t == begin || (ba == 0 && bb == 0)) o.seek(ob);
      const int64_t a0 = ba * tile_a, a1 = std::min(size_a, a0 + tile_a);
      const int64_t b0 = bb * tile_b, b1 = std::min(size_b, b0 + tile_b);
      for (int64_t b = b0; b < b1; ++b) {
        const char* src = in + (o.a + b) * w;
        char* dst = out + (o.b + b * out_stride_b) * w;
        for (int64_t a = a0; a < a1; ++a) copy_element<W>(dst + a * w, src + a * in_stride_a * w);
      }
    }
  });
}

void transpose_kernel(KernelContext& ctx) {
  const Tensor& x = ctx.input(0);
  if (x.size() == 0) return;
  const size_t elem = dtype_size(x.dtype());
  const Plan plan = simplify(x.shape(), ctx.attrs.get_or<std::vector<int64_t>>("perm", {}));
  const int64_t r = static_cast<int64_t>(plan.dims.size());
  if (r <= 1) {
    parallel_memcpy(ctx.pool(), raw_data(ctx.output(0)), raw_data(x), static_cast<int64_t>(x.nbytes()));
  } else if (plan.perm[r - 1] == r - 1) {
    copy_rows(ctx, plan, elem);
  } else {
    visit_element_width(elem, [&](auto w) { copy_tiles<decltype(w)>(ctx, plan); });
  }
}

}  // namespace

void register_transpose_kernels() {
  for (int d = 0; d < kNumDTypes; ++d) register_kernel("Transpose", DeviceType::CPU, static_cast<DType>(d), transpose_kernel);
}

}  // namespace weft::cpu
