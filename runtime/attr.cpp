#include "runtime/attr.h"

#include <cstdio>

namespace weft {

AttrType attr_type(const AttrValue& v) { return static_cast<AttrType>(v.index()); }

const char* attr_type_name(AttrType t) {
  static const char* names[] = {"bool", "int", "float", "dtype", "shape", "int list", "string", "tensor", "graph"};
  return names[static_cast<int>(t)];
}

void Attrs::set(std::string_view name, AttrValue value) {
  for (auto& [k, v] : items_) {
    if (k == name) {
      v = std::move(value);
      return;
    }
  }
  items_.emplace_back(std::string(name), std::move(value));
}

const AttrValue* Attrs::find(std::string_view name) const {
  for (const auto& [k, v] : items_)
    if (k == name) return &v;
  return nullptr;
}

void Attrs::missing(std::string_view name) {
  throw InvalidArgument("[attrs] missing attribute '" + std::string(name) + "'");
}

void Attrs::wrong_type(std::string_view name, const AttrValue& v) {
  throw InvalidArgument("[attrs] attribute '" + std::string(name) + "' has type " + attr_type_name(attr_type(v)));
}

std::string attr_text(const AttrValue& v) {
  struct Text {
    std::string operator()(bool b) const { return b ? "true" : "false"; }
    std::string operator()(int64_t i) const { return std::to_string(i); }
    std::string operator()(double d) const {
      char buf[32];
      std::snprintf(buf, sizeof buf, "%g", d);
      return buf;
    }
    std::string operator()(DType t) const { return std::string(dtype_name(t)); }
    std::string operator()(const Shape& s) const { return s.to_string(); }
    std::string operator()(const std::vector<int64_t>& list) const {
      std::string out = "[";
      for (size_t i = 0; i < list.size(); ++i) out += (i ? ", " : "") + std::to_string(list[i]);
      return out + "]";
    }
    std::string operator()(const std::string& s) const { return "\"" + s + "\""; }
    std::string operator()(const Tensor& t) const {
      return t.defined() ? std::string("<tensor ") + dtype_name(t.dtype()) + t.shape().to_string() + ">" : "<tensor>";
    }
    std::string operator()(const GraphAttr&) const { return "<graph>"; }
  };
  return std::visit(Text{}, v);
}

}  // namespace weft
