#include "runtime/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/error.h"
#include "runtime/file_io.h"
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

// deflate's largest expansion (RFC 1951: a 258-byte match per 2 bits, about 1032:1), so the data a
// gzip file can hold is bounded by its size: a header that claims more is a lie, refused before
// anything is read or allocated.
constexpr uint64_t kMaxDeflateRatio = 1032;
constexpr uint64_t kDefaultMaxBytes = uint64_t{8} << 30;

// The largest data an IDX file may hold: WEFT_IDX_MAX_BYTES, or 8 GiB. A file that really holds
// more (a decompression bomb that does not lie in its header) is refused before it is read.
uint64_t max_data_bytes(const std::string& path) {
  const char* env = std::getenv("WEFT_IDX_MAX_BYTES");
  if (!env || !*env) return kDefaultMaxBytes;
  char* end = nullptr;
  errno = 0;
  const unsigned long long v = std::strtoull(env, &end, 10);
  if (errno != 0 || *end != '\0' || *env == '-' || v == 0)
    throw InvalidArgument("[idx] " + path + ": WEFT_IDX_MAX_BYTES='" + env + "' is not a positive number of bytes");
  return v;
}

struct Opened {
  GzFile file;
  uint64_t file_bytes = 0;  // on disk
  bool compressed = false;
};

Opened open_idx(const std::string& path) {
  // Non-blocking: a FIFO under the name is refused below instead of waiting for a writer.
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) throw_io_error("idx", "cannot open", path, errno);
  struct stat st;
  unsigned char magic[2] = {0, 0};
  if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    throw InvalidArgument("[idx] " + path + " is not a regular file");
  }
  Opened o;
  o.file_bytes = static_cast<uint64_t>(st.st_size);
  o.compressed = ::pread(fd, magic, 2, 0) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
  o.file.reset(gzdopen(fd, "rb"));  // owns fd from here
  if (!o.file) {
    ::close(fd);
    throw Unavailable("[idx] cannot read " + path + " (zlib could not open it)");
  }
  return o;
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

// What the header claims against what the file can hold, before any data is read.
void check_size(const Header& h, const Opened& o, const std::string& path) {
  const uint64_t want = static_cast<uint64_t>(h.count) * h.file_elem;
  const uint64_t header_bytes = 4 + 4 * static_cast<uint64_t>(h.array.shape.rank());
  const std::string claim = "header declares " + h.array.shape.to_string() + ", " + std::to_string(want) + " bytes of data";
  if (!o.compressed && header_bytes + want > o.file_bytes)
    throw DataLoss("[idx] " + path + ": truncated: " + claim + ", the file has " +
                   std::to_string(o.file_bytes - std::min(o.file_bytes, header_bytes)));
  if (!o.compressed && header_bytes + want < o.file_bytes)
    throw DataLoss("[idx] " + path + ": file has data beyond the " + std::to_string(want) + " bytes its header declares");
  if (o.compressed && want / kMaxDeflateRatio > o.file_bytes)
    throw DataLoss("[idx] " + path + ": " + claim + ", more than a gzip file of " + std::to_string(o.file_bytes) +
                   " bytes can hold (deflate expands at most " + std::to_string(kMaxDeflateRatio) + ":1)");
  if (const uint64_t limit = max_data_bytes(path); want > limit)
    throw InvalidArgument("[idx] " + path + ": " + claim + ", over the limit of " + std::to_string(limit) +
                          " (WEFT_IDX_MAX_BYTES raises it)");
}

}  // namespace

ArrayHeader read_idx_header(const std::string& path) {
  Opened o = open_idx(path);
  return read_header(o.file.get(), path).array;
}

Tensor read_idx(const std::string& path) {
  Opened o = open_idx(path);
  gzFile f = o.file.get();
  const Header h = read_header(f, path);
  check_size(h, o, path);
  // Read in chunks that start small and double, so a lying header costs memory in proportion to
  // the data really present (a gzip file of a few bytes declaring gigabytes allocates 1 MiB).
  std::vector<unsigned char> raw;
  const size_t want = static_cast<size_t>(h.count) * h.file_elem;
  while (raw.size() < want) {
    size_t old = raw.size();
    size_t chunk = std::min<size_t>(want - old, std::clamp<size_t>(old, size_t{1} << 20, size_t{64} << 20));
    raw.resize(old + chunk);
    size_t got = read_some(f, path, raw.data() + old, chunk);
    if (got < chunk)
      throw DataLoss("[idx] " + path + ": truncated: header promises " + std::to_string(want) +
                     " bytes of data, file has " + std::to_string(old + got));
  }
  unsigned char extra;
  if (read_some(f, path, &extra, 1) != 0)
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
