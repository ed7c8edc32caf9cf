// Definitions of the trigonometric ops Sin and Cos (radians), float32 and float64, and float16 and
// bfloat16 computed in float32 and rounded once. They exist for expressions that must be computed
// inside a graph from run-time values, a cosine learning-rate schedule reading the step count, and
// are elementwise like Exp. FusedElementwise has no opcode for them, so they run unfused.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

// A libm call per element, as Exp's cost says.
Cost trig_cost(const InferContext& ctx) {
  const int64_t n = ctx.output(0).shape.num_elements();
  const double e = n > 0 ? static_cast<double>(n) : 0;
  return {20 * e, 2 * e * dtype_size(ctx.output(0).dtype)};
}

}  // namespace

void register_trig_defs() {
  for (const auto& [name, display] : {std::pair{"Sin", "sin"}, std::pair{"Cos", "cos"}})
    op_registry().add({.name = name, .display = display, .min_inputs = 1, .max_inputs = 1, .infer = infer_unary_float,
                       .cost = trig_cost, .flags = kElementwise});
}

}  // namespace weft::defs
