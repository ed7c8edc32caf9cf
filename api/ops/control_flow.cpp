// Gradients of If and While (front-ends in api/control_flow.h). Eager cond and while_loop need
// none: a tape sees the ops that ran. The If and While nodes of traced code are differentiated
// here, with front-end ops, so the gradient is itself traced: a cond of the two branches'
// gradients, and a while_loop running the body's gradient backwards.
//
// A subgraph's gradient is taken by replaying it through the dispatch funnel (call_graph) under a
// fresh tape, and asking that tape for the vector-Jacobian product. Replaying recomputes the
// subgraph's values instead of keeping them from the forward run, which keeps the forward ops
// free of extra outputs; replays leave side effects out (see call_graph).
#include <vector>

#include "api/control_flow.h"
#include "api/gradient_registry.h"
#include "api/gradient_tape.h"
#include "api/ops/array.h"
#include "api/ops/creation.h"
#include "api/ops/math.h"
#include "api/ops/reduce.h"
#include "api/ops/register_gradients.h"
#include "runtime/graph.h"

namespace weft {

namespace {

// d/d args[want[k]] of sum_i sum(ys_i * dys_i) where ys = g(args); dys_i undefined: no gradient
// reaches result i.
std::vector<Tensor> vjp(const GraphIR& g, std::span<const Tensor> args, std::span<const Tensor> dys,
                        const std::vector<size_t>& want) {
  std::vector<Tensor> xs(args.begin(), args.end());
  GradientTape tape;
  std::vector<Tensor> sources;
  for (size_t j : want) {
    // A fresh handle per argument: the same tensor may be passed twice (a loop variable also
    // captured by the body), and the tape would merge the two gradients.
    xs[j] = identity(xs[j]);
    tape.watch(xs[j]);
    sources.push_back(xs[j]);
  }
  std::vector<Tensor> ys = call_graph(g, xs);
  Tensor target;
  for (size_t i = 0; i < ys.size() && i < dys.size(); ++i) {
    if (!dys[i].defined() || !is_floating(ys[i].dtype())) continue;
    Tensor term = reduce_sum(mul(ys[i], dys[i]));
    target = target.defined() ? add(target, term) : term;
  }
  if (!target.defined()) {
    std::vector<Tensor> zero;
    for (const Tensor& s : sources) zero.push_back(zeros_like(s));
    return zero;
  }
  return tape.gradient(target, sources);
}

std::vector<Tensor> if_grad(const GradContext& ctx) {
  const GraphIR& then_g = *ctx.attrs.get<GraphAttr>("then_branch");
  const GraphIR& else_g = *ctx.attrs.get<GraphAttr>("else_branch");
  std::span<const Tensor> args = ctx.inputs.subspan(1);
  std::vector<Tensor> result(ctx.inputs.size());
  std::vector<size_t> want;
  for (size_t j = 0; j < args.size(); ++j)
    if (is_floating(args[j].dtype()) && ctx.needs(static_cast<int>(j + 1))) want.push_back(j);
  if (want.empty()) return result;
  std::vector<Tensor> dys(ctx.output_grads.size());
  for (size_t i = 0; i < dys.size(); ++i)
    if (ctx.has_grad(static_cast<int>(i))) dys[i] = ctx.grad(static_cast<int>(i));
  std::vector<Tensor> grads = control_flow_detail::cond(
      ctx.input(0), [&] { return vjp(then_g, args, dys, want); }, [&] { return vjp(else_g, args, dys, want); },
      SourceLocation::current());
  for (size_t k = 0; k < want.size(); ++k) result[want[k] + 1] = grads[k];
  return result;
}

// The body's gradient, run backwards: for i = n-1 .. 0, the state entering iteration i is
// recomputed by replaying the body i times from the initial values, and the gradient carried so
// far goes back through one body step. That is O(n^2) body evaluations for n iterations, traded
// for keeping no per-iteration state (TensorFlow stacks every iteration's intermediates instead);
// fine for the short loops this is meant for.
std::vector<Tensor> while_grad(const GradContext& ctx) {
  const GraphIR& body = *ctx.attrs.get<GraphAttr>("body");
  const size_t n = static_cast<size_t>(ctx.attrs.get<int64_t>("num_loop_vars"));
  std::span<const Tensor> init = ctx.inputs.first(n);
  std::span<const Tensor> captures = ctx.inputs.subspan(n);
  std::vector<Tensor> result(ctx.inputs.size());

  // Gradients are carried for every floating loop variable (one may feed another that is
  // wanted) and accumulated for the wanted floating captures.
  std::vector<size_t> carried, wanted_captures;
  bool any_wanted = false;
  for (size_t i = 0; i < n; ++i)
    if (is_floating(init[i].dtype())) {
      carried.push_back(i);
      any_wanted |= ctx.needs(static_cast<int>(i));
    }
  for (size_t j = 0; j < captures.size(); ++j)
    if (is_floating(captures[j].dtype()) && ctx.needs(static_cast<int>(n + j))) wanted_captures.push_back(j);
  if (!any_wanted && wanted_captures.empty()) return result;
  const size_t nc = carried.size();
  const SourceLocation loc = SourceLocation::current();

  // Loop variables: [i, gradient of each carried variable..., gradient of each wanted capture...].
  std::vector<Tensor> state{sub(ctx.output(static_cast<int>(n)), 1)};
  for (size_t i : carried) state.push_back(ctx.grad(static_cast<int>(i)));
  for (size_t j : wanted_captures) state.push_back(zeros_like(captures[j]));
  // vjp arguments: the body's (loop variables, then captures); which of them get gradients.
  std::vector<size_t> want = carried;
  for (size_t j : wanted_captures) want.push_back(n + j);

  auto backward_cond = [](const std::vector<Tensor>& v) { return greater_equal(v[0], 0); };
  auto backward_body = [&](const std::vector<Tensor>& v) {
    const Tensor& i = v[0];
    std::vector<Tensor> replay{constant(int64_t{0})};
    replay.insert(replay.end(), init.begin(), init.end());
    std::vector<Tensor> entering = control_flow_detail::while_loop(
        [&](const std::vector<Tensor>& r) { return less(r[0], i); },
        [&](const std::vector<Tensor>& r) {
          std::vector<Tensor> args(r.begin() + 1, r.end());
          args.insert(args.end(), captures.begin(), captures.end());
          std::vector<Tensor> next = call_graph(body, args);
          next.insert(next.begin(), add(r[0], 1));
          return next;
        },
        replay, {}, loc);
    std::vector<Tensor> args(entering.begin() + 1, entering.begin() + 1 + static_cast<std::ptrdiff_t>(n));
    args.insert(args.end(), captures.begin(), captures.end());
    std::vector<Tensor> dys(n);
    for (size_t k = 0; k < nc; ++k) dys[carried[k]] = v[1 + k];
    std::vector<Tensor> g = vjp(body, args, dys, want);
    std::vector<Tensor> next{sub(i, 1)};
    for (size_t k = 0; k < nc; ++k) next.push_back(g[k]);
    for (size_t k = 0; k < wanted_captures.size(); ++k) next.push_back(add(v[1 + nc + k], g[nc + k]));
    return next;
  };
  std::vector<Tensor> out = control_flow_detail::while_loop(backward_cond, backward_body, state, {}, loc);
  for (size_t k = 0; k < nc; ++k) result[carried[k]] = out[1 + k];
  for (size_t k = 0; k < wanted_captures.size(); ++k) result[n + wanted_captures[k]] = out[1 + nc + k];
  return result;
}

}  // namespace

void register_control_flow_gradients() {
  register_gradient("If", if_grad);
  register_gradient("While", while_grad);
}

}  // namespace weft
