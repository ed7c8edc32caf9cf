// Shared by the array op tests: tensors of any dtype with distinct element bytes, and plain
// reference implementations written with naive index loops, compared byte for byte.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <weft/weft.h>

namespace weft::testing_array {

inline constexpr DType kAllDTypes[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};

inline std::vector<int64_t> dims_of(const Shape& s) { return s.to_vector(); }

inline int64_t count(const std::vector<int64_t>& dims) {
  int64_t n = 1;
  for (int64_t d : dims) n *= d;
  return n;
}

inline std::vector<int64_t> unravel(int64_t flat, const std::vector<int64_t>& dims) {
  std::vector<int64_t> idx(dims.size());
  for (size_t k = dims.size(); k-- > 0;) {
    idx[k] = flat % dims[k];
    flat /= dims[k];
  }
  return idx;
}

inline int64_t ravel(const std::vector<int64_t>& idx, const std::vector<int64_t>& dims) {
  int64_t flat = 0;
  for (size_t k = 0; k < dims.size(); ++k) flat = flat * dims[k] + idx[k];
  return flat;
}

// Element i holds bytes that differ from every other element's (bool: alternating 0/1, the only
// valid bool bytes), so a misplaced element shows up in a byte comparison.
inline Tensor patterned(DType dtype, const Shape& shape, int seed = 0) {
  const size_t w = dtype_size(dtype);
  const int64_t n = shape.num_elements();
  std::vector<unsigned char> bytes(static_cast<size_t>(n) * w);
  for (int64_t i = 0; i < n; ++i)
    for (size_t k = 0; k < w; ++k) {
      uint64_t v = static_cast<uint64_t>(i + seed) * 0x9E3779B97F4A7C15ull;
      bytes[i * w + k] = dtype == bool_ ? static_cast<unsigned char>((i + seed + k) & 1)
                                        : static_cast<unsigned char>((v >> (8 * k)) ^ (i >> (8 * k)));
    }
  return Tensor::from_host(dtype, shape, bytes.data());
}

inline std::vector<unsigned char> bytes_of(const Tensor& t) {
  std::vector<unsigned char> b(t.nbytes());
  t.copy_to_host(b.data());
  return b;
}

// Expects `got` to be `dtype` of `dims` with exactly the bytes `want`.
inline void expect_bytes(const Tensor& got, DType dtype, const std::vector<int64_t>& dims,
                         const std::vector<unsigned char>& want, const std::string& what) {
  ASSERT_EQ(got.dtype(), dtype) << what;
  ASSERT_EQ(dims_of(got.shape()), dims) << what;
  ASSERT_TRUE(bytes_of(got) == want) << what << ": values differ from the reference";
}

// The reference copies: out element (multi-index) takes the bytes of input element src(index).
template <class Src>
std::vector<unsigned char> reference_copy(const Tensor& in, const std::vector<int64_t>& out_dims, Src src) {
  const size_t w = dtype_size(in.dtype());
  const std::vector<unsigned char> ib = bytes_of(in);
  std::vector<unsigned char> ob(static_cast<size_t>(count(out_dims)) * w);
  for (int64_t o = 0; o < count(out_dims); ++o) {
    const int64_t i = src(unravel(o, out_dims));
    for (size_t k = 0; k < w; ++k) ob[o * w + k] = ib[i * w + k];
  }
  return ob;
}

inline std::vector<unsigned char> ref_transpose(const Tensor& x, const std::vector<int64_t>& perm,
                                                std::vector<int64_t>* out_dims) {
  const std::vector<int64_t> in = dims_of(x.shape());
  out_dims->clear();
  for (int64_t p : perm) out_dims->push_back(in[p]);
  return reference_copy(x, *out_dims, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(in.size());
    for (size_t k = 0; k < perm.size(); ++k) i[perm[k]] = o[k];
    return ravel(i, in);
  });
}

inline std::vector<unsigned char> ref_slice(const Tensor& x, const std::vector<int64_t>& begin,
                                            const std::vector<int64_t>& size) {
  const std::vector<int64_t> in = dims_of(x.shape());
  return reference_copy(x, size, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(o);
    for (size_t k = 0; k < i.size(); ++k) i[k] += begin[k];
    return ravel(i, in);
  });
}

// Gathers along `axis` with int64 index values `idx` laid out as `idx_dims`.
inline std::vector<unsigned char> ref_gather(const Tensor& params, const std::vector<int64_t>& idx,
                                             const std::vector<int64_t>& idx_dims, int64_t axis,
                                             std::vector<int64_t>* out_dims) {
  const std::vector<int64_t> p = dims_of(params.shape());
  out_dims->assign(p.begin(), p.begin() + axis);
  out_dims->insert(out_dims->end(), idx_dims.begin(), idx_dims.end());
  out_dims->insert(out_dims->end(), p.begin() + axis + 1, p.end());
  const size_t ir = idx_dims.size();
  return reference_copy(params, *out_dims, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(o.begin(), o.begin() + axis);
    std::vector<int64_t> j(o.begin() + axis, o.begin() + axis + ir);
    i.push_back(idx[ravel(j, idx_dims)]);
    i.insert(i.end(), o.begin() + axis + ir, o.end());
    return ravel(i, p);
  });
}

// Element o comes from the input whose range along `axis` holds o[axis].
inline std::vector<unsigned char> ref_concat(const std::vector<Tensor>& xs, int64_t axis,
                                             std::vector<int64_t>* out_dims) {
  *out_dims = dims_of(xs[0].shape());
  (*out_dims)[axis] = 0;
  for (const Tensor& t : xs) (*out_dims)[axis] += t.shape()[axis];
  const size_t w = dtype_size(xs[0].dtype());
  std::vector<std::vector<unsigned char>> ib;
  for (const Tensor& t : xs) ib.push_back(bytes_of(t));
  std::vector<unsigned char> ob(static_cast<size_t>(count(*out_dims)) * w);
  for (int64_t o = 0; o < count(*out_dims); ++o) {
    std::vector<int64_t> idx = unravel(o, *out_dims);
    size_t t = 0;
    while (idx[axis] >= xs[t].shape()[axis]) idx[axis] -= xs[t++].shape()[axis];
    const int64_t i = ravel(idx, dims_of(xs[t].shape()));
    for (size_t k = 0; k < w; ++k) ob[o * w + k] = ib[t][i * w + k];
  }
  return ob;
}

// Expects `f` to throw InvalidArgument whose message contains every one of `parts`.
template <class F>
void expect_invalid(F f, std::initializer_list<std::string> parts) {
  try {
    f();
    ADD_FAILURE() << "expected InvalidArgument containing '" << *parts.begin() << "'";
  } catch (const InvalidArgument& e) {
    const std::string msg = e.what();
    for (const std::string& p : parts) EXPECT_NE(msg.find(p), std::string::npos) << "'" << p << "' not in: " << msg;
  }
}

}  // namespace weft::testing_array
