// The safetensors reader and writer: exact layout, round trips of every dtype, and damaged or
// forged files, which must fail with DataLoss naming the tensor (never crash or over-allocate).
#include "runtime/safetensors.h"

#include <gtest/gtest.h>

#include "temp_dir.h"
#include "tensor_test_util.h"
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <random>

#include "runtime/crc32c.h"

namespace weft {
namespace {

namespace fs = std::filesystem;

class TempDir : public testing::TempDir {
 public:
  TempDir() : testing::TempDir("weft_st") {}
};

std::string le64(uint64_t n) {
  std::string s(8, '\0');
  std::memcpy(s.data(), &n, 8);
  return s;
}

// A file from its header text and data, the length prefix computed.
std::string file_of(const std::string& header, const std::string& data = "") { return le64(header.size()) + header + data; }

TEST(Safetensors, HandWrittenFileDecodes) {
  // What Python's safetensors writes for {"a": np.array([1, -2], np.float32)}: no checksums.
  const std::string header = R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})";
  ASSERT_EQ(header.size(), 54u);
  const float values[2] = {1.0f, -2.0f};
  std::string bytes = std::string("\x36\0\0\0\0\0\0\0", 8) + header + std::string(reinterpret_cast<const char*>(values), 8);
  TensorFile f = decode_tensors(bytes);
  ASSERT_EQ(f.tensors.size(), 1u);
  EXPECT_EQ(f.tensors.at("a").shape(), Shape{2});
  EXPECT_EQ(f.tensors.at("a").to_vector<float>(), (std::vector<float>{1.0f, -2.0f}));
  EXPECT_TRUE(f.metadata.empty());
}

TEST(Safetensors, EncodedLayoutIsExact) {
  const int32_t v[2] = {1, -2};
  std::string bytes = encode_tensors({{"x", Tensor::from_host(int32, {2}, v)}});
  // 93 bytes of JSON padded with spaces to 96, then the 8 data bytes.
  const std::string header =
      R"({"__metadata__":{"crc32c/x":"afc9d12d"},"x":{"dtype":"I32","shape":[2],"data_offsets":[0,8]}})";
  EXPECT_EQ(bytes, std::string("\x60\0\0\0\0\0\0\0", 8) + header + "   " + std::string("\x01\0\0\0\xfe\xff\xff\xff", 8));
}

TEST(Safetensors, EveryDTypeRoundTripsThroughMemoryAndFile) {
  std::mt19937 rng(3);
  std::map<std::string, Tensor> tensors;
  const DType all[] = {float16, bfloat16, float32, float64, int8, uint8, int32, int64, bool_};
  for (DType d : all) {
    std::string n(dtype_name(d));
    tensors[n] = random_tensor(d, {3, 5}, rng);
    tensors[n + "/scalar"] = random_tensor(d, {}, rng);
    tensors[n + "/empty"] = random_tensor(d, {0, 4}, rng);
  }
  std::map<std::string, std::string> meta{{"format", "test"}, {"step", "12"}};
  TensorFile mem = decode_tensors(encode_tensors(tensors, meta));
  TempDir dir;
  save_tensors(dir.file("all.safetensors"), tensors, meta);
  TensorFile disk = load_tensors(dir.file("all.safetensors"));
  for (const TensorFile* f : {&mem, &disk}) {
    EXPECT_EQ(f->metadata, meta);
    ASSERT_EQ(f->tensors.size(), tensors.size());
    for (const auto& [name, t] : tensors) EXPECT_TRUE(same_bytes(f->tensors.at(name), t)) << name;
  }
  // Nothing but the file itself is left behind.
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
}

TEST(Safetensors, TensorsAreAlignedToTheirElementSize) {
  std::mt19937 rng(1);
  std::string bytes = encode_tensors({{"a", random_tensor(int8, {3}, rng)}, {"b", random_tensor(float64, {2}, rng)},
                                      {"c", random_tensor(float16, {1}, rng)}});
  uint64_t n;
  std::memcpy(&n, bytes.data(), 8);
  EXPECT_EQ(n % 8, 0u);
  EXPECT_EQ(bytes.size(), 8 + n + 3 + 16 + 2);
}

