// Control flow: cond and while_loop, the tf.cond and tf.while_loop of weft.
//
//   Tensor y = cond(x > 0.f, [&] { return x * 2; }, [&] { return -x; });
//   std::vector<Tensor> r = while_loop(
//       [](const std::vector<Tensor>& v) { return v[0] < 10; },
//       [](const std::vector<Tensor>& v) -> std::vector<Tensor> { return {v[0] + 1, v[1] * 2}; },
//       {constant(0), x});
//
// Eager, they are plain C++: the predicate is read and one branch runs, or the loop runs until
// the condition is false, and a GradientTape sees the ops that ran. While a function is traced
// (or a GraphScope is open) each branch, and the condition and body, are traced once into their
// own subgraph, and one If or While node runs them: only the branch taken runs, and print or a
// variable assignment inside it happens only then. Tensors of the enclosing code used inside are
// captured as extra inputs of the node, variable reads too, so gradients reach them.
//
// Both branches return a Tensor, or both a std::vector<Tensor>; traced, they must agree in
// number, dtypes and ranks (dims they disagree on become unknown). The body returns one tensor per
// loop variable with its dtype and shape. The predicate and the condition's result are bool
// scalars. Variables cannot be created inside either.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <type_traits>
#include <vector>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft {

class GraphIR;

struct WhileLoopOptions {
  // Stop after this many iterations even if the condition still holds; -1: no limit.
  int64_t max_iterations = -1;
};

namespace control_flow_detail {

using Branch = std::function<std::vector<Tensor>()>;
using LoopCond = std::function<Tensor(const std::vector<Tensor>&)>;
using LoopBody = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

std::vector<Tensor> cond(const Tensor& pred, const Branch& then_fn, const Branch& else_fn, const SourceLocation& loc);
// The final loop variables, then the number of iterations run (an int64 scalar).
std::vector<Tensor> while_loop(const LoopCond& cond_fn, const LoopBody& body_fn, std::vector<Tensor> loop_vars,
                               const WhileLoopOptions& options, const SourceLocation& loc);

template <class R>
inline constexpr bool is_single_v = std::is_convertible_v<R, Tensor>;
template <class R>
inline constexpr bool is_list_v = !is_single_v<R> && std::is_convertible_v<R, std::vector<Tensor>>;

template <class R>
std::vector<Tensor> as_list(R&& r) {
  if constexpr (is_single_v<std::remove_cvref_t<R>>) return {Tensor(std::forward<R>(r))};
  else return std::vector<Tensor>(std::forward<R>(r));
}

}  // namespace control_flow_detail

// then_fn() if pred, else else_fn(). Returns a Tensor when the branches return one, else a
// std::vector<Tensor>.
template <class F, class G>
auto cond(const Tensor& pred, F&& then_fn, G&& else_fn, const SourceLocation& loc = SourceLocation::current()) {
  using A = std::remove_cvref_t<std::invoke_result_t<F&>>;
  using B = std::remove_cvref_t<std::invoke_result_t<G&>>;
  namespace d = control_flow_detail;
  static_assert((d::is_single_v<A> && d::is_single_v<B>) || (d::is_list_v<A> && d::is_list_v<B>),
                "[cond] both branches must return a Tensor, or both a std::vector<Tensor>");
  std::vector<Tensor> out = d::cond(
      pred, [&] { return d::as_list(then_fn()); }, [&] { return d::as_list(else_fn()); }, loc);
  if constexpr (d::is_single_v<A>) return Tensor(out.at(0));
  else return out;
}

// Runs body_fn while cond_fn holds, starting from loop_vars; returns the final loop variables.
// cond_fn: (const std::vector<Tensor>&) -> bool scalar Tensor; body_fn: (const
// std::vector<Tensor>&) -> std::vector<Tensor> (or a Tensor, with one loop variable).
template <class C, class B>
std::vector<Tensor> while_loop(C&& cond_fn, B&& body_fn, std::vector<Tensor> loop_vars, WhileLoopOptions options = {},
                               const SourceLocation& loc = SourceLocation::current()) {
  namespace d = control_flow_detail;
  std::vector<Tensor> out = d::while_loop(
      [&](const std::vector<Tensor>& v) { return Tensor(cond_fn(v)); },
      [&](const std::vector<Tensor>& v) { return d::as_list(body_fn(v)); }, std::move(loop_vars), options, loc);
  out.pop_back();  // the iteration count
  return out;
}

// Runs `g` (a function body: args in, results out) on `args` by dispatching its nodes one by one:
// eagerly when no graph is being built, else into the graph being built; tapes see every op.
// It recomputes values (gradients of If and While are built with it), so side effects are left
// out: prints do not print and variable writes do not happen; reads see the current value.
std::vector<Tensor> call_graph(const GraphIR& g, std::span<const Tensor> args,
                               const SourceLocation& loc = SourceLocation::current());

}  // namespace weft
