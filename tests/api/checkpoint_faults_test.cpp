// Checkpoints under faults: temporaries of killed saves removed by the next save or restore, a
// full disk and every failing step of a save (write, fsync, close, rename) an Unavailable naming
// the file with the previous checkpoint intact, and restore_or_initialize passing over a damaged
// newest checkpoint. (A save killed by a signal: checkpoint_test.cpp.)
#include <gtest/gtest.h>
#include <sys/file.h>
#include <sys/mount.h>
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>

#include "runtime/file_io.h"
#include "temp_dir.h"
#include "weft/weft.h"

namespace weft {
namespace {

namespace fs = std::filesystem;
using testing::TempDir;

int temporaries_in(const std::string& dir) {
  int n = 0;
  for (auto& e : fs::directory_iterator(dir)) n += e.path().filename().string().find(".tmp-") != std::string::npos;
  return n;
}

template <class E, class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const E& e) {
    return e.what();
  } catch (const std::exception& e) {
    ADD_FAILURE() << "wrong error: " << e.what();
    return "";
  }
  ADD_FAILURE() << "no error";
  return "";
}

TEST(CheckpointFaults, StaleTemporariesGoOnTheNextSaveOrRestore) {
  TempDir dir("weft_ckpt_faults");
  Variable w(constant(1.f), "w");
  Checkpoint ckpt({{"w", w}});
  const std::string run = dir.file("run");
  CheckpointManager manager(ckpt, run, 3);
  manager.save();
  // Left by saves that died: of this manager's checkpoints (any number), of another prefix, and
  // one still being written (its writer holds the lock).
  for (const char* name : {"ckpt-2.safetensors.tmp-123-0", "ckpt-7.safetensors.tmp-99999-4", "other-2.safetensors.tmp-1-0"})
    std::ofstream(run + "/" + name) << "partial";
  const std::string busy = run + "/ckpt-2.safetensors.tmp-55-1";
  const int held = ::open(busy.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
  ASSERT_GE(held, 0);
  ASSERT_EQ(::flock(held, LOCK_EX), 0);

  EXPECT_EQ(manager.restore_or_initialize(), run + "/ckpt-1.safetensors");
  EXPECT_FALSE(fs::exists(run + "/ckpt-2.safetensors.tmp-123-0"));
  EXPECT_FALSE(fs::exists(run + "/ckpt-7.safetensors.tmp-99999-4"));
  EXPECT_TRUE(fs::exists(run + "/other-2.safetensors.tmp-1-0")) << "another prefix's files are not the manager's";
  EXPECT_TRUE(fs::exists(busy)) << "a temporary whose writer lives must stay";

  ::close(held);  // its writer "dies"
  std::ofstream(run + "/ckpt-5.safetensors.tmp-1-2") << "partial";
  manager.save();
  EXPECT_FALSE(fs::exists(busy));
  EXPECT_FALSE(fs::exists(run + "/ckpt-5.safetensors.tmp-1-2"));

  // A plain Checkpoint::save removes the leftovers of its own file.
  const std::string file = dir.file("plain.safetensors");
  std::ofstream(file + ".tmp-8-8") << "partial";
  ckpt.save(file);
  EXPECT_FALSE(fs::exists(file + ".tmp-8-8"));
}

// Each step of a save fails once, as a full disk, a failing device or an NFS server would make it.
TEST(CheckpointFaults, EveryFailingStepIsUnavailableNamingTheFileAndKeepsThePrevious) {
  TempDir dir("weft_ckpt_faults");
  Variable w(constant(std::vector<float>{1, 2, 3}, {3}), "w");
  Checkpoint ckpt({{"w", w}});
  CheckpointManager manager(ckpt, dir.file("run"), 3);
  const std::string first = manager.save();
  const std::string second = dir.file("run/ckpt-2.safetensors");
  w.assign(constant(std::vector<float>{7, 8, 9}, {3}));
  const std::pair<WriteStep, int> faults[] = {{WriteStep::kWrite, ENOSPC}, {WriteStep::kWrite, EIO},
                                              {WriteStep::kSync, EIO},     {WriteStep::kClose, EDQUOT},
                                              {WriteStep::kRename, EIO}};
  for (const auto& [step, err] : faults) {
    SCOPED_TRACE("step " + std::to_string(static_cast<int>(step)) + ", " + std::strerror(err));
    fail_next_write_for_testing(step, err);
    const std::string what = error_of<Unavailable>([&] { manager.save(); });
    EXPECT_NE(what.find(second), std::string::npos) << what;
    EXPECT_NE(what.find(std::strerror(err)), std::string::npos) << what;
    EXPECT_EQ(manager.checkpoints(), std::vector<std::string>{first});
    EXPECT_EQ(temporaries_in(dir.file("run")), 0);
  }
  w.assign(constant(std::vector<float>{0, 0, 0}, {3}));
  EXPECT_EQ(manager.restore_or_initialize(), first);
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 2, 3}));
}