TEST(Safetensors, SavingReplacesTheFileAtomically) {
  TempDir dir;
  const std::string path = dir.file("w.safetensors");
  save_tensors(path, {{"w", Tensor::from_host(float32, {1}, std::vector<float>{1}.data())}});
  save_tensors(path, {{"w", Tensor::from_host(float32, {1}, std::vector<float>{2}.data())}});
  EXPECT_EQ(load_tensors(path).tensors.at("w").item<float>(), 2.0f);
  EXPECT_EQ(std::distance(fs::directory_iterator(dir.path()), fs::directory_iterator()), 1);
  expect_error<NotFound>([&] { load_tensors(dir.file("missing.safetensors")); }, {"missing.safetensors"});
  expect_error<NotFound>([&] { save_tensors(dir.file("no/such/dir/x.safetensors"), {}); }, {"no/such/dir"});
}

TEST(Safetensors, WriterRejectsWhatItCannotWrite) {
  Tensor t = Tensor::from_host(float32, {1}, std::vector<float>{1}.data());
  expect_error<InvalidArgument>([&] { encode_tensors({{"", t}}); }, {"name"});
  expect_error<InvalidArgument>([&] { encode_tensors({{"__metadata__", t}}); }, {"__metadata__"});
  expect_error<InvalidArgument>([&] { encode_tensors({{"x", Tensor()}}); }, {"'x'"});
  expect_error<InvalidArgument>([&] { encode_tensors({{"x", t}}, {{"crc32c/x", "0"}}); }, {"reserved"});
  expect_error<InvalidArgument>([&] { encode_tensors({{"\xff", t}}); }, {"UTF-8"});
}

class Damaged : public ::testing::Test {
 protected:
  void SetUp() override {
    std::mt19937 rng(5);
    good_ = encode_tensors({{"layer/kernel", random_tensor(float32, {4, 4}, rng)}, {"layer/bias", random_tensor(float32, {4}, rng)}});
    std::memcpy(&header_len_, good_.data(), 8);
  }
  std::string good_;
  uint64_t header_len_ = 0;
};

TEST_F(Damaged, FlippedDataByteNamesTheTensor) {
  // Data order: both float32, so by name: "layer/bias" (16 bytes) then "layer/kernel".
  std::string bad = good_;
  bad[8 + header_len_ + 20] ^= 0x10;
  expect_error<DataLoss>([&] { decode_tensors(bad, "ckpt.safetensors"); },
                         {"[safetensors]", "ckpt.safetensors", "'layer/kernel'", "checksum"});
  bad = good_;
  bad[8 + header_len_ + 3] ^= 0x01;
  expect_error<DataLoss>([&] { decode_tensors(bad); }, {"'layer/bias'", "checksum"});
}

TEST_F(Damaged, TruncatedFileNamesTheTensor) {
  expect_error<DataLoss>([&] { decode_tensors(good_.substr(0, good_.size() - 1)); }, {"'layer/kernel'", "outside"});
  expect_error<DataLoss>([&] { decode_tensors(good_.substr(0, 8 + header_len_ - 10)); }, {"header length"});
  expect_error<DataLoss>([&] { decode_tensors(good_.substr(0, 5)); }, {"no header length"});
  TempDir dir;
  std::ofstream(dir.file("cut.safetensors"), std::ios::binary) << good_.substr(0, good_.size() - 7);
  expect_error<DataLoss>([&] { load_tensors(dir.file("cut.safetensors")); }, {"cut.safetensors", "'layer/kernel'"});
}

