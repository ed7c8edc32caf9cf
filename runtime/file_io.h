// Whole-file I/O shared by the file formats (graphs, checkpoints, .npy).
//
//   write_file_atomically("m/graph.capnp", {{head.data(), head.size()}, {body, n}}, "graph");
//   std::string bytes = read_file("m/graph.capnp", 1ull << 30, "graph");
//
// Writing is atomic: a temporary file in the same directory, fsync, rename, fsync of the
// directory, so a process killed mid-save leaves any previous file whole. Errors name the tag
// ("[graph] cannot open m/graph.capnp: No such file or directory"): NotFound for a missing
// file, Unavailable for other I/O failures, InvalidArgument for something that is not a regular
// file or is larger than the caller's bound.
#pragma once

#include <cstddef>
#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>
#include <string_view>

namespace weft {

struct ByteRange {
  const void* data;
  size_t size;
};

// Owns a POSIX file descriptor (-1: none) and closes it.
class UniqueFd {
 public:
  explicit UniqueFd(int fd) : fd_(fd) {}
  ~UniqueFd() { close(); }
  UniqueFd(const UniqueFd&) = delete;
  UniqueFd& operator=(const UniqueFd&) = delete;
  int get() const { return fd_; }
  int close();  // the result of ::close, 0 when there was nothing to close

 private:
  int fd_;
};

void write_file_atomically(const std::string& path, std::span<const ByteRange> pieces, std::string_view tag);
inline void write_file_atomically(const std::string& path, std::initializer_list<ByteRange> pieces,
                                  std::string_view tag) {
  write_file_atomically(path, std::span<const ByteRange>(pieces.begin(), pieces.size()), tag);
}

// The whole file; InvalidArgument when it is larger than max_bytes (checked before reading).
std::string read_file(const std::string& path, uint64_t max_bytes, std::string_view tag);

// Throws NotFound (ENOENT) or Unavailable: "[tag] what path: strerror".
[[noreturn]] void throw_io_error(std::string_view tag, const std::string& what, const std::string& path, int err);

}  // namespace weft
