#include "api/data/dataset.h"

#include <condition_variable>
#include <cstring>
#include <deque>
#include <exception>
#include <mutex>
#include <optional>
#include <random>
#include <thread>

#include "runtime/sharded_input.h"
#include "runtime/tensor_internals.h"

namespace weft::data {

// An element on its way through the pipeline. Before batching, elements are just row numbers
// into the source tensors: shuffling moves integers, and batch() copies each row straight into
// its place in the batch, so a 60000-image epoch never makes 60000 little tensors.
struct Element {
  int64_t row = -1;              // >= 0: a row of the source tensors, not yet materialised
  std::vector<Tensor> tensors;   // materialised element
};

class ElementStream {
 public:
  virtual ~ElementStream() = default;
  virtual bool next(Element& out) = 0;
};

struct DatasetNode {
  enum class Kind { Source, Shuffle, Batch, Prefetch, RandomCrop, RandomFlip } kind;
  std::shared_ptr<DatasetNode> input;
  std::vector<Tensor> sources;  // Source
  int64_t rows = 0;             // Source
  int64_t size = 0;             // Shuffle buffer, batch size, prefetch depth
  int64_t seed = -1;
  bool flag = false;            // Shuffle: reshuffle each iteration; Batch: drop remainder
  int64_t height = 0, width = 0, padding = 0;  // RandomCrop
  int64_t component = 0;        // RandomCrop, RandomFlip: the element's tensor they change
  mutable std::mutex mu;
  mutable int64_t epoch = 0;    // Shuffle, RandomCrop, RandomFlip: iterations started

  const DatasetNode& source() const { return input ? input->source() : *this; }
  std::shared_ptr<ElementStream> open() const;
};

namespace {

Tensor slice_row(const Tensor& t, int64_t row) {
  Shape s(std::span<const int64_t>(t.shape().data() + 1, t.rank() - 1));
  size_t bytes = static_cast<size_t>(s.num_elements()) * dtype_size(t.dtype());
  Tensor out = Tensor::empty(t.dtype(), s);
  if (bytes) std::memcpy(raw_data(out), static_cast<const char*>(raw_data(t)) + row * bytes, bytes);
  return out;
}

std::vector<Tensor> materialise(const DatasetNode& src, Element& e) {
  if (e.row < 0) return std::move(e.tensors);
  std::vector<Tensor> out;
  for (const Tensor& t : src.sources) out.push_back(slice_row(t, e.row));
  return out;
}

class SourceStream final : public ElementStream {
 public:
  explicit SourceStream(int64_t rows) : rows_(rows) {}
  bool next(Element& out) override {
    if (next_ >= rows_) return false;
    out.row = next_++;
    out.tensors.clear();
    return true;
  }

 private:
  int64_t rows_, next_ = 0;
};

class ShuffleStream final : public ElementStream {
 public:
  ShuffleStream(std::shared_ptr<ElementStream> in, int64_t buffer, uint64_t seed)
      : in_(std::move(in)), capacity_(buffer), rng_(seed) {}
  bool next(Element& out) override {
    while (static_cast<int64_t>(buffer_.size()) < capacity_ && !exhausted_) {
      Element e;
      if (in_->next(e)) buffer_.push_back(std::move(e));
      else exhausted_ = true;
    }
    if (buffer_.empty()) return false;
    std::uniform_int_distribution<size_t> pick(0, buffer_.size() - 1);
    size_t i = pick(rng_);
    out = std::move(buffer_[i]);
    buffer_[i] = std::move(buffer_.back());
    buffer_.pop_back();
    return true;
  }

