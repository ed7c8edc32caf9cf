#include "runtime/huge_page_blocks.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <string>

#include "runtime/error.h"

namespace weft {

namespace {

size_t round_up(size_t n, size_t to) { return (n + to - 1) / to * to; }

// `bytes` (a multiple of the system page) of fresh memory starting on a 2 MiB boundary, advised
// to be backed by huge pages.
void* map_aligned(size_t bytes) {
  const size_t span = bytes + HugePageBlocks::kHugePage;
  void* raw = mmap(nullptr, span, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (raw == MAP_FAILED)
    throw Unavailable("[allocator] out of host memory mapping " + std::to_string(bytes) + " bytes: " +
                      std::strerror(errno));
  const auto start = reinterpret_cast<uintptr_t>(raw);
  const uintptr_t aligned = round_up(start, HugePageBlocks::kHugePage);
  // Trim the mapping to [aligned, aligned + bytes): what is cut off was never touched.
  if (aligned > start) munmap(raw, aligned - start);
  const uintptr_t end = start + span;
  if (end > aligned + bytes) munmap(reinterpret_cast<void*>(aligned + bytes), end - (aligned + bytes));
  // Refused where the kernel has no transparent huge pages: the block then works with small pages.
  (void)madvise(reinterpret_cast<void*>(aligned), bytes, MADV_HUGEPAGE);
  return reinterpret_cast<void*>(aligned);
}

size_t system_page() {
  static const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return page;
}

}  // namespace

bool HugePageBlocks::enabled_by_environment() {
  const char* v = std::getenv("WEFT_HOST_HUGE_PAGES");
  return !(v && std::string(v) == "0");
}

size_t HugePageBlocks::blocks_per_chunk(size_t bytes) {
  if (bytes < kSmallest || bytes >= kHugePage) return 0;
  const size_t n = kHugePage / bytes;
  return n * bytes * 4 >= kHugePage * 3 ? n : 0;  // at most a quarter of the chunk unused
}

bool HugePageBlocks::takes(size_t bytes) const {
  return enabled_ && bytes >= kSmallest && (bytes >= kHugePage || blocks_per_chunk(bytes) > 0);
}

void* HugePageBlocks::allocate(size_t bytes) {
  if (bytes >= kHugePage) {
    const size_t mapped = round_up(bytes, system_page());
    void* p = map_aligned(mapped);
    std::lock_guard lock(mu_);
    own_mappings_.emplace(reinterpret_cast<uintptr_t>(p), mapped);
    mapped_ += static_cast<int64_t>(mapped);
    return p;
  }
  const size_t per_chunk = blocks_per_chunk(bytes);
  if (per_chunk == 0) throw Internal("[allocator] no huge-page chunk holds blocks of " + std::to_string(bytes) + " bytes");
  std::lock_guard lock(mu_);
  std::vector<uintptr_t>& open = open_chunks_[bytes];
  if (open.empty()) {
    const auto base = reinterpret_cast<uintptr_t>(map_aligned(kHugePage));
    Chunk& c = chunks_[base];
    c.block = bytes;
    for (size_t i = per_chunk; i-- > 0;) c.free_slots.push_back(static_cast<uint32_t>(i));  // slot 0 first
    open.push_back(base);
    mapped_ += static_cast<int64_t>(kHugePage);
  }
  const uintptr_t base = open.back();
  Chunk& c = chunks_.at(base);
  const uint32_t slot = c.free_slots.back();
  c.free_slots.pop_back();
  ++c.live;
  if (c.free_slots.empty()) open.pop_back();
  return reinterpret_cast<void*>(base + slot * c.block);
}

bool HugePageBlocks::deallocate(void* ptr) {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::unique_lock lock(mu_);
  if (auto own = own_mappings_.find(p); own != own_mappings_.end()) {
    const size_t mapped = own->second;
    own_mappings_.erase(own);
    mapped_ -= static_cast<int64_t>(mapped);
    lock.unlock();
    munmap(ptr, mapped);
    return true;
  }
  const uintptr_t base = p & ~(kHugePage - 1);
  auto it = chunks_.find(base);
  if (it == chunks_.end()) return false;
  Chunk& c = it->second;
  std::vector<uintptr_t>& open = open_chunks_[c.block];
  if (c.free_slots.empty()) open.push_back(base);
  c.free_slots.push_back(static_cast<uint32_t>((p - base) / c.block));
  if (--c.live > 0) return true;
  // The chunk's last block: the chunk goes back to the system.
  open.erase(std::find(open.begin(), open.end(), base));
  chunks_.erase(it);
  mapped_ -= static_cast<int64_t>(kHugePage);
  lock.unlock();
  munmap(reinterpret_cast<void*>(base), kHugePage);
  return true;
}

bool HugePageBlocks::owns(const void* ptr) const {
  const auto p = reinterpret_cast<uintptr_t>(ptr);
  std::lock_guard lock(mu_);
  return own_mappings_.count(p) || chunks_.count(p & ~(kHugePage - 1));
}

int64_t HugePageBlocks::mapped_bytes() const {
  std::lock_guard lock(mu_);
  return mapped_;
}

}  // namespace weft
