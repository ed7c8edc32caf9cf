// How weft::function (api/function.h) turns a call's arguments into a signature: the tensors it
// feeds to the traced graph, in order, and a text key for everything else.
//
// Tensors, also inside std::vector, std::array, std::pair, std::tuple and std::optional (nested
// as deep as wanted), are flattened into the fed list, as tf.nest does; the key records where
// they sit (vector lengths, whether an optional holds one), never their values. Every other
// value is keyed by its exact value and its type: floats by value as written by std::to_chars
// (shortest round trip, so -0.0 is not 0.0; all NaNs are one key), integers with their C++
// suffix, strings quoted and escaped, enums by type and value, Variables by identity. A type
// weft cannot key is refused at compile time unless it specialises weft::SignatureKey (below).
#pragma once

#include <algorithm>
#include <array>
#include <charconv>
#include <cmath>
#include <concepts>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "api/variable.h"
#include "runtime/tensor_lending.h"
#include "runtime/tensor.h"

namespace weft {

// The customisation point for keying a type of one's own:
//
//   template <> struct weft::SignatureKey<Activation> {
//     static std::string key(const Activation& a) { return a.name + "/" + std::to_string(a.slope); }
//   };
//
// Calls whose keys are equal share a trace, so the key must tell apart every two values the
// trace could differ for. Such a value is passed to the body as it is; tensors held inside it are
// not fed to the graph but taken as constants of the trace.
template <class T>
struct SignatureKey {};

template <>
struct SignatureKey<Shape> {
  static std::string key(const Shape& s) { return s.to_string(); }
};
template <>
struct SignatureKey<DType> {
  static std::string key(DType d) { return std::string(dtype_name(d)); }
};

namespace function_detail {

template <class T>
concept custom_keyed = requires(const T& v) {
  { SignatureKey<T>::key(v) } -> std::convertible_to<std::string>;
};

template <class T> struct is_vector : std::false_type {};
template <class E> struct is_vector<std::vector<E, std::allocator<E>>> : std::true_type {};
template <class T> struct is_array : std::false_type {};
template <class E, size_t N> struct is_array<std::array<E, N>> : std::true_type {};
template <class T> struct is_pair : std::false_type {};
template <class A, class B> struct is_pair<std::pair<A, B>> : std::true_type {};
template <class T> struct is_tuple : std::false_type {};
template <class... Ts> struct is_tuple<std::tuple<Ts...>> : std::true_type {};
template <class T> struct is_optional : std::false_type {};
template <class E> struct is_optional<std::optional<E>> : std::true_type {};

template <class D>
inline constexpr bool is_char_array_v = std::is_array_v<D> && std::rank_v<D> == 1 &&
                                        std::is_same_v<std::remove_cv_t<std::remove_extent_t<D>>, char>;
template <class D>
inline constexpr bool is_string_v = std::is_same_v<D, std::string> || std::is_same_v<D, std::string_view> ||
                                    std::is_same_v<D, const char*> || std::is_same_v<D, char*> || is_char_array_v<D>;

enum class Kind { tensor, custom, variable, boolean, integer, floating, enumeration, string, vector, array, pair, tuple, optional, unkeyable };

template <class D>
constexpr Kind kind_of() {
  if constexpr (std::is_same_v<D, Tensor>) return Kind::tensor;
  else if constexpr (custom_keyed<D>) return Kind::custom;
  else if constexpr (std::is_same_v<D, Variable>) return Kind::variable;
  else if constexpr (std::is_same_v<D, bool>) return Kind::boolean;
  else if constexpr (std::is_integral_v<D>) return Kind::integer;
  else if constexpr (std::is_floating_point_v<D>) return Kind::floating;
  else if constexpr (std::is_enum_v<D>) return Kind::enumeration;
  else if constexpr (is_string_v<D>) return Kind::string;
  else if constexpr (is_vector<D>::value) return Kind::vector;
  else if constexpr (is_array<D>::value) return Kind::array;
  else if constexpr (is_pair<D>::value) return Kind::pair;
  else if constexpr (is_tuple<D>::value) return Kind::tuple;
  else if constexpr (is_optional<D>::value) return Kind::optional;
  else return Kind::unkeyable;
}

template <class T>
struct Keyable;
template <class T>
inline constexpr bool keyable_v = Keyable<std::remove_cvref_t<T>>::value;

template <class D>
struct Keyable : std::bool_constant<kind_of<D>() != Kind::unkeyable> {};
template <class E>
struct Keyable<std::vector<E, std::allocator<E>>> : std::bool_constant<custom_keyed<std::vector<E>> || keyable_v<E>> {};
template <class E, size_t N>
struct Keyable<std::array<E, N>> : std::bool_constant<custom_keyed<std::array<E, N>> || keyable_v<E>> {};
template <class A, class B>
struct Keyable<std::pair<A, B>> : std::bool_constant<custom_keyed<std::pair<A, B>> || (keyable_v<A> && keyable_v<B>)> {};
template <class... Ts>
struct Keyable<std::tuple<Ts...>> : std::bool_constant<custom_keyed<std::tuple<Ts...>> || (keyable_v<Ts> && ...)> {};
template <class E>
struct Keyable<std::optional<E>> : std::bool_constant<custom_keyed<std::optional<E>> || keyable_v<E>> {};

// How many tensors a value of type T feeds: a count fixed by the type, or kDynamic where it
// depends on the value (a vector or optional holding tensors).
inline constexpr long kDynamic = -1;

template <class T>
constexpr long tensor_count() {
  using D = std::remove_cvref_t<T>;
  constexpr Kind k = kind_of<D>();
  if constexpr (k == Kind::tensor) {
    return 1;
  } else if constexpr (k == Kind::vector || k == Kind::optional) {
    return tensor_count<typename D::value_type>() == 0 ? 0 : kDynamic;
  } else if constexpr (k == Kind::array) {
    constexpr long n = tensor_count<typename D::value_type>();
    return n == kDynamic ? kDynamic : n * static_cast<long>(std::tuple_size_v<D>);
  } else if constexpr (k == Kind::pair || k == Kind::tuple) {
    return []<size_t... I>(std::index_sequence<I...>) {
      constexpr long counts[] = {tensor_count<std::tuple_element_t<I, D>>()..., 0};
      long total = 0;
      for (long c : counts) {
        if (c == kDynamic) return kDynamic;
        total += c;
      }
      return total;
    }(std::make_index_sequence<std::tuple_size_v<D>>{});
  } else {
    return 0;
  }
}

template <class T>
inline constexpr bool has_tensors_v = tensor_count<T>() != 0;

// The type's name as the compiler spells it, for keys that must tell types apart.
template <class T>
std::string_view type_name() {
#if defined(__clang__) || defined(__GNUC__)
  std::string_view p = __PRETTY_FUNCTION__;
  size_t start = p.find("T = ");
  if (start == std::string_view::npos) return "?";
  start += 4;
  size_t end = p.find(';', start);
  if (end == std::string_view::npos) end = p.rfind(']');
  return p.substr(start, end - start);
#elif defined(_MSC_VER)
  std::string_view p = __FUNCSIG__;
  size_t start = p.find("type_name<") + 10;
  return p.substr(start, p.rfind(">(") - start);
#else
  return "?";
#endif
}

inline void append_quoted(std::string& key, std::string_view s) {
  key += '"';
  for (char c : s) {
    if (c == '"' || c == '\\') {
      key += '\\';
      key += c;
    } else if (c == '\n') {
      key += "\\n";
    } else if (static_cast<unsigned char>(c) < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(static_cast<unsigned char>(c)));
      key += buf;
    } else {
      key += c;
    }
  }
  key += '"';
}

// Written as the C++ literal of its type where there is one (1, 1u, 1l, 1ull), else as a cast.
template <class D>
void append_integer(std::string& key, D v) {
  char buf[32];
  char* end;
  if constexpr (std::is_signed_v<D>) end = std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v)).ptr;
  else end = std::to_chars(buf, buf + sizeof buf, static_cast<unsigned long long>(v)).ptr;
  const std::string_view digits(buf, static_cast<size_t>(end - buf));
  const char* suffix = nullptr;
  if constexpr (std::is_same_v<D, int>) suffix = "";
  else if constexpr (std::is_same_v<D, unsigned>) suffix = "u";
  else if constexpr (std::is_same_v<D, long>) suffix = "l";
  else if constexpr (std::is_same_v<D, unsigned long>) suffix = "ul";
  else if constexpr (std::is_same_v<D, long long>) suffix = "ll";
  else if constexpr (std::is_same_v<D, unsigned long long>) suffix = "ull";
  if (suffix) {
    key += digits;
    key += suffix;
  } else {  // short, the char types
    key += type_name<D>();
    key += '(';
    key += digits;
    key += ')';
  }
}

