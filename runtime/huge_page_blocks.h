// Large host blocks backed by transparent huge pages (2 MiB), for the CPU allocator.
//
// Why: a tensor of a few hundred KiB or more spans hundreds of 4 KiB pages. Whatever walks them
// page by page pays per page: the kernel's cross-process copy under MPI (process_vm_readv pins
// every page of the peer's buffer; 1 MiB between two ranks here took 94 us with 4 KiB pages and
// 67 us with huge pages), and the TLB of kernels streaming through big operands. PyTorch offers
// the same for its CPU tensors (THP_MEM_ALLOC_ENABLE); here it is on by default, because weft's
// tensors cross processes on every step of a cluster job.
//
// How: a huge page must be a whole, 2 MiB-aligned part of a mapping. Blocks of 2 MiB and more get
// a mapping of their own, aligned so that every whole 2 MiB of them can be a huge page. Smaller
// blocks, from 256 KiB, are carved out of shared 2 MiB chunks, equal blocks per chunk (two of
// 1 MiB, three of 640 KiB), where that wastes at most a quarter of the chunk; other sizes are
// left to malloc. A chunk goes back to the system when its last block does. The caching
// allocator above keeps freed blocks for reuse, so these calls are rare in a steady loop.
//
// Memory use: a chunk takes its whole huge page from its first use, so a lone 1 MiB block costs
// 2 MiB of memory. WEFT_HOST_HUGE_PAGES=0 turns the whole scheme off (blocks come from malloc).
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <unordered_map>
#include <vector>

namespace weft {

class HugePageBlocks {
 public:
  static constexpr size_t kHugePage = size_t{2} << 20;
  // Blocks below this come from malloc.
  static constexpr size_t kSmallest = size_t{256} << 10;

  // Whether blocks of `bytes` are taken here (false also when WEFT_HOST_HUGE_PAGES=0).
  bool takes(size_t bytes) const;
  // A block of `bytes` (one `takes` accepts), 64-byte aligned or better. Unavailable when the
  // system has no memory for it.
  void* allocate(size_t bytes);
  // Gives `ptr` back if it is a block of this object and returns true; false (doing nothing) for
  // any other pointer.
  bool deallocate(void* ptr);
  bool owns(const void* ptr) const;
  // Bytes mapped for blocks (chunks whole), for the allocator's statistics.
  int64_t mapped_bytes() const;

 private:
  struct Chunk {
    size_t block = 0;
    std::vector<uint32_t> free_slots;
    uint32_t live = 0;
  };
  static size_t blocks_per_chunk(size_t bytes);

  bool enabled_ = enabled_by_environment();
  static bool enabled_by_environment();

  mutable std::mutex mu_;
  std::unordered_map<uintptr_t, Chunk> chunks_;                    // by base address
  std::unordered_map<size_t, std::vector<uintptr_t>> open_chunks_;  // block size -> chunks with a free slot
  std::unordered_map<uintptr_t, size_t> own_mappings_;             // blocks of 2 MiB and more
  int64_t mapped_ = 0;
};

}  // namespace weft
