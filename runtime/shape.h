// Shape: the dimensions of a tensor. Cheap to copy for the ranks that matter (inline up to 6
// dims, so eager dispatch allocates nothing for it). A dim of -1 is unknown (symbolic only).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <memory>
#include <span>
#include <string>
#include <vector>

namespace weft {

class Shape {
 public:
  static constexpr int kInline = 6;

  Shape() = default;
  Shape(std::initializer_list<int64_t> dims) { assign(dims.begin(), dims.size()); }
  explicit Shape(std::span<const int64_t> dims) { assign(dims.data(), dims.size()); }
  explicit Shape(const std::vector<int64_t>& dims) { assign(dims.data(), dims.size()); }
  Shape(const Shape& other) { assign(other.data(), other.rank_); }
  Shape(Shape&& other) noexcept { move_from(other); }
  Shape& operator=(const Shape& other) {
    if (this != &other) assign(other.data(), other.rank_);
    return *this;
  }
  Shape& operator=(Shape&& other) noexcept {
    if (this != &other) move_from(other);
    return *this;
  }

  int64_t rank() const { return rank_; }
  int64_t operator[](int64_t i) const { return data()[i]; }
  int64_t& operator[](int64_t i) { return data()[i]; }
  const int64_t* data() const { return heap_ ? heap_.get() : inline_; }
  int64_t* data() { return heap_ ? heap_.get() : inline_; }
  const int64_t* begin() const { return data(); }
  const int64_t* end() const { return data() + rank_; }
  std::span<const int64_t> dims() const { return {data(), static_cast<size_t>(rank_)}; }
  std::vector<int64_t> to_vector() const { return {begin(), end()}; }

  // Product of the dims; -1 when any dim is unknown. InvalidArgument if it overflows int64.
  int64_t num_elements() const;
  bool is_fully_defined() const;
  void push_back(int64_t d);

  bool operator==(const Shape& o) const;
  bool operator!=(const Shape& o) const { return !(*this == o); }

  // "(2, 3)", "(3,)", "()"; unknown dims print as None, as TensorFlow does.
  std::string to_string() const;

 private:
  void assign(const int64_t* d, size_t n);
  void move_from(Shape& o) noexcept;

  int64_t inline_[kInline] = {};
  std::unique_ptr<int64_t[]> heap_;
  int32_t rank_ = 0;
  int32_t capacity_ = kInline;
};

}  // namespace weft