 private:
  std::shared_ptr<ElementStream> in_;
  int64_t capacity_;
  std::mt19937_64 rng_;
  std::vector<Element> buffer_;
  bool exhausted_ = false;
};

class BatchStream final : public ElementStream {
 public:
  BatchStream(std::shared_ptr<ElementStream> in, const DatasetNode& src, int64_t size, bool drop)
      : in_(std::move(in)), src_(src), size_(size), drop_(drop) {}
  bool next(Element& out) override {
    std::vector<Element> items;
    Element e;
    while (static_cast<int64_t>(items.size()) < size_ && in_->next(e)) items.push_back(std::move(e));
    if (items.empty() || (drop_ && static_cast<int64_t>(items.size()) < size_)) return false;
    out.row = -1;
    out.tensors.clear();
    const int64_t n = static_cast<int64_t>(items.size());
    const size_t parts = items[0].row >= 0 ? src_.sources.size() : items[0].tensors.size();
    for (size_t k = 0; k < parts; ++k) {
      const Tensor& first = items[0].row >= 0 ? src_.sources[k] : items[0].tensors[k];
      Shape elem = items[0].row >= 0 ? Shape(std::span<const int64_t>(first.shape().data() + 1, first.rank() - 1))
                                     : first.shape();
      Shape batched{n};
      for (int64_t d : elem) batched.push_back(d);
      Tensor t = Tensor::empty(first.dtype(), batched);
      const size_t bytes = static_cast<size_t>(elem.num_elements()) * dtype_size(first.dtype());
      auto* dst = static_cast<char*>(raw_data(t));
      for (int64_t i = 0; i < n; ++i) {
        const Element& it = items[i];
        if (it.row >= 0) {
          std::memcpy(dst + i * bytes, static_cast<const char*>(raw_data(src_.sources[k])) + it.row * bytes, bytes);
        } else {
          if (it.tensors[k].shape() != elem)
            throw InvalidArgument("[batch] elements have different shapes: " + elem.to_string() + " and " +
                                  it.tensors[k].shape().to_string());
          std::memcpy(dst + i * bytes, raw_data(it.tensors[k]), bytes);
        }
      }
      out.tensors.push_back(t);
    }
    return true;
  }

 private:
  std::shared_ptr<ElementStream> in_;
  const DatasetNode& src_;
  int64_t size_;
  bool drop_;
};

// Runs the upstream pipeline on its own thread, keeping up to `depth` ready elements.
class PrefetchStream final : public ElementStream {
 public:
  PrefetchStream(std::shared_ptr<ElementStream> in, const DatasetNode& src, int64_t depth)
      : in_(std::move(in)), src_(src), depth_(depth) {
    worker_ = std::thread([this] { produce(); });
  }
  ~PrefetchStream() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    worker_.join();
  }
  bool next(Element& out) override {
    std::unique_lock<std::mutex> lock(mu_);
    cv_.wait(lock, [&] { return !queue_.empty() || finished_; });
    if (queue_.empty()) {
      if (error_) std::rethrow_exception(error_);
      return false;
    }
    out = std::move(queue_.front());
    queue_.pop_front();
    cv_.notify_all();
    return true;
  }

 private:
  void produce() {
    try {
      for (;;) {
        Element e;
        if (!in_->next(e)) break;
        e.tensors = materialise(src_, e);
        e.row = -1;
        std::unique_lock<std::mutex> lock(mu_);
        cv_.wait(lock, [&] { return stop_ || static_cast<int64_t>(queue_.size()) < depth_; });
        if (stop_) return;
        queue_.push_back(std::move(e));
        cv_.notify_all();
      }
    } catch (...) {
      std::lock_guard<std::mutex> lock(mu_);
      error_ = std::current_exception();
    }
    std::lock_guard<std::mutex> lock(mu_);
    finished_ = true;
    cv_.notify_all();
  }

