// Printing tensors the way TensorFlow and NumPy users read them:
//   Tensor([[1 2]
//    [3 4]], shape=(2, 2), dtype=int32)
#include <algorithm>
#include <charconv>
#include <cmath>
#include <limits>
#include <ostream>
#include <sstream>

#include "runtime/tensor.h"

namespace weft {

namespace {

constexpr int64_t kSummariseAbove = 1000;  // elements; NumPy's print threshold
constexpr int64_t kEdgeItems = 3;

std::string strip_zeros(std::string s) {
  size_t e = s.find('e');
  std::string exp = e == std::string::npos ? "" : s.substr(e);
  std::string mant = s.substr(0, e);
  if (mant.find('.') != std::string::npos) {
    while (!mant.empty() && mant.back() == '0') mant.pop_back();
    if (!mant.empty() && mant.back() == '.') mant.pop_back();
  }
  return mant + exp;
}

// NumPy's reading of floats: at most 8 digits after the point, the shortest round-trip form when
// that is shorter, scientific notation for very small or very large magnitudes, and integral
// values without a decimal point (as API.md shows: [2 3 4]).
template <class F>
std::string shortest(F v) {
  if (v != v) return "nan";
  if (v == std::numeric_limits<F>::infinity()) return "inf";
  if (v == -std::numeric_limits<F>::infinity()) return "-inf";
  char buf[128];
  F a = v < 0 ? -v : v;
  if (a != 0 && (a < F(1e-4) || a >= F(1e16))) {
    auto [p, ec] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::scientific, 7);
    return strip_zeros(std::string(buf, p));
  }
  auto [p1, e1] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed);
  std::string exact(buf, p1);
  auto [p2, e2] = std::to_chars(buf, buf + sizeof(buf), v, std::chars_format::fixed, 8);
  std::string rounded = strip_zeros(std::string(buf, p2));
  return exact.size() <= rounded.size() ? exact : rounded;
}

// The fewest significant digits that read back as the same 16-bit value, as NumPy prints float16:
// 0.1, not the 0.099975586 of the float32 it widens to.
template <class H, class FromFloat>
std::string shortest_16bit(H h, float f, FromFloat from_float) {
  if (!std::isfinite(f)) return shortest(f);
  char buf[64];
  for (int digits = 1; digits < 9; ++digits) {
    auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), f, std::chars_format::general, digits);
    float back = 0;
    std::from_chars(buf, end, back);
    if (from_float(back).bits == h.bits) return shortest(back);  // "1000", not "1e+03"
  }
  return shortest(f);
}

std::string format_element(const unsigned char* base, DType d, int64_t i) {
  switch (d) {
    case DType::Float16: {
      Half h = reinterpret_cast<const Half*>(base)[i];
      return shortest_16bit(h, half_to_float(h), float_to_half);
    }
    case DType::BFloat16: {
      BFloat16 h = reinterpret_cast<const BFloat16*>(base)[i];
      return shortest_16bit(h, bfloat16_to_float(h), float_to_bfloat16);
    }
    case DType::Float32: return shortest(reinterpret_cast<const float*>(base)[i]);
    case DType::Float64: return shortest(reinterpret_cast<const double*>(base)[i]);
    case DType::Int8: return std::to_string(reinterpret_cast<const int8_t*>(base)[i]);
    case DType::UInt8: return std::to_string(reinterpret_cast<const uint8_t*>(base)[i]);
    case DType::Int32: return std::to_string(reinterpret_cast<const int32_t*>(base)[i]);
    case DType::Int64: return std::to_string(reinterpret_cast<const int64_t*>(base)[i]);
    case DType::Bool: return reinterpret_cast<const bool*>(base)[i] ? "True" : "False";
  }
  return "?";
}

// Indices shown along one axis: all of them, or the edges with -1 standing for "...".
std::vector<int64_t> shown_indices(int64_t n, bool summarise) {
  std::vector<int64_t> idx;
  if (!summarise || n <= 2 * kEdgeItems) {
    for (int64_t i = 0; i < n; ++i) idx.push_back(i);
  } else {
    for (int64_t i = 0; i < kEdgeItems; ++i) idx.push_back(i);
    idx.push_back(-1);
    for (int64_t i = n - kEdgeItems; i < n; ++i) idx.push_back(i);
  }
  return idx;
}

struct Printer {
  const Shape& shape;
  std::vector<int64_t> strides;
  bool summarise;
  std::vector<std::string> cells;  // formatted elements in print order
  size_t width = 0;
  const unsigned char* base;
  DType dtype;

  void collect(int dim, int64_t offset) {
    if (dim == shape.rank()) {
      cells.push_back(format_element(base, dtype, offset));
      width = std::max(width, cells.back().size());
      return;
    }
    for (int64_t i : shown_indices(shape[dim], summarise))
      if (i >= 0) collect(dim + 1, offset + i * strides[dim]);
  }

  size_t next = 0;
  void emit(std::string& out, int dim, int indent) {
    if (dim == shape.rank()) {
      const std::string& c = cells[next++];
      out.append(width - c.size(), ' ');
      out += c;
      return;
    }
    out += '[';
    auto idx = shown_indices(shape[dim], summarise);
    for (size_t k = 0; k < idx.size(); ++k) {
      if (k) {
        if (dim + 1 == shape.rank()) {
          out += ' ';
        } else {
          out.append(static_cast<size_t>(shape.rank() - dim - 1), '\n');
          out.append(static_cast<size_t>(indent + 1), ' ');
        }
      }
      if (idx[k] < 0) {
        out += "...";
        continue;
      }
      emit(out, dim + 1, indent + 1);
    }
    out += ']';
  }
};

}  // namespace

std::string format_values(const Tensor& t, int indent) {
  std::vector<unsigned char> host(t.nbytes());
  if (!host.empty()) t.copy_to_host(host.data());
  const Shape& shape = t.shape();
  Printer p{shape, std::vector<int64_t>(shape.rank()), t.size() > kSummariseAbove, {}, 0, host.data(), t.dtype()};
  int64_t stride = 1;
  for (int64_t d = shape.rank() - 1; d >= 0; --d) {
    p.strides[d] = stride;
    stride *= shape[d];
  }
  // Like NumPy and TensorFlow, an empty tensor is "[]" whatever its rank: nested brackets would
  // suggest dims of 1 (the shape printed beside it tells the rest).
  if (t.size() == 0) return "[]";
  p.collect(0, 0);
  std::string out;
  p.emit(out, 0, indent);
  return out;
}

std::ostream& operator<<(std::ostream& os, const Tensor& t) {
  if (!t.defined()) return os << "Tensor(<empty handle>)";
  std::string tail = ", shape=" + t.shape().to_string() + ", dtype=" + std::string(dtype_name(t.dtype())) + ")";
  if (t.is_symbolic()) return os << "Tensor(\"" << t.name() << "\"" << tail;
  return os << "Tensor(" << format_values(t, 7) << tail;  // 7: strlen("Tensor(")
}

}  // namespace weft
