#include "runtime/sharded_input.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <map>
#include <mutex>
#include <numeric>
#include <utility>

#include "runtime/error.h"
#include "runtime/idx.h"
#include "runtime/npy.h"
#include "runtime/shard_split.h"

namespace weft {

namespace {

constexpr const char* kTag = "[read_sharded_batch] ";

void check_format(const std::string& format, const std::string& where) {
  if (format != "idx" && format != "npy")
    throw InvalidArgument("[" + where + "] unknown format '" + format + "' (known: idx, npy)");
}

// splitmix64 (Steele, Lea and Flood, 2014): the finaliser and the generator built on it.
uint64_t mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
uint64_t splitmix64(uint64_t& state) {
  state += 0x9E3779B97F4A7C15ull;
  return mix64(state);
}
// Uniform in [0, n) without modulo bias: draws below 2^64 mod n are redrawn.
uint64_t uniform_below(uint64_t& state, uint64_t n) {
  const uint64_t threshold = (0 - n) % n;
  for (;;) {
    const uint64_t r = splitmix64(state);
    if (r >= threshold) return r % n;
  }
}

// One loaded file; its own lock, so loading one file blocks nobody reading another.
struct FileSlot {
  std::mutex mu;
  Tensor value;  // undefined until loaded
};

struct Source {
  bool has_spec = false;
  ShardedInputSpec spec;
  std::shared_ptr<const ShardedDataset> data;
  ShardedPosition start;                                             // where new cursors begin
  bool positioned = false;  // given a position, or read: a graph's start_batch no longer applies
  std::map<int64_t, ShardedPosition> cursors;                        // by replica
  std::map<int64_t, std::shared_ptr<const std::vector<int64_t>>> orders;  // by epoch, a few recent
};

struct State {
  std::mutex mu;
  std::map<std::pair<std::string, std::string>, std::shared_ptr<FileSlot>> files;  // (format, path)
  std::map<std::string, Source> sources;
};

State& state() {
  static State* s = new State;  // never destroyed: kernels may run while the process exits
  return *s;
}

Tensor load_file(const std::string& format, const std::string& path) {
  std::shared_ptr<FileSlot> slot;
  {
    std::lock_guard lock(state().mu);
    auto& s = state().files[{format, path}];
    if (!s) s = std::make_shared<FileSlot>();
    slot = s;
  }
  std::lock_guard lock(slot->mu);
  if (!slot->value.defined()) slot->value = format == "idx" ? read_idx(path) : load_npy(path);
  return slot->value;
}

ShardedPosition normalized(ShardedPosition p, int64_t per_epoch) {
  return {p.epoch + p.batch / per_epoch, p.batch % per_epoch};
}

std::shared_ptr<const std::vector<int64_t>> order_for(Source& s, int64_t epoch) {
  if (s.spec.seed == -1) return nullptr;
  auto it = s.orders.find(epoch);
  if (it != s.orders.end()) return it->second;
  auto order = std::make_shared<const std::vector<int64_t>>(epoch_order(s.data->size(), s.spec.seed, epoch));
  s.orders.emplace(epoch, order);
  // Replicas of one process move in step; a few epochs cover any that lag.
  while (s.orders.size() > 3) s.orders.erase(s.orders.begin());
  return order;
}

}  // namespace

void ShardedInputSpec::validate(const std::string& where) const {
  check_format(format, where);
  if (features.empty() || labels.empty()) throw InvalidArgument("[" + where + "] needs a features and a labels file");
  if (global_batch <= 0)
    throw InvalidArgument("[" + where + "] global_batch must be positive, got " + std::to_string(global_batch));
  if (num_replicas <= 0)
    throw InvalidArgument("[" + where + "] num_replicas must be positive, got " + std::to_string(num_replicas));
  if (seed < -1)
    throw InvalidArgument("[" + where + "] seed must be >= 0, or -1 for no shuffling; got " + std::to_string(seed));
}

std::string ShardedInputSpec::describe() const {
  return format + " files " + features + " and " + labels + ", global_batch " + std::to_string(global_batch) +
         ", " + std::to_string(num_replicas) + " replicas, seed " + std::to_string(seed) +
         (drop_remainder ? ", drop_remainder" : "");
}

ArrayHeader read_array_header(const std::string& format, const std::string& path) {
  check_format(format, "read_sharded_batch");
  return format == "idx" ? read_idx_header(path) : read_npy_header(path);
}

std::shared_ptr<const ShardedDataset> load_sharded_dataset(const std::string& format, const std::string& features,
                                                           const std::string& labels) {
  check_format(format, "read_sharded_batch");
  auto data = std::make_shared<ShardedDataset>();
  data->features = load_file(format, features);
  data->labels = load_file(format, labels);
  const Tensor& x = data->features;
  const Tensor& y = data->labels;
  const DType xd = x.dtype(), yd = y.dtype();
  if (x.rank() < 1) throw InvalidArgument(kTag + features + ": features must have a leading example axis, got a scalar");
  if (xd != DType::UInt8 && xd != DType::Int8 && xd != DType::Int32 && xd != DType::Int64 && xd != DType::Float32 &&
      xd != DType::Float64)
    throw InvalidArgument(kTag + features + ": features of dtype " + std::string(dtype_name(xd)) +
                          " are not supported (uint8, int8, int32, int64, float32, float64 are)");
  if (y.rank() != 1)
    throw InvalidArgument(kTag + labels + ": labels must have rank 1, got shape " + y.shape().to_string());
  if (yd != DType::UInt8 && yd != DType::Int8 && yd != DType::Int32 && yd != DType::Int64)
    throw InvalidArgument(kTag + labels + ": labels of dtype " + std::string(dtype_name(yd)) +
                          " are not supported (uint8, int8, int32, int64 are)");
  if (x.shape()[0] != y.shape()[0])
    throw InvalidArgument(kTag + features + " has " + std::to_string(x.shape()[0]) + " examples but " + labels +
                          " has " + std::to_string(y.shape()[0]));
  if (y.shape()[0] == 0) throw InvalidArgument(kTag + features + " and " + labels + " hold no examples");
  if (yd == DType::Int64) {
    const int64_t* v = y.data<int64_t>();
    for (int64_t i = 0; i < y.shape()[0]; ++i)
      if (v[i] < INT32_MIN || v[i] > INT32_MAX)
        throw InvalidArgument(kTag + labels + ": label " + std::to_string(i) + " is " + std::to_string(v[i]) +
                              ", beyond int32, which the op outputs");
  }
  return data;
}

// Generator state for epoch e: splitmix64's finaliser of (finaliser(seed) + e); then for i from
// size-1 down to 1, swap positions i and uniform_below(i + 1) (Fisher-Yates).
std::vector<int64_t> epoch_order(int64_t size, int64_t seed, int64_t epoch) {
  std::vector<int64_t> order(static_cast<size_t>(size));
  std::iota(order.begin(), order.end(), int64_t{0});
  if (seed == -1) return order;
  uint64_t st = mix64(mix64(static_cast<uint64_t>(seed)) + static_cast<uint64_t>(epoch));
  for (int64_t i = size - 1; i > 0; --i) {
    const auto j = static_cast<int64_t>(uniform_below(st, static_cast<uint64_t>(i) + 1));
    std::swap(order[static_cast<size_t>(i)], order[static_cast<size_t>(j)]);
  }
  return order;
}

ShardedBatchPlan next_sharded_batch(const std::string& source, int64_t replica, const ShardedInputSpec& spec) {
  spec.validate("read_sharded_batch");
  if (replica < 0 || replica >= spec.num_replicas)
    throw InvalidArgument(std::string(kTag) + "replica " + std::to_string(replica) + " is out of range for " +
                          std::to_string(spec.num_replicas) + " replicas");
  auto mismatch = [&](const Source& s) {
    return InvalidArgument(std::string(kTag) + "source '" + source + "' already reads " + s.spec.describe() +
                           "; this node asks for " + spec.describe() + " (give it another source name)");
  };
  State& st = state();
  std::shared_ptr<const ShardedDataset> data;
  {
    std::lock_guard lock(st.mu);
    Source& s = st.sources[source];
    if (s.has_spec && s.spec != spec) throw mismatch(s);
    data = s.data;
  }
  // Loading takes a while; it holds only the files' own locks.
  if (!data) data = load_sharded_dataset(spec.format, spec.features, spec.labels);

  std::lock_guard lock(st.mu);
  Source& s = st.sources[source];
  if (!s.has_spec) {
    s.spec = spec;
    s.has_spec = true;
  } else if (s.spec != spec) {
    throw mismatch(s);
  }
  if (!s.data) s.data = data;
  const int64_t size = s.data->size();
  const int64_t per_epoch = batches_per_epoch(size, spec.global_batch, spec.drop_remainder);
  if (per_epoch == 0)
    throw InvalidArgument(kTag + spec.features + " has " + std::to_string(size) +
                          " examples, fewer than global_batch " + std::to_string(spec.global_batch) +
                          ": with drop_remainder there is no batch to read");
  ShardedPosition& cursor = s.cursors.try_emplace(replica, normalized(s.start, per_epoch)).first->second;
  s.positioned = true;

  ShardedBatchPlan plan;
  plan.data = s.data;
  plan.position = cursor;
  plan.order = order_for(s, cursor.epoch);
  const int64_t begin = cursor.batch * spec.global_batch;
  plan.global = std::min(spec.global_batch, size - begin);
  const RowRange rows = shard_rows(plan.global, spec.num_replicas, replica);
  plan.first = begin + rows.start;
  plan.count = rows.count;
  if (++cursor.batch == per_epoch) cursor = {cursor.epoch + 1, 0};
  return plan;
}

void set_sharded_input_position(const std::string& source, int64_t epoch, int64_t batch) {
  if (epoch < 0 || batch < 0)
    throw InvalidArgument("[set_sharded_input_position] epoch and batch must be >= 0, got epoch " +
                          std::to_string(epoch) + ", batch " + std::to_string(batch));
  std::lock_guard lock(state().mu);
  Source& s = state().sources[source];
  s.start = {epoch, batch};
  s.positioned = true;
  if (!s.data) return;  // no cursor yet: each starts from s.start when created
  const int64_t per_epoch = batches_per_epoch(s.data->size(), s.spec.global_batch, s.spec.drop_remainder);
  if (per_epoch == 0) return;
  for (auto& [replica, cursor] : s.cursors) cursor = normalized(s.start, per_epoch);
}

void start_sharded_input_at(const std::string& source, int64_t batches) {
  if (batches < 0)
    throw InvalidArgument("[start_sharded_input_at] batches must be >= 0, got " + std::to_string(batches));
  std::lock_guard lock(state().mu);
  Source& s = state().sources[source];
  if (s.positioned) return;
  s.start = {0, batches};  // normalised into (epoch, batch) when the first cursor is made
  s.positioned = true;
}

ShardedPosition sharded_input_position(const std::string& source, int64_t replica) {
  std::lock_guard lock(state().mu);
  auto it = state().sources.find(source);
  if (it == state().sources.end()) return {};
  const Source& s = it->second;
  if (auto c = s.cursors.find(replica); c != s.cursors.end()) return c->second;
  if (!s.data) return s.start;
  const int64_t per_epoch = batches_per_epoch(s.data->size(), s.spec.global_batch, s.spec.drop_remainder);
  return per_epoch > 0 ? normalized(s.start, per_epoch) : s.start;
}

uint64_t augment_stream(uint64_t seed, uint64_t epoch, uint64_t index) {
  // Distinct odd multipliers keep (epoch, index) pairs from colliding in the finaliser's input.
  return mix64(mix64(seed) + epoch * 0xD1B54A32D192ED03ull + index * 0x9E3779B97F4A7C15ull);
}

uint64_t augment_uniform(uint64_t& stream, uint64_t n) { return uniform_below(stream, n); }

void crop_padded_image(const char* src, int64_t h, int64_t w, int64_t pixel_bytes, int64_t pad, int64_t top,
                       int64_t left, int64_t out_h, int64_t out_w, char* dst) {
  // Output column x reads source column x + left - pad: the columns inside [0, w) are one run.
  const int64_t x0 = std::clamp<int64_t>(pad - left, 0, out_w);
  const int64_t x1 = std::clamp<int64_t>(w + pad - left, x0, out_w);
  const size_t row_bytes = static_cast<size_t>(out_w * pixel_bytes);
  for (int64_t y = 0; y < out_h; ++y) {
    char* out = dst + y * out_w * pixel_bytes;
    const int64_t sy = y + top - pad;
    if (sy < 0 || sy >= h || x0 == x1) {
      std::memset(out, 0, row_bytes);
      continue;
    }
    if (x0 > 0) std::memset(out, 0, static_cast<size_t>(x0 * pixel_bytes));
    std::memcpy(out + x0 * pixel_bytes, src + (sy * w + x0 + left - pad) * pixel_bytes,
                static_cast<size_t>((x1 - x0) * pixel_bytes));
    if (x1 < out_w) std::memset(out + x1 * pixel_bytes, 0, static_cast<size_t>((out_w - x1) * pixel_bytes));
  }
}

void flip_image_left_right(char* image, int64_t h, int64_t w, int64_t pixel_bytes) {
  std::vector<char> tmp(static_cast<size_t>(pixel_bytes));
  for (int64_t y = 0; y < h; ++y) {
    char* row = image + y * w * pixel_bytes;
    for (int64_t a = 0, b = w - 1; a < b; ++a, --b) {
      std::memcpy(tmp.data(), row + a * pixel_bytes, tmp.size());
      std::memcpy(row + a * pixel_bytes, row + b * pixel_bytes, tmp.size());
      std::memcpy(row + b * pixel_bytes, tmp.data(), tmp.size());
    }
  }
}

void reset_sharded_inputs() {
  std::lock_guard lock(state().mu);
  state().files.clear();
  state().sources.clear();
}

}  // namespace weft
