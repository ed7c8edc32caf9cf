#include "api/data/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

namespace weft::data {

namespace {

constexpr int64_t kMaxElements = int64_t{1} << 34;  // refuse absurd headers before allocating

struct GzCloser {
  void operator()(gzFile f) const { gzclose(f); }
};
using GzFile = std::unique_ptr<std::remove_pointer_t<gzFile>, GzCloser>;

// gzread reads compressed and plain files alike.
size_t read_some(gzFile f, const std::string& path, void* dst, size_t bytes) {
  size_t done = 0;
  while (done < bytes) {
    unsigned chunk = static_cast<unsigned>(std::min<size_t>(bytes - done, 1u << 30));
    int n = gzread(f, static_cast<char*>(dst) + done, chunk);
    if (n < 0) {
      int err = 0;
      const char* msg = gzerror(f, &err);
      throw DataLoss("[load_idx] " + path + ": cannot decompress: " + (msg ? msg : "unknown zlib error"));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

}  // namespace

Tensor read_idx(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw NotFound("[load_idx] cannot open " + path);
  unsigned char magic[4];
  if (read_some(f.get(), path, magic, 4) != 4) throw DataLoss("[load_idx] " + path + ": file is shorter than its header");
  if (magic[0] != 0 || magic[1] != 0)
    throw DataLoss("[load_idx] " + path + ": not an IDX file (magic number starts with " + std::to_string(magic[0]) +
                   ", " + std::to_string(magic[1]) + " instead of 0, 0)");
  DType dtype;
  size_t file_elem = 0;
  switch (magic[2]) {
    case 0x08: dtype = DType::UInt8; file_elem = 1; break;
    case 0x09: dtype = DType::Int8; file_elem = 1; break;
    case 0x0B: dtype = DType::Int32; file_elem = 2; break;
    case 0x0C: dtype = DType::Int32; file_elem = 4; break;
    case 0x0D: dtype = DType::Float32; file_elem = 4; break;
    case 0x0E: dtype = DType::Float64; file_elem = 8; break;
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", magic[2]);
      throw DataLoss("[load_idx] " + path + ": unknown IDX element type code " + code);
    }
  }
  int rank = magic[3];
  if (rank == 0 || rank > 8) throw DataLoss("[load_idx] " + path + ": implausible rank " + std::to_string(rank));
  Shape shape;
  int64_t count = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char b[4];
    if (read_some(f.get(), path, b, 4) != 4) throw DataLoss("[load_idx] " + path + ": header is truncated");
    int64_t d = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
    shape.push_back(d);
    // Checked before multiplying: four 32-bit dims can overflow a signed 64-bit product.
    if (d != 0 && count > kMaxElements / d)
      throw DataLoss("[load_idx] " + path + ": header declares an implausible size " + shape.to_string());
    count *= d;
  }
  // Read in chunks that start small and double, so a lying header costs memory in proportion to
  // the data really present (a 100-byte file declaring gigabytes allocates 1 MiB, not 64).
  std::vector<unsigned char> raw;
  const size_t want = static_cast<size_t>(count) * file_elem;
  while (raw.size() < want) {
    size_t old = raw.size();
    size_t chunk = std::min<size_t>(want - old, std::clamp<size_t>(old, size_t{1} << 20, size_t{64} << 20));
    raw.resize(old + chunk);
    size_t got = read_some(f.get(), path, raw.data() + old, chunk);
    if (got < chunk)
      throw DataLoss("[load_idx] " + path + ": truncated: header promises " + std::to_string(want) +
                     " bytes of data, file has " + std::to_string(old + got));
  }
  unsigned char extra;
  if (read_some(f.get(), path, &extra, 1) != 0)
    throw DataLoss("[load_idx] " + path + ": file has data beyond the " + std::to_string(want) + " bytes its header declares");

  Tensor t = Tensor::empty(dtype, shape);
  auto* out = static_cast<unsigned char*>(t.raw_data());
  if (file_elem == 1) {
    std::copy(raw.begin(), raw.end(), out);
  } else {  // IDX is big-endian
    for (int64_t i = 0; i < count; ++i) {
      const unsigned char* p = raw.data() + i * file_elem;
      if (magic[2] == 0x0B) {
        int32_t v = static_cast<int16_t>((p[0] << 8) | p[1]);
        std::memcpy(out + i * 4, &v, 4);
      } else {
        for (size_t k = 0; k < file_elem; ++k) out[i * file_elem + k] = p[file_elem - 1 - k];
      }
    }
  }
  return t;
}

std::pair<Tensor, Tensor> load_idx(const std::string& images_path, const std::string& labels_path) {
  Tensor images = read_idx(images_path);
  Tensor labels = read_idx(labels_path);
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
