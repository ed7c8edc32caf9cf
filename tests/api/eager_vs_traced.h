// The eager-vs-traced check DESIGN.md asks of every op: the same inputs through the op eagerly
// and through weft::function (traced with the pass pipeline, without it, and with unknown dims)
// give bit-identical results, on the CPU and on every GPU present. A single op runs the same
// kernel in each, so there is no tolerance: any difference is a defect of tracing, of a pass or of
// the executor (a shape, a dtype, an attribute that got lost, a constant folded differently, a
// reduction split another way).
#pragma once

#include <gtest/gtest.h>
#include <weft/weft.h>

#include "api/dispatch.h"
#include "gpu_devices.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include "reference.h"
#include "runtime/kernel_registry.h"

namespace weft::eager_vs_traced {

inline constexpr DType kAllDTypes[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};

// The op under test applied to its tensor inputs; everything else (axes, dtypes, seeds) is bound.
using Op = std::function<Tensor(const std::vector<Tensor>&)>;

// The dtypes the CPU has a kernel of `op_type` for: the test covers what the op accepts, and a
// kernel added for a new dtype is checked without touching the test.
inline std::vector<DType> dtypes_with_kernel(const std::string& op_type) {
  std::vector<DType> out;
  for (DType d : kAllDTypes)
    if (find_kernel(op_def(op_type), DeviceType::CPU, d)) out.push_back(d);
  return out;
}

// n values of dtype d: random in [lo, hi] (clamped to the dtype's range), with the values where
// implementations part ways (zeros of both signs, infinities, NaN, denormals, the extremes) spread
// in when `specials`.
inline Tensor sample(DType d, const Shape& shape, uint32_t seed, double lo, double hi, bool specials = true) {
  const int64_t n = shape.num_elements();
  return visit_dtype(d, [&](auto zero) -> Tensor {
    using T = decltype(zero);
    std::vector<T> v(static_cast<size_t>(n));
    if constexpr (std::is_same_v<T, Half> || std::is_same_v<T, BFloat16>) {
      std::vector<float> f = ref::random_values<float>(n, seed, lo, hi);
      if (specials) {
        const float s[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, 1e-7f, 65504.f, 1e5f};
        for (size_t i = 0; i < f.size() && i < std::size(s); ++i) f[i * 7 % f.size()] = s[i];
      }
      for (size_t i = 0; i < v.size(); ++i) {
        if constexpr (std::is_same_v<T, Half>) v[i] = float_to_half(f[i]);
        else v[i] = float_to_bfloat16(f[i]);
      }
    } else if constexpr (std::is_same_v<T, bool>) {
      std::vector<uint8_t> b = ref::random_values<uint8_t>(n, seed, 0, 1);
      for (size_t i = 0; i < v.size(); ++i) v[i] = b[i] != 0;
    } else if constexpr (std::is_floating_point_v<T>) {
      v = ref::random_values<T>(n, seed, lo, hi);
      if (specials) {
        using L = std::numeric_limits<T>;
        const T s[] = {T(0), -T(0), L::infinity(), -L::infinity(), L::quiet_NaN(), L::denorm_min(), T(1e30), T(-1)};
        for (size_t i = 0; i < v.size() && i < std::size(s); ++i) v[i * 7 % v.size()] = s[i];
      }
    } else {
      using L = std::numeric_limits<T>;
      v = ref::random_values<T>(n, seed, std::max(lo, static_cast<double>(L::lowest())),
                                std::min(hi, static_cast<double>(L::max())));
      if (specials) {
        const T s[] = {T(0), L::lowest(), L::max(), T(1)};
        for (size_t i = 0; i < v.size() && i < std::size(s); ++i) v[i * 7 % v.size()] = s[i];
      }
    }
    return constant(v, shape);
  });
}

// One element as "value (0xbits)", for the failure message.
inline std::string element_string(const unsigned char* p, DType d) {
  char buf[96];
  uint64_t bits = 0;
  std::memcpy(&bits, p, dtype_size(d));
  visit_dtype(d, [&](auto zero) {
    using T = decltype(zero);
    T v;
    std::memcpy(&v, p, sizeof v);
    double x;
    if constexpr (std::is_same_v<T, Half>) x = half_to_float(v);
    else if constexpr (std::is_same_v<T, BFloat16>) x = bfloat16_to_float(v);
    else x = static_cast<double>(v);
    std::snprintf(buf, sizeof buf, "%.17g (0x%llx)", x, static_cast<unsigned long long>(bits));
  });
  return buf;
}

// Same dtype, shape and bytes; on a difference, the first element that differs.
inline void expect_same_bits(const Tensor& want, const Tensor& got, const std::string& what) {
  ASSERT_EQ(got.dtype(), want.dtype()) << what;
  ASSERT_EQ(got.shape(), want.shape()) << what;
  std::vector<unsigned char> a(want.nbytes()), b(got.nbytes());
  if (a.empty()) return;
  want.copy_to_host(a.data());
  got.copy_to_host(b.data());
  const size_t size = dtype_size(want.dtype());
  for (size_t i = 0; i < a.size(); i += size) {
    if (std::memcmp(a.data() + i, b.data() + i, size) != 0) {
      ADD_FAILURE() << what << ": element " << i / size << " of " << a.size() / size << " is "
                    << element_string(b.data() + i, got.dtype()) << ", eager gives "
                    << element_string(a.data() + i, want.dtype());
      return;
    }
  }
}

// op(inputs) traced: the inputs become the function's tensor arguments (placeholders), so the op
// is a node of the graph and not a captured constant. `graph` receives the graph it ran. With
// `unknown_dims`, every dim of the signature is unknown (rank kept), so shapes are worked out
// when the graph runs, as for a function traced with relax_shapes.
inline Tensor run_traced(const Op& op, const std::vector<Tensor>& in, bool optimize, Graph* graph,
                         bool unknown_dims = false) {
  FunctionOptions options;
  options.optimize = optimize;
  if (unknown_dims)
    for (const Tensor& t : in)
      options.input_signature.push_back({t.dtype(), Shape(std::vector<int64_t>(static_cast<size_t>(t.rank()), -1))});
  auto run = [&](auto&& f, auto&&... args) {
    Tensor out = f(args...);
    *graph = f.graph(args...);
    EXPECT_EQ(f.tracing_count(), 1);
    return out;
  };
  switch (in.size()) {
    case 0: return run(function([&] { return op({}); }, options));
    case 1: return run(function([&](Tensor a) { return op({a}); }, options), in[0]);
    case 2: return run(function([&](Tensor a, Tensor b) { return op({a, b}); }, options), in[0], in[1]);
    case 3:
      return run(function([&](Tensor a, Tensor b, Tensor c) { return op({a, b, c}); }, options), in[0], in[1], in[2]);
    default: ADD_FAILURE() << "run_traced takes at most 3 inputs"; return Tensor();
  }
}

inline bool has_node(const Graph& g, const std::string& type) {
  for (const Operation& op : g.operations())
    if (op.type() == type) return true;
  return false;
}

// The eager result of op(inputs) against the traced ones: without the passes, with them, and with
// them over unknown dims. `node_type`: the op the unoptimised trace must contain ("" for
// composites that have none of their own).
inline void expect_traced_equals_eager(const Op& op, const std::vector<Tensor>& inputs, const std::string& node_type,
                                       const std::string& what) {
  Tensor eager = op(inputs);
  Graph plain, optimised;
  Tensor traced_plain = run_traced(op, inputs, false, &plain);
  Tensor traced = run_traced(op, inputs, true, &optimised);
  if (!node_type.empty()) {
    EXPECT_TRUE(has_node(plain, node_type)) << what << ": no " << node_type << " node traced";
  }
  expect_same_bits(eager, traced_plain, what + ", traced without passes");
  expect_same_bits(eager, traced, what + ", traced and optimised");
  Graph dynamic;
  expect_same_bits(eager, run_traced(op, inputs, true, &dynamic, true), what + ", traced with unknown dims");
  // The same on every GPU: eager there and traced there run the same CUDA kernels (an op without
  // one falls back to the CPU both ways), so the bits agree too. The CUDA kernels against the
  // CPU's are tests/gpu's business.
  for (const std::string& gpu : gpu_device_names()) {
    DeviceScope on(gpu);
    const Tensor eager_gpu = op(inputs);
    Graph plain_gpu, optimised_gpu;
    expect_same_bits(eager_gpu, run_traced(op, inputs, false, &plain_gpu), what + " on " + gpu + ", traced without passes");
    expect_same_bits(eager_gpu, run_traced(op, inputs, true, &optimised_gpu), what + " on " + gpu + ", traced and optimised");
  }
}

inline std::string describe(const std::string& op, DType d, const std::vector<Shape>& shapes) {
  std::string s = op + " " + std::string(dtype_name(d));
  for (const Shape& x : shapes) s += " " + x.to_string();
  return s;
}

}  // namespace weft::eager_vs_traced
