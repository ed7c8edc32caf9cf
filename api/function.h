// weft::function: the tf.function of weft. Trace once per signature, run the optimised graph.
//
//   auto step = weft::function([&](Tensor x, Tensor y) {
//     GradientTape tape;
//     Tensor loss = nn::sparse_softmax_cross_entropy(y, model(x, true));
//     opt.apply_gradients(tape.gradient(loss, model.trainable_variables()), model.trainable_variables());
//     return loss;
//   });
//   Tensor loss = step(x, y);   // first call with this signature traces; later calls run the graph
//   step.tracing_count();       // 1
//   step.graph(x, y);           // the optimised Graph for that signature
//
// Arguments and the signature (api/function_signature.h):
// - A Tensor argument becomes a placeholder; the signature holds its dtype and shape.
// - Tensors inside std::vector, std::array, std::pair, std::tuple and std::optional, nested in any
//   way, become placeholders too, in order (as tf.nest flattens): the body receives a container
//   of the same structure holding the stand-ins. The signature holds that structure (a vector's
//   length, whether an optional is empty), never the tensors' values, so
//     auto sum = weft::function([](const std::vector<Tensor>& xs) { return xs[0] + xs[1]; });
//     sum(std::vector<Tensor>{x, y});   // traces once for two scalars, then feeds new values
//   A container of another length retraces. std::tie(x, y) works: the body gets a
//   std::tuple<Tensor, Tensor>.
// - Every other argument is keyed by its exact value and its type, and passed to the body as is:
//   floats and doubles exactly (1.000001f is not 1.0f, -0.0 is not 0.0; every NaN is one key),
//   integers, bools and enums by value and type (1, 1u, 1.0 and true are four signatures),
//   strings by their characters, Shape and DType by value, Variables by identity (the trace reads
//   the variable on every call), and containers of these element by element.
// - Any other type is a compile-time error naming it, unless it specialises weft::SignatureKey:
//     template <> struct weft::SignatureKey<Activation> {
//       static std::string key(const Activation& a) { return a.name + "/" + std::to_string(a.slope); }
//     };
//   Equal keys share a trace, so the key must cover everything the body's trace depends on.
//   weft::is_keyable_v<T> says whether T may be an argument. Objects the body only uses (a model,
//   an optimizer) are captured by the lambda, not passed.
// - A placeholder is named input_<i>, i counting the flattened tensors; an input_signature lists
//   them in that order. graph() and save() take the same arguments as a call.
// A call whose arguments are all Tensors allocates nothing to match its signature.
//
// Results may be a Tensor, a std::vector<Tensor>, a std::tuple of Tensors, or nothing.
//
// Called while a GradientTape outside records, the traced graph runs and the tape records the call
// as one op, whose gradient runs a traced backward graph (api/function_gradient.h, which also says
// when the body runs eagerly instead).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/function_core.h"
#include "api/function_signature.h"
#include "api/graph.h"
#include "api/saved_model.h"
#include "api/variable.h"

namespace weft {

namespace function_detail {

template <class T>
struct is_tensor_tuple : std::false_type {};
template <class... Ts>
struct is_tensor_tuple<std::tuple<Ts...>> : std::bool_constant<(std::is_same_v<Ts, Tensor> && ...)> {};

template <class R>
std::vector<Tensor> to_results(R&& r) {
  using D = std::remove_cvref_t<R>;
  if constexpr (std::is_same_v<D, Tensor>) {
    return {std::forward<R>(r)};
  } else if constexpr (std::is_same_v<D, std::vector<Tensor>>) {
    return std::forward<R>(r);
  } else {
    static_assert(is_tensor_tuple<D>::value,
                  "weft::function: the body must return Tensor, std::vector<Tensor>, std::tuple<Tensor...> or void");
    return std::apply([](auto&&... t) { return std::vector<Tensor>{t...}; }, std::forward<R>(r));
  }
}

template <class R>
R from_results(std::vector<Tensor>&& out) {
  if constexpr (std::is_void_v<R>) {
    return;
  } else if constexpr (std::is_same_v<R, Tensor>) {
    return std::move(out.at(0));
  } else if constexpr (std::is_same_v<R, std::vector<Tensor>>) {
    return std::move(out);
  } else {
    return [&]<size_t... I>(std::index_sequence<I...>) { return R{std::move(out.at(I))...}; }(
        std::make_index_sequence<std::tuple_size_v<R>>{});
  }
}

}  // namespace function_detail

template <class F>
class Function {
 public:
  Function(F fn, FunctionOptions options)
      : fn_(std::make_shared<F>(std::move(fn))), core_(std::make_shared<FunctionCore>(std::move(options))) {}

  template <class... Args>
  auto operator()(Args&&... args) {
    using R = result_t<Args...>;
    // The arguments outlive the call, so their tensors are borrowed: a call of a small graph is
    // made of little more than such reference-count updates.
    function_detail::FlatArguments<std::remove_reference_t<Args>...> flat(args...);
    auto body = [&](std::span<const Tensor> stand_ins) -> std::vector<Tensor> { return invoke<R>(stand_ins, args...); };
    return function_detail::from_results<R>(core_->call(flat.tensors(), flat.key(), FunctionBody(body)));
  }

  // The optimised graph for this signature, tracing it if needed.
  template <class... Args>
  Graph graph(Args&&... args) {
    using R = result_t<Args...>;
    function_detail::FlatArguments<std::remove_reference_t<Args>...> flat(args...);
    auto body = [&](std::span<const Tensor> stand_ins) -> std::vector<Tensor> { return invoke<R>(stand_ins, args...); };
    return Graph(core_->graph_for(flat.tensors(), flat.key(), FunctionBody(body)));
  }

  // Writes the graph traced for this signature (tracing it if needed) and the values of the
  // variables it uses to `dir` (api/saved_model.h), for Graph::load and weft-run.
  template <class... Args>
  void save(const std::string& dir, Args&&... args) {
    save_function_graph(dir, graph(std::forward<Args>(args)...).ir());
  }

  int tracing_count() const { return core_->tracing_count(); }
  FunctionCore& core() const { return *core_; }

 private:
  template <class... Args>
  using result_t = std::invoke_result_t<F&, function_detail::prepared_t<std::remove_reference_t<Args>>...>;

  // Calls the body with the stand-ins in place of the call's tensors. Built into a tuple first:
  // braces evaluate left to right, the order the tensors were flattened in.
  template <class R, class... Args>
  std::vector<Tensor> invoke(std::span<const Tensor> stand_ins, Args&... args) {
    [[maybe_unused]] const Tensor* next = stand_ins.data();
    std::tuple<function_detail::prepared_t<Args>...> prepared{function_detail::prepare<Args>(args, next)...};
    if constexpr (std::is_void_v<R>) {
      std::apply(*fn_, std::move(prepared));
      return {};
    } else {
      return function_detail::to_results(std::apply(*fn_, std::move(prepared)));
    }
  }

  std::shared_ptr<F> fn_;
  std::shared_ptr<FunctionCore> core_;
};

template <class F>
Function<F> function(F fn, FunctionOptions options = {}) {
  return Function<F>(std::move(fn), std::move(options));
}

}  // namespace weft