// A real full disk: a tmpfs of 1 MiB (needs the right to mount; skipped where there is none).
TEST(CheckpointFaults, FullDiskIsUnavailableNamingTheFileAndKeepsThePrevious) {
  TempDir dir("weft_ckpt_disk");
  if (::mount("tmpfs", dir.path().c_str(), "tmpfs", 0, "size=1m") != 0)
    GTEST_SKIP() << "cannot mount a small tmpfs here (" << std::strerror(errno) << "; needs root or CAP_SYS_ADMIN)";
  struct Unmount {
    std::string path;
    ~Unmount() { ::umount2(path.c_str(), MNT_DETACH); }
  } unmount{dir.path()};
  Variable small(constant(std::vector<float>(1000, 1.f), {1000}), "v");
  Checkpoint ckpt({{"v", small}});
  CheckpointManager manager(ckpt, dir.file("run"), 5);
  const std::string first = manager.save();
  small.assign(constant(std::vector<float>(1000, 2.f), {1000}));
  // 2 MB more does not fit.
  Variable big(Tensor::empty(float32, {1 << 19}), "big");
  std::fill_n(big.value_for_update().data<float>(), 1 << 19, 3.f);
  Checkpoint both({{"v", small}, {"big", big}});
  CheckpointManager big_manager(both, dir.file("run"), 5);
  const std::string what = error_of<Unavailable>([&] { big_manager.save(); });
  EXPECT_NE(what.find(dir.file("run/ckpt-2.safetensors")), std::string::npos) << what;
  EXPECT_NE(what.find(std::strerror(ENOSPC)), std::string::npos) << what;
  EXPECT_EQ(temporaries_in(dir.file("run")), 0);
  EXPECT_EQ(manager.restore_or_initialize(), first);
  EXPECT_EQ(small.value().to_vector<float>(), std::vector<float>(1000, 1.f));
}

void damage(const std::string& path, bool truncate) {
  std::string bytes;
  {
    std::ifstream in(path, std::ios::binary);
    bytes.assign(std::istreambuf_iterator<char>(in), {});
  }
  if (truncate) bytes.resize(bytes.size() / 2);
  else bytes[bytes.size() - 2] ^= 0x10;  // inside the last tensor: its checksum no longer matches
  std::ofstream(path, std::ios::binary | std::ios::trunc) << bytes;
}

TEST(CheckpointFaults, RestorePassesOverDamagedCheckpointsNamingThem) {
  TempDir dir("weft_ckpt_faults");
  Variable w(constant(std::vector<float>{0, 0}, {2}), "w");
  Checkpoint ckpt({{"w", w}});
  CheckpointManager manager(ckpt, dir.file("run"), 5);
  std::vector<std::string> saved;
  for (float i = 1; i <= 3; ++i) {
    w.assign(constant(std::vector<float>{i, i}, {2}));
    saved.push_back(manager.save());
  }
  damage(saved[2], /*truncate=*/false);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(manager.restore_or_initialize(), saved[1]);
  std::string warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find("warning"), std::string::npos) << warned;
  EXPECT_NE(warned.find(saved[2]), std::string::npos) << warned;
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{2, 2}));

  damage(saved[1], /*truncate=*/true);
  ::testing::internal::CaptureStderr();
  EXPECT_EQ(manager.restore_or_initialize(), saved[0]);
  warned = ::testing::internal::GetCapturedStderr();
  EXPECT_NE(warned.find(saved[1]), std::string::npos) << warned;
  EXPECT_NE(warned.find(saved[2]), std::string::npos) << warned;
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{1, 1}));

  // With none left whole, the error names every one; the variable is left as it was.
  damage(saved[0], /*truncate=*/true);
  w.assign(constant(std::vector<float>{5, 5}, {2}));
  ::testing::internal::CaptureStderr();
  const std::string what = error_of<DataLoss>([&] { manager.restore_or_initialize(); });
  ::testing::internal::GetCapturedStderr();
  for (const std::string& p : saved) EXPECT_NE(what.find(p), std::string::npos) << what;
  EXPECT_EQ(w.value().to_vector<float>(), (std::vector<float>{5, 5}));
}

TEST(CheckpointFaults, ACheckpointOfAnotherModelIsNotPassedOver) {
  TempDir dir("weft_ckpt_faults");
  Variable w(constant(std::vector<float>{1, 2}, {2}), "w");
  CheckpointManager(Checkpoint({{"w", w}}), dir.file("run"), 5).save();
  Variable wide(constant(std::vector<float>{1, 2, 3}, {3}), "w");
  CheckpointManager other(Checkpoint({{"w", wide}}), dir.file("run"), 5);
  // Not damage: the caller's model does not match. An error, not a silent fresh start.
  error_of<InvalidArgument>([&] { other.restore_or_initialize(); });
}

}  // namespace
}  // namespace weft
