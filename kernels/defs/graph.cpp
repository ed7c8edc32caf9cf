// Definitions of the ops that only exist in graphs: arguments (Placeholder), captured values
// (Const), variable access (ReadVariable, ReadVariableForUpdate, AssignVariable and its add/sub
// forms) and NoOp, the node a group of targets hangs off.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"

namespace weft::defs {

namespace {

void infer_placeholder(InferContext& ctx) {
  const Shape& shape = ctx.attrs().get<Shape>("shape");
  for (int64_t d : shape)
    if (d < -1) ctx.fail("shape " + shape.to_string() + " has a dimension below -1");
  ctx.set_output(0, ctx.attrs().get<DType>("dtype"), shape);
}

void infer_const(InferContext& ctx) {
  const Tensor& v = ctx.attrs().get<Tensor>("value");
  if (v.is_symbolic()) ctx.fail("value must be a concrete tensor");
  ctx.set_output(0, v.dtype(), v.shape());
}

void infer_assign(InferContext& ctx) {
  const DType dtype = ctx.attrs().get<DType>("dtype");
  const Shape& shape = ctx.attrs().get<Shape>("shape");
  const std::string& var = ctx.attrs().get<std::string>("var");
  if (ctx.input_dtype(0) != dtype)
    ctx.fail("variable '" + var + "' has dtype " + std::string(dtype_name(dtype)) + ", the value is " +
             std::string(dtype_name(ctx.input_dtype(0))));
  const Shape& got = ctx.input_shape(0);
  bool compatible = got.rank() == shape.rank();
  for (int64_t i = 0; compatible && i < got.rank(); ++i) compatible = got[i] == -1 || got[i] == shape[i];
  if (!compatible)
    ctx.fail("variable '" + var + "' has shape " + shape.to_string() + ", the value has shape " + got.to_string());
  ctx.set_num_outputs(0);
}

void infer_no_op(InferContext& ctx) { ctx.set_num_outputs(0); }

}  // namespace

void register_graph_defs() {
  const std::vector<AttrSpec> var_attrs = {
      {"var", AttrType::String}, {"dtype", AttrType::Type}, {"shape", AttrType::Shape}};
  // Stateful: two placeholders are never merged by CSE, however alike.
  op_registry().add({.name = "Placeholder", .display = "placeholder", .attrs = {{"dtype", AttrType::Type},
                     {"shape", AttrType::Shape}}, .infer = infer_placeholder,
                     .flags = kStateful | kNotDifferentiable, .kernel_dtype_input = -1});
  op_registry().add({.name = "Const", .display = "constant", .attrs = {{"value", AttrType::Tensor}},
                     .infer = infer_const, .flags = kSetsOutputs | kNotDifferentiable, .kernel_dtype_input = -1});
  // Reads are stateful (never merged or folded: a read after an assignment differs from the one
  // before) but prunable.
  op_registry().add({.name = "ReadVariable", .display = "read_variable", .attrs = var_attrs,
                     .infer = infer_placeholder, .flags = kStateful | kSetsOutputs, .kernel_dtype_input = -1});
  // The variable's own buffer, made private first (copied if anything else holds it), for the
  // optimizer ops that update it in place.
  op_registry().add({.name = "ReadVariableForUpdate", .display = "read_variable_for_update", .attrs = var_attrs,
                     .infer = infer_placeholder, .flags = kStateful | kSideEffect | kSetsOutputs | kNotDifferentiable,
                     .kernel_dtype_input = -1});
  for (const char* name : {"AssignVariable", "AssignAddVariable", "AssignSubVariable"})
    op_registry().add({.name = name, .display = name, .min_inputs = 1, .max_inputs = 1, .num_outputs = 0,
                       .attrs = var_attrs, .infer = infer_assign,
                       .flags = kStateful | kSideEffect | kNotDifferentiable});
  op_registry().add({.name = "NoOp", .display = "no_op", .num_outputs = 0, .infer = infer_no_op,
                     .flags = kStateful | kNotDifferentiable, .kernel_dtype_input = -1});
}

}  // namespace weft::defs
