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
// The signature is each Tensor argument's dtype and shape, plus the value of every other
// argument (numbers, strings, bools; Variables and other objects by identity). Tensor arguments
// become placeholders; everything else is passed to the body as is. Results may be a Tensor, a
// std::vector<Tensor>, a std::tuple of Tensors, or nothing.
//
// Called while a GradientTape outside records, the traced graph runs and the tape records the call
// as one op, whose gradient runs a traced backward graph (api/function_gradient.h, which also says
// when the body runs eagerly instead).
#pragma once

#include <array>
#include <memory>
#include <span>
#include <sstream>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/function_core.h"
#include "api/graph.h"
#include "api/saved_model.h"
#include "api/variable.h"

namespace weft {

namespace function_detail {

template <class T>
inline constexpr bool is_tensor_v = std::is_same_v<std::remove_cvref_t<T>, Tensor>;

template <class T>
struct is_tensor_tuple : std::false_type {};
template <class... Ts>
struct is_tensor_tuple<std::tuple<Ts...>> : std::bool_constant<(std::is_same_v<Ts, Tensor> && ...)> {};

// The part of the signature a non-tensor argument contributes.
template <class T>
void append_key(std::string& key, const T& v) {
  using D = std::remove_cvref_t<T>;
  if (!key.empty()) key += ", ";
  if constexpr (std::is_same_v<D, bool>) {
    key += v ? "true" : "false";
  } else if constexpr (std::is_arithmetic_v<D>) {
    std::ostringstream os;
    os << v;
    key += os.str();
  } else if constexpr (std::is_enum_v<D>) {
    key += std::to_string(static_cast<long long>(v));
  } else if constexpr (std::is_convertible_v<const D&, std::string_view>) {
    key += "'" + std::string(std::string_view(v)) + "'";
  } else if constexpr (std::is_same_v<D, Variable>) {
    std::ostringstream os;
    os << "Variable@" << static_cast<const void*>(v.id());
    key += os.str();
  } else {
    std::ostringstream os;
    os << "object@" << static_cast<const void*>(&v);
    key += os.str();
  }
}

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

// Position of each argument among the tensor arguments (-1 for the others).
template <class... Args>
constexpr std::array<int, sizeof...(Args)> tensor_positions() {
  constexpr bool is_t[] = {is_tensor_v<Args>..., false};
  std::array<int, sizeof...(Args)> pos{};
  int k = 0;
  for (size_t i = 0; i < sizeof...(Args); ++i) pos[i] = is_t[i] ? k++ : -1;
  return pos;
}

}  // namespace function_detail

template <class F>
class Function {
 public:
  Function(F fn, FunctionOptions options)
      : fn_(std::make_shared<F>(std::move(fn))), core_(std::make_shared<FunctionCore>(std::move(options))) {}

  template <class... Args>
  auto operator()(Args&&... args) {
    using R = std::invoke_result_t<F&, Args...>;
    // The arguments outlive the call, so the tensors are borrowed: a call of a small graph is
    // made of little more than such reference-count updates.
    BorrowedTensors<count_tensors<Args...>()> tensors;
    std::string key;
    collect(tensors.data(), key, args...);
    auto body = [&](std::span<const Tensor> stand_ins) -> std::vector<Tensor> {
      return invoke<R>(stand_ins, std::index_sequence_for<Args...>{}, args...);
    };
    return function_detail::from_results<R>(core_->call(tensors.span(), key, FunctionBody(body)));
  }

  // The optimised graph for this signature, tracing it if needed.
  template <class... Args>
  Graph graph(Args&&... args) {
    using R = std::invoke_result_t<F&, Args...>;
    BorrowedTensors<count_tensors<Args...>()> tensors;
    std::string key;
    collect(tensors.data(), key, args...);
    auto body = [&](std::span<const Tensor> stand_ins) -> std::vector<Tensor> {
      return invoke<R>(stand_ins, std::index_sequence_for<Args...>{}, args...);
    };
    return Graph(core_->graph_for(tensors.span(), key, FunctionBody(body)));
  }

  // Writes the graph traced for this signature (tracing it if needed) and the values of the
  // variables it uses to `dir` (api/saved_model.h), for Graph::load and weft-run.
  template <class... Args>
  void save(const std::string& dir, Args&&... args) {
    save_function_graph(dir, *graph(std::forward<Args>(args)...).ir_ptr());
  }

  int tracing_count() const { return core_->tracing_count(); }
  FunctionCore& core() const { return *core_; }

 private:
  template <size_t N>
  struct BorrowedTensors {
    std::array<Tensor, N> tensors;
    BorrowedTensors() = default;
    BorrowedTensors(const BorrowedTensors&) = delete;
    BorrowedTensors& operator=(const BorrowedTensors&) = delete;
    ~BorrowedTensors() {
      for (Tensor& t : tensors) t.forget_borrowed();
    }
    Tensor* data() { return tensors.data(); }
    std::span<const Tensor> span() const { return tensors; }
  };

  template <class... Args>
  static constexpr size_t count_tensors() {
    return (size_t{0} + ... + (function_detail::is_tensor_v<Args> ? 1 : 0));
  }

  template <class... Args>
  static void collect([[maybe_unused]] Tensor* tensors, [[maybe_unused]] std::string& key, const Args&... args) {
    [[maybe_unused]] size_t k = 0;  // unused by a function of no arguments
    (
        [&] {
          if constexpr (function_detail::is_tensor_v<Args>) tensors[k++] = Tensor::borrowed(args);
          else function_detail::append_key(key, args);
        }(),
        ...);
  }

  template <size_t I, class Arg>
  static decltype(auto) pick(std::span<const Tensor> stand_ins, Arg& arg, const int* positions) {
    if constexpr (function_detail::is_tensor_v<Arg>) return Tensor(stand_ins[static_cast<size_t>(positions[I])]);
    else return static_cast<Arg&>(arg);
  }

  template <class R, size_t... I, class... Args>
  std::vector<Tensor> invoke(std::span<const Tensor> stand_ins, std::index_sequence<I...>, Args&... args) {
    static constexpr auto positions = function_detail::tensor_positions<std::remove_cvref_t<Args>...>();
    if constexpr (std::is_void_v<R>) {
      (*fn_)(pick<I>(stand_ins, args, positions.data())...);
      return {};
    } else {
      return function_detail::to_results((*fn_)(pick<I>(stand_ins, args, positions.data())...));
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
