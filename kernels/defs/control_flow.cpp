// Definitions of the functional control-flow ops, whose bodies are subgraphs held as attributes
// (TensorFlow's If and While):
//
//   If(pred, args...)            then_branch, else_branch: graphs taking args..., with the same
//                                number and dtypes of results; outputs: those results
//   While(vars..., captures...)  cond: graph (vars..., captures...) -> bool scalar
//                                body: graph (vars..., captures...) -> vars...
//                                num_loop_vars, max_iterations (-1: no limit)
//                                outputs: the final vars..., then the iteration count (int64)
//
// Both branches of an If take the same argument list (the union of what they capture), and so do
// the condition and body of a While, so no index maps are needed. The checks live here rather
// than in the front-ends so that a graph loaded from a file is validated the same way.
//
// Flags: stateful, so CSE and constant folding leave them alone (their subgraphs may read
// variables or print); kSetsOutputs, as the branch taken decides the outputs' buffers and, where
// the branches disagree, shapes.
#include "kernels/defs/shape_fns.h"
#include "kernels/register_all.h"
#include "runtime/graph.h"

namespace weft::defs {

namespace {

std::string describe(const TensorMeta& m) { return std::string(dtype_name(m.dtype)) + " " + m.shape.to_string(); }

bool compatible(const Shape& a, const Shape& b) {
  if (a.rank() != b.rank()) return false;
  for (int64_t i = 0; i < a.rank(); ++i)
    if (a[i] >= 0 && b[i] >= 0 && a[i] != b[i]) return false;
  return true;
}

// Equal dims stay, the others become unknown.
Shape merge(const Shape& a, const Shape& b) {
  std::vector<int64_t> dims(static_cast<size_t>(a.rank()));
  for (int64_t i = 0; i < a.rank(); ++i) dims[static_cast<size_t>(i)] = a[i] == b[i] ? a[i] : -1;
  return Shape(dims);
}

const GraphIR& subgraph(const InferContext& ctx, std::string_view attr) {
  const GraphAttr& g = ctx.attrs().get<GraphAttr>(attr);
  if (!g) ctx.fail("attribute '" + std::string(attr) + "' holds no graph");
  return *g;
}

// The subgraph must take exactly the inputs [first, num_inputs) with their dtypes and shapes.
void check_args(const InferContext& ctx, const GraphIR& g, std::string_view what, int first) {
  const int want = ctx.num_inputs() - first;
  if (static_cast<int>(g.args.size()) != want)
    ctx.fail(std::string(what) + " takes " + std::to_string(g.args.size()) + " arguments, the node passes " +
             std::to_string(want));
  for (int i = 0; i < want; ++i) {
    const TensorMeta& arg = g.meta({g.args[static_cast<size_t>(i)], 0});
    const TensorMeta in{ctx.input_dtype(first + i), ctx.input_shape(first + i)};
    if (arg.dtype != in.dtype || !compatible(arg.shape, in.shape))
      ctx.fail(std::string(what) + " argument " + std::to_string(i) + " is " + describe(arg) + ", the node passes " +
               describe(in));
  }
}

void check_pred(const InferContext& ctx, const TensorMeta& pred, const std::string& what) {
  if (pred.dtype != DType::Bool || pred.shape.rank() != 0)
    ctx.fail(what + " must be a bool scalar, got " + describe(pred));
}

void infer_if(InferContext& ctx) {
  if (ctx.num_inputs() < 1) ctx.fail("needs a predicate input");
  check_pred(ctx, {ctx.input_dtype(0), ctx.input_shape(0)}, "pred");
  const GraphIR& then_g = subgraph(ctx, "then_branch");
  const GraphIR& else_g = subgraph(ctx, "else_branch");
  check_args(ctx, then_g, "then branch", 1);
  check_args(ctx, else_g, "else branch", 1);
  if (then_g.results.size() != else_g.results.size())
    ctx.fail("the then branch returns " + std::to_string(then_g.results.size()) + " values, the else branch " +
             std::to_string(else_g.results.size()));
  ctx.set_num_outputs(static_cast<int>(then_g.results.size()));
  for (size_t i = 0; i < then_g.results.size(); ++i) {
    const TensorMeta& a = then_g.meta(then_g.results[i]);
    const TensorMeta& b = else_g.meta(else_g.results[i]);
    if (a.dtype != b.dtype || a.shape.rank() != b.shape.rank())
      ctx.fail("result " + std::to_string(i) + ": the then branch returns " + describe(a) +
               ", the else branch returns " + describe(b) + "; both branches must return the same dtypes and ranks");
    ctx.set_output(static_cast<int>(i), a.dtype, merge(a.shape, b.shape));
  }
}

void infer_while(InferContext& ctx) {
  const int64_t n = ctx.attrs().get<int64_t>("num_loop_vars");
  if (n < 0 || n > ctx.num_inputs())
    ctx.fail("num_loop_vars is " + std::to_string(n) + " for " + std::to_string(ctx.num_inputs()) + " inputs");
  const GraphIR& cond = subgraph(ctx, "cond");
  const GraphIR& body = subgraph(ctx, "body");
  check_args(ctx, cond, "cond", 0);
  check_args(ctx, body, "body", 0);
  if (cond.results.size() != 1)
    ctx.fail("cond returns " + std::to_string(cond.results.size()) + " values; it must return one bool scalar");
  check_pred(ctx, cond.meta(cond.results[0]), "cond's result");
  if (static_cast<int64_t>(body.results.size()) != n)
    ctx.fail("body returns " + std::to_string(body.results.size()) + " values for " + std::to_string(n) +
             " loop variables");
  ctx.set_num_outputs(static_cast<int>(n + 1));
  for (int i = 0; i < n; ++i) {
    const TensorMeta in{ctx.input_dtype(i), ctx.input_shape(i)};
    const TensorMeta& out = body.meta(body.results[static_cast<size_t>(i)]);
    if (in.dtype != out.dtype || !compatible(in.shape, out.shape))
      ctx.fail("loop variable " + std::to_string(i) + " enters the loop as " + describe(in) + " but the body returns " +
               describe(out) + "; the body must keep each loop variable's dtype and shape");
    ctx.set_output(i, in.dtype, merge(in.shape, out.shape));
  }
  ctx.set_output(static_cast<int>(n), DType::Int64, Shape{});
}

}  // namespace

void register_control_flow_defs() {
  // kernel_dtype_input -1: kernels are registered for every dtype, whichever output 0 has.
  op_registry().add({.name = "If", .display = "cond", .min_inputs = 1, .max_inputs = -1, .num_outputs = -1,
                     .attrs = {{"then_branch", AttrType::Graph}, {"else_branch", AttrType::Graph}},
                     .infer = infer_if, .flags = kStateful | kSetsOutputs, .kernel_dtype_input = -1});
  op_registry().add({.name = "While", .display = "while_loop", .min_inputs = 0, .max_inputs = -1, .num_outputs = -1,
                     .attrs = {{"cond", AttrType::Graph}, {"body", AttrType::Graph},
                               {"num_loop_vars", AttrType::Int}, {"max_iterations", AttrType::Int, false}},
                     .infer = infer_while, .flags = kStateful | kSetsOutputs, .kernel_dtype_input = -1});
}

}  // namespace weft::defs
