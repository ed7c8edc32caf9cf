// The .npy reader and writer: numpy.save's exact bytes, round trips of every dtype, files numpy
// wrote (when the test's Python has numpy), and damaged or forged files, which must fail with
// DataLoss or InvalidArgument naming the source and the fault (never crash or over-allocate).
#include "runtime/npy.h"

#include <gtest/gtest.h>

#include "temp_dir.h"
#include "tensor_test_util.h"
#include <unistd.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

namespace weft {
namespace {

namespace fs = std::filesystem;

class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("weft_npy") {}
};

std::string bytes_of(const void* p, size_t n) { return std::string(static_cast<const char*>(p), n); }

// A file with the given header text (no padding needed by readers) and data.
std::string npy_with(const std::string& header, const std::string& data = "", int major = 1) {
  std::string out("\x93NUMPY", 6);
  out += static_cast<char>(major);
  out += '\0';
  const size_t n = header.size();
  out += static_cast<char>(n & 0xFF);
  out += static_cast<char>((n >> 8) & 0xFF);
  if (major > 1) out += std::string(2, '\0');
  return out + header + data;
}

std::string dict(const std::string& descr, const std::string& shape, const std::string& fortran = "False") {
  return "{'descr': '" + descr + "', 'fortran_order': " + fortran + ", 'shape': " + shape + ", }\n";
}

// A damaged file: DataLoss naming the source ("bad.npy") and `what`.
void expect_corrupt(const std::string& bytes, std::initializer_list<std::string> what) {
  std::vector<std::string> parts{"[npy] bad.npy: "};
  parts.insert(parts.end(), what.begin(), what.end());
  expect_error<DataLoss>([&] { decode_npy(bytes, "bad.npy"); }, parts);
}

template <class T>
double as_double(T v) {
  if constexpr (std::is_same_v<T, Half>) return static_cast<double>(half_to_float(v));
  else return static_cast<double>(v);
}

// What numpy 2.4 writes for np.save(f, np.arange(6, dtype='<i4').reshape(2, 3)), byte for byte.
const std::string kArangeHeader =
    std::string("\x93NUMPY\x01\x00\x76\x00", 10) +
    "{'descr': '<i4', 'fortran_order': False, 'shape': (2, 3), }" + std::string(58, ' ') + "\n";

TEST(Npy, WritesWhatNumpyWrites) {
  const int32_t values[6] = {0, 1, 2, 3, 4, 5};
  const std::string bytes = encode_npy(Tensor::from_host(int32, {2, 3}, values));
  ASSERT_EQ(kArangeHeader.size(), 128u);
  EXPECT_EQ(bytes, kArangeHeader + bytes_of(values, sizeof values));
}

TEST(Npy, WritesScalarsAndEmptyArraysAsNumpyDoes) {
  // np.save(f, np.float32(1.5)) and np.save(f, np.zeros((0,), 'f8')).
  const float x = 1.5f;
  EXPECT_EQ(encode_npy(Tensor::from_host(float32, {}, &x)),
            std::string("\x93NUMPY\x01\x00\x76\x00", 10) + "{'descr': '<f4', 'fortran_order': False, 'shape': (), }" +
                std::string(62, ' ') + "\n" + bytes_of(&x, 4));
  EXPECT_EQ(encode_npy(Tensor::empty(float64, {0})),
            std::string("\x93NUMPY\x01\x00\x76\x00", 10) + "{'descr': '<f8', 'fortran_order': False, 'shape': (0,), }" +
                std::string(60, ' ') + "\n");
}

TEST(Npy, ReadsNumpyBytes) {
  const int32_t values[6] = {0, 1, 2, 3, 4, 5};
  Tensor t = decode_npy(kArangeHeader + bytes_of(values, sizeof values));
  EXPECT_EQ(t.dtype(), int32);
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
}

TEST(Npy, EveryDtypeAndShapeRoundTrips) {
  std::mt19937 rng(7);
  const DType dtypes[] = {float16, float32, float64, int8, uint8, int32, int64, bool_};
  const Shape shapes[] = {{}, {0}, {1}, {5}, {2, 3}, {2, 0, 3}, {1, 1, 7}, {2, 3, 4, 5}, {1, 2, 1, 2, 1, 2, 1, 2}};
  for (DType d : dtypes) {
    for (const Shape& s : shapes) {
      Tensor t = random_tensor(d, s, rng);
      const std::string bytes = encode_npy(t);
      EXPECT_EQ(bytes.size() % 64, t.nbytes() % 64) << "the data starts 64-byte aligned";
      Tensor back = decode_npy(bytes);
      EXPECT_TRUE(same_bytes(t, back)) << dtype_name(d) << s.to_string();
    }
  }
}

TEST(Npy, FilesRoundTripAtomically) {
  TempDir dir;
  const std::vector<double> v{1.5, -2.25, 1e300};
  save_npy(dir.file("x.npy"), Tensor::from_host(float64, {3}, v.data()));
  Tensor back = load_npy(dir.file("x.npy"));
  EXPECT_EQ(back.to_vector<double>(), v);
  // Nothing but the file itself: the temporary was renamed over it.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  expect_error<NotFound>([&] { load_npy(dir.file("missing.npy")); }, {"[npy]", "missing.npy"});
}

TEST(Npy, Bfloat16IsRefused) {
  expect_error<InvalidArgument>([] { encode_npy(Tensor::empty(bfloat16, {2})); }, {"[npy]", "bfloat16", "NumPy"});
}

TEST(Npy, ReadsVersionsTwoAndThree) {
  const int64_t v[2] = {-1, 1LL << 40};
  for (int major : {2, 3}) {
    Tensor t = decode_npy(npy_with(dict("<i8", "(2,)"), bytes_of(v, sizeof v), major));
    EXPECT_EQ(t.to_vector<int64_t>(), (std::vector<int64_t>{-1, 1LL << 40})) << major;
  }
}

TEST(Npy, BigEndianIsSwapped) {
  const std::string be32("\x00\x00\x01\x02\xff\xff\xff\xfe", 8);
  EXPECT_EQ(decode_npy(npy_with(dict(">i4", "(2,)"), be32)).to_vector<int32_t>(), (std::vector<int32_t>{258, -2}));
  // 1.0 as a big-endian double: 3F F0 00 .. 00.
  const std::string be64("\x3f\xf0\0\0\0\0\0\0", 8);
  EXPECT_EQ(decode_npy(npy_with(dict(">f8", "()"), be64)).item<double>(), 1.0);
  // One-byte types have no order: '>u1' is read as is.
  EXPECT_EQ(decode_npy(npy_with(dict(">u1", "(1,)"), "\x07")).to_vector<uint8_t>(), (std::vector<uint8_t>{7}));
}

TEST(Npy, FortranOrderIsTransposed) {
  // np.asfortranarray(np.arange(6).reshape(2, 3)) stores 0 3 1 4 2 5.
  const int32_t f2[6] = {0, 3, 1, 4, 2, 5};
  Tensor t = decode_npy(npy_with(dict("<i4", "(2, 3)", "True"), bytes_of(f2, sizeof f2)));
  EXPECT_EQ(t.shape(), (Shape{2, 3}));
  EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{0, 1, 2, 3, 4, 5}));
  // Rank 3, shape (2, 3, 4): element (i, j, k) of value 12i + 4j + k sits at i + 2j + 6k.
  std::vector<float> f3(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) f3[static_cast<size_t>(i + 2 * j + 6 * k)] = static_cast<float>(12 * i + 4 * j + k);
  Tensor u = decode_npy(npy_with(dict(">f4", "(2, 3, 4)", "True"), [&] {
    std::string s = bytes_of(f3.data(), 96);
    for (size_t i = 0; i < s.size(); i += 4) std::reverse(s.begin() + static_cast<long>(i), s.begin() + static_cast<long>(i) + 4);
    return s;
  }()));
  std::vector<float> expect(24);
  for (int i = 0; i < 24; ++i) expect[static_cast<size_t>(i)] = static_cast<float>(i);
  EXPECT_EQ(u.to_vector<float>(), expect);
}

