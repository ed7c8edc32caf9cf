// MNIST-style IDX files (the format of MNIST and Fashion-MNIST), plain or gzip-compressed.
//
//   auto [images, labels] = data::load_idx("train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz");
//   // images: uint8 (N, 28, 28); labels: uint8 (N,)
//
// Files are untrusted: a missing file is NotFound, a wrong magic number or a truncated file is
// DataLoss, images and labels that disagree are InvalidArgument; every message names the path.
#pragma once

#include <string>
#include <utility>

#include "runtime/tensor.h"

namespace weft::data {

// Any IDX file: element type from its magic number (uint8, int8, int16 -> int32, int32,
// float32, float64), shape from its header. The same parser as weft::read_idx (runtime/idx.h).
Tensor read_idx(const std::string& path);

// An image file (rank 3) and its label file (rank 1) of the same length.
std::pair<Tensor, Tensor> load_idx(const std::string& images_path, const std::string& labels_path);

}  // namespace weft::data
