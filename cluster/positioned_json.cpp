#include "cluster/positioned_json.h"

#include <cstddef>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <utility>

#include "runtime/error.h"

namespace weft {

namespace {

// Walks the text for nlohmann's lexer and publishes how far it has read, so the SAX handler
// knows the input position in each callback (nlohmann's own position is private to its parser).
class CountingIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  CountingIterator(const char* p, const char** cursor) : p_(p), cursor_(cursor) {}
  reference operator*() const { return *p_; }
  CountingIterator& operator++() {
    ++p_;
    *cursor_ = p_;
    return *this;
  }
  CountingIterator operator++(int) {
    CountingIterator old = *this;
    ++*this;
    return old;
  }
  bool operator==(const CountingIterator& other) const { return p_ == other.p_; }
  bool operator!=(const CountingIterator& other) const { return p_ != other.p_; }

 private:
  const char* p_;
  const char** cursor_;
};

bool is_number_char(char c) {
  return (c >= '0' && c <= '9') || c == '-' || c == '+' || c == '.' || c == 'e' || c == 'E';
}

// nlohmann's message quotes the bytes it read, which may be invalid UTF-8 or control characters:
// those are written as \xNN, and the message is cut to a readable length.
std::string printable(std::string_view s, size_t max_bytes) {
  std::string out;
  static const char* hex = "0123456789abcdef";
  for (size_t i = 0; i < s.size();) {
    if (out.size() >= max_bytes) return out + "...";
    const auto u = static_cast<unsigned char>(s[i]);
    size_t len = u < 0x80 ? 1 : (u >> 5) == 6 ? 2 : (u >> 4) == 14 ? 3 : (u >> 3) == 30 ? 4 : 0;
    for (size_t k = 1; len > 1 && k < len; ++k)
      if (i + k >= s.size() || (static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) len = 0;
    if (len == 0 || u < 0x20 || u == 0x7f) {
      out += "\\x";
      out += hex[u >> 4];
      out += hex[u & 15];
      ++i;
    } else {
      out.append(s.substr(i, len));
      i += len;
    }
  }
  return out;
}

// Builds the tree from nlohmann's SAX events. Each callback comes right after the lexer scanned
// the value's token, so the value's first character is found from the current read position:
// strings end at it, numbers one character before it (the lexer reads one past a number, except
// at the end of the text), literals and brackets have a known length.
class TreeBuilder {
 public:
  TreeBuilder(std::string_view text, const char** cursor) : text_(text), cursor_(cursor) {}

  bool null() { return add_scalar(JsonNode::Kind::kNull, consumed() - 4); }
  bool boolean(bool v) {
    if (!add_scalar(JsonNode::Kind::kBool, consumed() - (v ? 4 : 5))) return false;
    last_added().boolean = v;
    return true;
  }
  bool number_integer(int64_t v) { return add_integer(v, false, std::to_string(v)); }
  bool number_unsigned(uint64_t v) {
    const bool big = v > static_cast<uint64_t>(INT64_MAX);
    return add_integer(big ? INT64_MAX : static_cast<int64_t>(v), big, std::to_string(v));
  }
  bool number_float(double, const std::string& literal) {
    if (!add_scalar(JsonNode::Kind::kFloat, number_start())) return false;
    last_added().text = literal;
    return true;
  }
  bool string(std::string& v) {
    if (!add_scalar(JsonNode::Kind::kString, string_start())) return false;
    last_added().text = std::move(v);
    return true;
  }
  bool binary(nlohmann::json::binary_t&) { return fail(consumed(), "binary values are not JSON"); }
  bool start_object(size_t) { return open(JsonNode::Kind::kObject); }
  bool start_array(size_t) { return open(JsonNode::Kind::kArray); }
  bool end_object() { return close(); }
  bool end_array() { return close(); }
  bool key(std::string& k) {
    Frame& top = stack_.back();
    top.key = std::move(k);
    top.key_offset = string_start();
    return true;
  }
  bool parse_error(size_t position, const std::string&, const nlohmann::json::exception& e) {
    // `position` counts the characters read, the offending one included.
    std::string what = e.what();
    const size_t column = what.find("column ");
    const size_t colon = column == std::string::npos ? std::string::npos : what.find(": ", column);
    if (colon != std::string::npos) what = what.substr(colon + 2);
    return fail(position > 0 ? position - 1 : 0, printable(what, 200));
  }

  std::optional<JsonNode>& root() { return root_; }
  const std::optional<std::pair<size_t, std::string>>& error() const { return error_; }

 private:
  struct Frame {
    JsonNode node;
    std::string key;
    size_t key_offset = 0;
  };

  size_t consumed() const { return static_cast<size_t>(*cursor_ - text_.data()); }

  // The opening quote of the string token that ends at the read position: the nearest quote
  // before the closing one that is not escaped (an even run of backslashes precedes it).
  size_t string_start() const {
    size_t q = consumed() - 1;
    while (q > 0) {
      --q;
      if (text_[q] != '"') continue;
      size_t b = q;
      while (b > 0 && text_[b - 1] == '\\') --b;
      if ((q - b) % 2 == 0) return q;
    }
    return 0;
  }

  size_t number_start() const {
    size_t end = consumed();  // one past the character after the number, or the text's end
    const bool read_past = end < text_.size() || !is_number_char(text_[end - 1]);
    if (read_past) --end;
    while (end > 0 && is_number_char(text_[end - 1])) --end;
    return end;
  }

  bool fail(size_t offset, std::string message) {
    if (!error_) error_.emplace(std::min(offset, text_.size()), std::move(message));
    return false;
  }

  JsonNode& last_added() {
    if (stack_.empty()) return *root_;
    JsonNode& top = stack_.back().node;
    return top.is_array() ? top.items.back() : top.members.back().value;
  }

  bool add(JsonNode node) {
    if (stack_.empty()) {
      root_ = std::move(node);
    } else if (Frame& top = stack_.back(); top.node.is_array()) {
      top.node.items.push_back(std::move(node));
    } else {
      top.node.members.push_back(JsonMember{std::move(top.key), top.key_offset, std::move(node)});
    }
    return true;
  }

  bool add_scalar(JsonNode::Kind kind, size_t offset) {
    JsonNode node;
    node.kind = kind;
    node.offset = offset;
    return add(std::move(node));
  }

  bool add_integer(int64_t v, bool saturated, std::string text) {
    if (!add_scalar(JsonNode::Kind::kInteger, number_start())) return false;
    JsonNode& node = last_added();
    node.integer = v;
    node.integer_saturated = saturated;
    node.text = std::move(text);
    return true;
  }

  bool open(JsonNode::Kind kind) {
    const size_t offset = consumed() - 1;
    if (stack_.size() >= static_cast<size_t>(kMaxJsonDepth))
      return fail(offset, "nesting deeper than " + std::to_string(kMaxJsonDepth) + " levels");
    Frame frame;
    frame.node.kind = kind;
    frame.node.offset = offset;
    stack_.push_back(std::move(frame));
    return true;
  }

  bool close() {
    JsonNode node = std::move(stack_.back().node);
    stack_.pop_back();
    return add(std::move(node));
  }

  std::string_view text_;
  const char** cursor_;
  std::vector<Frame> stack_;
  std::optional<JsonNode> root_;
  std::optional<std::pair<size_t, std::string>> error_;
};

}  // namespace

JsonNode parse_positioned_json(std::string_view text, std::string_view source, std::string_view tag) {
  const char* cursor = text.data();
  TreeBuilder builder(text, &cursor);
  CountingIterator first(text.data(), &cursor), last(text.data() + text.size(), &cursor);
  const bool ok = nlohmann::json::sax_parse(first, last, &builder);
  if (!ok || !builder.root()) {
    const auto& error = builder.error();
    const size_t offset = error ? error->first : text.size();
    throw InvalidArgument("[" + std::string(tag) + "] " + std::string(source) + ":" +
                          json_line_column(text, offset) + ": invalid JSON: " +
                          (error ? error->second : std::string("no value")));
  }
  return std::move(*builder.root());
}

std::string json_line_column(std::string_view text, size_t offset) {
  offset = std::min(offset, text.size());
  size_t line = 1, line_start = 0;
  for (size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return std::to_string(line) + ":" + std::to_string(offset - line_start + 1);
}

const char* json_kind_name(const JsonNode& node) {
  switch (node.kind) {
    case JsonNode::Kind::kNull: return "null";
    case JsonNode::Kind::kBool: return "a boolean";
    case JsonNode::Kind::kInteger: return "an integer";
    case JsonNode::Kind::kFloat: return "a number";
    case JsonNode::Kind::kString: return "a string";
    case JsonNode::Kind::kArray: return "a list";
    case JsonNode::Kind::kObject: return "an object";
  }
  return "a value";
}

}  // namespace weft
