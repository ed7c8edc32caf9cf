#include "runtime/attr_text.h"

#include <cstdio>

namespace weft {

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
      return t.defined() ? "<tensor " + std::string(dtype_name(t.dtype())) + t.shape().to_string() + ">" : "<tensor>";
    }
    std::string operator()(const GraphAttr&) const { return "<graph>"; }
  };
  return std::visit(Text{}, v);
}

}  // namespace weft
