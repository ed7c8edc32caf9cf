// Attributes: the non-tensor parameters of an op (axes, perm, dtype, seed, ...). A small list of
// (name, value) pairs: ops have few attributes, and a linear scan beats a map at this size.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"

namespace weft {

class GraphIR;
// The subgraphs of control-flow ops (the branches of If, the condition and body of While).
using GraphAttr = std::shared_ptr<const GraphIR>;

using AttrValue =
    std::variant<bool, int64_t, double, DType, Shape, std::vector<int64_t>, std::string, Tensor, GraphAttr>;

enum class AttrType { Bool, Int, Float, Type, Shape, IntList, String, Tensor, Graph };
AttrType attr_type(const AttrValue& v);
const char* attr_type_name(AttrType t);

class Attrs {
 public:
  Attrs() = default;
  Attrs(std::initializer_list<std::pair<std::string, AttrValue>> items) : items_(items) {}

  void set(std::string_view name, AttrValue value);
  const AttrValue* find(std::string_view name) const;
  bool empty() const { return items_.empty(); }
  size_t size() const { return items_.size(); }
  auto begin() const { return items_.begin(); }
  auto end() const { return items_.end(); }

  // The attribute as T; InvalidArgument when it is missing or of another type.
  template <class T>
  const T& get(std::string_view name) const {
    const AttrValue* v = find(name);
    if (!v) missing(name);
    if (const T* p = std::get_if<T>(v)) return *p;
    wrong_type(name, *v);
  }
  template <class T>
  T get_or(std::string_view name, T fallback) const {
    const AttrValue* v = find(name);
    if (!v) return fallback;
    if (const T* p = std::get_if<T>(v)) return *p;
    wrong_type(name, *v);
  }

 private:
  [[noreturn]] static void missing(std::string_view name);
  [[noreturn]] static void wrong_type(std::string_view name, const AttrValue& v);
  std::vector<std::pair<std::string, AttrValue>> items_;
};

}  // namespace weft
