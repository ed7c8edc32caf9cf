#include "runtime/safetensors.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstring>
#include <optional>
#include <set>
#include <vector>

#include <nlohmann/json.hpp>

#include "runtime/crc32c.h"
#include "runtime/file_io.h"
#include "runtime/device.h"
#include "runtime/tensor_internals.h"

namespace weft {

// The format is little-endian; a big-endian port would byte-swap in encode/decode.
static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

namespace {

using json = nlohmann::json;
using ordered_json = nlohmann::ordered_json;

// Bounds on untrusted input. The header of a real checkpoint is ~100 bytes per tensor, so 100 MB
// is far beyond any model; it only stops a forged length from allocating without limit.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;
constexpr size_t kMaxNameBytes = 4096;
constexpr size_t kMaxRank = 64;
constexpr char kCrcPrefix[] = "crc32c/";
constexpr char kMetadataKey[] = "__metadata__";

struct Code {
  DType dtype;
  const char* name;
};
constexpr Code kCodes[] = {{DType::Float16, "F16"}, {DType::BFloat16, "BF16"}, {DType::Float32, "F32"},
                           {DType::Float64, "F64"}, {DType::Int8, "I8"},       {DType::UInt8, "U8"},
                           {DType::Int32, "I32"},   {DType::Int64, "I64"},     {DType::Bool, "BOOL"}};
// Valid safetensors dtypes that weft has no DType for: a well-formed file, but not one we can hold.
constexpr const char* kForeignCodes[] = {"I16", "U16", "U32", "U64", "F8_E4M3", "F8_E5M2", "F8_E8M0", "F4", "F6_E2M3",
                                         "F6_E3M2", "C64"};

const char* code_of(DType d) {
  for (const Code& c : kCodes)
    if (c.dtype == d) return c.name;
  return "?";
}

struct Entry {
  std::string name;
  DType dtype;
  Shape shape;
  uint64_t begin = 0, end = 0;
  std::optional<uint32_t> crc;
};

struct Header {
  std::vector<Entry> entries;
  std::map<std::string, std::string> metadata;
};

std::string quoted(const std::string& name) {
  // Names come from the file: keep the message printable and short.
  std::string out = "'";
  for (size_t i = 0; i < name.size() && i < 200; ++i) {
    unsigned char c = static_cast<unsigned char>(name[i]);
    out += (c >= 0x20 && c < 0x7F) ? static_cast<char>(c) : '?';
  }
  if (name.size() > 200) out += "...";
  return out + "'";
}

[[noreturn]] void corrupt(const std::string& source, const std::string& what) {
  throw DataLoss("[safetensors] " + source + ": " + what);
}
[[noreturn]] void corrupt_tensor(const std::string& source, const std::string& name, const std::string& what) {
  throw DataLoss("[safetensors] " + source + ": tensor " + quoted(name) + ": " + what);
}

uint64_t read_le64(const unsigned char* p) {
  uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

std::optional<uint32_t> parse_hex32(const std::string& s) {
  if (s.size() != 8) return std::nullopt;
  uint32_t v = 0;
  for (char c : s) {
    int d = (c >= '0' && c <= '9') ? c - '0' : (c >= 'a' && c <= 'f') ? c - 'a' + 10 : (c >= 'A' && c <= 'F') ? c - 'A' + 10 : -1;
    if (d < 0) return std::nullopt;
    v = (v << 4) | static_cast<uint32_t>(d);
  }
  return v;
}

std::string hex32(uint32_t v) {
  static const char* digits = "0123456789abcdef";
  std::string s(8, '0');
  for (int i = 7; i >= 0; --i, v >>= 4) s[i] = digits[v & 0xF];
  return s;
}

Entry parse_entry(const std::string& source, const std::string& name, const json& j, uint64_t data_size) {
  if (name.empty() || name.size() > kMaxNameBytes)
    corrupt(source, "tensor name of " + std::to_string(name.size()) + " bytes (1 to " + std::to_string(kMaxNameBytes) +
                        " allowed)");
  if (!j.is_object()) corrupt_tensor(source, name, "entry is not a JSON object");
  Entry e;
  e.name = name;

  auto dt = j.find("dtype");
  if (dt == j.end() || !dt->is_string()) corrupt_tensor(source, name, "no \"dtype\" string");
  const std::string& code = dt->get_ref<const std::string&>();
  bool known = false;
  for (const Code& c : kCodes) {
    if (code == c.name) {
      e.dtype = c.dtype;
      known = true;
    }
  }
  if (!known) {
    for (const char* foreign : kForeignCodes)
      if (code == foreign)
        throw Unimplemented("[safetensors] " + source + ": tensor " + quoted(name) + " has dtype " + code +
                            ", which weft does not support");
    corrupt_tensor(source, name, "unknown dtype " + quoted(code));
  }

  auto sh = j.find("shape");
  if (sh == j.end() || !sh->is_array()) corrupt_tensor(source, name, "no \"shape\" array");
  if (sh->size() > kMaxRank) corrupt_tensor(source, name, "rank " + std::to_string(sh->size()) + " is beyond " + std::to_string(kMaxRank));
  uint64_t elements = 1;
  std::vector<int64_t> dims;
  for (const json& d : *sh) {
    if (!d.is_number_unsigned()) corrupt_tensor(source, name, "shape " + sh->dump() + " holds a value that is not a non-negative integer");
    uint64_t v = d.get<uint64_t>();
    if (v > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(elements, v, &elements) ||
        elements > static_cast<uint64_t>(INT64_MAX))
      corrupt_tensor(source, name, "shape " + sh->dump() + " has more elements than can be counted");
    dims.push_back(static_cast<int64_t>(v));
  }
  e.shape = Shape(dims);
  uint64_t nbytes;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(dtype_size(e.dtype)), &nbytes))
    corrupt_tensor(source, name, "shape " + sh->dump() + " needs more bytes than can be counted");