// Exact: std::to_chars writes the shortest text that reads back as the same value, so two keys
// are equal exactly when the bits are (-0.0 keeps its sign), NaNs aside: every NaN is one key,
// so a NaN argument does not retrace on each call.
template <class D>
void append_floating(std::string& key, D v) {
  const char* type = std::is_same_v<D, float> ? "float" : std::is_same_v<D, double> ? "double" : "long double";
  if (std::isnan(v) || std::isinf(v)) {
    key += type;
    key += std::isnan(v) ? "(nan)" : v < 0 ? "(-inf)" : "(inf)";
    return;
  }
  char buf[64];
  char* end = std::to_chars(buf, buf + sizeof buf, v).ptr;
  const std::string_view text(buf, static_cast<size_t>(end - buf));
  key += text;
  if (text.find_first_of(".e") == std::string_view::npos) key += ".0";  // 1.0, not the int 1
  key += std::is_same_v<D, float> ? "f" : std::is_same_v<D, double> ? "" : "L";
}

// Receives the tensors of a call, lent (runtime/tensor_lending.h): the arguments outlive the call.
struct FixedSink {
  Tensor* out;
  void push(const Tensor& t) { *out++ = TensorLending::lend(t); }
};
struct ListSink {
  std::vector<Tensor>* out;
  void push(const Tensor& t) {
    out->emplace_back();  // may throw before anything is lent
    out->back() = TensorLending::lend(t);
  }
};

