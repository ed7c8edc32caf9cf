// A Keras-style progress bar for training loops.
//
//   utils::Progbar bar(steps_per_epoch, "Epoch 1/5");
//   for (...) bar.update(step + 1, {{"loss", loss}, {"accuracy", acc}});
//
// On a terminal it redraws one line in place:
//   Epoch 1/5  1200/1875 [==================>...........] - ETA: 2s - loss: 0.5123 - accuracy: 0.8201
// When the output is not a terminal (a log file, CI) it prints one plain line when the epoch ends.
#pragma once

#include <chrono>
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

namespace weft::utils {

class Progbar {
 public:
  // `out` defaults to stdout; `interactive` defaults to whether `out` is a terminal.
  explicit Progbar(int64_t target, std::string title = "", std::FILE* out = stdout, int interactive = -1);
  void update(int64_t current, const std::vector<std::pair<std::string, double>>& values = {});

 private:
  std::string metrics(const std::vector<std::pair<std::string, double>>& values) const;
  int64_t target_;
  std::string title_;
  std::FILE* out_;
  bool interactive_;
  std::chrono::steady_clock::time_point start_, last_draw_;
  bool finished_ = false;
};

}  // namespace weft::utils
