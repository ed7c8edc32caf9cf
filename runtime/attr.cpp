#include "runtime/attr.h"

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

}  // namespace weft
