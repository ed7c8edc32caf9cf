// A JSON value tree that remembers where each value and key starts in the text, so that the
// readers of untrusted JSON (the cluster spec) can point at the offending element by line and
// column. nlohmann-json parses; this only records positions, which its own DOM does not keep.
//
//   JsonNode root = parse_positioned_json(text, "spec.json", "cluster");
//   for (const JsonMember& m : root.members)
//     std::cout << m.key << " at " << json_line_column(text, m.key_offset) << "\n";  // "2:3"
//
// Syntax errors are InvalidArgument: "[cluster] spec.json:2:9: invalid JSON: syntax error ...".
// Nesting is bounded (kMaxJsonDepth), so hostile input cannot exhaust the stack when the tree is
// destroyed. Duplicate keys are kept, in order: the reader decides whether they are an error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace weft {

inline constexpr int kMaxJsonDepth = 32;

struct JsonMember;

struct JsonNode {
  enum class Kind : uint8_t { kNull, kBool, kInteger, kFloat, kString, kArray, kObject };
  Kind kind = Kind::kNull;
  size_t offset = 0;  // byte offset of the value's first character
  bool boolean = false;
  // Integers beyond int64 saturate (integer_saturated); `text` then still spells the value.
  int64_t integer = 0;
  bool integer_saturated = false;
  // The string's value; for numbers, the number as written or printed, for messages.
  std::string text;
  std::vector<JsonNode> items;      // kArray
  std::vector<JsonMember> members;  // kObject, in the order of the text

  bool is_object() const { return kind == Kind::kObject; }
  bool is_array() const { return kind == Kind::kArray; }
  bool is_string() const { return kind == Kind::kString; }
  bool is_integer() const { return kind == Kind::kInteger; }
};

struct JsonMember {
  std::string key;
  size_t key_offset = 0;  // the key's opening quote
  JsonNode value;
};

// Parses a whole JSON document. Throws InvalidArgument "[tag] source:line:column: invalid JSON: ..."
// for a syntax error, invalid UTF-8, or nesting deeper than kMaxJsonDepth.
JsonNode parse_positioned_json(std::string_view text, std::string_view source, std::string_view tag);

// "line:column" of a byte offset, both 1-based; the column counts bytes.
std::string json_line_column(std::string_view text, size_t offset);

// "an object", "a list", "a string", ... for messages that say what was found instead.
const char* json_kind_name(const JsonNode& node);

}  // namespace weft
