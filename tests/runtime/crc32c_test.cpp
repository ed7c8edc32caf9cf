// CRC32C against published vectors (RFC 3720, appendix B.4) and the hardware path against the
// portable one.
#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "runtime/crc32c.h"

namespace weft {
namespace {

TEST(Crc32c, KnownVectors) {
  const std::string check = "123456789";
  EXPECT_EQ(crc32c(check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c_extend_portable(0, check.data(), check.size()), 0xE3069283u);
  EXPECT_EQ(crc32c(nullptr, 0), 0u);

  std::vector<unsigned char> zeros(32, 0), ones(32, 0xFF), up(32), down(32);
  for (int i = 0; i < 32; ++i) up[i] = static_cast<unsigned char>(i), down[i] = static_cast<unsigned char>(31 - i);
  EXPECT_EQ(crc32c(zeros.data(), 32), 0x8A9136AAu);
  EXPECT_EQ(crc32c(ones.data(), 32), 0x62A8AB43u);
  EXPECT_EQ(crc32c(up.data(), 32), 0x46DD794Eu);
  EXPECT_EQ(crc32c(down.data(), 32), 0x113FDB5Cu);
}

TEST(Crc32c, ExtendEqualsOneCallAndPathsAgree) {
  std::mt19937 rng(7);
  std::vector<unsigned char> data(10007);
  for (auto& b : data) b = static_cast<unsigned char>(rng());
  const uint32_t whole = crc32c(data.data(), data.size());
  EXPECT_EQ(crc32c_extend_portable(0, data.data(), data.size()), whole);
  for (size_t cut : {0ul, 1ul, 7ul, 8ul, 9ul, 4096ul, 10006ul, 10007ul}) {
    uint32_t c = crc32c(data.data(), cut);
    EXPECT_EQ(crc32c_extend(c, data.data() + cut, data.size() - cut), whole) << "cut at " << cut;
    // Unaligned starts exercise the byte-at-a-time tails of both paths.
    EXPECT_EQ(crc32c(data.data() + cut % 8, 999), crc32c_extend_portable(0, data.data() + cut % 8, 999));
  }
}

}  // namespace
}  // namespace weft