TEST(Npy, HeaderSpellingsNumpyAccepts) {
  // Python 2 longs, double quotes, no trailing comma, extra spaces, keys in another order.
  EXPECT_EQ(decode_npy(npy_with("{'descr': '<i4', 'fortran_order': False, 'shape': (1L, 2L), }", std::string(8, '\0')))
                .shape(),
            (Shape{1, 2}));
  EXPECT_EQ(decode_npy(npy_with("{ \"shape\" : ( 2 , ) , \"fortran_order\":False,\"descr\":\"|b1\"}", std::string("\x01\x00", 2)))
                .to_vector<bool>(),
            (std::vector<bool>{true, false}));
}

// Files numpy itself wrote and reads back. The interpreter is WEFT_TEST_PYTHON from CMake:
// Debian's /usr/bin/python3 by default, which has numpy once scripts/setup installed python3-numpy.
TEST(Npy, InteroperatesWithNumpy) {
  const std::string python = WEFT_TEST_PYTHON;
  if (!fs::exists(python)) GTEST_SKIP() << "no Python at " << python << " (configure with -DWEFT_TEST_PYTHON=...)";
  if (std::system(("'" + python + "' -c 'import numpy' >/dev/null 2>&1").c_str()) != 0)
    GTEST_SKIP() << python << " has no numpy (scripts/setup installs python3-numpy)";
  TempDir dir;
  const std::string script = dir.file("check.py");
  std::ofstream(script) << R"(import sys, numpy as np
d = sys.argv[2]
kinds = ['<f2', '<f4', '<f8', '|i1', '|u1', '<i4', '<i8', '>i4', '>f8']
if sys.argv[1] == 'write':
    for k in kinds:
        np.save(f'{d}/{k[1:]}{"_be" if k[0] == ">" else ""}.npy', (np.arange(24) - 5).astype(k).reshape(2, 3, 4))
    np.save(f'{d}/bool.npy', np.arange(7) % 3 == 0)
    np.save(f'{d}/fortran.npy', np.asfortranarray((np.arange(24) - 5).astype('<i8').reshape(2, 3, 4)))
    np.save(f'{d}/scalar.npy', np.float64(2.5))
    np.save(f'{d}/empty.npy', np.zeros((3, 0), dtype='<i4'))
else:
    for k in ['<f2', '<f4', '<f8', '|i1', '|u1', '<i4', '<i8']:
        a = np.load(f'{d}/weft_{k[1:]}.npy')
        assert a.dtype == np.dtype(k) and a.shape == (2, 3, 4), (k, a.dtype, a.shape)
        assert (a == (np.arange(24) - 5).astype(k).reshape(2, 3, 4)).all(), k
    b = np.load(f'{d}/weft_bool.npy')
    assert b.dtype == np.bool_ and (b == (np.arange(7) % 3 == 0)).all()
    assert np.load(f'{d}/weft_scalar.npy').shape == ()
)";
  ASSERT_EQ(std::system(("'" + python + "' " + script + " write " + dir.path()).c_str()), 0);

  auto expect_values = [&](const std::string& name, DType d) {
    SCOPED_TRACE(name);
    Tensor t = load_npy(dir.file(name));
    ASSERT_EQ(t.dtype(), d);
    ASSERT_EQ(t.shape(), (Shape{2, 3, 4}));
    visit_dtype(d, [&](auto tag) {
      using T = decltype(tag);
      if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, BFloat16>) {
        std::vector<T> v = t.to_vector<T>();
        for (size_t i = 0; i < 24; ++i) {
          // NumPy's astype wraps negative values into unsigned types the same way a C cast does.
          const int64_t value = static_cast<int64_t>(i) - 5;
          T expect;
          if constexpr (std::is_same_v<T, Half>) expect = float_to_half(static_cast<float>(value));
          else expect = static_cast<T>(value);
          EXPECT_EQ(as_double(v[i]), as_double(expect)) << i;
        }
      }
    });
  };
  expect_values("f2.npy", float16);
  expect_values("f4.npy", float32);
  expect_values("f8.npy", float64);
  expect_values("i1.npy", int8);
  expect_values("u1.npy", uint8);
  expect_values("i4.npy", int32);
  expect_values("i8.npy", int64);
  expect_values("i4_be.npy", int32);
  expect_values("f8_be.npy", float64);
  expect_values("fortran.npy", int64);
  EXPECT_EQ(load_npy(dir.file("bool.npy")).to_vector<bool>(), (std::vector<bool>{1, 0, 0, 1, 0, 0, 1}));
  EXPECT_EQ(load_npy(dir.file("scalar.npy")).item<double>(), 2.5);
  EXPECT_EQ(load_npy(dir.file("empty.npy")).shape(), (Shape{3, 0}));

  // And numpy reads what weft writes: each dtype, re-saved from the tensors numpy wrote.
  for (const char* k : {"f2", "f4", "f8", "i1", "u1", "i4", "i8"})
    save_npy(dir.file(std::string("weft_") + k + ".npy"), load_npy(dir.file(std::string(k) + ".npy")));
  save_npy(dir.file("weft_bool.npy"), load_npy(dir.file("bool.npy")));
  save_npy(dir.file("weft_scalar.npy"), load_npy(dir.file("scalar.npy")));
  EXPECT_EQ(std::system(("'" + python + "' " + script + " read " + dir.path()).c_str()), 0);
}

