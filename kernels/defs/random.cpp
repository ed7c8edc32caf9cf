// Definitions of RandomNormal and RandomUniform. Their numbers depend only on (seed, element
// index) -- for an unseeded node of a compiled graph, on (stream_seed, how many times the node ran,
// element index) -- so every mode and device produces the same tensor for the same seed.
#include <cmath>

#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

// The shape is the "shape" attribute, or, with an input, that input's shape at run time (the
// form a graph traced with unknown dims needs, e.g. a dropout mask over an unknown batch).
void infer_random(InferContext& ctx) {
  const bool like = ctx.num_inputs() == 1;
  if (!like && !ctx.attrs().find("shape")) ctx.fail("needs a shape attribute or an input to take the shape of");
  const Shape shape = like ? ctx.input_shape(0) : ctx.attrs().get<Shape>("shape");
  for (int64_t d : shape)
    if (d < (like ? -1 : 0)) ctx.fail("shape " + shape.to_string() + " has a negative dimension");
  DType dtype = ctx.attrs().get<DType>("dtype");
  if (dtype != DType::Float32 && dtype != DType::Float64)
    ctx.fail("dtype " + std::string(dtype_name(dtype)) + " is not supported (supported: float32, float64)");
  const char* a = ctx.op().name == "RandomNormal" ? "mean" : "low";
  const char* b = ctx.op().name == "RandomNormal" ? "stddev" : "high";
  double pa = ctx.attrs().get<double>(a), pb = ctx.attrs().get<double>(b);
  if (!std::isfinite(pa) || !std::isfinite(pb)) ctx.fail(std::string(a) + " and " + b + " must be finite");
  if (ctx.op().name == "RandomNormal" && pb < 0) ctx.fail("stddev must be >= 0, got " + std::to_string(pb));
  if (ctx.op().name == "RandomUniform" && pb < pa)
    ctx.fail("high (" + std::to_string(pb) + ") must be >= low (" + std::to_string(pa) + ")");
  ctx.set_output(0, dtype, shape);
}

}  // namespace

void register_random_defs() {
  // Stateful: two unseeded draws must not be merged or folded into one constant. "stream_seed" is
  // not the user's: compilation gives it to an unseeded node (runtime/random_seed.h).
  op_registry().add({.name = "RandomNormal", .display = "random::normal", .min_inputs = 0, .max_inputs = 1,
                     .attrs = {{"shape", AttrType::Shape, false}, {"mean", AttrType::Float}, {"stddev", AttrType::Float},
                               {"seed", AttrType::Int}, {"stream_seed", AttrType::Int, false}, {"dtype", AttrType::Type}},
                     .infer = infer_random, .flags = kStateful | kNotDifferentiable | kRandom, .kernel_dtype_input = -1});
  op_registry().add({.name = "RandomUniform", .display = "random::uniform", .min_inputs = 0, .max_inputs = 1,
                     .attrs = {{"shape", AttrType::Shape, false}, {"low", AttrType::Float}, {"high", AttrType::Float},
                               {"seed", AttrType::Int}, {"stream_seed", AttrType::Int, false}, {"dtype", AttrType::Type}},
                     .infer = infer_random, .flags = kStateful | kNotDifferentiable | kRandom, .kernel_dtype_input = -1});
}

}  // namespace weft::defs
