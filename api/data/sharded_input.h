// A training input that every data-parallel replica reads on its own task: a features file and a
// labels file (IDX, possibly .gz, or .npy), cut into global batches, each split over the replicas
// by shard_rows (runtime/shard_split.h). read() adds one ReadShardedBatch node (or, eagerly, runs
// it): each call advances that replica's cursor by one batch.
//
//   auto input = data::ShardedInput::idx(dir + "/train-images-idx3-ubyte.gz",
//                                        dir + "/train-labels-idx1-ubyte.gz", /*global_batch=*/256)
//                    .shuffle(42).scale(1.0 / 255);
//   std::vector<Tensor> b = input.read(/*replica=*/1, /*num_replicas=*/4);
//   // b[0]: float32 (n_r, 28, 28); b[1]: int32 (n_r,); b[2]: float32 scalar n_r / N_step
//
// Epochs, order and per-process state: runtime/sharded_input.h. A ShardedInput is a small value;
// copies name the same source, so they share cursors.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "api/source_location.h"
#include "runtime/sharded_input.h"
#include "runtime/tensor.h"

namespace weft {
class Attrs;
}

namespace weft::data {

class ShardedInput {
 public:
  static ShardedInput idx(std::string features, std::string labels, int64_t global_batch);
  static ShardedInput npy(std::string features, std::string labels, int64_t global_batch);

  // Options; each returns *this. seed -1: no shuffling (the default).
  ShardedInput& shuffle(int64_t seed);
  ShardedInput& scale(double s);            // features *= s after the cast to float32 (default 1)
  ShardedInput& drop_remainder(bool drop);  // skip each epoch's short last batch (default false)
  ShardedInput& source(std::string name);   // the key naming this input's cursors (default generated)
  // Augmentation of image examples (H, W) or (H, W, C), on the reading task, per example (as
  // Dataset's of the same names): pad by `padding` zero pixels, then a random H x W window; mirror
  // along W with p = 1/2. An example's draws depend on the seed, the epoch and its index in the
  // file, so they are the same for any replica count. random_crop(0) and
  // random_flip_left_right(-1) turn them off.
  ShardedInput& random_crop(int64_t padding, int64_t seed = 0);
  ShardedInput& random_flip_left_right(int64_t seed = 0);

  // Read from the files' headers on the calling process (once; cached in this value and its
  // copies). NotFound / DataLoss from the parsers, InvalidArgument naming both files when their
  // example counts differ.
  int64_t num_examples() const;
  Shape example_shape() const;
  int64_t batches_per_epoch() const;

  // Replica `replica` of `num_replicas`'s share of the next global batch: {features, labels,
  // weight}. While tracing it adds a ReadShardedBatch node; eagerly it runs it.
  std::vector<Tensor> read(int64_t replica, int64_t num_replicas,
                           const SourceLocation& loc = SourceLocation::current()) const;
  // The node's attributes, for code that builds graphs itself (DataParallel; runtime/attr.h).
  Attrs node_attrs(int64_t replica, int64_t num_replicas) const;

  // Checkpoint restarts: where this process's cursors of this source stand / start. Set it before
  // the first step that reads the input (a job restarted from a checkpoint): graphs made after
  // carry it (ReadShardedBatch's start_batch), so every task starts its cursors there too.
  ShardedPosition position(int64_t replica = 0) const { return sharded_input_position(source_, replica); }
  void set_position(int64_t epoch, int64_t batch) const { set_sharded_input_position(source_, epoch, batch); }

  const std::string& source() const { return source_; }
  const ShardedInputSpec& spec() const { return spec_; }  // num_replicas is set per read

 private:
  struct Headers;
  ShardedInput(std::string format, std::string features, std::string labels, int64_t global_batch);
  const Headers& headers() const;

  ShardedInputSpec spec_;
  double scale_ = 1.0;
  int64_t crop_padding_ = 0, crop_seed_ = 0, flip_seed_ = -1;
  std::string source_;
  std::shared_ptr<Headers> headers_;
};

}  // namespace weft::data