// ---- damaged and forged files: one test per kind of damage ----

TEST(NpyDamage, BadMagic) {
  expect_corrupt("", {"not a .npy file"});
  expect_corrupt("\x93NUMP", {"not a .npy file"});
  expect_corrupt("PK\x03\x04 this is a zip", {"not a .npy file"});
  std::string wrong = npy_with(dict("<f4", "()"), "abcd");
  wrong[1] = 'n';
  expect_corrupt(wrong, {"not a .npy file"});
}

TEST(NpyDamage, TruncatedPrefix) {
  expect_corrupt(std::string("\x93NUMPY\x01", 7), {"truncated in the format version"});
  expect_corrupt(std::string("\x93NUMPY\x01\x00\x10", 9), {"truncated in the header length"});
  expect_corrupt(std::string("\x93NUMPY\x02\x00\x10\x00\x00", 11), {"truncated in the header length"});
}

TEST(NpyDamage, UnknownVersion) {
  expect_error<InvalidArgument>([] { decode_npy(npy_with(dict("<f4", "()"), "abcd", 4), "v4.npy"); },
                                {"[npy] v4.npy", "format version 4.0"});
  std::string minor = npy_with(dict("<f4", "()"), "abcd");
  minor[7] = 1;
  expect_error<InvalidArgument>([&] { decode_npy(minor, "v11.npy"); }, {"format version 1.1"});
}

