// Shared by the GPU tests: the GPU (or a skip), random tensors of every dtype, running one kernel
// on one device, and comparing results.
#pragma once

#include <algorithm>

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <exception>
#include <limits>
#include <memory>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "kernels/register_all.h"
#include "runtime/device.h"
#include "runtime/half.h"
#include "runtime/kernel_registry.h"
#include "runtime/tensor_internals.h"

namespace weft::gpu_test {

// The first CUDA device, or null.
inline Device* gpu() {
  register_builtin_ops();
  for (Device* d : local_devices())
    if (d->type() == DeviceType::CUDA) return d;
  return nullptr;
}

// The process's first two GPUs, or an empty vector (tests of two GPUs skip).
inline std::vector<Device*> two_gpus() {
  std::vector<Device*> out;
  register_builtin_ops();
  for (Device* d : local_devices())
    if (d->type() == DeviceType::CUDA && out.size() < 2) out.push_back(d);
  if (out.size() < 2) out.clear();
  return out;
}

#define WEFT_REQUIRE_GPU()                                                               \
  do {                                                                                   \
    if (!::weft::gpu_test::gpu()) GTEST_SKIP() << "no CUDA device (or no CUDA driver)"; \
  } while (0)

// The message of an error a callback or kernel completed with ("" for one that is no std::exception).
inline std::string message_of(const std::exception_ptr& e) {
  try {
    std::rethrow_exception(e);
  } catch (const std::exception& x) {
    return x.what();
  } catch (...) {
  }
  return "";
}

// How a test's random values are drawn.
enum class Values {
  kGeneral,     // moderate values with zeros, extremes and (floats) inf, NaN, subnormals mixed in
  kNonZero,     // as kGeneral without zeros (integer divisors)
  kSmallPower,  // integer exponents 0..9, float exponents in [-3, 3]
  kAllBits,     // every bit pattern (casts)
};

template <class T>
T draw(std::mt19937_64& rng, int64_t i, Values v) {
  if constexpr (std::is_same_v<T, bool>) {
    return rng() & 1;
  } else if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
    return T{static_cast<uint16_t>(rng())};
  } else if constexpr (std::is_floating_point_v<T>) {
    if (v == Values::kAllBits && i % 3 == 0) {
      uint64_t bits = rng();
      T out;
      std::memcpy(&out, &bits, sizeof(T));  // every pattern, NaNs and infinities included
      return out;
    }
    if (v == Values::kSmallPower) return std::uniform_real_distribution<T>(-3, 3)(rng);
    if (v == Values::kAllBits && i % 3 == 1) return std::uniform_real_distribution<T>(-3e10, 3e10)(rng);
    static const T specials[] = {T(0), -T(0), std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::infinity(),
                                 std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::denorm_min(),
                                 std::numeric_limits<T>::max(), T(1), T(-1), T(0.5), T(2.5), T(-2.5)};
    if (i % 29 == 0) {
      T s = specials[(i / 29) % std::size(specials)];
      if (v == Values::kNonZero && s == T(0)) s = T(3);
      return s;
    }
    return std::uniform_real_distribution<T>(-10, 10)(rng);
  } else {
    if (v == Values::kAllBits) return static_cast<T>(rng());
    if (v == Values::kSmallPower) return static_cast<T>(rng() % 10);
    T x;
    if (i % 31 == 0) x = (i / 31) % 2 ? std::numeric_limits<T>::min() : std::numeric_limits<T>::max();
    else if (i % 31 == 1) x = T(-1);
    else x = static_cast<T>(static_cast<int64_t>(rng() % 2001) - 1000);
    if (v == Values::kNonZero && x == 0) x = T(7);
    return x;
  }
}

inline Tensor random_tensor(DType dtype, const Shape& shape, uint64_t seed, Values v) {
  std::mt19937_64 rng(seed);
  const int64_t n = shape.num_elements();
  return visit_dtype(dtype, [&](auto t) {
    using T = decltype(t);
    // std::vector<bool> packs bits; a plain array of T does not.
    std::unique_ptr<T[]> data(new T[static_cast<size_t>(n > 0 ? n : 1)]);
    for (int64_t i = 0; i < n; ++i) data[i] = draw<T>(rng, i, v);
    return Tensor::from_host(dtype, shape, data.get());
  });
}

