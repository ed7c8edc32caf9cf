#include "runtime/shape.h"

#include <algorithm>
#include <cstring>

#include "runtime/error.h"

namespace weft {

void Shape::assign(const int64_t* d, size_t n) {
  if (n > static_cast<size_t>(capacity_)) {
    heap_ = std::make_unique<int64_t[]>(n);
    capacity_ = static_cast<int32_t>(n);
  }
  if (n) std::memmove(data(), d, n * sizeof(int64_t));
  rank_ = static_cast<int32_t>(n);
}

void Shape::move_from(Shape& o) noexcept {
  if (o.heap_) {
    heap_ = std::move(o.heap_);
    capacity_ = o.capacity_;
  } else {
    heap_.reset();
    capacity_ = kInline;
    std::memcpy(inline_, o.inline_, sizeof(inline_));
  }
  rank_ = o.rank_;
  o.rank_ = 0;
  o.capacity_ = kInline;
}

void Shape::push_back(int64_t d) {
  if (rank_ == capacity_) {
    auto grown = std::make_unique<int64_t[]>(capacity_ * 2);
    std::memcpy(grown.get(), data(), rank_ * sizeof(int64_t));
    heap_ = std::move(grown);
    capacity_ *= 2;
  }
  data()[rank_++] = d;
}

int64_t Shape::num_elements() const {
  bool zero = false;
  for (int64_t d : *this) {
    if (d < 0) return -1;
    zero |= d == 0;
  }
  if (zero) return 0;  // before multiplying: (2^40, 2^40, 0) is empty, not an overflow
  int64_t n = 1;
  for (int64_t d : *this)
    if (__builtin_mul_overflow(n, d, &n))  // signed overflow is UB; shapes can come from files
      throw InvalidArgument("[shape] " + to_string() + " has more elements than an int64 can count");
  return n;
}

bool Shape::is_fully_defined() const {
  return std::none_of(begin(), end(), [](int64_t d) { return d < 0; });
}

bool Shape::operator==(const Shape& o) const {
  return rank_ == o.rank_ && std::equal(begin(), end(), o.begin());
}

std::string Shape::to_string() const {
  std::string s = "(";
  for (int32_t i = 0; i < rank_; ++i) {
    if (i) s += ", ";
    s += data()[i] < 0 ? std::string("None") : std::to_string(data()[i]);
  }
  if (rank_ == 1) s += ",";
  s += ")";
  return s;
}

}  // namespace weft
