#include "runtime/py_literal.h"

#include <limits>
#include <utility>

#include "runtime/error.h"

namespace weft {

namespace {

// Deeper nesting than any header needs; it only keeps forged input from exhausting the stack.
constexpr int kMaxDepth = 32;

class Parser {
 public:
  Parser(std::string_view text, std::string_view context) : text_(text), context_(context) {}

  PyValue parse_all() {
    skip_space();
    PyValue v = value(0);
    skip_space();
    if (pos_ != text_.size()) fail("unexpected " + describe_here() + " after the literal");
    return v;
  }

 private:
  [[noreturn]] void fail(const std::string& what) const {
    throw DataLoss(std::string(context_) + ": " + what + " at offset " + std::to_string(pos_));
  }

  bool at_end() const { return pos_ >= text_.size(); }
  char peek() const { return at_end() ? '\0' : text_[pos_]; }

  std::string describe_here() const {
    if (at_end()) return "end of text";
    const unsigned char c = static_cast<unsigned char>(text_[pos_]);
    if (c >= 0x20 && c < 0x7F) return std::string("'") + static_cast<char>(c) + "'";
    static const char* digits = "0123456789abcdef";
    return std::string("byte 0x") + digits[c >> 4] + digits[c & 0xF];
  }

  void skip_space() {
    // Inside brackets Python allows line breaks; a header is always inside braces.
    while (!at_end() && (peek() == ' ' || peek() == '\t' || peek() == '\n' || peek() == '\r' || peek() == '\f')) ++pos_;
  }

  void expect(char c) {
    if (peek() != c) fail(std::string("expected '") + c + "' but found " + describe_here());
    ++pos_;
  }

