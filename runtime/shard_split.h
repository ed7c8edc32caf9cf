// How a global batch of n rows is split over data-parallel replicas, in one place: the
// ReadShardedBatch op (each replica reads its rows on its own task) and DataParallel's in-memory
// split of a fed batch must agree row for row.
//
//   RowRange r = shard_rows(10, 4, 1);   // {start 3, count 3}: replicas get 3, 3, 2, 2 rows
//
// Replica r of R gets rows [start, start + count) where base = n / R, rem = n % R,
// count = base + (r < rem), start = r * base + min(r, rem): the first n % R replicas get one row
// more, the ranges are contiguous, in replica order, and cover [0, n) exactly once. A replica
// may get 0 rows (more replicas than rows).
#pragma once

#include <algorithm>
#include <cstdint>

namespace weft {

struct RowRange {
  int64_t start = 0;
  int64_t count = 0;
};

// Requires n >= 0, replicas > 0 and 0 <= replica < replicas (callers validate; see the op).
inline RowRange shard_rows(int64_t n, int64_t replicas, int64_t replica) {
  const int64_t base = n / replicas, rem = n % replicas;
  return {replica * base + std::min(replica, rem), base + (replica < rem ? 1 : 0)};
}

// Batches in one epoch of `size` examples: the last, partial one is counted unless
// drop_remainder. Requires global_batch > 0.
inline int64_t batches_per_epoch(int64_t size, int64_t global_batch, bool drop_remainder) {
  return drop_remainder ? size / global_batch : (size + global_batch - 1) / global_batch;
}

}  // namespace weft
