// CPU kernel of ReadShardedBatch: asks the process's cursor for this replica's rows of the step
// (runtime/sharded_input.h) and copies just those rows out of the loaded files, casting features
// to float32 times `scale` and labels to int32.
#include <cstring>
#include <vector>

#include "kernels/defs/input.h"
#include "kernels/register_all.h"
#include "runtime/kernel_registry.h"

namespace weft::cpu {

namespace {

template <class T>
void copy_features(const ShardedBatchPlan& p, int64_t row_size, float scale, float* out) {
  const T* src = p.data->features.data<T>();
  for (int64_t i = 0; i < p.count; ++i) {
    const T* row = src + p.example(i) * row_size;
    float* dst = out + i * row_size;
    for (int64_t k = 0; k < row_size; ++k) dst[k] = static_cast<float>(row[k]) * scale;
  }
}

template <class T>
void copy_labels(const ShardedBatchPlan& p, int32_t* out) {
  const T* src = p.data->labels.data<T>();
  for (int64_t i = 0; i < p.count; ++i) out[i] = static_cast<int32_t>(src[p.example(i)]);
}

// Random crops (zero padding, then an H x W window) and flips of each float32 example, in place.
void augment(const ShardedBatchPlan& p, const Shape& example, const Attrs& a, float* rows) {
  const int64_t pad = a.get_or<int64_t>("crop_padding", 0);
  const int64_t flip_seed = a.get_or<int64_t>("flip_seed", -1);
  if ((pad == 0 && flip_seed < 0) || p.count == 0) return;
  const uint64_t crop_seed = static_cast<uint64_t>(a.get_or<int64_t>("crop_seed", 0));
  const int64_t h = example[0], w = example[1], pixel = (example.rank() == 3 ? example[2] : 1) * 4;
  const int64_t row_size = example.num_elements();
  std::vector<float> tmp(pad > 0 ? static_cast<size_t>(row_size) : 0);
  const auto epoch = static_cast<uint64_t>(p.position.epoch);
  for (int64_t i = 0; i < p.count; ++i) {
    auto* row = reinterpret_cast<char*>(rows + i * row_size);
    const auto index = static_cast<uint64_t>(p.example(i));
    if (pad > 0) {
      uint64_t st = augment_stream(crop_seed, epoch, index);
      const auto top = static_cast<int64_t>(augment_uniform(st, static_cast<uint64_t>(2 * pad + 1)));
      const auto left = static_cast<int64_t>(augment_uniform(st, static_cast<uint64_t>(2 * pad + 1)));
      std::memcpy(tmp.data(), row, tmp.size() * sizeof(float));
      crop_padded_image(reinterpret_cast<const char*>(tmp.data()), h, w, pixel, pad, top, left, h, w, row);
    }
    if (flip_seed >= 0) {
      // Its own stream: the flips do not depend on whether crops are on.
      uint64_t st = augment_stream(static_cast<uint64_t>(flip_seed), epoch, index);
      if (augment_uniform(st, 2) == 1) flip_image_left_right(row, h, w, pixel);
    }
  }
}

void read_sharded_batch(KernelContext& c) {
  const ShardedInputSpec spec = defs::sharded_input_spec(c.attrs);
  if (const int64_t start = c.attrs.get_or<int64_t>("start_batch", 0); start > 0)
    start_sharded_input_at(c.attrs.get<std::string>("source"), start);
  const ShardedBatchPlan p =
      next_sharded_batch(c.attrs.get<std::string>("source"), c.attrs.get<int64_t>("replica"), spec);
  const Tensor& x = p.data->features;
  const Shape example(x.shape().dims().subspan(1));
  // The graph was built for examples of this shape (from the header it read then); a file
  // replaced since, or a different file on this task, must not be read as something else.
  if (const AttrValue* s = c.attrs.find("example_shape"); s && std::get<Shape>(*s) != example)
    c.fail(spec.features + " holds examples of shape " + example.to_string() + ", the graph was built for " +
           std::get<Shape>(*s).to_string());
  Shape shape{p.count};
  for (int64_t d : example) shape.push_back(d);
  Tensor features = Tensor::empty(DType::Float32, shape, &c.device);
  Tensor labels = Tensor::empty(DType::Int32, Shape{p.count}, &c.device);
  Tensor weight = Tensor::empty(DType::Float32, Shape{}, &c.device);

  const int64_t row_size = example.num_elements();
  const auto scale = static_cast<float>(c.attrs.get<double>("scale"));
  float* f = p.count ? features.data<float>() : nullptr;
  switch (x.dtype()) {
    case DType::UInt8: copy_features<uint8_t>(p, row_size, scale, f); break;
    case DType::Int8: copy_features<int8_t>(p, row_size, scale, f); break;
    case DType::Int32: copy_features<int32_t>(p, row_size, scale, f); break;
    case DType::Int64: copy_features<int64_t>(p, row_size, scale, f); break;
    case DType::Float32: copy_features<float>(p, row_size, scale, f); break;
    case DType::Float64: copy_features<double>(p, row_size, scale, f); break;
    default: c.fail("features of dtype " + std::string(dtype_name(x.dtype())) + " cannot be read");  // checked at load
  }
  augment(p, example, c.attrs, f);
  int32_t* l = p.count ? labels.data<int32_t>() : nullptr;
  switch (p.data->labels.dtype()) {
    case DType::UInt8: copy_labels<uint8_t>(p, l); break;
    case DType::Int8: copy_labels<int8_t>(p, l); break;
    case DType::Int32: copy_labels<int32_t>(p, l); break;
    case DType::Int64: copy_labels<int64_t>(p, l); break;  // range checked at load
    default: c.fail("labels of dtype " + std::string(dtype_name(p.data->labels.dtype())) + " cannot be read");
  }
  *weight.data<float>() = static_cast<float>(static_cast<double>(p.count) / static_cast<double>(p.global));
  c.output(0) = std::move(features);
  c.output(1) = std::move(labels);
  c.output(2) = std::move(weight);
}

}  // namespace

void register_input_kernels() { register_kernel("ReadShardedBatch", DeviceType::CPU, float32, read_sharded_batch); }

}  // namespace weft::cpu
