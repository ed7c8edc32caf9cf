// Random tensors. An explicit seed gives the same numbers in every mode and on every device
// (counter-based Philox: element i depends only on the seed and i). Without a seed (seed < 0)
// each call draws a fresh seed.
//
//   random::normal({784, 128}, 0.f, 0.1f, /*seed=*/1);  random::uniform({10}, -1.f, 1.f, 7);
#pragma once

#include <cstdint>

#include "api/source_location.h"
#include "runtime/tensor.h"

namespace weft::random {

// Makes unseeded draws (and layer initialisers) reproducible from here on, like
// tf.random.set_seed: the n-th unseeded draw after set_seed(s) always gets the same seed. A
// compiled graph draws one key per unseeded node when it is compiled (on the chief in a cluster)
// and a new stream of it on every run, so after set_seed(s) a program gives the same numbers
// run to run, in one process or placed over a cluster (runtime/random_seed.h).
void set_seed(int64_t seed);

Tensor normal(const Shape& shape, double mean = 0.0, double stddev = 1.0, int64_t seed = -1, DType dtype = float32,
              const SourceLocation& loc = SourceLocation::current());
Tensor uniform(const Shape& shape, double low = 0.0, double high = 1.0, int64_t seed = -1, DType dtype = float32,
               const SourceLocation& loc = SourceLocation::current());
// Uniform numbers in the shape `like` has when the op runs (for graphs traced with unknown dims).
Tensor uniform_like(const Tensor& like, double low = 0.0, double high = 1.0, int64_t seed = -1, DType dtype = float32,
                    const SourceLocation& loc = SourceLocation::current());

}  // namespace weft::random
