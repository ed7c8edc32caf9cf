#include "api/checkpoint/checkpoint_manager.h"

#include <algorithm>
#include <charconv>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <system_error>

#include "runtime/file_io.h"

namespace weft {

namespace fs = std::filesystem;

namespace {

constexpr char kSuffix[] = ".safetensors";

// "<prefix>-<n>.safetensors" -> n; -1 for anything else (temporary files, other prefixes).
int64_t number_of(const std::string& file, const std::string& prefix) {
  const std::string head = prefix + "-";
  const size_t suffix = sizeof(kSuffix) - 1;
  if (file.size() <= head.size() + suffix || file.compare(0, head.size(), head) != 0 ||
      file.compare(file.size() - suffix, suffix, kSuffix) != 0)
    return -1;
  const char* first = file.data() + head.size();
  const char* last = file.data() + file.size() - suffix;
  int64_t n = -1;
  auto [end, err] = std::from_chars(first, last, n);
  if (err != std::errc() || end != last || n < 0 || *first == '+') return -1;
  return n;
}

std::vector<std::pair<int64_t, std::string>> scan_dir(const std::string& directory, const std::string& prefix) {
  std::vector<std::pair<int64_t, std::string>> out;
  std::error_code ec;
  for (fs::directory_iterator it(directory, ec), end; !ec && it != end; it.increment(ec)) {
    int64_t n = number_of(it->path().filename().string(), prefix);
    if (n >= 0 && it->is_regular_file(ec)) out.emplace_back(n, it->path().string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

}  // namespace

void CheckpointManager::remove_stale_temporaries() const {
  // Any checkpoint's, not only the one about to be written: a save killed while writing number 7
  // leaves a temporary that no later save of number 7 may come to remove.
  weft::remove_stale_temporaries(directory_, [&](std::string_view target) { return number_of(std::string(target), prefix_) >= 0; });
}

CheckpointManager::CheckpointManager(Checkpoint checkpoint, std::string directory, int max_to_keep, std::string prefix)
    : checkpoint_(std::move(checkpoint)), directory_(std::move(directory)), max_to_keep_(max_to_keep), prefix_(std::move(prefix)) {
  if (max_to_keep_ < 1)
    throw InvalidArgument("[checkpoint] max_to_keep must be at least 1, got " + std::to_string(max_to_keep_));
  if (prefix_.empty() || prefix_.find('/') != std::string::npos)
    throw InvalidArgument("[checkpoint] prefix '" + prefix_ + "' must be a non-empty file name");
  if (directory_.empty()) throw InvalidArgument("[checkpoint] CheckpointManager needs a directory");
  std::error_code ec;
  fs::create_directories(directory_, ec);
  if (ec) throw Unavailable("[checkpoint] cannot create directory " + directory_ + ": " + ec.message());
}

std::vector<CheckpointManager::Numbered> CheckpointManager::scan() const {
  std::vector<Numbered> out;
  for (auto& [n, path] : scan_dir(directory_, prefix_)) out.push_back({n, path});
  return out;
}

std::string CheckpointManager::save() {
  auto existing = scan();
  return save(existing.empty() ? 1 : existing.back().number + 1);
}

std::string CheckpointManager::save(int64_t checkpoint_number) {
  if (checkpoint_number < 0)
    throw InvalidArgument("[checkpoint] checkpoint numbers are non-negative, got " + std::to_string(checkpoint_number));
  std::string path = (fs::path(directory_) / (prefix_ + "-" + std::to_string(checkpoint_number) + kSuffix)).string();
  remove_stale_temporaries();
  checkpoint_.save(path, {{"checkpoint_number", std::to_string(checkpoint_number)}});
  // Only after the new file is complete: a crash before this point loses no old checkpoint.
  auto all = scan();
  for (size_t i = 0; i + max_to_keep_ < all.size(); ++i) {
    std::error_code ec;
    fs::remove(all[i].path, ec);  // a checkpoint that cannot be deleted is merely kept
  }
  return path;
}

std::vector<std::string> CheckpointManager::checkpoints() const {
  std::vector<std::string> out;
  for (const Numbered& c : scan()) out.push_back(c.path);
  return out;
}

std::string CheckpointManager::latest_checkpoint() const { return weft::latest_checkpoint(directory_, prefix_); }

std::string CheckpointManager::restore_or_initialize(const RestoreOptions& options) {
  remove_stale_temporaries();
  const auto all = scan();
  // Newest first. A damaged file (DataLoss: truncated, a checksum that does not match) is passed
  // over for the one before it, loudly; any other error (a checkpoint of another model, a missing
  // variable) is the caller's to see. A failed restore changes no variable.
  std::string damaged;
  for (auto it = all.rbegin(); it != all.rend(); ++it) {
    try {
      checkpoint_.restore(it->path, options);
      return it->path;
    } catch (const DataLoss& e) {
      std::cerr << "weft: warning: [checkpoint] " << it->path << " is damaged, "
                << (std::next(it) == all.rend() ? "and there is no older checkpoint" : "restoring the one before it")
                << ": " << e.what() << "\n";
      damaged += (damaged.empty() ? "" : ", ") + it->path;
    }
  }
  if (!damaged.empty())
    throw DataLoss("[checkpoint] every checkpoint in " + directory_ + " is damaged: " + damaged);
  return "";
}

std::string latest_checkpoint(const std::string& directory, const std::string& prefix) {
  auto all = scan_dir(directory, prefix);
  return all.empty() ? std::string() : all.back().second;
}

}  // namespace weft