// Appends v's tensors to the sink and its key to `key`.
template <class D, class Sink>
void flatten(const D& v, Sink& sink, std::string& key);

template <class Sink, class It>
void flatten_elements(It begin, It end, Sink& sink, std::string& key) {
  for (It it = begin; it != end; ++it) {
    if (it != begin) key += ", ";
    flatten<std::remove_cvref_t<decltype(*it)>>(*it, sink, key);
  }
}

template <class Sink, class Tuple>
void flatten_fields(const Tuple& t, Sink& sink, std::string& key) {
  [&]<size_t... I>(std::index_sequence<I...>) {
    ((key += (I ? ", " : ""), flatten<std::remove_cvref_t<std::tuple_element_t<I, Tuple>>>(std::get<I>(t), sink, key)),
     ...);
  }(std::make_index_sequence<std::tuple_size_v<Tuple>>{});
}

template <class D, class Sink>
void flatten(const D& v, Sink& sink, std::string& key) {
  constexpr Kind k = kind_of<D>();
  if constexpr (k == Kind::tensor) {
    sink.push(v);
    key += "Tensor";
  } else if constexpr (k == Kind::custom) {
    key += type_name<D>();
    key += '{';
    for (char c : std::string(SignatureKey<D>::key(v))) {
      if (c == '{' || c == '}' || c == '\\') key += '\\';
      key += c;
    }
    key += '}';
  } else if constexpr (k == Kind::variable) {
    // By identity: the trace captures the variable itself and reads it on every call.
    char buf[32];
    std::snprintf(buf, sizeof buf, "@%p", static_cast<const void*>(v.id()));
    key += "Variable";
    if (v.defined()) append_quoted(key, v.name());
    key += buf;
  } else if constexpr (k == Kind::boolean) {
    key += v ? "true" : "false";
  } else if constexpr (k == Kind::integer) {
    append_integer(key, v);
  } else if constexpr (k == Kind::floating) {
    append_floating(key, v);
  } else if constexpr (k == Kind::enumeration) {
    using U = std::underlying_type_t<D>;
    char buf[32];
    char* end = std::is_signed_v<U> ? std::to_chars(buf, buf + sizeof buf, static_cast<long long>(v)).ptr
                                    : std::to_chars(buf, buf + sizeof buf, static_cast<unsigned long long>(v)).ptr;
    key += type_name<D>();
    key += '(';
    key += std::string_view(buf, static_cast<size_t>(end - buf));
    key += ')';
  } else if constexpr (k == Kind::string) {
    if constexpr (is_char_array_v<D>) {
      append_quoted(key, std::string_view(v, static_cast<size_t>(std::find(v, v + std::extent_v<D>, '\0') - v)));
    } else if constexpr (std::is_pointer_v<D>) {
      if (v) append_quoted(key, v);
      else key += "nullptr";
    } else {
      append_quoted(key, v);
    }
  } else if constexpr (k == Kind::vector || k == Kind::array) {
    if (v.empty()) {
      key += type_name<D>();  // an empty vector of tensors differs from an empty vector of ints
      key += "{}";
      return;
    }
    key += k == Kind::vector ? "[" : "array[";
    flatten_elements(v.begin(), v.end(), sink, key);
    key += ']';
  } else if constexpr (k == Kind::pair || k == Kind::tuple) {
    key += k == Kind::pair ? "pair(" : "tuple(";
    flatten_fields(v, sink, key);
    key += ')';
  } else if constexpr (k == Kind::optional) {
    if (!v) {
      key += type_name<D>();
      key += "{}";
      return;
    }
    key += "optional(";
    flatten<typename D::value_type>(*v, sink, key);
    key += ')';
  }
  // Kind::unkeyable was refused by check_argument before we got here.
}

