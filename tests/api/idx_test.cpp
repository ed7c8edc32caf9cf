// IDX reading: files written here, plain and gzip, good and broken.
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>

#include "weft/weft.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using Bytes = std::vector<unsigned char>;

Bytes header(unsigned char type, const std::vector<uint32_t>& dims) {
  Bytes b = {0, 0, type, static_cast<unsigned char>(dims.size())};
  for (uint32_t d : dims)
    for (int s = 24; s >= 0; s -= 8) b.push_back(static_cast<unsigned char>(d >> s));
  return b;
}

Bytes operator+(Bytes a, const Bytes& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

// Big-endian bytes of each value.
template <class T>
Bytes big_endian(const std::vector<T>& values) {
  Bytes b;
  for (T v : values) {
    unsigned char raw[sizeof(T)];
    std::memcpy(raw, &v, sizeof(T));
    for (size_t k = 0; k < sizeof(T); ++k) b.push_back(raw[sizeof(T) - 1 - k]);
  }
  return b;
}

class IdxTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "weft_idx_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string write(const std::string& name, const Bytes& bytes) {
    std::string path = (dir_ / name).string();
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  std::string write_gz(const std::string& name, const Bytes& bytes) {
    std::string path = (dir_ / name).string();
    gzFile f = gzopen(path.c_str(), "wb");
    EXPECT_NE(f, nullptr);
    if (!bytes.empty()) {
      EXPECT_EQ(gzwrite(f, bytes.data(), static_cast<unsigned>(bytes.size())), int(bytes.size()));
    }
    gzclose(f);
    return path;
  }
  // Both forms of the same bytes.
  std::vector<std::string> write_both(const std::string& name, const Bytes& bytes) {
    return {write(name, bytes), write_gz(name + ".gz", bytes)};
  }

  template <class E>
  void expect_error(const std::string& path, const std::string& fragment = "") {
    try {
      data::read_idx(path);
      ADD_FAILURE() << "no error for " << path;
    } catch (const E& e) {
      EXPECT_NE(std::string(e.what()).find(path), std::string::npos) << "message should name the file: " << e.what();
      if (!fragment.empty()) {
        EXPECT_NE(std::string(e.what()).find(fragment), std::string::npos) << e.what();
      }
    } catch (const std::exception& e) {
      ADD_FAILURE() << "wrong error type for " << path << ": " << e.what();
    }
  }

  fs::path dir_;
};

TEST_F(IdxTest, ReadsEveryElementTypePlainAndCompressed) {
  Bytes u8 = header(0x08, {2, 3}) + Bytes{0, 1, 2, 128, 254, 255};
  for (const std::string& p : write_both("u8", u8)) {
    Tensor t = data::read_idx(p);
    EXPECT_EQ(t.dtype(), uint8) << p;
    EXPECT_EQ(t.shape(), (Shape{2, 3}));
    EXPECT_EQ(t.to_vector<uint8_t>(), (std::vector<uint8_t>{0, 1, 2, 128, 254, 255}));
  }
  for (const std::string& p : write_both("i8", header(0x09, {3}) + Bytes{0x80, 0xFF, 0x7F})) {
    EXPECT_EQ(data::read_idx(p).to_vector<int8_t>(), (std::vector<int8_t>{-128, -1, 127}));
  }
  for (const std::string& p : write_both("i16", header(0x0B, {2}) + big_endian<int16_t>({-300, 32767}))) {
    Tensor t = data::read_idx(p);
    EXPECT_EQ(t.dtype(), int32);
    EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{-300, 32767}));
  }
  for (const std::string& p : write_both("i32", header(0x0C, {1, 2, 2}) + big_endian<int32_t>({-70000, 1, 0, 1 << 30}))) {
    Tensor t = data::read_idx(p);
    EXPECT_EQ(t.shape(), (Shape{1, 2, 2}));
    EXPECT_EQ(t.to_vector<int32_t>(), (std::vector<int32_t>{-70000, 1, 0, 1 << 30}));
  }
  for (const std::string& p : write_both("f32", header(0x0D, {3}) + big_endian<float>({1.5f, -0.25f, 3e30f}))) {
    Tensor t = data::read_idx(p);
    EXPECT_EQ(t.dtype(), float32);
    EXPECT_EQ(t.to_vector<float>(), (std::vector<float>{1.5f, -0.25f, 3e30f}));
  }
  for (const std::string& p : write_both("f64", header(0x0E, {2}) + big_endian<double>({-1e-300, 12345.678}))) {
    EXPECT_EQ(data::read_idx(p).to_vector<double>(), (std::vector<double>{-1e-300, 12345.678}));
  }
  for (const std::string& p : write_both("empty", header(0x08, {0, 28, 28}))) {
    EXPECT_EQ(data::read_idx(p).shape(), (Shape{0, 28, 28}));
  }
}

