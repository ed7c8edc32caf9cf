#include "runtime/idx.h"

#include <zlib.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/error.h"
#include "runtime/tensor_internals.h"

namespace weft {

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
      throw DataLoss("[idx] " + path + ": cannot decompress: " + (msg ? msg : "unknown zlib error"));
    }
    if (n == 0) break;
    done += static_cast<size_t>(n);
  }
  return done;
}

GzFile open_idx(const std::string& path) {
  GzFile f(gzopen(path.c_str(), "rb"));
  if (!f) throw NotFound("[idx] cannot open " + path);
  return f;
}

struct Header {
  ArrayHeader array;
  unsigned char type_code = 0;
  size_t file_elem = 0;  // bytes per element in the file
  int64_t count = 0;     // elements
};

// Reads the magic number and the dims, leaving `f` at the first data byte.
Header read_header(gzFile f, const std::string& path) {
  Header h;
  unsigned char magic[4];
  if (read_some(f, path, magic, 4) != 4) throw DataLoss("[idx] " + path + ": file is shorter than its header");
  if (magic[0] != 0 || magic[1] != 0)
    throw DataLoss("[idx] " + path + ": not an IDX file (magic number starts with " + std::to_string(magic[0]) +
                   ", " + std::to_string(magic[1]) + " instead of 0, 0)");
  h.type_code = magic[2];
  switch (magic[2]) {
    case 0x08: h.array.dtype = DType::UInt8; h.file_elem = 1; break;
    case 0x09: h.array.dtype = DType::Int8; h.file_elem = 1; break;
    case 0x0B: h.array.dtype = DType::Int32; h.file_elem = 2; break;
    case 0x0C: h.array.dtype = DType::Int32; h.file_elem = 4; break;
    case 0x0D: h.array.dtype = DType::Float32; h.file_elem = 4; break;
    case 0x0E: h.array.dtype = DType::Float64; h.file_elem = 8; break;
    default: {
      char code[8];
      std::snprintf(code, sizeof code, "0x%02x", magic[2]);
      throw DataLoss("[idx] " + path + ": unknown IDX element type code " + code);
    }
  }
  int rank = magic[3];
  if (rank == 0 || rank > 8) throw DataLoss("[idx] " + path + ": implausible rank " + std::to_string(rank));
  h.count = 1;
  for (int i = 0; i < rank; ++i) {
    unsigned char b[4];
    if (read_some(f, path, b, 4) != 4) throw DataLoss("[idx] " + path + ": header is truncated");
    int64_t d = (int64_t{b[0]} << 24) | (int64_t{b[1]} << 16) | (int64_t{b[2]} << 8) | int64_t{b[3]};
    h.array.shape.push_back(d);
    // Checked before multiplying: four 32-bit dims can overflow a signed 64-bit product.
    if (d != 0 && h.count > kMaxElements / d)
      throw DataLoss("[idx] " + path + ": header declares an implausible size " + h.array.shape.to_string());
    h.count *= d;
  }
  return h;
}

}  // namespace

ArrayHeader read_idx_header(const std::string& path) {
  GzFile f = open_idx(path);
  return read_header(f.get(), path).array;
}

Tensor read_idx(const std::string& path) {
  GzFile f = open_idx(path);
  const Header h = read_header(f.get(), path);
  // Read in chunks that start small and double, so a lying header costs memory in proportion to
  // the data really present (a 100-byte file declaring gigabytes allocates 1 MiB, not 64).
  std::vector<unsigned char> raw;
  const size_t want = static_cast<size_t>(h.count) * h.file_elem;
  while (raw.size() < want) {
    size_t old = raw.size();
    size_t chunk = std::min<size_t>(want - old, std::clamp<size_t>(old, size_t{1} << 20, size_t{64} << 20));
    raw.resize(old + chunk);
    size_t got = read_some(f.get(), path, raw.data() + old, chunk);
    if (got < chunk)
      throw DataLoss("[idx] " + path + ": truncated: header promises " + std::to_string(want) +
                     " bytes of data, file has " + std::to_string(old + got));
  }
  unsigned char extra;
  if (read_some(f.get(), path, &extra, 1) != 0)
    throw DataLoss("[idx] " + path + ": file has data beyond the " + std::to_string(want) + " bytes its header declares");

  Tensor t = Tensor::empty(h.array.dtype, h.array.shape);
  auto* out = static_cast<unsigned char*>(raw_data(t));
  if (h.file_elem == 1) {
    std::copy(raw.begin(), raw.end(), out);
  } else {  // IDX is big-endian
    for (int64_t i = 0; i < h.count; ++i) {
      const unsigned char* p = raw.data() + i * h.file_elem;
      if (h.type_code == 0x0B) {
        int32_t v = static_cast<int16_t>((p[0] << 8) | p[1]);
        std::memcpy(out + i * 4, &v, 4);
      } else {
        for (size_t k = 0; k < h.file_elem; ++k) out[i * h.file_elem + k] = p[h.file_elem - 1 - k];
      }
    }
  }
  return t;
}

}  // namespace weft
