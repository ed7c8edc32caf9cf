#include "api/ops/random.h"

#include "api/dispatch.h"
#include "runtime/random_seed.h"

namespace weft::random {

void set_seed(int64_t seed) { set_global_seed(seed); }

// Seeds are passed on as given. An unseeded op (-1) run eagerly draws its seed from the process's
// sequence when its kernel runs; traced, compilation gives it a key from that sequence and every
// run a new stream of it, so a traced graph gets fresh numbers on every call, reproducibly after
// set_seed and wherever the node is placed (runtime/random_seed.h).
Tensor normal(const Shape& shape, double mean, double stddev, int64_t seed, DType dtype, const SourceLocation& loc) {
  static const OpDef& op = op_def("RandomNormal");
  return dispatch1(op, {},
                   {{"shape", shape}, {"mean", mean}, {"stddev", stddev}, {"seed", seed < 0 ? int64_t{-1} : seed}, {"dtype", dtype}},
                   loc);
}

Tensor uniform(const Shape& shape, double low, double high, int64_t seed, DType dtype, const SourceLocation& loc) {
  static const OpDef& op = op_def("RandomUniform");
  return dispatch1(op, {},
                   {{"shape", shape}, {"low", low}, {"high", high}, {"seed", seed < 0 ? int64_t{-1} : seed}, {"dtype", dtype}},
                   loc);
}

Tensor uniform_like(const Tensor& like, double low, double high, int64_t seed, DType dtype, const SourceLocation& loc) {
  if (like.shape().is_fully_defined()) return uniform(like.shape(), low, high, seed, dtype, loc);
  static const OpDef& op = op_def("RandomUniform");
  return dispatch1(op, {like}, {{"low", low}, {"high", high}, {"seed", seed < 0 ? int64_t{-1} : seed}, {"dtype", dtype}},
                   loc);
}

}  // namespace weft::random
