// BroadcastTo: x stretched to a larger shape by NumPy rules (the gradient of every reduction
// and the explicit form of what binary ops do implicitly).
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

void infer_broadcast_to(InferContext& ctx) {
  const Shape& target = ctx.attrs().get<Shape>("shape");
  for (int64_t d : target)
    if (d < 0) ctx.fail("target shape " + target.to_string() + " has a negative or unknown dimension");
  const Shape& in = ctx.input_shape(0);
  if (in.rank() > target.rank())
    ctx.fail("cannot broadcast " + in.to_string() + " to the lower-rank shape " + target.to_string());
  for (int64_t i = 0; i < in.rank(); ++i) {
    int64_t d = in[i], t = target[target.rank() - in.rank() + i];
    if (d != t && d != 1 && d >= 0) ctx.fail("cannot broadcast " + in.to_string() + " to " + target.to_string());
  }
  ctx.set_output(0, ctx.input_dtype(0), target);
}

// The dynamic-shape forms used by gradients of graphs traced with unknown dims: the target
// shape is another tensor's, known at run time.
void check_broadcastable(InferContext& ctx, const Shape& in, const Shape& target) {
  if (in.rank() > target.rank())
    ctx.fail("cannot broadcast " + in.to_string() + " to the lower-rank shape " + target.to_string());
  for (int64_t i = 0; i < in.rank(); ++i) {
    int64_t d = in[i], t = target[target.rank() - in.rank() + i];
    if (d != t && d != 1 && d >= 0 && t >= 0) ctx.fail("cannot broadcast " + in.to_string() + " to " + target.to_string());
  }
}

void infer_broadcast_like(InferContext& ctx) {
  check_broadcastable(ctx, ctx.input_shape(0), ctx.input_shape(1));
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(1));
}

void infer_reshape_like(InferContext& ctx) {
  const int64_t a = ctx.input_shape(0).num_elements(), b = ctx.input_shape(1).num_elements();
  if (a >= 0 && b >= 0 && a != b)
    ctx.fail("cannot reshape " + ctx.input_shape(0).to_string() + " to " + ctx.input_shape(1).to_string());
  ctx.set_output(0, ctx.input_dtype(0), ctx.input_shape(1));
}

void infer_size(InferContext& ctx) { ctx.set_output(0, ctx.attrs().get<DType>("out_type"), Shape{}); }

}  // namespace

void register_broadcast_defs() {
  op_registry().add({.name = "BroadcastLike", .display = "broadcast_like", .min_inputs = 2, .max_inputs = 2,
                     .infer = infer_broadcast_like});
  // A view: the executor makes it from the input's buffer; no kernel runs.
  op_registry().add({.name = "ReshapeLike", .display = "reshape_like", .min_inputs = 2, .max_inputs = 2,
                     .infer = infer_reshape_like, .flags = kForwardsInput});
  op_registry().add({.name = "Size", .display = "size", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"out_type", AttrType::Type}}, .infer = infer_size, .flags = kNotDifferentiable,
                     .kernel_dtype_input = -1});
  op_registry().add({.name = "BroadcastTo", .display = "broadcast_to", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"shape", AttrType::Shape}}, .infer = infer_broadcast_to});
}

}  // namespace weft::defs
