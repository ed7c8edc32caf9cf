// A minimal intrusive reference-counted pointer: one atomic in the object, no control block, so a
// Tensor handle is a single pointer and copying it is one atomic increment.
#pragma once

#include <atomic>
#include <cstdint>
#include <utility>

namespace weft {

class RefCounted {
 public:
  void ref() const { refs_.fetch_add(1, std::memory_order_relaxed); }
  // Returns true when this was the last reference.
  bool unref() const { return refs_.fetch_sub(1, std::memory_order_acq_rel) == 1; }
  int32_t ref_count() const { return refs_.load(std::memory_order_relaxed); }

 protected:
  RefCounted() = default;
  RefCounted(const RefCounted&) : refs_(0) {}

 private:
  mutable std::atomic<int32_t> refs_{0};
};

template <class T>
class IntrusivePtr {
 public:
  IntrusivePtr() = default;
  explicit IntrusivePtr(T* p) : p_(p) {
    if (p_) p_->ref();
  }
  IntrusivePtr(const IntrusivePtr& o) : p_(o.p_) {
    if (p_) p_->ref();
  }
  IntrusivePtr(IntrusivePtr&& o) noexcept : p_(std::exchange(o.p_, nullptr)) {}
  ~IntrusivePtr() { reset(); }
  IntrusivePtr& operator=(const IntrusivePtr& o) {
    IntrusivePtr(o).swap(*this);
    return *this;
  }
  IntrusivePtr& operator=(IntrusivePtr&& o) noexcept {
    IntrusivePtr(std::move(o)).swap(*this);
    return *this;
  }
  void reset() {
    if (p_ && p_->unref()) delete p_;
    p_ = nullptr;
  }
  void swap(IntrusivePtr& o) noexcept { std::swap(p_, o.p_); }
  T* get() const { return p_; }
  T* operator->() const { return p_; }
  T& operator*() const { return *p_; }
  explicit operator bool() const { return p_ != nullptr; }
  bool operator==(const IntrusivePtr& o) const { return p_ == o.p_; }

 private:
  T* p_ = nullptr;
};

template <class T, class... Args>
IntrusivePtr<T> make_intrusive(Args&&... args) {
  return IntrusivePtr<T>(new T(std::forward<Args>(args)...));
}

}  // namespace weft
