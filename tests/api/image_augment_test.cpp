// Image augmentation in the input pipelines: Dataset::random_crop / random_flip_left_right
// (reproducible per seed, a flip mirrors, a crop is a shifted window with zeros at the border).
#include <gtest/gtest.h>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "runtime/sharded_input.h"
#include "weft/weft.h"

namespace weft {
namespace {

constexpr int64_t kN = 16, kH = 4, kW = 5, kC = 2;

// (kN, kH, kW, kC) images whose values are all distinct and non-zero, so a padded zero or a
// moved pixel is recognisable.
Tensor images() {
  std::vector<float> v(static_cast<size_t>(kN * kH * kW * kC));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<float>(i + 1);
  return constant(v, Shape{kN, kH, kW, kC});
}

float at(const std::vector<float>& img, int64_t w, int64_t y, int64_t x, int64_t c) { return img[(y * w + x) * kC + c]; }

std::vector<float> image(const Tensor& batch, int64_t i) {
  std::vector<float> all = batch.to_vector<float>();
  const int64_t size = batch.shape().num_elements() / batch.shape()[0];
  return {all.begin() + i * size, all.begin() + (i + 1) * size};
}

// Every image of one epoch, concatenated (any batching).
std::vector<float> epoch_values(const data::Dataset& ds) {
  std::vector<float> out;
  for (const std::vector<Tensor>& el : ds) {
    std::vector<float> v = el[0].to_vector<float>();
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

data::Dataset source() { return data::Dataset::from_tensors({images(), constant(std::vector<int64_t>(kN, 0), Shape{kN})}); }

TEST(ImageAugment, FlipMirrorsAboutHalfTheImages) {
  std::vector<float> out = epoch_values(source().random_flip_left_right(/*seed=*/3));
  Tensor in = images();
  int flipped = 0;
  for (int64_t i = 0; i < kN; ++i) {
    std::vector<float> a = image(in, i);
    std::vector<float> b(out.begin() + i * kH * kW * kC, out.begin() + (i + 1) * kH * kW * kC);
    if (a == b) continue;
    ++flipped;
    for (int64_t y = 0; y < kH; ++y)
      for (int64_t x = 0; x < kW; ++x)
        for (int64_t c = 0; c < kC; ++c) ASSERT_EQ(at(b, kW, y, x, c), at(a, kW, y, kW - 1 - x, c)) << i;
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, kN);
}

TEST(ImageAugment, CropIsAShiftedWindowWithZerosAtTheBorder) {
  const int64_t pad = 2;
  std::vector<float> out = epoch_values(source().random_crop(kH, kW, pad, /*seed=*/5));
  ASSERT_EQ(out.size(), static_cast<size_t>(kN * kH * kW * kC));
  Tensor in = images();
  std::set<std::pair<int64_t, int64_t>> shifts;
  for (int64_t i = 0; i < kN; ++i) {
    std::vector<float> a = image(in, i);
    std::vector<float> b(out.begin() + i * kH * kW * kC, out.begin() + (i + 1) * kH * kW * kC);
    int matches = 0;
    for (int64_t dy = -pad; dy <= pad; ++dy)
      for (int64_t dx = -pad; dx <= pad; ++dx) {
        bool ok = true;
        for (int64_t y = 0; y < kH && ok; ++y)
          for (int64_t x = 0; x < kW && ok; ++x)
            for (int64_t c = 0; c < kC && ok; ++c) {
              const int64_t sy = y + dy, sx = x + dx;
              const float want = sy >= 0 && sy < kH && sx >= 0 && sx < kW ? at(a, kW, sy, sx, c) : 0.f;
              ok = at(b, kW, y, x, c) == want;
            }
        if (ok) {
          ++matches;
          shifts.insert({dy, dx});
        }
      }
    EXPECT_EQ(matches, 1) << "image " << i << " is no shifted window of its source";
  }
  EXPECT_GT(shifts.size(), 3u);  // the offsets vary from image to image

  // A smaller window of an unpadded image: no zeros, a sub-block.
  for (const std::vector<Tensor>& el : source().batch(4).random_crop(2, 3, 0, 1)) {
    EXPECT_EQ(el[0].shape(), (Shape{4, 2, 3, kC}));
    for (float v : el[0].to_vector<float>()) EXPECT_GT(v, 0.f);
  }
}

TEST(ImageAugment, SeedsReproduceAndDiffer) {
  auto pipeline = [](int64_t seed) {
    return source().shuffle(kN, 1).random_crop(kH, kW, 1, seed).random_flip_left_right(seed + 1).batch(5);
  };
  std::vector<float> a = epoch_values(pipeline(7));
  EXPECT_EQ(a, epoch_values(pipeline(7)));
  EXPECT_NE(a, epoch_values(pipeline(8)));
  // A new epoch of the same dataset draws new crops and flips.
  data::Dataset ds = pipeline(7);
  std::vector<float> first = epoch_values(ds);
  EXPECT_EQ(first, a);
  EXPECT_NE(epoch_values(ds), first);
  // Draws follow each image's position, not the batching: augmenting before or after batch(3)
  // and through prefetch gives the same images.
  EXPECT_EQ(epoch_values(source().random_flip_left_right(4).random_crop(kH, kW, 2, 6).batch(3)),
            epoch_values(source().batch(3).random_flip_left_right(4).prefetch(2).random_crop(kH, kW, 2, 6)));
  // Unseeded pipelines differ from run to run (2 * 16 coin flips and crops).
  EXPECT_NE(epoch_values(source().random_crop(kH, kW, 2)), epoch_values(source().random_crop(kH, kW, 2)));
}

TEST(ImageAugment, AnyDTypeAndTheOtherComponentsUntouched) {
  std::vector<uint8_t> v(static_cast<size_t>(2 * 3 * 3 * 1));
  for (size_t i = 0; i < v.size(); ++i) v[i] = static_cast<uint8_t>(i + 1);
  Tensor x = constant(v, Shape{2, 3, 3, 1});
  Tensor y = constant(std::vector<int64_t>{7, 9}, Shape{2});
  int64_t n = 0;
  for (const std::vector<Tensor>& el : data::Dataset::from_tensors({x, y}).random_crop(3, 3, 1, 2).random_flip_left_right(3)) {
    EXPECT_EQ(el[0].dtype(), DType::UInt8);
    EXPECT_EQ(el[0].shape(), (Shape{3, 3, 1}));
    EXPECT_EQ(el[1].item<int64_t>(), n == 0 ? 7 : 9);
    ++n;
  }
  EXPECT_EQ(n, 2);
}

TEST(ImageAugment, ErrorsNameTheProblem) {
  EXPECT_THROW(source().random_crop(0, 4), InvalidArgument);
  EXPECT_THROW(source().random_crop(4, 4, -1), InvalidArgument);
  EXPECT_THROW(epoch_values(source().random_crop(kH + 3, kW, 1)), InvalidArgument);  // larger than padded
  EXPECT_THROW(epoch_values(source().random_flip_left_right(1, /*component=*/1)), InvalidArgument);  // rank 0 labels
  EXPECT_THROW(epoch_values(source().random_flip_left_right(1, /*component=*/2)), InvalidArgument);
}

TEST(ImageAugment, HostHelpers) {
  // A 2x3 image of 1-byte pixels, padded by 1, window 2x3 at (0, 0): shifted down-right by one.
  const char src[] = {1, 2, 3, 4, 5, 6};
  char dst[6];
  crop_padded_image(src, 2, 3, 1, 1, 0, 0, 2, 3, dst);
  EXPECT_EQ(std::vector<char>(dst, dst + 6), (std::vector<char>{0, 0, 0, 0, 1, 2}));
  crop_padded_image(src, 2, 3, 1, 1, 2, 2, 2, 3, dst);
  EXPECT_EQ(std::vector<char>(dst, dst + 6), (std::vector<char>{5, 6, 0, 0, 0, 0}));
  char img[] = {1, 2, 3, 4, 5, 6};
  flip_image_left_right(img, 2, 3, 1);
  EXPECT_EQ(std::vector<char>(img, img + 6), (std::vector<char>{3, 2, 1, 6, 5, 4}));
  EXPECT_EQ(augment_stream(1, 0, 5), augment_stream(1, 0, 5));
  EXPECT_NE(augment_stream(1, 0, 5), augment_stream(1, 1, 5));
}

// ShardedInput: examples (3, 4) uint8 with distinct non-zero values, label = index.
class ShardedAugmentTest : public ::testing::Test {
 protected:
  static constexpr int64_t kExamples = 10, kRows = 3, kCols = 4;
  void SetUp() override {
    reset_sharded_inputs();
    std::string tmpl = (std::filesystem::temp_directory_path() / "weft_augment_XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    std::vector<unsigned char> x = {0, 0, 0x08, 3, 0, 0, 0, kExamples, 0, 0, 0, kRows, 0, 0, 0, kCols};
    std::vector<unsigned char> y = {0, 0, 0x08, 1, 0, 0, 0, kExamples};
    for (int64_t i = 0; i < kExamples; ++i) {
      for (int64_t k = 0; k < kRows * kCols; ++k) x.push_back(static_cast<unsigned char>(1 + i * kRows * kCols + k));
      y.push_back(static_cast<unsigned char>(i));
    }
    images_ = write("x.idx", x);
    labels_ = write("y.idx", y);
  }
  void TearDown() override {
    reset_sharded_inputs();
    std::filesystem::remove_all(dir_);
  }
  std::string write(const std::string& name, const std::vector<unsigned char>& bytes) {
    std::string path = dir_ + "/" + name;
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char*>(bytes.data()), static_cast<std::streamsize>(bytes.size()));
    return path;
  }
  data::ShardedInput input(const std::string& source) const {
    return data::ShardedInput::idx(images_, labels_, kExamples).random_crop(1, 3).random_flip_left_right(4).source(source);
  }
  std::string dir_, images_, labels_;
};

TEST_F(ShardedAugmentTest, ExamplesAreFlippedShiftedWindows) {
  std::vector<Tensor> b = input("a").read(0, 1);
  ASSERT_EQ(b[0].shape(), (Shape{kExamples, kRows, kCols}));
  std::vector<float> f = b[0].to_vector<float>();
  std::vector<int32_t> labels = b[1].to_vector<int32_t>();
  int flipped = 0, shifted = 0;
  for (int64_t i = 0; i < kExamples; ++i) {
    const int64_t ex = labels[static_cast<size_t>(i)];
    auto src = [&](int64_t r, int64_t c) {
      return r < 0 || r >= kRows || c < 0 || c >= kCols ? 0.f : static_cast<float>(1 + ex * kRows * kCols + r * kCols + c);
    };
    int matches = 0;
    for (int flip = 0; flip < 2; ++flip)
      for (int64_t dy = -1; dy <= 1; ++dy)
        for (int64_t dx = -1; dx <= 1; ++dx) {
          bool ok = true;
          for (int64_t r = 0; r < kRows && ok; ++r)
            for (int64_t c = 0; c < kCols && ok; ++c) {
              const int64_t cc = flip ? kCols - 1 - c : c;  // the flip comes after the crop
              ok = f[static_cast<size_t>((i * kRows + r) * kCols + c)] == src(r + dy, cc + dx);
            }
          if (ok) {
            ++matches;
            flipped += flip;
            shifted += dy != 0 || dx != 0;
          }
        }
    EXPECT_EQ(matches, 1) << "example " << ex;
  }
  EXPECT_GT(flipped, 0);
  EXPECT_LT(flipped, kExamples);
  EXPECT_GT(shifted, 0);
}

TEST_F(ShardedAugmentTest, SameDrawsForAnyReplicaCountAndAcrossRuns) {
  std::vector<float> one = input("one").read(0, 1)[0].to_vector<float>();
  data::ShardedInput two = input("two");
  std::vector<float> split = two.read(0, 2)[0].to_vector<float>();
  std::vector<float> second = two.read(1, 2)[0].to_vector<float>();
  split.insert(split.end(), second.begin(), second.end());
  EXPECT_EQ(split, one);
  // Traced like eagerly.
  data::ShardedInput traced_input = input("traced");
  auto step = weft::function([&] { return traced_input.read(0, 1)[0]; });
  EXPECT_EQ(step().to_vector<float>(), one);
  // The next epoch draws again.
  EXPECT_NE(input("one").read(0, 1)[0].to_vector<float>(), one);
  reset_sharded_inputs();
  EXPECT_EQ(input("one").read(0, 1)[0].to_vector<float>(), one);
  // Other seeds, other images; no augmentation, the file's values.
  reset_sharded_inputs();
  auto other = data::ShardedInput::idx(images_, labels_, kExamples).random_crop(1, 9).random_flip_left_right(10);
  EXPECT_NE(other.read(0, 1)[0].to_vector<float>(), one);
  auto plain = data::ShardedInput::idx(images_, labels_, kExamples).random_crop(0).random_flip_left_right(-1);
  std::vector<float> p = plain.read(0, 1)[0].to_vector<float>();
  for (size_t i = 0; i < p.size(); ++i) EXPECT_EQ(p[i], static_cast<float>(i + 1));
  EXPECT_THROW(plain.random_crop(-1), InvalidArgument);
  EXPECT_THROW(plain.random_flip_left_right(-2), InvalidArgument);
}

}  // namespace
}  // namespace weft
