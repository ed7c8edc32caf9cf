// CheckpointManager: numbered checkpoints in a directory, the newest `max_to_keep` kept.
//
//   CheckpointManager manager(ckpt, "run", /*max_to_keep=*/3);
//   manager.restore_or_initialize();          // resumes from the newest, if any
//   for (...) { train(); manager.save(); }    // run/ckpt-1.safetensors, ckpt-2, ...
//
// The directory itself is the index: checkpoints are the files named <prefix>-<n>.safetensors,
// ordered by n. Each is written atomically, so a crash at any moment leaves only complete
// checkpoints under those names, and nothing separate can disagree with the files. Temporaries
// of a save that was killed are removed by the next save or restore (runtime/file_io.h).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "api/checkpoint/checkpoint.h"

namespace weft {

class CheckpointManager {
 public:
  // The directory is created when missing. max_to_keep >= 1.
  CheckpointManager(Checkpoint checkpoint, std::string directory, int max_to_keep = 5, std::string prefix = "ckpt");

  // Saves as number one past the newest in the directory (1 in an empty one), deletes the
  // oldest beyond max_to_keep, and returns the new file's path.
  std::string save();
  std::string save(int64_t checkpoint_number);

  // The newest checkpoint's path, "" when there is none.
  std::string latest_checkpoint() const;
  // Every checkpoint's path, oldest first.
  std::vector<std::string> checkpoints() const;
  // Restores the newest checkpoint and returns its path; "" (and nothing restored) if none. A
  // damaged checkpoint (DataLoss) is passed over for the one before it, with a warning on stderr
  // naming it; DataLoss naming them when every one is damaged.
  std::string restore_or_initialize(const RestoreOptions& options = {});

  const Checkpoint& checkpoint() const { return checkpoint_; }
  const std::string& directory() const { return directory_; }

 private:
  struct Numbered {
    int64_t number;
    std::string path;
  };
  std::vector<Numbered> scan() const;
  void remove_stale_temporaries() const;

  Checkpoint checkpoint_;
  std::string directory_;
  int max_to_keep_;
  std::string prefix_;
};

// The newest "<prefix>-<n>.safetensors" in `directory`, "" when there is none (or no directory).
std::string latest_checkpoint(const std::string& directory, const std::string& prefix = "ckpt");

}  // namespace weft