TEST_F(IdxTest, LoadsImagesAndLabels) {
  Bytes pixels;
  for (int i = 0; i < 3 * 4 * 5; ++i) pixels.push_back(static_cast<unsigned char>(i * 3));
  std::string images = write_gz("images.gz", header(0x08, {3, 4, 5}) + pixels);
  std::string labels = write("labels", header(0x08, {3}) + Bytes{7, 0, 9});
  auto [x, y] = data::load_idx(images, labels);
  EXPECT_EQ(x.shape(), (Shape{3, 4, 5}));
  EXPECT_EQ(x.dtype(), uint8);
  EXPECT_EQ(x.to_vector<uint8_t>(), std::vector<uint8_t>(pixels.begin(), pixels.end()));
  EXPECT_EQ(y.shape(), (Shape{3}));
  EXPECT_EQ(y.to_vector<uint8_t>(), (std::vector<uint8_t>{7, 0, 9}));
}

TEST_F(IdxTest, MissingFileIsNotFound) {
  expect_error<NotFound>((dir_ / "nope.gz").string());
  std::string labels = write("labels", header(0x08, {1}) + Bytes{1});
  std::string missing = (dir_ / "images-missing").string();
  try {
    data::load_idx(missing, labels);
    ADD_FAILURE() << "no error";
  } catch (const NotFound& e) {
    EXPECT_NE(std::string(e.what()).find(missing), std::string::npos) << e.what();
  }
}

TEST_F(IdxTest, BadHeadersAreDataLoss) {
  for (const std::string& p : write_both("magic", Bytes{1, 0, 8, 1, 0, 0, 0, 1, 5})) expect_error<DataLoss>(p);
  for (const std::string& p : write_both("magic2", Bytes{0, 7, 8, 1, 0, 0, 0, 1, 5})) expect_error<DataLoss>(p);
  for (const std::string& p : write_both("type", header(0x0A, {1}) + Bytes{5})) expect_error<DataLoss>(p, "0x0a");
  for (const std::string& p : write_both("rank0", header(0x08, {}) + Bytes{5})) expect_error<DataLoss>(p);
  for (const std::string& p : write_both("short", Bytes{0, 0, 8})) expect_error<DataLoss>(p);
  for (const std::string& p : write_both("nothing", Bytes{})) expect_error<DataLoss>(p);
  Bytes dims_cut = header(0x08, {2, 3});
  dims_cut.pop_back();  // two bytes short (resize(size() - 2) draws a false -Wstringop-overflow)
  dims_cut.pop_back();
  for (const std::string& p : write_both("dims", dims_cut)) expect_error<DataLoss>(p);
  // A gzip stream that breaks off in the middle.
  Bytes good = header(0x08, {4096}) + Bytes(4096, 7);
  std::string gz = write_gz("cut.gz", good);
  fs::resize_file(gz, fs::file_size(gz) / 2);
  expect_error<DataLoss>(gz);
}

TEST_F(IdxTest, TruncatedOrOverlongDataIsDataLoss) {
  for (const std::string& p : write_both("trunc", header(0x08, {2, 3}) + Bytes{1, 2, 3, 4, 5}))
    expect_error<DataLoss>(p, "truncated");
  for (const std::string& p : write_both("trunc32", header(0x0C, {2}) + Bytes{0, 0, 0, 1, 0, 0}))
    expect_error<DataLoss>(p);
  for (const std::string& p : write_both("extra", header(0x08, {2}) + Bytes{1, 2, 3})) expect_error<DataLoss>(p);
  for (const std::string& p : write_both("extra_f", header(0x0D, {1}) + big_endian<float>({1.f, 2.f})))
    expect_error<DataLoss>(p);
}

TEST_F(IdxTest, ImagesAndLabelsMustAgree) {
  std::string images = write("images", header(0x08, {3, 2, 2}) + Bytes(12, 1));
  std::string two_labels = write("labels2", header(0x08, {2}) + Bytes{1, 2});
  std::string three_labels = write("labels3", header(0x08, {3}) + Bytes{1, 2, 3});
  EXPECT_THROW(data::load_idx(images, two_labels), InvalidArgument);
  std::string flat = write("flat", header(0x08, {3, 4}) + Bytes(12, 1));
  EXPECT_THROW(data::load_idx(flat, three_labels), InvalidArgument);
  std::string wide = write("wide_labels", header(0x0C, {3}) + big_endian<int32_t>({1, 2, 3}));
  EXPECT_THROW(data::load_idx(images, wide), InvalidArgument);
  std::string matrix_labels = write("matrix_labels", header(0x08, {3, 1}) + Bytes{1, 2, 3});
  EXPECT_THROW(data::load_idx(images, matrix_labels), InvalidArgument);
  EXPECT_NO_THROW(data::load_idx(images, three_labels));
}

