// Whole-file I/O shared by the file formats (graphs, checkpoints, .npy).
//
//   write_file_atomically("m/graph.capnp", {{head.data(), head.size()}, {body, n}}, "graph");
//   std::string bytes = read_file("m/graph.capnp", 1ull << 30, "graph");
//
// Writing is atomic: a temporary file in the same directory ("<path>.tmp-<pid>-<n>"), fsync,
// rename, fsync of the directory, so a process killed mid-save leaves any previous file whole.
// The writer holds an flock on its temporary until the rename: a temporary nobody holds was left
// by a writer that died, and the next write of the same path removes it (a lock, not a pid or an
// age, so that it also holds across hosts sharing a file system and needs no clock).
// Errors name the tag and the file ("[graph] cannot write m/graph.capnp: No space left on
// device"): NotFound for a missing file or directory, Unavailable for other I/O failures (a full
// disk among them; the previous file stays as it was), InvalidArgument for something that is not
// a regular file or is larger than the caller's bound. Reading never blocks on a FIFO.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
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

// Removes the temporaries in `directory` that write_file_atomically left behind when its process
// died, of every target file whose name `target` accepts; returns how many. Temporaries still
// being written (locked) are left alone.
size_t remove_stale_temporaries(const std::string& directory, const std::function<bool(std::string_view)>& target);

// The steps of write_file_atomically, for tests that make each fail (a full disk is easy to
// make, a failing fsync or close is not): the next write fails at `step` with errno `err`, once.
enum class WriteStep { kWrite, kSync, kClose, kRename };
void fail_next_write_for_testing(WriteStep step, int err);

// The whole file; InvalidArgument when it is larger than max_bytes (checked before reading).
std::string read_file(const std::string& path, uint64_t max_bytes, std::string_view tag);

// Throws NotFound (ENOENT) or Unavailable: "[tag] what path: strerror".
[[noreturn]] void throw_io_error(std::string_view tag, const std::string& what, const std::string& path, int err);

}  // namespace weft