// The value the body receives at trace time for an argument holding tensors: the same structure,
// with the stand-ins in place of the tensors (a std::tuple of references becomes one of values).
template <class D>
struct Rebuilt {
  using type = D;
};
template <class T>
using rebuilt_t = typename Rebuilt<std::remove_cvref_t<T>>::type;
template <class E>
struct Rebuilt<std::vector<E, std::allocator<E>>> {
  using type = std::vector<rebuilt_t<E>>;
};
template <class E, size_t N>
struct Rebuilt<std::array<E, N>> {
  using type = std::array<rebuilt_t<E>, N>;
};
template <class A, class B>
struct Rebuilt<std::pair<A, B>> {
  using type = std::pair<rebuilt_t<A>, rebuilt_t<B>>;
};
template <class... Ts>
struct Rebuilt<std::tuple<Ts...>> {
  using type = std::tuple<rebuilt_t<Ts>...>;
};
template <class E>
struct Rebuilt<std::optional<E>> {
  using type = std::optional<rebuilt_t<E>>;
};
template <size_t N>
struct Rebuilt<char[N]> {
  using type = std::string;
};

// `next` walks the stand-ins in the order flatten() lent the tensors.
template <class D>
rebuilt_t<D> rebuild(const D& v, const Tensor*& next) {
  constexpr Kind k = kind_of<D>();
  using Out = rebuilt_t<D>;
  if constexpr (!has_tensors_v<D> || k == Kind::custom) {
    return Out(v);
  } else if constexpr (k == Kind::tensor) {
    return Tensor(*next++);
  } else if constexpr (k == Kind::vector) {
    Out out;
    out.reserve(v.size());
    for (const auto& e : v) out.push_back(rebuild<typename D::value_type>(e, next));
    return out;
  } else if constexpr (k == Kind::optional) {
    return v ? Out(rebuild<typename D::value_type>(*v, next)) : Out();
  } else {  // array, pair, tuple: braces build the fields left to right, the order they were lent
    return [&]<size_t... I>(std::index_sequence<I...>) {
      return Out{rebuild<std::remove_cvref_t<std::tuple_element_t<I, D>>>(std::get<I>(v), next)...};
    }(std::make_index_sequence<std::tuple_size_v<D>>{});
  }
}

