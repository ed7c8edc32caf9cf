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
  // Returns true when this was the last reference. A count of one read by its only holder cannot
  // rise under it (a new reference is copied from an existing one), so the last release, the
  // common case for temporaries, skips the locked read-modify-write. The acquire load pairs with
  // the release of every earlier holder's decrement, as the fetch_sub would.
  bool unref() const {
    if (refs_.load(std::memory_order_acquire) == 1) return true;
    return refs_.fetch_sub(1, std::memory_order_acq_rel) == 1;
  }
  // The first reference of a new object, which no other thread can see yet: a plain store.
  void adopt() const { refs_.store(1, std::memory_order_relaxed); }
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
  // A pointer to p that takes no reference, and the way to let go of one without dropping a
  // reference. For lending a pointer owned elsewhere for longer (the executor lends its value
  // table to kernels this way), and for make_intrusive, whose new object counts its first
  // reference itself.
  static IntrusivePtr unowned(T* p) {
    IntrusivePtr r;
    r.p_ = p;
    return r;
  }
  void forget_unowned() { p_ = nullptr; }
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
  T* p = new T(std::forward<Args>(args)...);
  p->adopt();
  return IntrusivePtr<T>::unowned(p);  // the reference adopt() counted
}

}  // namespace weft