  auto off = j.find("data_offsets");
  if (off == j.end() || !off->is_array() || off->size() != 2 || !(*off)[0].is_number_unsigned() ||
      !(*off)[1].is_number_unsigned())
    corrupt_tensor(source, name, "\"data_offsets\" is not a pair of non-negative integers");
  e.begin = (*off)[0].get<uint64_t>();
  e.end = (*off)[1].get<uint64_t>();
  if (e.begin > e.end || e.end > data_size)
    corrupt_tensor(source, name, "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                                     "] lie outside the data section of " + std::to_string(data_size) +
                                     " bytes (truncated file?)");
  if (e.end - e.begin != nbytes)
    corrupt_tensor(source, name, "data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] span " +
                                     std::to_string(e.end - e.begin) + " bytes, but " + code + " " +
                                     e.shape.to_string() + " needs " + std::to_string(nbytes));
  return e;
}

// Everything in the header is checked here, before a single tensor is allocated.
Header parse_header(std::string_view text, uint64_t data_size, const std::string& source) {
  if (text.empty() || text.front() != '{') corrupt(source, "the header is not a JSON object");
  // The callback bounds nesting (the format needs three levels) and catches duplicate tensor
  // names, which a JSON object would otherwise silently collapse into one.
  std::set<std::string> seen;
  auto guard = [&](int depth, json::parse_event_t event, json& parsed) -> bool {
    if (depth > 3) corrupt(source, "the header nests deeper than the format allows");
    if (event == json::parse_event_t::key && depth == 1 && !seen.insert(parsed.get<std::string>()).second)
      corrupt(source, "tensor " + quoted(parsed.get<std::string>()) + " appears twice in the header");
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), guard);
  } catch (const json::exception& e) {
    corrupt(source, std::string("the header is not valid JSON (") + e.what() + ")");
  }
  if (!root.is_object()) corrupt(source, "the header is not a JSON object");

  Header h;
  std::map<std::string, uint32_t> crcs;
  for (auto it = root.begin(); it != root.end(); ++it) {
    if (it.key() == kMetadataKey) {
      if (!it.value().is_object()) corrupt(source, "\"__metadata__\" is not an object of strings");
      for (auto m = it.value().begin(); m != it.value().end(); ++m) {
        if (!m.value().is_string()) corrupt(source, "metadata entry " + quoted(m.key()) + " is not a string");
        const std::string& v = m.value().get_ref<const std::string&>();
        if (m.key().rfind(kCrcPrefix, 0) == 0) {
          auto crc = parse_hex32(v);
          if (!crc) corrupt(source, "checksum entry " + quoted(m.key()) + " is not 8 hex digits");
          crcs[m.key().substr(sizeof(kCrcPrefix) - 1)] = *crc;
        } else {
          h.metadata[m.key()] = v;
        }
      }
      continue;
    }
    h.entries.push_back(parse_entry(source, it.key(), it.value(), data_size));
  }
  // Indexed by name: a forged header may hold a million tensors and as many checksums.
  std::map<std::string_view, Entry*> by_name;
  for (Entry& e : h.entries) by_name.emplace(e.name, &e);
  for (const auto& [name, crc] : crcs) {
    auto e = by_name.find(name);
    if (e == by_name.end()) corrupt(source, "a checksum is recorded for tensor " + quoted(name) + ", which is not in the file");
    e->second->crc = crc;
  }
  // Overlapping tensors would alias; gaps are harmless (other writers may align their data).
  std::vector<const Entry*> by_offset;
  for (const Entry& e : h.entries)
    if (e.end > e.begin) by_offset.push_back(&e);
  std::sort(by_offset.begin(), by_offset.end(), [](const Entry* a, const Entry* b) { return a->begin < b->begin; });
  for (size_t i = 1; i < by_offset.size(); ++i)
    if (by_offset[i]->begin < by_offset[i - 1]->end)
      corrupt_tensor(source, by_offset[i]->name, "its bytes overlap those of tensor " + quoted(by_offset[i - 1]->name));
  return h;
}

