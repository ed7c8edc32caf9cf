// Input pipelines in the tf.data style.
//
//   auto ds = data::Dataset::from_tensors({x, y}).shuffle(10000, /*seed=*/1).batch(128).prefetch(2);
//   for (const std::vector<Tensor>& batch : ds) { ... batch[0], batch[1] ... }
//
// from_tensors slices its tensors along the first dimension (tf.data's from_tensor_slices):
// element i is {x[i], y[i]}. Iterating starts a new epoch; shuffle reshuffles each epoch
// (deterministically when seeded). prefetch(k) prepares up to k elements on a background thread
// while the loop body runs. Datasets are handles; transformations return new datasets.
//
// Image augmentation (Keras's RandomCrop / RandomFlip, tf.image.random_flip_left_right), on the
// host, per image, seeded and reproducible:
//
//   auto train = data::Dataset::from_tensors({images, labels})      // images (N, 32, 32, 3)
//                    .shuffle(50000, 1)
//                    .random_crop(32, 32, /*padding=*/4, /*seed=*/2)  // pad 4 zeros, crop 32x32
//                    .random_flip_left_right(/*seed=*/3)             // mirror with p = 0.5
//                    .batch(128).prefetch(2);
//
// They change one component of each element (`component`, default 0: the images): an HWC image
// (rank 3), or an NHWC batch (rank 4: each image draws its own crop and flip), of any dtype.
// An image's draws depend on the seed, the epoch and the image's position in the epoch, so a
// seeded pipeline gives the same images in every run, and new ones each epoch; seed -1 draws a
// fresh seed per epoch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "runtime/tensor.h"

namespace weft::data {

struct DatasetNode;
class ElementStream;

class Dataset {
 public:
  static Dataset from_tensors(const std::vector<Tensor>& tensors);
  static Dataset from_tensor_slices(const std::vector<Tensor>& tensors) { return from_tensors(tensors); }

  // Fills a buffer of `buffer_size` elements and yields a random one each step, like tf.data.
  Dataset shuffle(int64_t buffer_size, int64_t seed = -1, bool reshuffle_each_iteration = true) const;
  // Stacks `batch_size` consecutive elements; the last batch may be smaller unless dropped.
  Dataset batch(int64_t batch_size, bool drop_remainder = false) const;
  Dataset prefetch(int64_t buffer_size) const;

  // Pads each image by `padding` zero pixels on every side, then takes a random height x width
  // window of it (uniform over the positions that fit). InvalidArgument at iteration when the
  // padded image is smaller than the window or the component is not rank 3 or 4.
  Dataset random_crop(int64_t height, int64_t width, int64_t padding = 0, int64_t seed = -1,
                      int64_t component = 0) const;
  // Mirrors each image along its width with probability 1/2.
  Dataset random_flip_left_right(int64_t seed = -1, int64_t component = 0) const;

  // Elements per epoch.
  int64_t cardinality() const;

  class Iterator {
   public:
    using value_type = std::vector<Tensor>;
    Iterator() = default;
    Iterator(std::shared_ptr<const DatasetNode> node, std::shared_ptr<ElementStream> stream);
    const std::vector<Tensor>& operator*() const { return current_; }
    const std::vector<Tensor>* operator->() const { return &current_; }
    Iterator& operator++();
    bool operator==(const Iterator& o) const { return done_ == o.done_; }
    bool operator!=(const Iterator& o) const { return !(*this == o); }

   private:
    std::shared_ptr<const DatasetNode> node_;  // keeps the pipeline the stream reads alive
    std::shared_ptr<ElementStream> stream_;
    std::vector<Tensor> current_;
    bool done_ = true;
  };
  Iterator begin() const;
  Iterator end() const { return Iterator(); }

 private:
  explicit Dataset(std::shared_ptr<DatasetNode> node) : node_(std::move(node)) {}
  std::shared_ptr<DatasetNode> node_;
};

}  // namespace weft::data
