// The CUDA device: its stream-ordered caching allocator, its copy engine, its kernel context.
#include <cuda_runtime.h>
#include <gtest/gtest.h>

#include <cstring>
#include <numeric>
#include <vector>

#include "gpu_test_util.h"
#include "runtime/cuda/cuda_allocator.h"
#include "runtime/cuda/cuda_context.h"
#include "runtime/error.h"

namespace weft::gpu_test {
namespace {

// Runs without a GPU: a CPU device has no CUDA context.
TEST(CudaContext, RefusedForCpuDevices) {
  EXPECT_THROW(cuda_context(*cpu_device()), FailedPrecondition);
}

TEST(CudaContext, HasStreamCublasLtAndWorkspace) {
  WEFT_REQUIRE_GPU();
  CudaContext& cu = cuda_context(*gpu());
  EXPECT_NE(cu.stream, nullptr);
  EXPECT_NE(cu.lt, nullptr);
  EXPECT_NE(cu.workspace, nullptr);
  EXPECT_EQ(cu.workspace_bytes, kCublasLtWorkspaceBytes);
  EXPECT_EQ(cu.device, gpu()->index());
  EXPECT_GT(cu.sm_count, 0);
  EXPECT_EQ(&cuda_context(*gpu()), &cu) << "one context per device";
  int current = -1;
  ASSERT_EQ(cudaGetDevice(&current), cudaSuccess);
  EXPECT_EQ(current, cu.device);
}

TEST(CudaAllocator, KeepsStatsAndCachesFreedMemory) {
  WEFT_REQUIRE_GPU();
  Allocator& a = gpu()->allocator();
  gpu()->synchronize();
  const AllocatorStats before = a.stats();
  a.reset_peak();
  const size_t bytes = size_t{64} << 20;
  void* p = a.allocate(bytes);
  ASSERT_NE(p, nullptr);
  AllocatorStats during = a.stats();
  EXPECT_EQ(during.bytes_in_use, before.bytes_in_use + static_cast<int64_t>(bytes));
  EXPECT_GE(during.peak_bytes_in_use, during.bytes_in_use);
  EXPECT_EQ(during.num_allocs, before.num_allocs + 1);
  a.deallocate(p, bytes);
  gpu()->synchronize();  // the free completes in stream order
  AllocatorStats after = a.stats();
  EXPECT_EQ(after.bytes_in_use, before.bytes_in_use);
  EXPECT_EQ(after.peak_bytes_in_use, during.bytes_in_use);
  auto* cuda = dynamic_cast<CudaAllocator*>(&a);
  ASSERT_NE(cuda, nullptr);
  if (cuda->stream_ordered()) {
    EXPECT_GE(after.bytes_cached, static_cast<int64_t>(bytes)) << "the pool keeps freed memory";
    // The same size again comes out of the pool.
    void* q = a.allocate(bytes);
    a.deallocate(q, bytes);
    a.release_cache();
    EXPECT_LT(a.stats().bytes_cached, static_cast<int64_t>(bytes));
  }
}

// Small blocks come back from a free list of their power-of-two size with no driver call: a freed
// 100-byte block serves a 300-byte request (both 512 B), is counted as cached while listed, and
// release_cache gives it back. Data written through the reused block is the new owner's.
TEST(CudaAllocator, SmallBlocksAreReusedFromTheirSizeClass) {
  WEFT_REQUIRE_GPU();
  auto* a = dynamic_cast<CudaAllocator*>(&gpu()->allocator());
  ASSERT_NE(a, nullptr);
  a->release_cache();
  void* p = a->allocate(100);
  const int64_t cached_before = a->stats().bytes_cached;
  a->deallocate(p, 100);
  EXPECT_GE(a->stats().bytes_cached, cached_before + 512) << "the freed block is listed";
  void* q = a->allocate(300);
  EXPECT_EQ(q, p) << "same size class: the listed block";
  void* big = a->allocate(CudaAllocator::kSmallBlockMax + 1);
  EXPECT_NE(big, p);
  a->deallocate(big, CudaAllocator::kSmallBlockMax + 1);
  // Stream order: what the first owner queued is done before the second owner's writes land.
  std::vector<int32_t> first(75, 7), second(75, 9), back(75, 0);
  gpu()->copy_from_host(first.data(), q, 300);
  a->deallocate(q, 300);
  void* r = a->allocate(300);
  ASSERT_EQ(r, q);
  gpu()->copy_from_host(second.data(), r, 300);
  gpu()->copy_to_host(r, back.data(), 300);
  EXPECT_EQ(back, second);
  a->deallocate(r, 300);
  EXPECT_GE(a->small_block_bytes_cached(), 512);
  a->release_cache();
  EXPECT_EQ(a->small_block_bytes_cached(), 0) << "release_cache empties the lists";
}

// The lists hold at most kSmallCacheBytes: frees beyond it go back to the pool.
TEST(CudaAllocator, TheSmallBlockListsAreBounded) {
  WEFT_REQUIRE_GPU();
  auto* a = dynamic_cast<CudaAllocator*>(&gpu()->allocator());
  ASSERT_NE(a, nullptr);
  a->release_cache();
  const size_t block = CudaAllocator::kSmallBlockMax;
  const size_t n = static_cast<size_t>(CudaAllocator::kSmallCacheBytes) / block + 8;
  std::vector<void*> blocks;
  for (size_t i = 0; i < n; ++i) blocks.push_back(a->allocate(block));
  for (void* b : blocks) a->deallocate(b, block);
  EXPECT_EQ(a->small_block_bytes_cached(), CudaAllocator::kSmallCacheBytes) << "the rest went to the pool";
  a->release_cache();
  EXPECT_EQ(a->small_block_bytes_cached(), 0);
}

TEST(CudaAllocator, OutOfMemoryIsUnavailable) {
  WEFT_REQUIRE_GPU();
  const size_t too_much = static_cast<size_t>(gpu()->memory_bytes()) * 4;
  EXPECT_THROW(gpu()->allocator().allocate(too_much), Unavailable);
  // And the device still works afterwards.
  void* p = gpu()->allocator().allocate(1024);
  gpu()->allocator().deallocate(p, 1024);
}

// Round trips through the staging buffers, at sizes around the chunk size.
TEST(CudaCopies, RoundTripPageableMemory) {
  WEFT_REQUIRE_GPU();
  const size_t chunk = size_t{4} << 20;
  for (size_t bytes : {size_t{1}, size_t{1000}, chunk - 1, chunk, chunk + 1, 3 * chunk + 12345}) {
    std::vector<unsigned char> src(bytes), back(bytes, 0);
    for (size_t i = 0; i < bytes; ++i) src[i] = static_cast<unsigned char>(i * 131 + (i >> 12));
    void* d = gpu()->allocator().allocate(bytes);
    gpu()->copy_from_host(src.data(), d, bytes);
    gpu()->copy_to_host(d, back.data(), bytes);
    gpu()->allocator().deallocate(d, bytes);
    ASSERT_TRUE(src == back) << bytes << " bytes";
  }
}

TEST(CudaCopies, RoundTripPinnedMemoryAndDeviceCopies) {
  WEFT_REQUIRE_GPU();
  const size_t bytes = (size_t{4} << 20) + 77;
  void* pinned_src = nullptr;
  void* pinned_dst = nullptr;
  ASSERT_EQ(cudaMallocHost(&pinned_src, bytes), cudaSuccess);
  ASSERT_EQ(cudaMallocHost(&pinned_dst, bytes), cudaSuccess);
  auto* s = static_cast<unsigned char*>(pinned_src);
  for (size_t i = 0; i < bytes; ++i) s[i] = static_cast<unsigned char>(i * 7 + 3);
  std::memset(pinned_dst, 0, bytes);
  void* a = gpu()->allocator().allocate(bytes);
  void* b = gpu()->allocator().allocate(bytes);
  gpu()->copy_from_host(pinned_src, a, bytes);
  gpu()->copy_on_device(a, b, bytes);          // queued on the compute stream ...
  gpu()->copy_to_host(b, pinned_dst, bytes);   // ... which the copy waits for
  EXPECT_EQ(std::memcmp(pinned_src, pinned_dst, bytes), 0);
  gpu()->allocator().deallocate(a, bytes);
  gpu()->allocator().deallocate(b, bytes);
  cudaFreeHost(pinned_src);
  cudaFreeHost(pinned_dst);
}

// A kernel's output, freed and reallocated at once, is read back in order: the compute stream's
// work is always finished before a copy reads, and a freed block is not handed out early.
TEST(CudaCopies, ReadBackAfterKernelsAndReuse) {
  WEFT_REQUIRE_GPU();
  const int64_t n = 1 << 22;
  std::vector<float> a(n), b(n);
  std::iota(a.begin(), a.end(), 0.f);
  std::iota(b.begin(), b.end(), 1.f);
  Tensor ta = Tensor::from_host(float32, Shape{n}, a.data()), tb = Tensor::from_host(float32, Shape{n}, b.data());
  for (int round = 0; round < 3; ++round) {
    Tensor sum = run_on(*gpu(), "Add", {ta, tb}, float32, Shape{n});
    const float* s = sum.data<float>();
    for (int64_t i = 0; i < n; i += 4099) ASSERT_EQ(s[i], a[i] + b[i]) << "round " << round << " at " << i;
    ASSERT_EQ(s[n - 1], a[n - 1] + b[n - 1]);
  }
}

}  // namespace
}  // namespace weft::gpu_test
