// IDX files (the format of MNIST and Fashion-MNIST), plain or gzip-compressed: the one parser of
// the format, used by the eager data API (api/data/idx.h) and the ReadShardedBatch kernel.
//
//   Tensor images = read_idx("train-images-idx3-ubyte.gz");   // uint8 (60000, 28, 28)
//   ArrayHeader h = read_idx_header("train-labels-idx1-ubyte.gz");  // uint8 (60000,), no data read
//
// Files are untrusted: a missing file is NotFound, a wrong magic number, a truncated file or data
// beyond what the header declares is DataLoss; every message names the path. Sizes are checked
// before anything is allocated: a header that claims more data than the file holds (plain) or
// can hold (gzip: deflate expands at most 1032:1) is DataLoss, and data over WEFT_IDX_MAX_BYTES
// (default 8 GiB: a decompression bomb) InvalidArgument. Something other than a regular file (a
// FIFO, a device) is InvalidArgument, refused without waiting on it.
#pragma once

#include <string>

#include "runtime/array_header.h"
#include "runtime/tensor.h"

namespace weft {

// Element type from the magic number (uint8, int8, int16 -> int32, int32, float32, float64),
// shape from the header.
Tensor read_idx(const std::string& path);

// The header only: reads a few bytes (decompressing just as far), not the data.
ArrayHeader read_idx_header(const std::string& path);

}  // namespace weft
