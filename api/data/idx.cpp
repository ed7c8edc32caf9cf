#include "api/data/idx.h"

#include "runtime/idx.h"

namespace weft::data {

// The parser lives in runtime/idx.cpp, shared with the ReadShardedBatch kernel.
Tensor read_idx(const std::string& path) { return weft::read_idx(path); }

std::pair<Tensor, Tensor> load_idx(const std::string& images_path, const std::string& labels_path) {
  Tensor images = weft::read_idx(images_path);
  Tensor labels = weft::read_idx(labels_path);
  if (images.dtype() != DType::UInt8 || images.rank() != 3)
    throw InvalidArgument("[load_idx] " + images_path + ": expected uint8 images of rank 3, got " +
                          std::string(dtype_name(images.dtype())) + " " + images.shape().to_string());
  if (labels.dtype() != DType::UInt8 || labels.rank() != 1)
    throw InvalidArgument("[load_idx] " + labels_path + ": expected uint8 labels of rank 1, got " +
                          std::string(dtype_name(labels.dtype())) + " " + labels.shape().to_string());
  if (images.shape()[0] != labels.shape()[0])
    throw InvalidArgument("[load_idx] " + images_path + " has " + std::to_string(images.shape()[0]) + " images but " +
                          labels_path + " has " + std::to_string(labels.shape()[0]) + " labels");
  return {images, labels};
}

}  // namespace weft::data
