// Helpers shared by the tests of file formats (safetensors, .npy, checkpoints, graph files).
#pragma once

#include <gtest/gtest.h>

#include <cstring>
#include <exception>
#include <random>
#include <string>
#include <vector>

#include "runtime/error.h"
#include "runtime/tensor.h"
#include "runtime/tensor_internals.h"

namespace weft {

// `f` throws an E whose message contains every one of `parts`.
template <class E, class F>
void expect_error(F&& f, const std::vector<std::string>& parts) {
  try {
    f();
    ADD_FAILURE() << "no exception";
  } catch (const E& e) {
    for (const std::string& p : parts) EXPECT_NE(std::string(e.what()).find(p), std::string::npos) << e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong exception type: " << e.what();
  }
}

// A host tensor of random bytes (bools 0 or 1).
inline Tensor random_tensor(DType dtype, Shape shape, std::mt19937& rng) {
  Tensor t = Tensor::empty(dtype, std::move(shape));
  auto* p = static_cast<unsigned char*>(raw_data(t));
  for (size_t i = 0; i < t.nbytes(); ++i) p[i] = static_cast<unsigned char>(dtype == bool_ ? rng() & 1 : rng());
  return t;
}

// Same dtype, shape and bytes (host tensors).
inline bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.dtype() == b.dtype() && a.shape() == b.shape() && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(raw_data(a), raw_data(b), a.nbytes()) == 0);
}

}  // namespace weft
