#include "runtime/timeline.h"

#include <algorithm>
#include <chrono>
#include <mutex>

namespace weft::timeline {

namespace detail {
std::atomic<bool> g_enabled{false};
}

namespace {

// One buffer for the process: events are recorded once per kernel at most, so a mutex costs far
// less than the kernel it records, and keeps take_events simple and exact.
struct Buffer {
  std::mutex mu;
  std::vector<Event> events;
  size_t dropped = 0;
};

Buffer& buffer() {
  static Buffer* b = new Buffer;  // never destroyed: threads may record during exit
  return *b;
}

void push(Event&& e) {
  Buffer& b = buffer();
  std::lock_guard lock(b.mu);
  if (b.events.size() >= kMaxEvents) {
    ++b.dropped;
    return;
  }
  b.events.push_back(std::move(e));
}

}  // namespace

void set_enabled(bool on) { detail::g_enabled.store(on, std::memory_order_relaxed); }

int64_t now_us() {
  return std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

void record(std::string_view name, std::string_view category, std::string_view track, int64_t start_us,
            int64_t end_us, Args args) {
  if (!enabled()) return;
  push(Event{std::string(name), std::string(category), std::string(track), start_us,
             end_us > start_us ? end_us - start_us : 0, std::move(args)});
}

std::vector<Event> take_events() {
  Buffer& b = buffer();
  std::lock_guard lock(b.mu);
  std::vector<Event> out = std::move(b.events);
  b.events.clear();
  b.dropped = 0;
  return out;
}

size_t dropped_events() {
  Buffer& b = buffer();
  std::lock_guard lock(b.mu);
  return b.dropped;
}

Span::Span(std::string_view name, std::string_view category, std::string_view track, Args args) {
  if (!enabled()) return;
  event_.name = name;
  event_.category = category;
  event_.track = track;
  event_.args = std::move(args);
  start_us_ = now_us();
}

Span::~Span() {
  if (start_us_ < 0) return;
  event_.start_us = start_us_;
  event_.duration_us = std::max<int64_t>(0, now_us() - start_us_);
  // Recorded even if recording stopped meanwhile: the span began while it was on.
  push(std::move(event_));
}

}  // namespace weft::timeline