// Checks what the header cannot: the checksum, and that bools are 0 or 1 (any other byte read
// as a C++ bool is undefined behaviour).
void verify(const std::string& source, const Entry& e, const Tensor& t) {
  const auto* bytes = static_cast<const unsigned char*>(raw_data(t));
  size_t n = t.nbytes();
  if (e.crc) {
    uint32_t actual = crc32c(bytes, n);
    if (actual != *e.crc)
      corrupt_tensor(source, e.name, "checksum mismatch (stored " + hex32(*e.crc) + ", computed " + hex32(actual) +
                                         "): the data is damaged");
  }
  if (e.dtype == DType::Bool)
    for (size_t i = 0; i < n; ++i)
      if (bytes[i] > 1) corrupt_tensor(source, e.name, "bool element " + std::to_string(i) + " holds byte " + std::to_string(bytes[i]));
}

// ---- writing ---------------------------------------------------------------------------------

struct Encoded {
  std::string head;             // 8-byte length + padded JSON
  std::vector<Tensor> payload;  // host tensors, in data order
};

Encoded encode_head(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  for (const auto& [key, value] : metadata)
    if (key.rfind(kCrcPrefix, 0) == 0)
      throw InvalidArgument("[safetensors] metadata key " + quoted(key) + " is reserved for weft's checksums");
  struct Item {
    const std::string* name;
    Tensor host;
  };
  std::vector<Item> items;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name.size() > kMaxNameBytes || name == kMetadataKey)
      throw InvalidArgument("[safetensors] invalid tensor name " + quoted(name));
    if (!t.defined()) throw InvalidArgument("[safetensors] tensor " + quoted(name) + " is an empty handle");
    if (t.is_symbolic()) throw InvalidArgument("[safetensors] tensor " + quoted(name) + " is symbolic: it has no value to save");
    items.push_back({&name, t.device_ptr()->type() == DeviceType::CPU ? t : t.to(cpu_device())});
  }
  // Widest elements first: with the header padded to 8 bytes, every tensor then starts on a
  // multiple of its element size, so a reader may map the file and use the data in place.
  std::stable_sort(items.begin(), items.end(),
                   [](const Item& a, const Item& b) { return dtype_size(a.host.dtype()) > dtype_size(b.host.dtype()); });

  // "__metadata__" first, as Python writes it; its checksums are filled in below.
  ordered_json root = ordered_json::object();
  root[kMetadataKey] = ordered_json::object();
  ordered_json meta = ordered_json::object();
  for (const auto& [k, v] : metadata) meta[k] = v;
  uint64_t offset = 0;
  Encoded out;
  for (const Item& it : items) {
    const Tensor& t = it.host;
    meta[std::string(kCrcPrefix) + *it.name] = hex32(crc32c(raw_data(t), t.nbytes()));
    ordered_json entry = ordered_json::object();
    entry["dtype"] = code_of(t.dtype());
    entry["shape"] = t.shape().to_vector();
    entry["data_offsets"] = {offset, offset + t.nbytes()};
    offset += t.nbytes();
    root[*it.name] = std::move(entry);
    out.payload.push_back(t);
  }
  root[kMetadataKey] = std::move(meta);
  std::string text;
  try {
    text = root.dump();
  } catch (const ordered_json::exception& ex) {  // names and metadata must be UTF-8
    throw InvalidArgument(std::string("[safetensors] a tensor name or metadata entry is not valid UTF-8 (") + ex.what() + ")");
  }
  text.append((8 - text.size() % 8) % 8, ' ');  // Python's writer pads with spaces too
  uint64_t n = text.size();
  out.head.resize(8);
  std::memcpy(out.head.data(), &n, 8);
  out.head += text;
  return out;
}

