#include "runtime/npy.h"

#include <algorithm>
#include <bit>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <vector>

#include "runtime/file_io.h"
#include "runtime/py_literal.h"
#include "runtime/tensor_internals.h"

namespace weft {

// Elements are copied as they lie in memory; '<' data is native only on a little-endian host.
static_assert(std::endian::native == std::endian::little, "npy I/O assumes a little-endian host");

namespace {

constexpr char kMagic[] = "\x93NUMPY";
constexpr size_t kMagicBytes = 6;
// numpy pads the header so the data starts at a multiple of 64 bytes (memory-mappable).
constexpr size_t kAlign = 64;
// numpy leaves room after the shape for its growing axis to reach this many digits in place.
constexpr size_t kGrowthAxisMaxDigits = 21;
// Bounds on untrusted input. numpy itself refuses headers over 10 000 bytes by default; these
// are looser and only stop a forged length from costing time or memory.
constexpr uint64_t kMaxHeaderBytes = 1 << 20;
constexpr size_t kMaxRank = 64;
constexpr uint64_t kMaxFileBytes = uint64_t{1} << 40;

struct Code {
  DType dtype;
  char kind;  // NumPy's kind letter: 'f' float, 'i' signed, 'u' unsigned, 'b' bool
};
constexpr Code kCodes[] = {{DType::Float16, 'f'}, {DType::Float32, 'f'}, {DType::Float64, 'f'},
                           {DType::Int8, 'i'},    {DType::UInt8, 'u'},   {DType::Int32, 'i'},
                           {DType::Int64, 'i'},   {DType::Bool, 'b'}};
constexpr const char* kSupported = "float16, float32, float64, int8, uint8, int32, int64 and bool";

[[noreturn]] void corrupt(std::string_view source, const std::string& what) {
  throw DataLoss("[npy] " + std::string(source) + ": " + what);
}
[[noreturn]] void unsupported(std::string_view source, const std::string& what) {
  throw InvalidArgument("[npy] " + std::string(source) + ": " + what);
}

// The descr numpy writes for `d`: '<f4', '|u1', ...; empty for bfloat16, which NumPy lacks.
std::string descr_of(DType d) {
  for (const Code& c : kCodes) {
    if (c.dtype != d) continue;
    const size_t size = dtype_size(d);
    return std::string(1, size == 1 ? '|' : '<') + c.kind + std::to_string(size);
  }
  return "";
}

struct Layout {
  DType dtype = DType::Float32;
  bool swap = false;  // big-endian data, to byte-swap
  bool fortran = false;
  Shape shape;
  uint64_t nbytes = 0;  // what the data must hold
};

DType parse_descr(const PyValue& v, std::string_view source, bool* swap) {
  if (v.kind == PyValue::Kind::List)
    unsupported(source, "structured dtypes (a list of fields as 'descr') are not supported; weft reads " +
                            std::string(kSupported));
  if (v.kind != PyValue::Kind::Str) corrupt(source, std::string("'descr' is ") + v.kind_phrase() + ", not a string");
  std::string_view s = v.str;
  char order = '=';
  if (!s.empty() && (s[0] == '<' || s[0] == '>' || s[0] == '|' || s[0] == '=')) {
    order = s[0];
    s.remove_prefix(1);
  }
  // '|' means "byte order does not apply"; NumPy still accepts it on wider types, as native.
  for (const Code& c : kCodes) {
    const std::string code = c.kind + std::to_string(dtype_size(c.dtype));
    if (s == code) {
      *swap = order == '>' && dtype_size(c.dtype) > 1;
      return c.dtype;
    }
  }
  unsupported(source, "dtype " + quote_for_message(v.str) + " is not supported; weft reads " + std::string(kSupported));
}

Shape parse_shape(const PyValue& v, std::string_view source, DType dtype, uint64_t* nbytes) {
  if (v.kind != PyValue::Kind::Tuple) corrupt(source, std::string("'shape' is ") + v.kind_phrase() + ", not a tuple");
  if (v.items.size() > kMaxRank)
    corrupt(source, "rank " + std::to_string(v.items.size()) + " is beyond " + std::to_string(kMaxRank));
  std::vector<int64_t> dims;
  // As NumPy does, the dims other than zeros must have a countable product even when another
  // dim is zero: (0, 2^40, 2^40) is refused, so no later stride computation can overflow.
  uint64_t nonzero = 1;
  bool overflow = false, empty = false;
  for (const PyValue& d : v.items) {
    if (d.kind != PyValue::Kind::Int) corrupt(source, std::string("'shape' holds ") + d.kind_phrase() + ", not an integer");
    if (d.integer < 0) corrupt(source, "'shape' holds the negative dimension " + std::to_string(d.integer));
    dims.push_back(d.integer);
    if (d.integer == 0) empty = true;
    else overflow = overflow || __builtin_mul_overflow(nonzero, static_cast<uint64_t>(d.integer), &nonzero);
  }
  Shape shape(dims);
  uint64_t max_bytes = 0;
  if (overflow || nonzero > static_cast<uint64_t>(INT64_MAX) || __builtin_mul_overflow(nonzero, dtype_size(dtype), &max_bytes))
    corrupt(source, "shape " + shape.to_string() + " has more elements than can be counted");
  *nbytes = empty ? 0 : max_bytes;
  return shape;
}

Layout parse_header(std::string_view text, std::string_view source) {
  const PyValue dict = parse_py_literal(text, "[npy] " + std::string(source) + ": header");
  if (dict.kind != PyValue::Kind::Dict) corrupt(source, std::string("the header is ") + dict.kind_phrase() + ", not a dict");
  const PyValue* descr = nullptr;
  const PyValue* fortran = nullptr;
  const PyValue* shape = nullptr;
  for (size_t i = 0; i < dict.items.size(); i += 2) {
    const PyValue& key = dict.items[i];
    if (key.kind != PyValue::Kind::Str) corrupt(source, std::string("the header has ") + key.kind_phrase() + " as a key");
    const PyValue** slot = key.str == "descr" ? &descr : key.str == "fortran_order" ? &fortran
                         : key.str == "shape" ? &shape : nullptr;
    if (!slot) corrupt(source, "the header has the unexpected key " + quote_for_message(key.str));
    if (*slot) corrupt(source, "the header has the key " + quote_for_message(key.str) + " twice");
    *slot = &dict.items[i + 1];
  }
  for (auto [p, name] : {std::pair{descr, "descr"}, {fortran, "fortran_order"}, {shape, "shape"}})
    if (!p) corrupt(source, std::string("the header has no '") + name + "' key");
  if (fortran->kind != PyValue::Kind::Bool)
    corrupt(source, std::string("'fortran_order' is ") + fortran->kind_phrase() + ", not True or False");

  Layout l;
  l.dtype = parse_descr(*descr, source, &l.swap);
  l.fortran = fortran->boolean;
  l.shape = parse_shape(*shape, source, l.dtype, &l.nbytes);
  return l;
}

uint64_t read_le(const unsigned char* p, size_t n) {
  uint64_t v = 0;
  for (size_t i = n; i-- > 0;) v = (v << 8) | p[i];
  return v;
}

// Column-major `src` into row-major `dst`: walks dst in order, keeping the source offset as the
// index advances like an odometer (last axis fastest).
void fortran_to_row_major(const unsigned char* src, unsigned char* dst, const Shape& shape, size_t elem) {
  const int64_t rank = shape.rank();
  const int64_t n = shape.num_elements();
  std::vector<int64_t> stride(static_cast<size_t>(rank)), index(static_cast<size_t>(rank), 0);
  int64_t s = 1;
  for (int64_t k = 0; k < rank; ++k) {
    stride[k] = s;
    s *= shape[k];
  }
  int64_t from = 0;
  for (int64_t i = 0; i < n; ++i) {
    std::memcpy(dst + static_cast<size_t>(i) * elem, src + static_cast<size_t>(from) * elem, elem);
    for (int64_t k = rank - 1; k >= 0; --k) {
      if (++index[k] < shape[k]) {
        from += stride[k];
        break;
      }
      from -= stride[k] * (shape[k] - 1);
      index[k] = 0;
    }
  }
}

void swap_bytes(unsigned char* p, size_t n, size_t elem) {
  for (size_t i = 0; i + elem <= n; i += elem) std::reverse(p + i, p + i + elem);
}

std::string shape_repr(const Shape& s) {
  // Python's tuple repr: "()", "(6,)", "(2, 3)".
  std::string out = "(";
  for (int64_t i = 0; i < s.rank(); ++i) out += (i ? ", " : "") + std::to_string(s[i]);
  return out + (s.rank() == 1 ? ",)" : ")");
}

// The magic, version, length and padded header for `t`: what numpy.save writes before the data.
std::string header_for(const Tensor& t) {
  if (!t.defined()) throw InvalidArgument("[npy] cannot save an undefined tensor");
  if (t.is_symbolic())
    throw InvalidArgument("[npy] cannot save the symbolic tensor " + t.name() + ": run the graph and save its value");
  const std::string descr = descr_of(t.dtype());
  if (descr.empty())
    throw InvalidArgument("[npy] " + std::string(dtype_name(t.dtype())) +
                          " has no NumPy dtype; cast the tensor to float32 before saving it");
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': " + shape_repr(t.shape()) + ", }";
  if (t.rank() > 0) {
    const size_t digits = std::to_string(t.shape()[0]).size();
    dict.append(kGrowthAxisMaxDigits > digits ? kGrowthAxisMaxDigits - digits : 0, ' ');
  }
  const size_t text = dict.size() + 1;  // and the final '\n'
  // Version 1.0 has a 2-byte length; larger headers need 2.0 and its 4-byte length.
  int major = 1;
  size_t prefix = kMagicBytes + 2 + 2;
  size_t pad = kAlign - (prefix + text) % kAlign;
  if (text + pad > 0xFFFF) {
    major = 2;
    prefix = kMagicBytes + 2 + 4;
    pad = kAlign - (prefix + text) % kAlign;
  }
  const uint64_t length = text + pad;
  std::string out(kMagic, kMagicBytes);
  out += static_cast<char>(major);
  out += '\0';
  for (size_t i = 0; i < prefix - kMagicBytes - 2; ++i) out += static_cast<char>((length >> (8 * i)) & 0xFF);
  out += dict;
  out.append(pad, ' ');
  out += '\n';
  return out;
}

// Checks the magic, version and header length and parses the header; `*data_offset` is where the
// elements start. `bytes` may stop right after the header (read_npy_header).
Layout parse_prefix(std::string_view bytes, std::string_view source, size_t* data_offset) {
  const auto* p = reinterpret_cast<const unsigned char*>(bytes.data());
  if (bytes.size() < kMagicBytes || bytes.substr(0, kMagicBytes) != std::string_view(kMagic, kMagicBytes))
    corrupt(source, "not a .npy file (it does not start with \\x93NUMPY)");
  if (bytes.size() < kMagicBytes + 2) corrupt(source, "truncated in the format version");
  const int major = p[6], minor = p[7];
  if (minor != 0 || major < 1 || major > 3)
    unsupported(source, "format version " + std::to_string(major) + "." + std::to_string(minor) +
                            " is not supported (1.0, 2.0 and 3.0 are)");
  const size_t length_bytes = major == 1 ? 2 : 4;
  const size_t prefix = kMagicBytes + 2 + length_bytes;
  if (bytes.size() < prefix) corrupt(source, "truncated in the header length");
  const uint64_t header_bytes = read_le(p + kMagicBytes + 2, length_bytes);
  if (header_bytes > kMaxHeaderBytes)
    corrupt(source, "header length " + std::to_string(header_bytes) + " is beyond " + std::to_string(kMaxHeaderBytes));
  if (prefix + header_bytes > bytes.size())
    corrupt(source, "the header of " + std::to_string(header_bytes) + " bytes runs past the end of the file (" +
                        std::to_string(bytes.size()) + " bytes)");
  *data_offset = prefix + header_bytes;
  // Versions 1.0 and 2.0 are latin-1, 3.0 UTF-8; every byte a valid header needs is ASCII, so
  // the parser reads bytes and rejects anything else outside strings.
  return parse_header(bytes.substr(prefix, header_bytes), source);
}

}  // namespace

Tensor decode_npy(std::string_view bytes, std::string_view source) {
  size_t data_offset = 0;
  const Layout l = parse_prefix(bytes, source, &data_offset);

  const size_t elem = dtype_size(l.dtype);
  const uint64_t need = l.nbytes;
  const std::string_view data = bytes.substr(data_offset);
  if (data.size() != need)
    corrupt(source, "holds " + std::to_string(data.size()) + " bytes of data but " + std::string(dtype_name(l.dtype)) +
                        l.shape.to_string() + " needs " + std::to_string(need));
  const auto* src = reinterpret_cast<const unsigned char*>(data.data());
  if (l.dtype == DType::Bool) {
    for (size_t i = 0; i < data.size(); ++i)
      if (src[i] > 1)
        corrupt(source, "bool element " + std::to_string(i) + " is the byte " + std::to_string(src[i]) + ", not 0 or 1");
  }

  Tensor t = Tensor::empty(l.dtype, l.shape);
  if (need == 0) return t;
  auto* dst = static_cast<unsigned char*>(raw_data(t));
  if (l.fortran && l.shape.rank() > 1) fortran_to_row_major(src, dst, l.shape, elem);
  else std::memcpy(dst, src, data.size());
  if (l.swap) swap_bytes(dst, data.size(), elem);
  return t;
}

std::string encode_npy(const Tensor& t) {
  std::string out = header_for(t);
  const size_t head = out.size();
  out.resize(head + t.nbytes());
  if (t.nbytes()) t.copy_to_host(out.data() + head);
  return out;
}

Tensor load_npy(const std::string& path) { return decode_npy(read_file(path, kMaxFileBytes, "npy"), path); }

ArrayHeader read_npy_header(const std::string& path) {
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw_io_error("npy", "cannot open", path, errno);
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> closer(f, std::fclose);
  // The fixed prefix (at most 12 bytes), then as much header as it declares; parse_prefix
  // reports whatever is missing.
  std::string bytes(kMagicBytes + 2 + 4, '\0');
  bytes.resize(std::fread(bytes.data(), 1, bytes.size(), f));
  if (bytes.size() >= kMagicBytes + 2) {
    const size_t length_bytes = bytes[kMagicBytes] == 1 ? 2 : 4;
    const size_t prefix = kMagicBytes + 2 + length_bytes;
    if (bytes.size() >= prefix) {
      const uint64_t header_bytes =
          read_le(reinterpret_cast<const unsigned char*>(bytes.data()) + kMagicBytes + 2, length_bytes);
      const size_t want = prefix + static_cast<size_t>(std::min(header_bytes, kMaxHeaderBytes));
      const size_t had = bytes.size();
      if (want > had) {
        bytes.resize(want);
        bytes.resize(had + std::fread(bytes.data() + had, 1, want - had, f));
      }
    }
  }
  size_t data_offset = 0;
  const Layout l = parse_prefix(bytes, path, &data_offset);
  return {l.dtype, l.shape};
}

void save_npy(const std::string& path, const Tensor& t) {
  const std::string bytes = encode_npy(t);
  write_file_atomically(path, {{bytes.data(), bytes.size()}}, "npy");
}

}  // namespace weft