long max_rss_kib() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss;
}

// How fast the rejection is, is measured by bench/idx_load.cpp.
TEST_F(IdxTest, GiganticHeadersFailWithoutAllocating) {
  const std::vector<std::vector<uint32_t>> lies = {
      {1u << 16, 1u << 16, 2},           // 8 GiB of uint8, within the element bound
      {1u << 20, 1u << 20},              // 2^40 elements: beyond any bound
      {0xFFFFFFFFu, 0xFFFFFFFFu, 1},     // the product overflows 64 bits' signed range
      {0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu, 0xFFFFFFFFu},
      {3, 0x80000000u, 0x80000000u, 4},
  };
  long rss_before = max_rss_kib();
  int i = 0;
  for (const auto& dims : lies) {
    for (unsigned char type : {0x08, 0x0E}) {
      ++i;
      for (const std::string& p : write_both("lie" + std::to_string(i), header(type, dims) + Bytes(100, 1)))
        expect_error<DataLoss>(p);
    }
  }
  // Peak RSS only grows past earlier peaks, so this catches the gross case (allocating what the
  // header declares), not every megabyte.
  EXPECT_LT(max_rss_kib() - rss_before, 128L * 1024) << "KiB of peak memory for files of a few hundred bytes";
}

// A gzip file whose header does not lie but whose data is huge (zeros compress 1000:1): refused
// by the limit, before reading, naming the file and the setting.
TEST_F(IdxTest, DecompressionBombsAreRefusedBeforeReading) {
  const std::string bomb = write_gz("bomb.gz", header(0x08, {4u << 20}) + Bytes(4u << 20, 0));
  ASSERT_LT(fs::file_size(bomb), 64u << 10);
  ASSERT_EQ(::setenv("WEFT_IDX_MAX_BYTES", "1048576", 1), 0);
  expect_error<InvalidArgument>(bomb, "WEFT_IDX_MAX_BYTES");
  ASSERT_EQ(::setenv("WEFT_IDX_MAX_BYTES", "lots", 1), 0);
  expect_error<InvalidArgument>(bomb, "WEFT_IDX_MAX_BYTES='lots'");
  ::unsetenv("WEFT_IDX_MAX_BYTES");
  EXPECT_EQ(data::read_idx(bomb).shape(), (Shape{4 << 20}));
  // A header claiming more than any gzip file of its size can hold is a lie, found from the sizes.
  for (const std::string& p : {write_gz("liar.gz", header(0x08, {1u << 30}) + Bytes(100, 0))})
    expect_error<DataLoss>(p, "can hold");
}

TEST_F(IdxTest, SomethingOtherThanAFileIsRefusedWithoutWaiting) {
  const std::string fifo = (dir_ / "fifo").string();
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  expect_error<InvalidArgument>(fifo, "not a regular file");  // would block until a writer came
  expect_error<InvalidArgument>(dir_.string(), "not a regular file");
}

TEST(FashionMnist, RealFilesLoad) {
  const std::string dir = "/usr/share/datasets/fashion-mnist";
  if (!fs::exists(dir + "/train-images-idx3-ubyte.gz")) GTEST_SKIP() << "Fashion-MNIST not installed at " << dir;
  auto [x, y] = data::load_idx(dir + "/train-images-idx3-ubyte.gz", dir + "/train-labels-idx1-ubyte.gz");
  EXPECT_EQ(x.shape(), (Shape{60000, 28, 28}));
  EXPECT_EQ(y.shape(), (Shape{60000}));
  EXPECT_EQ(x.dtype(), uint8);
  std::vector<int> counts(256);
  for (uint8_t l : y.to_vector<uint8_t>()) ++counts[l];
  for (int c = 0; c < 10; ++c) EXPECT_EQ(counts[c], 6000) << "class " << c;
  EXPECT_EQ(y.to_vector<uint8_t>()[0], 9) << "the first training image is an ankle boot";
  auto [xt, yt] = data::load_idx(dir + "/t10k-images-idx3-ubyte.gz", dir + "/t10k-labels-idx1-ubyte.gz");
  EXPECT_EQ(xt.shape(), (Shape{10000, 28, 28}));
  EXPECT_EQ(yt.shape(), (Shape{10000}));
}

}  // namespace
}  // namespace weft