  std::shared_ptr<ElementStream> in_;
  const DatasetNode& src_;
  int64_t depth_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Element> queue_;
  bool stop_ = false, finished_ = false;
  std::exception_ptr error_;
  std::thread worker_;
};

// RandomCrop and RandomFlip: materialises each element and replaces one of its tensors by an
// augmented copy (never in place: the tensor may be shared with the caller's source).
class AugmentStream final : public ElementStream {
 public:
  AugmentStream(std::shared_ptr<ElementStream> in, const DatasetNode& node, uint64_t seed, uint64_t epoch)
      : in_(std::move(in)), node_(node), src_(node.source()), seed_(seed), epoch_(epoch) {}
  bool next(Element& out) override {
    if (!in_->next(out)) return false;
    out.tensors = materialise(src_, out);
    out.row = -1;
    const char* op = node_.kind == DatasetNode::Kind::RandomCrop ? "[random_crop] " : "[random_flip_left_right] ";
    if (node_.component >= static_cast<int64_t>(out.tensors.size()))
      throw InvalidArgument(op + std::string("component ") + std::to_string(node_.component) +
                            " is out of range for elements of " + std::to_string(out.tensors.size()) + " tensors");
    Tensor& t = out.tensors[static_cast<size_t>(node_.component)];
    if (t.rank() != 3 && t.rank() != 4)
      throw InvalidArgument(op + std::string("needs HWC images (rank 3) or NHWC batches (rank 4), got shape ") +
                            t.shape().to_string());
    const bool batched = t.rank() == 4;
    const int64_t n = batched ? t.shape()[0] : 1;
    const int64_t h = t.shape()[batched ? 1 : 0], w = t.shape()[batched ? 2 : 1], c = t.shape()[batched ? 3 : 2];
    const int64_t pixel = c * static_cast<int64_t>(dtype_size(t.dtype()));
    int64_t oh = h, ow = w;
    const bool crop = node_.kind == DatasetNode::Kind::RandomCrop;
    if (crop) {
      oh = node_.height;
      ow = node_.width;
      if (h + 2 * node_.padding < oh || w + 2 * node_.padding < ow)
        throw InvalidArgument(op + std::string("images of shape ") + t.shape().to_string() + " padded by " +
                              std::to_string(node_.padding) + " are smaller than the crop " + std::to_string(oh) +
                              "x" + std::to_string(ow));
    }
    Shape shape = batched ? Shape{n, oh, ow, c} : Shape{oh, ow, c};
    Tensor result = Tensor::empty(t.dtype(), shape);
    const auto* in = static_cast<const char*>(raw_data(t));
    auto* dst = static_cast<char*>(raw_data(result));
    for (int64_t i = 0; i < n; ++i, ++index_) {
      uint64_t stream = augment_stream(seed_, epoch_, index_);
      const char* img = in + i * h * w * pixel;
      char* o = dst + i * oh * ow * pixel;
      if (crop) {
        const auto top = static_cast<int64_t>(augment_uniform(stream, static_cast<uint64_t>(h + 2 * node_.padding - oh + 1)));
        const auto left = static_cast<int64_t>(augment_uniform(stream, static_cast<uint64_t>(w + 2 * node_.padding - ow + 1)));
        crop_padded_image(img, h, w, pixel, node_.padding, top, left, oh, ow, o);
      } else {
        std::memcpy(o, img, static_cast<size_t>(h * w * pixel));
        if (augment_uniform(stream, 2) == 1) flip_image_left_right(o, h, w, pixel);
      }
    }
    t = std::move(result);
    return true;
  }

