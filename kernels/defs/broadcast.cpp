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

}  // namespace

void register_broadcast_defs() {
  op_registry().add({.name = "BroadcastTo", .display = "broadcast_to", .min_inputs = 1, .max_inputs = 1,
                     .attrs = {{"shape", AttrType::Shape}}, .infer = infer_broadcast_to});
}

}  // namespace weft::defs