TEST(NpyDamage, HeaderLengthBeyondFile) {
  std::string bytes = npy_with(dict("<f4", "()"), "abcd");
  bytes[8] = static_cast<char>(0xFF);
  bytes[9] = static_cast<char>(0xFF);
  expect_corrupt(bytes, {"header of 65535 bytes runs past the end of the file"});
  // Version 2.0's 4-byte length can claim 4 GiB: refused before anything is read or allocated.
  std::string big = npy_with(dict("<f4", "()"), "abcd", 2);
  big[11] = static_cast<char>(0xF0);
  expect_corrupt(big, {"header length", "is beyond"});
}

TEST(NpyDamage, MalformedHeaderDict) {
  const std::string cases[][2] = {
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), ", "expected a value but found end of text"},
      {"{descr: '<f4', 'fortran_order': False, 'shape': ()}", "unexpected name 'descr'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ()} x", "after the literal"},
      {"{'descr': '<f4, 'fortran_order': False, 'shape': ()}", "expected ','"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (2.5,)}", "expected ','"},
      {"{'descr': '<f4' 'fortran_order': False, 'shape': ()}", "expected ','"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ((((((((((((((((((((((((((((((((1))))))))))))))))))))))))))))))))}",
       "nested deeper"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (1,,)}", "expected a value"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (99999999999999999999999,)}", "does not fit in 64 bits"},
      {"{'descr': '<f4', 'fortran_order': maybe, 'shape': ()}", "unexpected name 'maybe'"},
      {"{'descr': '<f4', " + std::string(1, '\0') + "'fortran_order': False, 'shape': ()}", "byte 0x00"},
      {"{'descr': '<f4\n', 'fortran_order': False, 'shape': ()}", "line break inside a string"},
  };
  for (const auto& [header, what] : cases) {
    SCOPED_TRACE(header);
    expect_corrupt(npy_with(header, "abcd"), {"header: ", what, "at offset"});
  }
}

