// Input pipelines in the tf.data style.
//
//   auto ds = data::Dataset::from_tensors({x, y}).shuffle(10000, /*seed=*/1).batch(128).prefetch(2);
//   for (const std::vector<Tensor>& batch : ds) { ... batch[0], batch[1] ... }
//
// from_tensors slices its tensors along the first dimension (tf.data's from_tensor_slices):
// element i is {x[i], y[i]}. Iterating starts a new epoch; shuffle reshuffles each epoch
// (deterministically when seeded). prefetch(k) prepares up to k elements on a background thread
// while the loop body runs. Datasets are handles; transformations return new datasets.
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