  PyValue value(int depth) {
    if (depth >= kMaxDepth) fail("literal nested deeper than " + std::to_string(kMaxDepth) + " levels");
    const char c = peek();
    if (c == '{') return dict(depth);
    if (c == '(') return paren(depth);
    if (c == '[') return sequence(depth, ']', PyValue::Kind::List);
    if (c == '\'' || c == '"') return string();
    if (c == '-' || c == '+' || (c >= '0' && c <= '9')) return integer();
    if ((c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || c == '_') return name();
    fail("expected a value but found " + describe_here());
  }

  PyValue dict(int depth) {
    PyValue d;
    d.kind = PyValue::Kind::Dict;
    expect('{');
    skip_space();
    while (peek() != '}') {
      d.items.push_back(value(depth + 1));
      skip_space();
      expect(':');
      skip_space();
      d.items.push_back(value(depth + 1));
      skip_space();
      if (peek() == '}') break;
      expect(',');
      skip_space();
    }
    ++pos_;
    return d;
  }

  // "(1, 2)", "(1,)" and "()" are tuples; "(1)" is the value 1, as in Python.
  PyValue paren(int depth) {
    expect('(');
    skip_space();
    if (peek() == ')') {
      ++pos_;
      PyValue t;
      t.kind = PyValue::Kind::Tuple;
      return t;
    }
    PyValue first = value(depth + 1);
    skip_space();
    if (peek() == ')') {
      ++pos_;
      return first;
    }
    PyValue t;
    t.kind = PyValue::Kind::Tuple;
    t.items.push_back(std::move(first));
    expect(',');
    skip_space();
    return rest_of_sequence(depth, ')', std::move(t));
  }

  PyValue sequence(int depth, char close, PyValue::Kind kind) {
    PyValue s;
    s.kind = kind;
    ++pos_;  // the opening bracket, checked by the caller
    skip_space();
    return rest_of_sequence(depth, close, std::move(s));
  }

  // The elements after those already in `s`, up to and including `close`.
  PyValue rest_of_sequence(int depth, char close, PyValue s) {
    while (peek() != close) {
      s.items.push_back(value(depth + 1));
      skip_space();
      if (peek() == close) break;
      expect(',');
      skip_space();
    }
    ++pos_;
    return s;
  }

  PyValue string() {
    const char quote = text_[pos_++];
    PyValue s;
    s.kind = PyValue::Kind::Str;
    while (true) {
      if (at_end()) fail("unterminated string");
      char c = text_[pos_++];
      if (c == quote) break;
      if (c == '\n' || c == '\r') fail("line break inside a string");
      if (c == '\\') {
        if (at_end()) fail("unterminated string");
        const char e = text_[pos_++];
        switch (e) {
          case '\\': case '\'': case '"': c = e; break;
          case 'n': c = '\n'; break;
          case 't': c = '\t'; break;
          case 'r': c = '\r'; break;
          case '0': c = '\0'; break;
          default:
            // Python keeps an unknown escape as written; weft never needs the others.
            s.str += '\\';
            c = e;
        }
      }
      s.str += c;
    }
    return s;
  }

  PyValue integer() {
    bool negative = false;
    if (peek() == '-' || peek() == '+') {
      negative = peek() == '-';
      ++pos_;
      skip_space();
    }
    if (!(peek() >= '0' && peek() <= '9')) fail("expected digits but found " + describe_here());
    const size_t start = pos_;
    uint64_t magnitude = 0;
    bool too_big = false;
    while (peek() >= '0' && peek() <= '9') {
      const uint64_t d = static_cast<uint64_t>(text_[pos_] - '0');
      if (magnitude > (std::numeric_limits<uint64_t>::max() - d) / 10) too_big = true;
      else magnitude = magnitude * 10 + d;
      ++pos_;
    }
    const std::string_view digits = text_.substr(start, pos_ - start);
    if (peek() == 'L' || peek() == 'l') ++pos_;  // Python 2's long literal
    const uint64_t limit = negative ? uint64_t{1} << 63 : static_cast<uint64_t>(std::numeric_limits<int64_t>::max());
    if (too_big || magnitude > limit)
      fail("integer " + std::string(negative ? "-" : "") + quote_for_message(digits) + " does not fit in 64 bits");
    PyValue v;
    v.kind = PyValue::Kind::Int;
    // Two's complement negation of the magnitude, well defined for -2^63 too.
    v.integer = negative ? static_cast<int64_t>(~magnitude + 1) : static_cast<int64_t>(magnitude);
    return v;
  }

  PyValue name() {
    const size_t start = pos_;
    while ((peek() >= 'A' && peek() <= 'Z') || (peek() >= 'a' && peek() <= 'z') || (peek() >= '0' && peek() <= '9') ||
           peek() == '_')
      ++pos_;
    const std::string_view word = text_.substr(start, pos_ - start);
    PyValue v;
    if (word == "True" || word == "False") {
      v.kind = PyValue::Kind::Bool;
      v.boolean = word == "True";
    } else if (word != "None") {
      pos_ = start;
      fail("unexpected name " + quote_for_message(word) + " (only True, False and None are literals)");
    }
    return v;
  }

  std::string_view text_;
  std::string_view context_;
  size_t pos_ = 0;
};

}  // namespace

const char* PyValue::kind_phrase() const {
  switch (kind) {
    case Kind::None: return "None";
    case Kind::Bool: return "a bool";
    case Kind::Int: return "an int";
    case Kind::Str: return "a string";
    case Kind::Tuple: return "a tuple";
    case Kind::List: return "a list";
    case Kind::Dict: return "a dict";
  }
  return "?";
}

PyValue parse_py_literal(std::string_view text, std::string_view context) { return Parser(text, context).parse_all(); }

std::string quote_for_message(std::string_view s) {
  constexpr size_t kMax = 64;
  std::string out = "'";
  for (size_t i = 0; i < s.size() && i < kMax; ++i) {
    const unsigned char c = static_cast<unsigned char>(s[i]);
    out += (c >= 0x20 && c < 0x7F) ? static_cast<char>(c) : '?';
  }
  if (s.size() > kMax) out += "...";
  return out + "'";
}

}  // namespace weft
