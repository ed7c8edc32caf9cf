// A strict parser for the small subset of Python literals that file headers use (the dict at the
// start of a NumPy .npy file): dicts, tuples, lists, strings, integers, True, False and None.
//
//   PyValue v = parse_py_literal("{'shape': (2, 3), }", "[npy] x.npy: header");
//   v.kind == PyValue::Kind::Dict;  v.items[1].items[0].integer == 2
//
// It is what Python's ast.literal_eval would accept for these kinds and nothing more, so a
// damaged header fails here instead of being half-understood. Integers must fit in int64 (an
// 'L' suffix, as Python 2 wrote them, is accepted); nesting is bounded. Every failure is a
// DataLoss whose message starts with `context` and gives the offset of the fault.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

struct PyValue {
  enum class Kind { None, Bool, Int, Str, Tuple, List, Dict };
  Kind kind = Kind::None;
  bool boolean = false;
  int64_t integer = 0;
  std::string str;
  // Tuple and List: the elements. Dict: key, value, key, value, ... in source order.
  std::vector<PyValue> items;

  // "a dict", "an int", "None", ... for error messages.
  const char* kind_phrase() const;
};

PyValue parse_py_literal(std::string_view text, std::string_view context);

// `s` quoted and made printable for an error message ('<c8', 'a?b', long strings cut short).
std::string quote_for_message(std::string_view s);

}  // namespace weft