TEST(Safetensors, ForgedHeadersFailWithDataLoss) {
  const std::string data(16, '\0');
  auto bad = [&](const std::string& header, std::initializer_list<std::string> parts) {
    expect_error<DataLoss>([&] { decode_tensors(file_of(header, data), "f"); }, parts);
  };
  bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,24]}})", {"'t'", "outside"});
  bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[8,0]}})", {"'t'", "outside"});
  bad(R"({"t":{"dtype":"F32","shape":[3],"data_offsets":[0,8]}})", {"'t'", "needs 12"});
  bad(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})",
      {"'b'", "overlap", "'a'"});
  bad(R"({"t":{"dtype":"F33","shape":[2],"data_offsets":[0,8]}})", {"'t'", "unknown dtype"});
  bad(R"({"t":{"dtype":"F32","shape":[-2],"data_offsets":[0,8]}})", {"'t'", "shape"});
  bad(R"({"t":{"dtype":"F32","shape":[2.5],"data_offsets":[0,8]}})", {"'t'", "shape"});
  bad(R"({"t":{"dtype":"F32","shape":[4294967296,4294967296,4294967296],"data_offsets":[0,8]}})", {"'t'", "elements"});
  bad(R"({"t":{"dtype":"F64","shape":[4611686018427387904],"data_offsets":[0,8]}})", {"'t'", "bytes"});
  bad(R"({"t":{"dtype":"F32","shape":[2]}})", {"'t'", "data_offsets"});
  bad(R"({"t":{"shape":[2],"data_offsets":[0,8]}})", {"'t'", "dtype"});
  bad(R"({"t":[1,2]})", {"'t'", "not a JSON object"});
  bad(R"({"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"t":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
      {"'t'", "twice"});
  bad(R"({"__metadata__":{"crc32c/u":"00000000"},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", {"'u'"});
  bad(R"({"__metadata__":{"crc32c/t":"xyz"},"t":{"dtype":"F32","shape":[2],"data_offsets":[0,8]}})", {"crc32c/t"});
  bad(R"({"__metadata__":{"k":1}})", {"'k'"});
}

TEST(Safetensors, MalformedFramingFailsWithDataLoss) {
  expect_error<DataLoss>([] { decode_tensors(le64(1ull << 62) + "{}"); }, {"header length"});
  expect_error<DataLoss>([] { decode_tensors(le64(200ull << 20) + std::string(16, ' ')); }, {"header length"});
  expect_error<DataLoss>([] { decode_tensors(file_of("not json at all")); }, {"not a JSON object"});
  expect_error<DataLoss>([] { decode_tensors(file_of("{\"t\": ")); }, {"not valid JSON"});
  expect_error<DataLoss>([] { decode_tensors(file_of("[1]")); }, {"not a JSON object"});
  // Deep nesting is refused as it is read, not after building a huge tree.
  expect_error<DataLoss>([] { decode_tensors(file_of("{\"t\":" + std::string(100000, '[') + std::string(100000, ']') + "}")); },
                         {"nests"});
}

TEST(Safetensors, BoolsOtherThanZeroOrOneAreRejected) {
  std::string header = R"({"t":{"dtype":"BOOL","shape":[2],"data_offsets":[0,2]}})";
  EXPECT_EQ(decode_tensors(file_of(header, std::string("\x01\x00", 2))).tensors.at("t").to_vector<bool>(),
            (std::vector<bool>{true, false}));
  expect_error<DataLoss>([&] { decode_tensors(file_of(header, std::string("\x01\x02", 2))); }, {"'t'", "byte 2"});
}

TEST(Safetensors, ForeignDTypesAreUnimplemented) {
  expect_error<Unimplemented>(
      [] { decode_tensors(file_of(R"({"t":{"dtype":"U16","shape":[2],"data_offsets":[0,4]}})", "abcd")); }, {"'t'", "U16"});
}

TEST(Safetensors, GapsBetweenTensorsAreAccepted) {
  std::string header = R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[0,1]},"b":{"dtype":"U8","shape":[1],"data_offsets":[4,5]}})";
  TensorFile f = decode_tensors(file_of(header, "x...y"));
  EXPECT_EQ(f.tensors.at("b").item<uint8_t>(), 'y');
}

TEST_F(Damaged, RandomCorruptionNeverCrashes) {
  // Every mutation either decodes or raises a weft error: no crash, no other exception.
  std::mt19937 rng(11);
  int rejected = 0;
  for (int i = 0; i < 3000; ++i) {
    std::string bad = good_;
    switch (i % 3) {
      case 0: bad[rng() % bad.size()] = static_cast<char>(rng()); break;
      case 1: bad.resize(rng() % bad.size()); break;
      default: bad[8 + rng() % header_len_] = "{}[]\",:0123456789 e-"[rng() % 20]; break;
    }
    try {
      decode_tensors(bad);
    } catch (const Error&) {
      ++rejected;
    }
  }
  EXPECT_GT(rejected, 2000);
}

}  // namespace
}  // namespace weft