// What the body is called with for an argument of type Arg (as the call spelled it, without its
// reference): a tensor or a structure of tensors is rebuilt around the stand-ins; any other
// argument is passed as it is.
template <class Arg>
using prepared_t = std::conditional_t<has_tensors_v<Arg>, rebuilt_t<Arg>, Arg&>;

template <class Arg>
prepared_t<Arg> prepare(Arg& arg, const Tensor*& next) {
  if constexpr (has_tensors_v<Arg>) return rebuild<std::remove_cv_t<Arg>>(arg, next);
  else return arg;
}

template <class T>
struct check_argument {
  // When this fails, the T in "check_argument<T>" in the compiler's message is the type at fault.
  static_assert(keyable_v<T>,
                "weft::function: this argument type cannot be part of a signature. Arguments may be "
                "Tensors, Variables, numbers, bools, enums, strings, std::vector/array/pair/tuple/optional "
                "of those, or a type with a weft::SignatureKey<T> specialisation (api/function_signature.h). "
                "Capture other objects in the function's lambda instead.");
  static constexpr bool value = true;
};

// A call's arguments, flattened: the tensors it feeds (lent, see FixedSink) and the key of the
// rest. A call whose arguments are all plain Tensors keys nothing and allocates nothing.
template <class... Args>
class FlatArguments {
  static constexpr long kCount = [] {
    constexpr long counts[] = {tensor_count<Args>()..., 0};
    long total = 0;
    for (long c : counts) {
      if (c == kDynamic) return kDynamic;
      total += c;
    }
    return total;
  }();
  static constexpr bool kAllPlain = (std::is_same_v<std::remove_cvref_t<Args>, Tensor> && ...);
  using Storage = std::conditional_t<kCount == kDynamic, std::vector<Tensor>,
                                     std::array<Tensor, static_cast<size_t>(kCount == kDynamic ? 0 : kCount)>>;

 public:
  explicit FlatArguments(const Args&... args) {
    static_assert((check_argument<Args>::value && ...));
    if constexpr (kCount == kDynamic) {
      ListSink sink{&tensors_};
      collect(sink, args...);
    } else {
      FixedSink sink{tensors_.data()};
      collect(sink, args...);
    }
  }
  ~FlatArguments() {
    for (Tensor& t : tensors_) TensorLending::forget(t);
  }
  FlatArguments(const FlatArguments&) = delete;
  FlatArguments& operator=(const FlatArguments&) = delete;

  std::span<const Tensor> tensors() const { return tensors_; }
  const std::string& key() const { return key_; }

 private:
  template <class Sink>
  void collect([[maybe_unused]] Sink& sink, [[maybe_unused]] const Args&... args) {
    if constexpr (kAllPlain) {
      (sink.push(args), ...);
    } else {
      // Every argument has its part of the key, tensors too: f(x, 2.f) and f(2.f, x) must differ.
      [[maybe_unused]] bool first = true;
      ((key_ += first ? "" : ", ", first = false, flatten<std::remove_cvref_t<Args>>(args, sink, key_)), ...);
    }
  }

  Storage tensors_{};
  std::string key_;
};

}  // namespace function_detail

// Whether a value of type T may be an argument of a weft::function (see api/function.h).
template <class T>
inline constexpr bool is_keyable_v = function_detail::keyable_v<T>;

}  // namespace weft
