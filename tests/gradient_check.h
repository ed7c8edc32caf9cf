// Finite-difference gradient checks for tests: compares GradientTape's gradient of
// sum(f(inputs) * w), for a fixed random weighting w, with central differences in float64. On
// each GPU present, the gradient taken there (f and its backward under a DeviceScope) must match
// the CPU's within the same tolerance.
//
//   expect_gradients_match([](const std::vector<Tensor>& x) { return mul(x[0], x[1]); },
//                          {random::normal({3, 4}, 0, 1, 1, float64), random::normal({4}, 0, 1, 2, float64)});
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <string>
#include <vector>

#include "gpu_devices.h"
#include "weft/weft.h"

namespace weft::testing {

using Fn = std::function<Tensor(const std::vector<Tensor>&)>;

// Random weights make the scalar objective sensitive to every output element (a plain sum
// hides errors that cancel, e.g. in softmax, whose outputs always sum to one).
inline Tensor objective(const Fn& f, const std::vector<Tensor>& inputs, const Tensor& weights) {
  return reduce_sum(mul(f(inputs), weights));
}

inline void expect_gradients_match(const Fn& f, std::vector<Tensor> inputs, double eps = 1e-6, double tol = 1e-5,
                                   const std::string& what = "") {
  Tensor probe = f(inputs);
  Tensor weights = random::uniform(probe.shape(), 0.5, 1.5, 1234, float64);
  // The tape's gradients of the objective, taken where the current DeviceScope puts the ops.
  auto tape_gradients = [&] {
    GradientTape tape;
    for (const Tensor& x : inputs) tape.watch(x);
    Tensor y = objective(f, inputs, weights);
    return tape.gradient(y, inputs);
  };
  const std::vector<Tensor> analytic = tape_gradients();
  for (size_t k = 0; k < inputs.size(); ++k) {
    if (!is_floating(inputs[k].dtype())) continue;
    ASSERT_EQ(inputs[k].dtype(), DType::Float64) << "gradient checks run in float64";
    ASSERT_EQ(analytic[k].shape(), inputs[k].shape()) << what << " input " << k;
    std::vector<double> values = inputs[k].to_vector<double>();
    std::vector<double> got = analytic[k].to_vector<double>();
    for (size_t i = 0; i < values.size(); ++i) {
      auto at = [&](double delta) {
        std::vector<double> v = values;
        v[i] += delta;
        std::vector<Tensor> moved = inputs;
        moved[k] = constant(v, inputs[k].shape());
        return objective(f, moved, weights).item<double>();
      };
      double numeric = (at(eps) - at(-eps)) / (2 * eps);
      EXPECT_NEAR(got[i], numeric, tol * std::max(1.0, std::abs(numeric)))
          << what << " d/d input " << k << " element " << i;
    }
  }
  for (const std::string& gpu : gpu_device_names()) {
    std::vector<Tensor> on_gpu;
    {
      DeviceScope on(gpu);
      on_gpu = tape_gradients();
    }
    for (size_t k = 0; k < inputs.size(); ++k) {
      if (!is_floating(inputs[k].dtype())) continue;
      ASSERT_EQ(on_gpu[k].shape(), inputs[k].shape()) << what << " on " << gpu << " input " << k;
      const std::vector<double> want = analytic[k].to_vector<double>(), got = on_gpu[k].to_vector<double>();
      for (size_t i = 0; i < want.size(); ++i)
        EXPECT_NEAR(got[i], want[i], tol * std::max(1.0, std::abs(want[i])))
            << what << " on " << gpu << ": d/d input " << k << " element " << i;
    }
  }
}

}  // namespace weft::testing