[[noreturn]] void io_error(const std::string& what, const std::string& path, int err) {
  throw_io_error("safetensors", what, path, err);
}

void read_exact(int fd, void* data, size_t n, uint64_t offset, const std::string& path) {
  char* p = static_cast<char*>(data);
  while (n > 0) {
    ssize_t r = ::pread(fd, p, std::min<size_t>(n, 1 << 30), static_cast<off_t>(offset));
    if (r < 0) {
      if (errno == EINTR) continue;
      io_error("cannot read", path, errno);
    }
    if (r == 0) corrupt(path, "the file ended early (it shrank while being read?)");
    p += r;
    n -= static_cast<size_t>(r);
    offset += static_cast<uint64_t>(r);
  }
}

}  // namespace

std::string encode_tensors(const std::map<std::string, Tensor>& tensors, const std::map<std::string, std::string>& metadata) {
  Encoded e = encode_head(tensors, metadata);
  std::string out = std::move(e.head);
  for (const Tensor& t : e.payload)
    if (t.nbytes()) out.append(static_cast<const char*>(raw_data(t)), t.nbytes());
  return out;
}

TensorFile decode_tensors(const std::string& bytes, const std::string& source_name) {
  if (bytes.size() < 8) corrupt(source_name, "only " + std::to_string(bytes.size()) + " bytes: no header length");
  const auto* base = reinterpret_cast<const unsigned char*>(bytes.data());
  uint64_t n = read_le64(base);
  if (n > kMaxHeaderBytes || n > bytes.size() - 8)
    corrupt(source_name, "header length " + std::to_string(n) + " is impossible for a file of " +
                             std::to_string(bytes.size()) + " bytes");
  Header h = parse_header(std::string_view(bytes.data() + 8, n), bytes.size() - 8 - n, source_name);
  TensorFile out;
  out.metadata = std::move(h.metadata);
  const unsigned char* data = base + 8 + n;
  for (const Entry& e : h.entries) {
    Tensor t = Tensor::from_host(e.dtype, e.shape, data + e.begin);
    verify(source_name, e, t);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

TensorFile load_tensors(const std::string& path) {
  // O_NONBLOCK: a FIFO under the name is refused as not a file instead of waiting for a writer.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
  if (fd.get() < 0) io_error("cannot open", path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) io_error("cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) throw InvalidArgument("[safetensors] " + path + " is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size < 8) corrupt(path, "only " + std::to_string(size) + " bytes: no header length");
  unsigned char len[8];
  read_exact(fd.get(), len, 8, 0, path);
  uint64_t n = read_le64(len);
  if (n > kMaxHeaderBytes || n > size - 8)
    corrupt(path, "header length " + std::to_string(n) + " is impossible for a file of " + std::to_string(size) + " bytes");
  std::string text(n, '\0');
  read_exact(fd.get(), text.data(), n, 8, path);
  Header h = parse_header(text, size - 8 - n, path);
  // Each tensor is read straight into its own buffer: no second copy of a large checkpoint.
  TensorFile out;
  out.metadata = std::move(h.metadata);
  for (const Entry& e : h.entries) {
    Tensor t = Tensor::empty(e.dtype, e.shape);
    if (t.nbytes()) read_exact(fd.get(), raw_data(t), t.nbytes(), 8 + n + e.begin, path);
    verify(path, e, t);
    out.tensors.emplace(e.name, std::move(t));
  }
  return out;
}

void save_tensors(const std::string& path, const std::map<std::string, Tensor>& tensors,
                  const std::map<std::string, std::string>& metadata) {
  Encoded e = encode_head(tensors, metadata);
  std::vector<ByteRange> pieces{{e.head.data(), e.head.size()}};
  for (const Tensor& t : e.payload) pieces.push_back({raw_data(t), t.nbytes()});
  write_file_atomically(path, pieces, "safetensors");
}

}  // namespace weft