// NumPy's broadcast of two shapes (the tests only pass shapes that broadcast).
inline Shape broadcast(const Shape& a, const Shape& b) {
  const int64_t r = std::max(a.rank(), b.rank());
  std::vector<int64_t> out(r);
  for (int64_t i = 0; i < r; ++i) {
    const int64_t ia = i - (r - a.rank()), ib = i - (r - b.rank());
    const int64_t da = ia >= 0 ? a[ia] : 1, db = ib >= 0 ? b[ib] : 1;
    out[i] = da == 1 ? db : da;
  }
  return Shape(out);
}

// Runs op's kernel for `device` on `inputs` (copied there) and returns output 0 where it is, on
// `device`: nothing waits for the device.
inline Tensor run_on_device(Device& device, std::string_view op_name, const std::vector<Tensor>& inputs,
                            DType out_dtype, const Shape& out_shape, const Attrs& attrs = {}) {
  register_builtin_ops();
  const OpDef* op = op_registry().find(op_name);
  if (!op) throw InvalidArgument("no op " + std::string(op_name));
  const DType kernel_dtype = kernel_dtype_of(*op, static_cast<int>(inputs.size()),
                                             [&](int i) { return inputs[i].dtype(); }, out_dtype);
  KernelFn fn = find_kernel(*op, device.type(), kernel_dtype);
  if (!fn)
    throw InvalidArgument("no " + std::string(device_type_name(device.type())) + " kernel for " +
                          std::string(op_name) + " " + std::string(dtype_name(kernel_dtype)));
  std::vector<Tensor> ins;
  for (const Tensor& t : inputs) ins.push_back(t.to(&device));
  std::vector<Tensor> outs(1);
  run_kernel(*op, fn, device, attrs, ins, outs, [&](size_t) { return TensorMeta{out_dtype, out_shape}; });
  return outs[0];
}

// run_on_device, then output 0 on the host (for a GPU, the wait for its kernels).
inline Tensor run_on(Device& device, std::string_view op_name, const std::vector<Tensor>& inputs, DType out_dtype,
                     const Shape& out_shape, const Attrs& attrs = {}) {
  return run_on_device(device, op_name, inputs, out_dtype, out_shape, attrs).to(cpu_device());
}

inline std::vector<unsigned char> host_bytes(const Tensor& t) {
  std::vector<unsigned char> b(t.nbytes());
  if (!b.empty()) t.copy_to_host(b.data());
  return b;
}

// Runs op on the CPU and on the GPU and compares the bytes of the results.
inline void expect_same_bits(std::string_view op, const std::vector<Tensor>& ins, DType out_dtype, const Shape& out_shape,
                      const Attrs& attrs, const std::string& what) {
  Tensor want = run_on(*cpu_device(), op, ins, out_dtype, out_shape, attrs);
  Tensor got = run_on(*gpu(), op, ins, out_dtype, out_shape, attrs);
  ASSERT_EQ(want.shape(), got.shape()) << what;
  ASSERT_EQ(host_bytes(want), host_bytes(got)) << what;
}

// Element i of a host tensor as a double (for messages and tolerant comparisons).
inline double element(const Tensor& t, int64_t i) {
  return visit_dtype(t.dtype(), [&](auto x) -> double {
    using T = decltype(x);
    const T v = static_cast<const T*>(raw_data(t))[i];
    if constexpr (std::is_same_v<T, Half>) return half_to_float(v);
    else if constexpr (std::is_same_v<T, BFloat16>) return bfloat16_to_float(v);
    else return static_cast<double>(v);
  });
}

inline double smallest_normal(DType d) {
  switch (d) {
    case float64: return std::numeric_limits<double>::min();
    case float16: return 0x1p-14;
    default: return std::numeric_limits<float>::min();  // float32 and bfloat16 share the exponent range
  }
}

