// Large host blocks on transparent huge pages: which sizes go there, how blocks share 2 MiB
// chunks, that chunks go back to the system with their last block, and that the kernel really
// backs them with huge pages where it has them.
#include <gtest/gtest.h>

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/huge_page_blocks.h"

namespace weft {
namespace {

constexpr size_t KiB = 1024, MiB = 1024 * 1024;

uintptr_t address(const void* p) { return reinterpret_cast<uintptr_t>(p); }

bool huge_pages_disabled_here() {
  const char* env = std::getenv("WEFT_HOST_HUGE_PAGES");
  return env && std::string(env) == "0";
}

TEST(HugePageBlocks, TakesLargeBlocksThatFillAChunkOrMore) {
  if (huge_pages_disabled_here()) GTEST_SKIP() << "WEFT_HOST_HUGE_PAGES=0";
  HugePageBlocks h;
  EXPECT_FALSE(h.takes(100 * KiB));
  EXPECT_FALSE(h.takes(256 * KiB - 64));
  EXPECT_TRUE(h.takes(256 * KiB));      // 8 per chunk
  EXPECT_TRUE(h.takes(640 * KiB));      // 3 per chunk: 1.875 MiB used
  EXPECT_TRUE(h.takes(1 * MiB));        // 2 per chunk
  EXPECT_FALSE(h.takes(1280 * KiB));    // 1 per chunk would leave 37.5% unused
  EXPECT_TRUE(h.takes(1792 * KiB));     // 1 per chunk, 12.5% unused
  EXPECT_TRUE(h.takes(2 * MiB));        // a mapping of its own
  EXPECT_TRUE(h.takes(3 * MiB + 4096));
}

TEST(HugePageBlocks, BlocksShareAlignedChunksAndChunksGoBackWithTheirLastBlock) {
  if (huge_pages_disabled_here()) GTEST_SKIP() << "WEFT_HOST_HUGE_PAGES=0";
  HugePageBlocks h;
  void* a = h.allocate(1 * MiB);
  void* b = h.allocate(1 * MiB);
  EXPECT_EQ(address(a) % HugePageBlocks::kHugePage, 0u);
  EXPECT_EQ(address(b), address(a) + 1 * MiB) << "two 1 MiB blocks fill one chunk";
  EXPECT_EQ(h.mapped_bytes(), static_cast<int64_t>(2 * MiB));
  void* c = h.allocate(1 * MiB);  // the chunk is full: a new one
  EXPECT_EQ(address(c) % HugePageBlocks::kHugePage, 0u);
  EXPECT_EQ(h.mapped_bytes(), static_cast<int64_t>(4 * MiB));
  for (void* p : {a, b, c}) std::memset(p, 0x5a, 1 * MiB);
  EXPECT_TRUE(h.owns(a) && h.owns(b) && h.owns(c));

  EXPECT_TRUE(h.deallocate(a));
  EXPECT_EQ(h.mapped_bytes(), static_cast<int64_t>(4 * MiB)) << "b still lives in a's chunk";
  void* a2 = h.allocate(1 * MiB);
  EXPECT_EQ(a2, a) << "a freed slot is used before a new chunk is mapped";
  EXPECT_TRUE(h.deallocate(a2));
  EXPECT_TRUE(h.deallocate(b));
  EXPECT_EQ(h.mapped_bytes(), static_cast<int64_t>(2 * MiB));
  EXPECT_FALSE(h.owns(b));
  EXPECT_TRUE(h.deallocate(c));
  EXPECT_EQ(h.mapped_bytes(), 0);
}

TEST(HugePageBlocks, ChunksHoldOneSizeOfBlockEach) {
  if (huge_pages_disabled_here()) GTEST_SKIP() << "WEFT_HOST_HUGE_PAGES=0";
  HugePageBlocks h;
  std::vector<void*> blocks;
  for (int i = 0; i < 4; ++i) blocks.push_back(h.allocate(640 * KiB));
  void* other = h.allocate(1 * MiB);
  EXPECT_EQ(address(blocks[1]) - address(blocks[0]), 640 * KiB);
  EXPECT_EQ(address(blocks[2]) - address(blocks[0]), 1280 * KiB);
  EXPECT_EQ(address(blocks[3]) % HugePageBlocks::kHugePage, 0u) << "three 640 KiB blocks fill a chunk";
  EXPECT_EQ(address(other) % HugePageBlocks::kHugePage, 0u) << "a 1 MiB block does not go into a 640 KiB chunk";
  EXPECT_EQ(h.mapped_bytes(), static_cast<int64_t>(6 * MiB));
  for (void* p : blocks) EXPECT_TRUE(h.deallocate(p));
  EXPECT_TRUE(h.deallocate(other));
  EXPECT_EQ(h.mapped_bytes(), 0);
}

TEST(HugePageBlocks, LargeBlocksHaveAlignedMappingsOfTheirOwn) {
  if (huge_pages_disabled_here()) GTEST_SKIP() << "WEFT_HOST_HUGE_PAGES=0";
  HugePageBlocks h;
  const size_t n = 5 * MiB + 100;
  void* p = h.allocate(n);
  EXPECT_EQ(address(p) % HugePageBlocks::kHugePage, 0u);
  std::memset(p, 1, n);  // every byte is mapped
  EXPECT_GE(h.mapped_bytes(), static_cast<int64_t>(n));
  EXPECT_TRUE(h.deallocate(p));
  EXPECT_EQ(h.mapped_bytes(), 0);
}

TEST(HugePageBlocks, OtherPointersAreNotItsOwn) {
  HugePageBlocks h;
  void* m = std::malloc(4 * MiB);
  EXPECT_FALSE(h.owns(m));
  EXPECT_FALSE(h.deallocate(m));  // left alone
  std::free(m);
}

// The kernel's own account of a mapping: AnonHugePages of the smaps entry that holds `p`.
int64_t anon_huge_kib_at(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  bool inside = false;
  while (std::getline(smaps, line)) {
    uintptr_t lo = 0, hi = 0;
    char dash = 0;
    std::istringstream head(line);
    if (head >> std::hex >> lo >> dash >> hi && dash == '-') {
      inside = address(p) >= lo && address(p) < hi;
      continue;
    }
    if (inside && line.rfind("AnonHugePages:", 0) == 0) return std::stoll(line.substr(14));
  }
  return -1;
}

TEST(HugePageBlocks, TheKernelBacksThemWithHugePages) {
  if (huge_pages_disabled_here()) GTEST_SKIP() << "WEFT_HOST_HUGE_PAGES=0";
  std::ifstream mode("/sys/kernel/mm/transparent_hugepage/enabled");
  std::string modes;
  std::getline(mode, modes);
  if (modes.empty() || modes.find("[never]") != std::string::npos)
    GTEST_SKIP() << "this kernel has transparent huge pages off (" << modes << ")";
  HugePageBlocks h;
  void* p = h.allocate(4 * MiB);
  std::memset(p, 3, 4 * MiB);
  EXPECT_GT(anon_huge_kib_at(p), 0) << "THP mode: " << modes;
  h.deallocate(p);
}

TEST(CpuAllocator, LargeCachedBlocksLieOnHugePages) {
  if (huge_pages_disabled_here()) GTEST_SKIP() << "WEFT_HOST_HUGE_PAGES=0";
  CpuAllocator& a = CpuAllocator::instance();
  if (!a.caching()) GTEST_SKIP() << "caching is off (a sanitizer build): every block comes from malloc";
  void* small = a.allocate(100 * KiB);
  void* large = a.allocate(1 * MiB);
  EXPECT_FALSE(a.on_huge_pages(small));
  EXPECT_TRUE(a.on_huge_pages(large));
  EXPECT_GE(a.stats().huge_page_bytes, static_cast<int64_t>(2 * MiB));
  a.deallocate(small, 100 * KiB);
  a.deallocate(large, 1 * MiB);
}

}  // namespace
}  // namespace weft
