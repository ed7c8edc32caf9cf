#include "runtime/file_io.h"

#include <fcntl.h>
#include <sys/file.h>
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

// fail_next_write_for_testing: the step to fail (-1: none) and its errno.
std::atomic<int> g_fail_step{-1};
std::atomic<int> g_fail_errno{0};

// The errno a test asked `step` to fail with (once), else 0.
int injected_failure(WriteStep step) {
  int want = static_cast<int>(step);
  if (g_fail_step.load(std::memory_order_relaxed) != want || !g_fail_step.compare_exchange_strong(want, -1)) return 0;
  return g_fail_errno.load();
}

// Returns errno on failure, 0 on success.
int write_all(int fd, const void* data, size_t n) {
  if (int err = injected_failure(WriteStep::kWrite)) return err;
  const char* p = static_cast<const char*>(data);
  while (n > 0) {
    ssize_t w = ::write(fd, p, std::min<size_t>(n, 1 << 30));
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
  return 0;
}

bool same_file(int fd, const std::string& path) {
  struct stat a, b;
  return ::fstat(fd, &a) == 0 && ::stat(path.c_str(), &b) == 0 && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int lock(int fd, int how) {
  int rc;
  do rc = ::flock(fd, how);
  while (rc != 0 && errno == EINTR);
  return rc;
}

// "<target>.tmp-<pid>-<n>" -> "<target>"; empty for any other name.
std::string_view target_of_temporary(std::string_view name) {
  const size_t at = name.rfind(".tmp-");
  if (at == std::string_view::npos || at == 0) return {};
  std::string_view rest = name.substr(at + 5);
  const size_t dash = rest.find('-');
  auto digits = [](std::string_view d) {
    return !d.empty() && std::all_of(d.begin(), d.end(), [](char c) { return c >= '0' && c <= '9'; });
  };
  if (dash == std::string_view::npos || !digits(rest.substr(0, dash)) || !digits(rest.substr(dash + 1))) return {};
  return name.substr(0, at);
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

void fail_next_write_for_testing(WriteStep step, int err) {
  g_fail_errno = err;
  g_fail_step = static_cast<int>(step);
}

size_t remove_stale_temporaries(const std::string& directory, const std::function<bool(std::string_view)>& target) {
  namespace fs = std::filesystem;
  size_t removed = 0;
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    const std::string name = it->path().filename().string();
    const std::string_view of = target_of_temporary(name);
    if (of.empty() || !target(of)) continue;
    const std::string path = it->path().string();
    // Non-blocking and not following links: whatever sits under such a name, this only looks.
    UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK | O_NOFOLLOW));
    struct stat st;
    if (fd.get() < 0 || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) continue;
    // Locked: a writer is still at work on it. Otherwise its writer died before the rename.
    if (lock(fd.get(), LOCK_EX | LOCK_NB) != 0) continue;
    if (same_file(fd.get(), path) && ::unlink(path.c_str()) == 0) ++removed;
  }
  return removed;
}

void write_file_atomically(const std::string& path, std::span<const ByteRange> pieces, std::string_view tag) {
  namespace fs = std::filesystem;
  fs::path target(path);
  fs::path dir = target.parent_path().empty() ? fs::path(".") : target.parent_path();
  const std::string name = target.filename().string();
  remove_stale_temporaries(dir.string(), [&](std::string_view t) { return t == name; });

  // Unique per process and call, so concurrent savers never share a temporary file. Locked before
  // anything is written; a cleaner that took it for a dead writer's in the moment between the
  // open and the lock has removed the name, and the next name is tried.
  std::string tmp;
  int fd = -1;
  for (int attempt = 0; fd < 0; ++attempt) {
    tmp = path + ".tmp-" + std::to_string(::getpid()) + "-" + std::to_string(g_tmp_counter++);
    fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
    if (fd < 0) throw_io_error(tag, "cannot create", tmp, errno);
    if (lock(fd, LOCK_EX) == 0 && same_file(fd, tmp)) break;
    ::close(fd);
    fd = -1;
    if (attempt == 8) throw Unavailable("[" + std::string(tag) + "] cannot hold a temporary file for " + path);
  }
  UniqueFd owned(fd);
  // Every failure names the file being saved; the temporary goes, the previous file stays.
  auto fail = [&](const char* what, int err) {
    ::unlink(tmp.c_str());
    throw_io_error(tag, what, path, err);
  };
  for (const ByteRange& r : pieces)
    if (r.size)
      if (int err = write_all(fd, r.data, r.size)) fail("cannot write", err);
  // The data must be on disk before the rename makes it visible, or a crash could leave the new
  // name pointing at a file with holes.
  int err = injected_failure(WriteStep::kSync);
  if (!err && ::fsync(fd) != 0) err = errno;
  if (err) fail("cannot sync", err);
  // Closing a duplicate flushes as the last close would (NFS reports late write errors there),
  // while the lock, held by the original, stays until the rename is done.
  err = injected_failure(WriteStep::kClose);
  if (!err) {
    const int dup = ::dup(fd);
    if (dup < 0 || ::close(dup) != 0) err = errno;
  }
  if (err) fail("cannot close", err);
  err = injected_failure(WriteStep::kRename);
  if (!err && ::rename(tmp.c_str(), path.c_str()) != 0) err = errno;
  if (err) fail(("cannot rename " + tmp + " to").c_str(), err);
  owned.close();
  // The rename itself lives in the directory; sync it so the new name survives a power loss.
  UniqueFd dfd(::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dfd.get() >= 0) ::fsync(dfd.get());
}

std::string read_file(const std::string& path, uint64_t max_bytes, std::string_view tag) {
  // O_NONBLOCK: opening a FIFO does not wait for a writer; it is refused below as not a file.
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK));
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
