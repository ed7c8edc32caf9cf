// The per-process state behind the ReadShardedBatch op: the loaded files and one cursor per
// (source, replica), so that every data-parallel replica reads its own rows of each global batch
// on its own task and the chief relays no training data.
//
//   ShardedInputSpec spec{.format = "idx", .features = "train-images-idx3-ubyte.gz",
//                         .labels = "train-labels-idx1-ubyte.gz", .global_batch = 256, .num_replicas = 4,
//                         .seed = 42};
//   ShardedBatchPlan p = next_sharded_batch("train", /*replica=*/1, spec);   // advances the cursor
//   for (int64_t i = 0; i < p.count; ++i) copy_row(p.data->features, p.example(i));
//
// Order. Epoch e visits every example once, in the order epoch_order(size, seed, e): the identity
// for seed -1, else a Fisher-Yates shuffle driven by splitmix64 from (seed, e) — a fixed, simple
// algorithm (not std::shuffle, whose results differ between standard libraries), so every process
// computes the same order. Batch b of epoch e is positions [b*G, min((b+1)*G, size)) of it (the
// short last batch is skipped with drop_remainder); replica r reads shard_rows(N_step, R, r) of
// that batch. After an epoch's last batch the next epoch starts, reshuffled.
//
// State. Files are loaded once per (format, path) per process and shared by every source and
// replica that names them; they stay loaded until reset_sharded_inputs(). A cursor belongs to
// (source, replica); nodes with the same source and replica in one process share it, and every
// read advances it by one batch. Everything here is thread-safe.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "runtime/array_header.h"
#include "runtime/tensor.h"

namespace weft {

// What a source reads and how: the op's attributes minus the replica.
struct ShardedInputSpec {
  std::string format;  // "idx" or "npy"
  std::string features, labels;
  int64_t global_batch = 0;
  int64_t num_replicas = 1;
  int64_t seed = -1;  // -1: no shuffling
  bool drop_remainder = false;

  bool operator==(const ShardedInputSpec&) const = default;
  // InvalidArgument("[where] ...") for a bad format, batch, replica count or seed.
  void validate(const std::string& where) const;
  std::string describe() const;
};

// A features file and its labels file, as read (features keep the file's dtype).
struct ShardedDataset {
  Tensor features;  // (N, ...): uint8, int8, int32, int64, float32 or float64
  Tensor labels;    // (N,): uint8, int8, int32 or int64
  int64_t size() const { return labels.shape()[0]; }
};

// The header of one file of `format` ("idx" or "npy"), reading no data.
ArrayHeader read_array_header(const std::string& format, const std::string& path);

// Loads (once per process) and checks a pair of files: NotFound / DataLoss from the parsers,
// InvalidArgument naming both files when their example counts differ, naming one for a dtype or
// rank the op cannot read.
std::shared_ptr<const ShardedDataset> load_sharded_dataset(const std::string& format, const std::string& features,
                                                           const std::string& labels);

// The permutation of [0, size) that epoch `epoch` visits (see the header comment).
std::vector<int64_t> epoch_order(int64_t size, int64_t seed, int64_t epoch);

// A position in the stream: the next batch a cursor reads is batch `batch` of epoch `epoch`.
struct ShardedPosition {
  int64_t epoch = 0;
  int64_t batch = 0;
  bool operator==(const ShardedPosition&) const = default;
};

// What one replica reads in one step.
struct ShardedBatchPlan {
  std::shared_ptr<const ShardedDataset> data;
  std::shared_ptr<const std::vector<int64_t>> order;  // the epoch's order; null for the identity
  int64_t first = 0;   // the replica's first row: position `first` of the order
  int64_t count = 0;   // n_r: its rows (may be 0)
  int64_t global = 0;  // N_step: the rows of this step's global batch
  ShardedPosition position;  // the batch this plan reads

  // The dataset index of the replica's row i.
  int64_t example(int64_t i) const { return order ? (*order)[static_cast<size_t>(first + i)] : first + i; }
};

// Reads one step for (source, replica): loads the files if needed, returns the rows of the
// cursor's batch that belong to the replica, and advances the cursor by one batch.
// InvalidArgument when the source is already in use with a different spec, when replica is out
// of range, or when drop_remainder leaves no batch at all.
ShardedBatchPlan next_sharded_batch(const std::string& source, int64_t replica, const ShardedInputSpec& spec);

// For checkpoint restarts: every cursor of `source` (and any created later) next reads batch
// `batch` of epoch `epoch`. A batch beyond an epoch's end carries into the following epochs
// (set(source, 0, global_step) resumes after global_step batches). InvalidArgument for negative
// values.
void set_sharded_input_position(const std::string& source, int64_t epoch, int64_t batch);
// The batch the cursor of (source, replica) reads next; where it will start if it has not read yet.
ShardedPosition sharded_input_position(const std::string& source, int64_t replica = 0);
// For a process that has neither read `source` nor been given a position for it: its cursors start
// `batches` global batches in. A graph carries this (ReadShardedBatch's start_batch) to every task,
// so a job restarted from a checkpoint reads on from where the chief was told to start.
void start_sharded_input_at(const std::string& source, int64_t batches);

// Forgets every cursor, position and loaded file of this process (tests; freeing memory).
void reset_sharded_inputs();

// Image augmentation on the host, shared by data::Dataset and ReadShardedBatch. Images are HWC
// rows of bytes: a pixel is `pixel_bytes` bytes (channels times the dtype's size), so one code
// path serves every dtype and a row moves with memcpy.
//
// The random draws of one image come from augment_stream(seed, epoch, index): a counter-based
// generator (splitmix64), so an image's crop and flip depend only on the seed, the epoch and the
// image's index, not on threads, replicas or batch sizes.
uint64_t augment_stream(uint64_t seed, uint64_t epoch, uint64_t index);
// A uniform draw in [0, n) from the stream (n > 0).
uint64_t augment_uniform(uint64_t& stream, uint64_t n);
// dst (out_h, out_w) = the window at (top, left) of src (h, w) padded by `pad` zero pixels on
// every side; top in [0, h + 2*pad - out_h], left in [0, w + 2*pad - out_w].
void crop_padded_image(const char* src, int64_t h, int64_t w, int64_t pixel_bytes, int64_t pad, int64_t top,
                       int64_t left, int64_t out_h, int64_t out_w, char* dst);
// Mirrors an image (h, w) in place along its width.
void flip_image_left_right(char* image, int64_t h, int64_t w, int64_t pixel_bytes);

}  // namespace weft