// Floating outputs: NaN matches any NaN (payloads and signs of NaN differ between x86 and GPUs);
// everything else must be bit-identical, or within `rel` relative error where rel > 0 (the
// transcendental functions, whose last bits differ between glibc and CUDA's math library).
inline ::testing::AssertionResult same_values(const Tensor& want, const Tensor& got, double rel) {
  if (want.dtype() != got.dtype()) return ::testing::AssertionFailure() << "dtypes differ";
  if (want.shape() != got.shape())
    return ::testing::AssertionFailure() << "shapes differ: " << want.shape().to_string() << " vs "
                                         << got.shape().to_string();
  const bool floating = is_floating(want.dtype());
  const size_t w = dtype_size(want.dtype());
  const auto* a = static_cast<const unsigned char*>(raw_data(want));
  const auto* b = static_cast<const unsigned char*>(raw_data(got));
  int reported = 0;
  int64_t bad = 0;
  ::testing::AssertionResult result = ::testing::AssertionFailure();
  for (int64_t i = 0; i < want.size(); ++i) {
    if (std::memcmp(a + i * w, b + i * w, w) == 0) continue;
    if (floating) {
      const double x = element(want, i), y = element(got, i);
      if (std::isnan(x) && std::isnan(y)) continue;
      // Below the smallest normal number the spacing of values is fixed, so a subnormal result
      // is held to the relative error at the smallest normal (CUDA's powf lands one subnormal ulp
      // from glibc's there: 1.4e-45 on 4e-40).
      if (rel > 0 && std::isfinite(x) && std::isfinite(y) &&
          std::fabs(x - y) <= rel * std::max({std::fabs(x), std::fabs(y), smallest_normal(want.dtype())}))
        continue;
    }
    ++bad;
    if (reported++ < 5) result << "\n  element " << i << ": CPU " << element(want, i) << ", GPU " << element(got, i);
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return result << "\n  " << bad << " of " << want.size() << " elements differ";
}

// Values uniform in [lo, hi], in `dtype` (16-bit ones rounded from float).
inline Tensor uniform(DType dtype, const Shape& shape, uint64_t seed, double lo, double hi) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> d(lo, hi);
  const size_t n = static_cast<size_t>(shape.num_elements());
  std::vector<double> v(n);
  for (double& e : v) e = d(rng);
  switch (dtype) {
    case DType::Float64: return Tensor::from_host(dtype, shape, v.data());
    case DType::Float32: {
      std::vector<float> f(v.begin(), v.end());
      return Tensor::from_host(dtype, shape, f.data());
    }
    case DType::Float16: {
      std::vector<Half> h(n);
      for (size_t i = 0; i < n; ++i) h[i] = float_to_half(static_cast<float>(v[i]));
      return Tensor::from_host(dtype, shape, h.data());
    }
    default: {
      std::vector<BFloat16> h(n);
      for (size_t i = 0; i < n; ++i) h[i] = float_to_bfloat16(static_cast<float>(v[i]));
      return Tensor::from_host(dtype, shape, h.data());
    }
  }
}

// Every output of `op` run on `device`, on the host.
inline std::vector<Tensor> run_all(Device& device, const char* name, const std::vector<Tensor>& inputs, const Attrs& attrs) {
  const OpDef& op = op_registry().get(name);
  InferContext ic(op, inputs, attrs);
  op.infer(ic);
  std::vector<TensorMeta> metas;
  for (int i = 0; i < ic.num_outputs(); ++i) metas.push_back(ic.output(i));
  KernelFn fn = find_kernel(op, device.type(), inputs[op.kernel_dtype_input].dtype());
  if (!fn) throw InvalidArgument(std::string("no kernel for ") + name);
  std::vector<Tensor> ins;
  for (const Tensor& t : inputs) ins.push_back(t.to(&device));
  std::vector<Tensor> outs(metas.size());
  run_kernel(op, fn, device, attrs, ins, outs, [&](size_t i) { return metas[i]; });
  for (Tensor& t : outs) t = t.to(cpu_device());
  return outs;
}

// Every element within rel |want| + abs of the CPU's; NaN matches NaN and infinities must be equal.
inline ::testing::AssertionResult close(const Tensor& want, const Tensor& got, double rel, double abs) {
  if (want.dtype() != got.dtype() || want.shape() != got.shape())
    return ::testing::AssertionFailure() << "dtypes or shapes differ";
  int64_t bad = 0;
  ::testing::AssertionResult result = ::testing::AssertionFailure();
  for (int64_t i = 0; i < want.size(); ++i) {
    const double w = element(want, i), g = element(got, i);
    if (w == g || (std::isnan(w) && std::isnan(g))) continue;
    if (std::isfinite(w) && std::isfinite(g) && std::fabs(w - g) <= rel * std::fabs(w) + abs) continue;
    if (bad++ < 5) result << "\n  element " << i << ": CPU " << w << ", GPU " << g;
  }
  if (bad == 0) return ::testing::AssertionSuccess();
  return result << "\n  " << bad << " of " << want.size() << " differ";
}

}  // namespace weft::gpu_test