TEST(NpyDamage, WrongHeaderContents) {
  const std::string cases[][2] = {
      {"['descr', '<f4']", "the header is a list, not a dict"},
      {"{'descr': '<f4', 'shape': ()}", "no 'fortran_order' key"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'extra': 1}", "unexpected key 'extra'"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': (), 'shape': ()}", "key 'shape' twice"},
      {"{'descr': '<f4', 'fortran_order': 0, 'shape': ()}", "'fortran_order' is an int, not True or False"},
      {"{'descr': 4, 'fortran_order': False, 'shape': ()}", "'descr' is an int, not a string"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': [1]}", "'shape' is a list, not a tuple"},
      {"{'descr': '<f4', 'fortran_order': False, 'shape': ('1',)}", "'shape' holds a string, not an integer"},
      {"{1: '<f4', 'fortran_order': False, 'shape': ()}", "the header has an int as a key"},
  };
  for (const auto& [header, what] : cases) {
    SCOPED_TRACE(header);
    expect_corrupt(npy_with(header, "abcd"), {what});
  }
}

TEST(NpyDamage, UnsupportedDtypesAreNamed) {
  for (const char* descr : {"<c8", "|O", "<U5", "|S3", "<i2", "<u8", "<M8[ns]", "f4x", ""}) {
    SCOPED_TRACE(descr);
    expect_error<InvalidArgument>([&] { decode_npy(npy_with(dict(descr, "(1,)"), "abcdefgh"), "x.npy"); },
                                  {"[npy] x.npy: dtype '" + std::string(descr) + "' is not supported", "float32"});
  }
  expect_error<InvalidArgument>(
      [] { decode_npy(npy_with("{'descr': [('a', '<f4')], 'fortran_order': False, 'shape': (1,)}", "abcd"), "s.npy"); },
      {"[npy] s.npy", "structured dtypes"});
}

TEST(NpyDamage, NegativeDimension) { expect_corrupt(npy_with(dict("<f4", "(2, -1)"), "abcdefgh"), {"negative dimension -1"}); }

TEST(NpyDamage, OverflowingShape) {
  // The element count overflows 64 bits; then one whose count fits but whose byte count does not.
  expect_corrupt(npy_with(dict("<f4", "(4294967296, 4294967296)"), "abcd"), {"more elements than can be counted"});
  expect_corrupt(npy_with(dict("<f8", "(4611686018427387904,)"), "abcd"), {"more elements than can be counted"});
  expect_corrupt(npy_with(dict("<f4", "(0, 4294967296, 4294967296)"), "abcd"), {"more elements than can be counted"});
  // Beyond the rank any shape can have.
  std::string deep = "(";
  for (int i = 0; i < 65; ++i) deep += "1, ";
  expect_corrupt(npy_with(dict("<f4", deep + ")"), "abcd"), {"rank 65 is beyond 64"});
}

TEST(NpyDamage, DataSizeDiffersFromShape) {
  expect_corrupt(npy_with(dict("<f4", "(2, 3)"), std::string(20, 'x')), {"holds 20 bytes of data but float32(2, 3) needs 24"});
  expect_corrupt(npy_with(dict("<f4", "(2, 3)"), std::string(28, 'x')), {"holds 28 bytes"});
  expect_corrupt(npy_with(dict("<f4", "(0,)"), "x"), {"holds 1 bytes of data but float32(0,) needs 0"});
  // A forged shape of a terabyte fails on the size check, before any allocation.
  expect_corrupt(npy_with(dict("<f8", "(131072, 1048576)"), "x"), {"needs 1099511627776"});
}

TEST(NpyDamage, BoolBytesOtherThanZeroOrOne) {
  expect_corrupt(npy_with(dict("|b1", "(3,)"), std::string("\x01\x00\x02", 3)), {"bool element 2 is the byte 2"});
}

}  // namespace
}  // namespace weft
