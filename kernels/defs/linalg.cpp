// Definition of MatMul: (..., m, k) x (..., k, n) -> (..., m, n), batch dims broadcast.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

// Batch dims with the last two dropped.
Shape batch_of(const Shape& s) { return Shape(std::span<const int64_t>(s.data(), s.rank() - 2)); }

void infer_matmul(InferContext& ctx) {
  check_same_dtype(ctx, 0, 2);
  // float16 and bfloat16: cuBLASLt on a GPU, the float32 product widened and rounded on the CPU
  // (kernels/cpu/via_float32.h); both accumulate in float32.
  check_dtype_in(ctx, 0, {DType::Float32, DType::Float64, DType::Float16, DType::BFloat16, DType::Int32, DType::Int64});
  const Shape& a = ctx.input_shape(0);
  const Shape& b = ctx.input_shape(1);
  if (a.rank() < 2 || b.rank() < 2)
    ctx.fail("both operands need rank >= 2, got " + a.to_string() + " x " + b.to_string());
  bool ta = ctx.attrs().get_or<bool>("transpose_a", false);
  bool tb = ctx.attrs().get_or<bool>("transpose_b", false);
  int64_t m = ta ? a[a.rank() - 1] : a[a.rank() - 2];
  int64_t ka = ta ? a[a.rank() - 2] : a[a.rank() - 1];
  int64_t kb = tb ? b[b.rank() - 1] : b[b.rank() - 2];
  int64_t n = tb ? b[b.rank() - 2] : b[b.rank() - 1];
  if (ka >= 0 && kb >= 0 && ka != kb) {
    std::string flags;
    if (ta) flags += " with transpose_a";
    if (tb) flags += std::string(ta ? " and" : " with") + " transpose_b";
    ctx.fail("inner dimensions differ: " + a.to_string() + " x " + b.to_string() + flags);
  }
  Shape out = broadcast_shapes(ctx, batch_of(a), batch_of(b));
  out.push_back(m);
  out.push_back(n);
  ctx.set_output(0, ctx.input_dtype(0), std::move(out));
}

Cost matmul_cost(const InferContext& ctx) {
  const Shape& a = ctx.input_shape(0);
  const Shape& out = ctx.output(0).shape;
  bool ta = ctx.attrs().get_or<bool>("transpose_a", false);
  double k = static_cast<double>(ta ? a[a.rank() - 2] : a[a.rank() - 1]);
  double n_out = static_cast<double>(std::max<int64_t>(out.num_elements(), 0));
  double bytes = n_out;
  for (int i = 0; i < 2; ++i) bytes += static_cast<double>(std::max<int64_t>(ctx.input_shape(i).num_elements(), 0));
  return {2.0 * n_out * std::max(k, 0.0), bytes * dtype_size(ctx.output(0).dtype)};
}

}  // namespace

void register_linalg_defs() {
  op_registry().add({.name = "MatMul", .display = "matmul", .min_inputs = 2, .max_inputs = 2,
                     .attrs = {{"transpose_a", AttrType::Bool, false}, {"transpose_b", AttrType::Bool, false}},
                     .infer = infer_matmul, .cost = matmul_cost});
}

}  // namespace weft::defs
