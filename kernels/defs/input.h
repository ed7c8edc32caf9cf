// The attributes of ReadShardedBatch, read the same way by its definition and its kernel.
//
//   format          String  "idx" or "npy"
//   features        String  path of the features file (IDX may be .gz)
//   labels          String  path of the labels file
//   global_batch    Int     > 0: rows of each global batch
//   replica         Int     0 <= replica < num_replicas: the rows this node reads
//   num_replicas    Int     > 0
//   seed            Int     -1: no shuffling; >= 0: the epoch orders' seed
//   drop_remainder  Bool    skip each epoch's short last batch
//   scale           Float   features are cast to float32 and multiplied by it (1/255 for pixels)
//   source          String  names the input: nodes with the same source and replica in one
//                           process share one cursor (runtime/sharded_input.h)
//   example_shape   Shape   one example's shape (data::ShardedInput reads it from the file's
//                           header when the node is made; shape inference opens no file)
//   features_dtype  Type    optional, float32 (the only one supported)
//   labels_dtype    Type    optional, int32 (the only one supported)
//   crop_padding    Int     optional, >= 0: pad each example (H, W[, C]) by this many zero pixels
//                           and take a random H x W window (absent or 0: no crop)
//   crop_seed       Int     optional, >= 0 (default 0): the crops' seed
//   flip_seed       Int     optional: >= 0 mirrors each example along W with p = 1/2, seeded;
//                           absent or -1: no flips
// An example's crop and flip depend on the seed, the epoch and the example's index in the file
// (runtime/sharded_input.h's augment_stream): the same for any replica count or batch.
#pragma once

#include "runtime/attr.h"
#include "runtime/sharded_input.h"

namespace weft::defs {

inline ShardedInputSpec sharded_input_spec(const Attrs& a) {
  return {.format = a.get<std::string>("format"),
          .features = a.get<std::string>("features"),
          .labels = a.get<std::string>("labels"),
          .global_batch = a.get<int64_t>("global_batch"),
          .num_replicas = a.get<int64_t>("num_replicas"),
          .seed = a.get<int64_t>("seed"),
          .drop_remainder = a.get<bool>("drop_remainder")};
}

}  // namespace weft::defs
