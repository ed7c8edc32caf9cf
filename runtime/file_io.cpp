#include "runtime/file_io.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cerrno>
#include <cstring>
#include <filesystem>

#include "runtime/error.h"

namespace weft {

namespace {

std::atomic<uint64_t> g_tmp_counter{0};

void write_all(int fd, const void* data, size_t n, const std::string& path, std::string_view tag) {
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, 1 << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      throw_io_error(tag, "cannot write", path, errno);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

}  // namespace

int UniqueFd::close() {
  int rc = fd_ >= 0 ? ::close(fd_) : 0;
  fd_ = -1;
  return rc;
}

void throw_io_error(std::string_view tag, const std::string& what, const std::string& path, int err) {
  std::string msg = "[" + std::string(tag) + "] " + what + " " + path + ": " + std::strerror(err);
  if (err == ENOENT) throw NotFound(msg);
  throw Unavailable(msg);
}

void write_file_atomically(const std::string& path, std::span<const ByteRange> pieces, std::string_view tag) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  // Unique per process and call, so concurrent savers never share a temporary file.
  std::string tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_tmp_counter++);
  {
    UniqueFd fd(::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644));
    if (fd.get() < 0) throw_io_error(tag, "cannot create", tmp, errno);
    try {
      for (const ByteRange& r : pieces)
        if (r.size) write_all(fd.get(), r.data, r.size, tmp, tag);
      // The data must be on disk before the rename makes it visible, or a crash could leave
      // the new name pointing at a file with holes.
      if (::fsync(fd.get()) != 0) throw_io_error(tag, "cannot sync", tmp, errno);
      if (fd.close() != 0) throw_io_error(tag, "cannot close", tmp, errno);
    } catch (...) {
      ::unlink(tmp.c_str());
      throw;
    }
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    int err = errno;
    ::unlink(tmp.c_str());
    throw_io_error(tag, "cannot rename " + tmp + " to", path, err);
  }
  // The rename itself lives in the directory; sync it so the new name survives a power loss.
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) ::fsync(dfd.get());
}

std::string read_file(const std::string& path, uint64_t max_bytes, std::string_view tag) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC));
  if (fd.get() < 0) throw_io_error(tag, "cannot open", path, errno);
  struct stat st;
  if (::fstat(fd.get(), &st) != 0) throw_io_error(tag, "cannot stat", path, errno);
  if (!S_ISREG(st.st_mode)) throw InvalidArgument("[" + std::string(tag) + "] " + path + " is not a regular file");
  const uint64_t size = static_cast<uint64_t>(st.st_size);
  if (size > max_bytes)
    throw InvalidArgument("[" + std::string(tag) + "] " + path + " has " + std::to_string(size) +
                          " bytes, more than the limit of " + std::to_string(max_bytes));
  std::string out(size, '\0');
  size_t done = 0;
  while (done < size) {
    ssize_t r = ::read(fd.get(), out.data() + done, std::min<size_t>(size - done, 1 << 30));
    if (r < 0) {
      if (errno == EINTR) continue;
      throw_io_error(tag, "cannot read", path, errno);
    }
    if (r == 0) break;  // the file shrank while being read: return what is there
    done += static_cast<size_t>(r);
  }
  out.resize(done);
  return out;
}

}  // namespace weft
