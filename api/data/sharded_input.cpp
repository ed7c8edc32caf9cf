#include "api/data/sharded_input.h"

#include <atomic>
#include <cmath>
#include <mutex>
#include <optional>

#include "api/dispatch.h"
#include "runtime/shard_split.h"

namespace weft::data {

struct ShardedInput::Headers {
  std::mutex mu;
  std::optional<int64_t> examples;
  Shape example;
};

ShardedInput::ShardedInput(std::string format, std::string features, std::string labels, int64_t global_batch)
    : headers_(std::make_shared<Headers>()) {
  spec_.format = std::move(format);
  spec_.features = std::move(features);
  spec_.labels = std::move(labels);
  spec_.global_batch = global_batch;
  spec_.validate("ShardedInput");
  // Generated in creation order, so a restarted program names its inputs as before (and a
  // checkpoint's positions find them); give a name with source() to be independent of order.
  static std::atomic<int64_t> counter{0};
  source_ = "sharded_input_" + std::to_string(counter.fetch_add(1));
}

ShardedInput ShardedInput::idx(std::string features, std::string labels, int64_t global_batch) {
  return ShardedInput("idx", std::move(features), std::move(labels), global_batch);
}
ShardedInput ShardedInput::npy(std::string features, std::string labels, int64_t global_batch) {
  return ShardedInput("npy", std::move(features), std::move(labels), global_batch);
}

ShardedInput& ShardedInput::shuffle(int64_t seed) {
  if (seed < -1) throw InvalidArgument("[ShardedInput] seed must be >= 0, or -1 for no shuffling; got " + std::to_string(seed));
  spec_.seed = seed;
  return *this;
}
ShardedInput& ShardedInput::scale(double s) {
  if (!std::isfinite(s)) throw InvalidArgument("[ShardedInput] scale must be finite, got " + std::to_string(s));
  scale_ = s;
  return *this;
}
ShardedInput& ShardedInput::drop_remainder(bool drop) {
  spec_.drop_remainder = drop;
  return *this;
}
ShardedInput& ShardedInput::random_crop(int64_t padding, int64_t seed) {
  if (padding < 0 || seed < 0)
    throw InvalidArgument("[ShardedInput] random_crop needs padding >= 0 and seed >= 0, got padding " +
                          std::to_string(padding) + ", seed " + std::to_string(seed));
  crop_padding_ = padding;
  crop_seed_ = seed;
  return *this;
}
ShardedInput& ShardedInput::random_flip_left_right(int64_t seed) {
  if (seed < -1)
    throw InvalidArgument("[ShardedInput] random_flip_left_right's seed must be >= 0, or -1 for no flips; got " +
                          std::to_string(seed));
  flip_seed_ = seed;
  return *this;
}
ShardedInput& ShardedInput::source(std::string name) {
  if (name.empty()) throw InvalidArgument("[ShardedInput] the source name must not be empty");
  source_ = std::move(name);
  return *this;
}

const ShardedInput::Headers& ShardedInput::headers() const {
  std::lock_guard lock(headers_->mu);
  if (!headers_->examples) {
    const ArrayHeader x = read_array_header(spec_.format, spec_.features);
    const ArrayHeader y = read_array_header(spec_.format, spec_.labels);
    if (x.shape.rank() < 1)
      throw InvalidArgument("[ShardedInput] " + spec_.features + " holds a scalar, not a sequence of examples");
    if (y.shape.rank() != 1)
      throw InvalidArgument("[ShardedInput] " + spec_.labels + ": labels must have rank 1, got shape " +
                            y.shape.to_string());
    if (x.shape[0] != y.shape[0])
      throw InvalidArgument("[ShardedInput] " + spec_.features + " has " + std::to_string(x.shape[0]) +
                            " examples but " + spec_.labels + " has " + std::to_string(y.shape[0]));
    headers_->example = Shape(x.shape.dims().subspan(1));
    headers_->examples = x.shape[0];
  }
  return *headers_;
}

int64_t ShardedInput::num_examples() const { return *headers().examples; }
Shape ShardedInput::example_shape() const { return headers().example; }
int64_t ShardedInput::batches_per_epoch() const {
  return weft::batches_per_epoch(num_examples(), spec_.global_batch, spec_.drop_remainder);
}

Attrs ShardedInput::node_attrs(int64_t replica, int64_t num_replicas) const {
  // Where this process stands: a task reading the source for the first time starts there too.
  const ShardedPosition at = position(replica);
  const int64_t start = at.epoch * batches_per_epoch() + at.batch;
  Attrs attrs{{"format", spec_.format},
               {"features", spec_.features},
               {"labels", spec_.labels},
               {"global_batch", spec_.global_batch},
               {"replica", replica},
               {"num_replicas", num_replicas},
               {"seed", spec_.seed},
               {"drop_remainder", spec_.drop_remainder},
               {"scale", scale_},
               {"source", source_},
               {"example_shape", example_shape()}};
  if (start > 0) attrs.set("start_batch", start);
  // Only when on, so graphs without augmentation keep their attributes (and their hashes).
  if (crop_padding_ > 0) {
    attrs.set("crop_padding", crop_padding_);
    attrs.set("crop_seed", crop_seed_);
  }
  if (flip_seed_ >= 0) attrs.set("flip_seed", flip_seed_);
  return attrs;
}

std::vector<Tensor> ShardedInput::read(int64_t replica, int64_t num_replicas, const SourceLocation& loc) const {
  static const OpDef& op = op_def("ReadShardedBatch");
  return dispatch(op, {}, node_attrs(replica, num_replicas), loc);
}

}  // namespace weft::data