 private:
  std::shared_ptr<ElementStream> in_;
  const DatasetNode& node_;
  const DatasetNode& src_;
  uint64_t seed_, epoch_;
  uint64_t index_ = 0;  // images augmented so far this epoch
};

uint64_t fresh_seed() {
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

std::shared_ptr<ElementStream> DatasetNode::open() const {
  switch (kind) {
    case Kind::Source: return std::make_shared<SourceStream>(rows);
    case Kind::Shuffle: {
      int64_t e;
      {
        std::lock_guard<std::mutex> lock(mu);
        e = epoch++;
      }
      uint64_t s = seed >= 0 ? static_cast<uint64_t>(seed) + (flag ? static_cast<uint64_t>(e) * 0x9E3779B97F4A7C15ull : 0)
                             : fresh_seed();
      return std::make_shared<ShuffleStream>(input->open(), size, s);
    }
    case Kind::Batch: return std::make_shared<BatchStream>(input->open(), source(), size, flag);
    case Kind::Prefetch: return std::make_shared<PrefetchStream>(input->open(), source(), size);
    case Kind::RandomCrop:
    case Kind::RandomFlip: {
      int64_t e;
      {
        std::lock_guard<std::mutex> lock(mu);
        e = epoch++;
      }
      // Unseeded: a fresh seed each epoch (the epoch number then adds nothing).
      const uint64_t s = seed >= 0 ? static_cast<uint64_t>(seed) : fresh_seed();
      return std::make_shared<AugmentStream>(input->open(), *this, s, static_cast<uint64_t>(e));
    }
  }
  return nullptr;
}

Dataset Dataset::from_tensors(const std::vector<Tensor>& tensors) {
  if (tensors.empty()) throw InvalidArgument("[Dataset] from_tensors needs at least one tensor");
  auto node = std::make_shared<DatasetNode>();
  node->kind = DatasetNode::Kind::Source;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    if (!t.defined() || t.is_symbolic()) throw InvalidArgument("[Dataset] tensor " + std::to_string(i) + " is not a concrete tensor");
    if (t.rank() == 0) throw InvalidArgument("[Dataset] tensor " + std::to_string(i) + " is a scalar; elements are slices along dim 0");
    if (t.shape()[0] != tensors[0].shape()[0])
      throw InvalidArgument("[Dataset] tensors disagree on the number of elements: " + tensors[0].shape().to_string() +
                            " and " + t.shape().to_string());
    node->sources.push_back(t.to(cpu_device()));
  }
  node->rows = tensors[0].shape()[0];
  return Dataset(node);
}

Dataset Dataset::shuffle(int64_t buffer_size, int64_t seed, bool reshuffle_each_iteration) const {
  if (buffer_size <= 0) throw InvalidArgument("[shuffle] buffer_size must be positive, got " + std::to_string(buffer_size));
  auto node = std::make_shared<DatasetNode>();
  node->kind = DatasetNode::Kind::Shuffle;
  node->input = node_;
  node->size = buffer_size;
  // Unseeded but not reshuffled: draw the seed once, here, so every epoch has the same order.
  node->seed = seed >= 0 || reshuffle_each_iteration ? seed : static_cast<int64_t>(fresh_seed() >> 1);
  node->flag = reshuffle_each_iteration;
  return Dataset(node);
}

Dataset Dataset::batch(int64_t batch_size, bool drop_remainder) const {
  if (batch_size <= 0) throw InvalidArgument("[batch] batch_size must be positive, got " + std::to_string(batch_size));
  auto node = std::make_shared<DatasetNode>();
  node->kind = DatasetNode::Kind::Batch;
  node->input = node_;
  node->size = batch_size;
  node->flag = drop_remainder;
  return Dataset(node);
}

Dataset Dataset::prefetch(int64_t buffer_size) const {
  if (buffer_size <= 0) throw InvalidArgument("[prefetch] buffer_size must be positive, got " + std::to_string(buffer_size));
  auto node = std::make_shared<DatasetNode>();
  node->kind = DatasetNode::Kind::Prefetch;
  node->input = node_;
  node->size = buffer_size;
  return Dataset(node);
}

Dataset Dataset::random_crop(int64_t height, int64_t width, int64_t padding, int64_t seed, int64_t component) const {
  if (height <= 0 || width <= 0 || padding < 0)
    throw InvalidArgument("[random_crop] height and width must be positive and padding >= 0, got " +
                          std::to_string(height) + "x" + std::to_string(width) + ", padding " + std::to_string(padding));
  if (component < 0) throw InvalidArgument("[random_crop] component must be >= 0, got " + std::to_string(component));
  auto node = std::make_shared<DatasetNode>();
  node->kind = DatasetNode::Kind::RandomCrop;
  node->input = node_;
  node->height = height;
  node->width = width;
  node->padding = padding;
  node->seed = seed;
  node->component = component;
  return Dataset(node);
}

Dataset Dataset::random_flip_left_right(int64_t seed, int64_t component) const {
  if (component < 0)
    throw InvalidArgument("[random_flip_left_right] component must be >= 0, got " + std::to_string(component));
  auto node = std::make_shared<DatasetNode>();
  node->kind = DatasetNode::Kind::RandomFlip;
  node->input = node_;
  node->seed = seed;
  node->component = component;
  return Dataset(node);
}

int64_t Dataset::cardinality() const {
  std::vector<const DatasetNode*> chain;
  for (const DatasetNode* n = node_.get(); n; n = n->input.get()) chain.push_back(n);
  int64_t count = 0;
  for (auto it = chain.rbegin(); it != chain.rend(); ++it) {
    const DatasetNode* n = *it;
    if (n->kind == DatasetNode::Kind::Source) count = n->rows;
    if (n->kind == DatasetNode::Kind::Batch) count = n->flag ? count / n->size : (count + n->size - 1) / n->size;
  }
  return count;
}

Dataset::Iterator::Iterator(std::shared_ptr<const DatasetNode> node, std::shared_ptr<ElementStream> stream)
    : node_(std::move(node)), stream_(std::move(stream)), done_(false) {}

Dataset::Iterator& Dataset::Iterator::operator++() {
  Element e;
  if (!stream_ || !stream_->next(e)) {
    done_ = true;
    stream_.reset();
    current_.clear();
    return *this;
  }
  current_ = materialise(node_->source(), e);  // rows reach here when nothing batched them
  return *this;
}

Dataset::Iterator Dataset::begin() const {
  Iterator it(node_, node_->open());
  ++it;
  return it;
}

}  // namespace weft::data
