// What the timeline costs the executor: a traced chain of eight 2x2 matmuls (a call of a few
// microseconds, most of it executor, eight nodes), called many times with recording off and on.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <vector>

#include "runtime/timeline.h"
#include "weft/weft.h"

using namespace weft;

namespace {

// The best of several repetitions; the recorded events are dropped between them, untimed.
double us_per_call(const std::function<void()>& call, int calls) {
  double best = 1e30;
  for (int rep = 0; rep < 7; ++rep) {
    const auto t0 = std::chrono::steady_clock::now();
    for (int i = 0; i < calls; ++i) call();
    const auto t1 = std::chrono::steady_clock::now();
    best = std::min(best, std::chrono::duration<double, std::micro>(t1 - t0).count() / calls);
    (void)timeline::take_events();
  }
  return best;
}

}  // namespace

int main() {
  const Tensor a = constant({{1.f, -2.f}, {3.f, -4.f}}), b = constant({{0.5f, 0.f}, {0.f, 0.5f}});
  auto f = function([](const Tensor& x, const Tensor& w) {
    Tensor h = x;
    for (int i = 0; i < 8; ++i) h = matmul(h, w);
    return h;
  });
  (void)f(a, b);
  const int calls = 50000;
  const double off = us_per_call([&] { (void)f(a, b); }, calls);
  timeline::set_enabled(true);
  const double on = us_per_call([&] { (void)f(a, b); }, calls);
  timeline::set_enabled(false);
  std::printf("%-44s %10s\n", "traced chain of 8 matmuls, 2x2", "us/call");
  std::printf("%-44s %10.3f\n", "timeline off", off);
  std::printf("%-44s %10.3f\n", "timeline on (recording every kernel)", on);
  return 0;
}
