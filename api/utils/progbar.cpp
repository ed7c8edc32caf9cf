#include "api/utils/progbar.h"

#include <unistd.h>

#include <cmath>

namespace weft::utils {

namespace {
std::string duration(double s) {
  char buf[32];
  if (s >= 3600) std::snprintf(buf, sizeof buf, "%d:%02d:%02d", int(s) / 3600, int(s) % 3600 / 60, int(s) % 60);
  else if (s >= 60) std::snprintf(buf, sizeof buf, "%d:%02d", int(s) / 60, int(s) % 60);
  else std::snprintf(buf, sizeof buf, "%ds", int(std::lround(s)));
  return buf;
}
}  // namespace

Progbar::Progbar(int64_t target, std::string title, std::FILE* out, int interactive)
    : target_(target), title_(std::move(title)), out_(out),
      interactive_(interactive < 0 ? isatty(fileno(out)) != 0 : interactive != 0),
      start_(std::chrono::steady_clock::now()), last_draw_(start_) {}

std::string Progbar::metrics(const std::vector<std::pair<std::string, double>>& values) const {
  std::string s;
  char buf[64];
  for (const auto& [name, v] : values) {
    std::snprintf(buf, sizeof buf, " - %s: %.4f", name.c_str(), v);
    s += buf;
  }
  return s;
}

void Progbar::update(int64_t current, const std::vector<std::pair<std::string, double>>& values) {
  if (finished_) return;
  auto now = std::chrono::steady_clock::now();
  double elapsed = std::chrono::duration<double>(now - start_).count();
  bool done = current >= target_;
  std::string head = title_.empty() ? "" : title_ + "  ";
  if (!interactive_) {
    if (done) {
      double per_step = current > 0 ? elapsed / current : 0;
      std::fprintf(out_, "%s%lld/%lld - %s %.0fms/step%s\n", head.c_str(), static_cast<long long>(current),
                   static_cast<long long>(target_), duration(elapsed).c_str(), per_step * 1e3, metrics(values).c_str());
      std::fflush(out_);
      finished_ = true;
    }
    return;
  }
  // Redraw at most 20 times a second: a terminal write per step would cost more than the step.
  if (!done && std::chrono::duration<double>(now - last_draw_).count() < 0.05) return;
  last_draw_ = now;
  const int width = 30;
  int filled = target_ > 0 ? static_cast<int>(width * std::min<double>(1.0, double(current) / double(target_))) : width;
  std::string bar(static_cast<size_t>(filled), '=');
  if (!done && filled < width) bar += '>';
  bar.resize(width, '.');
  std::string tail;
  if (done) {
    char buf[64];
    std::snprintf(buf, sizeof buf, " - %s %.0fms/step", duration(elapsed).c_str(), current > 0 ? elapsed / current * 1e3 : 0.0);
    tail = buf;
  } else {
    double eta = current > 0 ? elapsed / current * (target_ - current) : 0;
    tail = " - ETA: " + duration(eta);
  }
  std::fprintf(out_, "\r%s%lld/%lld [%s]%s%s\033[K", head.c_str(), static_cast<long long>(current),
               static_cast<long long>(target_), bar.c_str(), tail.c_str(), metrics(values).c_str());
  if (done) {
    std::fprintf(out_, "\n");
    finished_ = true;
  }
  std::fflush(out_);
}

}  // namespace weft::utils
