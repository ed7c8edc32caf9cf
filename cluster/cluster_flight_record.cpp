// The chief's side of the flight recorder (runtime/flight_recorder.h): when a step stalls or fails,
// every live task's ring is gathered, with the chief's own, into one file (cluster/flight_record.h).
//
// Clocks: each task's times are moved onto the chief's clock as the profiler's are
// (cluster/cluster_timeline.cpp): the task reads its clock when the request arrives, and its offset
// is taken as that reading minus the midpoint of the request's send and its answer's arrival. One
// sample, not the best of several (a record is taken when something is already wrong, and should
// not wait for more round trips): the error is at most half that round trip. On one host the
// processes share steady_clock, so the offset is near zero whatever the round trip.
//
// Bounds: a task that does not answer within kFlightRecordWait is named in the file as silent,
// and a lost task is not asked. At most one file per step and kMaxFlightRecordFiles per process,
// so a loop of failing steps cannot fill a disk.
//
// At 1000 tasks: one request and one answer of up to a ring's worth (about 100 bytes an entry)
// per task, gathered by the chief one at a time; a record is rare, so a linear gather is
// acceptable here (unlike the per-step path).
#include <unistd.h>

#include <cctype>
#include <cstdint>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <map>

#include "cluster/cluster_runtime.h"
#include "cluster/flight_record.h"
#include "cluster/messages.h"
#include "cluster/proto/control.capnp.h"
#include "runtime/error.h"
#include "runtime/file_io.h"
#include "runtime/flight_recorder.h"

namespace weft {

namespace {

std::string flight_record_dir() {
  if (const char* dir = std::getenv("WEFT_FLIGHT_RECORDER_DIR"); dir && *dir) return dir;
  std::error_code ec;
  const std::filesystem::path tmp = std::filesystem::temp_directory_path(ec);
  return ec ? std::string("/tmp") : tmp.string();
}

// Only letters, digits, '-' and '_' in a file name made from a job's name.
std::string file_safe(std::string_view s) {
  std::string out;
  for (char c : s) out += std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' ? c : '_';
  return out.substr(0, 64);
}

// t - offset, saturated: a task's times are its own word, and a damaged one must not overflow.
int64_t shifted(int64_t t, int64_t offset) {
  int64_t out;
  if (!__builtin_sub_overflow(t, offset, &out)) return out;
  return offset < 0 ? INT64_MAX : INT64_MIN;
}

}  // namespace

void ClusterRuntime::write_flight_record_soon(int64_t step_id, std::string reason) {
  std::lock_guard lock(mu_);
  if (stopping_ || rank_ != spec_.chief_rank()) return;
  if (flight_queue_.size() >= 8) return;  // the writer is behind: what is queued is enough
  flight_queue_.emplace_back(step_id, std::move(reason));
  if (!flight_writer_.joinable()) flight_writer_ = std::thread([this] { write_queued_flight_records(); });
  cv_.notify_all();
}

void ClusterRuntime::write_queued_flight_records() {
  std::unique_lock lock(mu_);
  for (;;) {
    cv_.wait(lock, [&] { return stopping_ || !flight_queue_.empty(); });
    if (stopping_) return;
    auto [step, reason] = std::move(flight_queue_.front());
    flight_queue_.pop_front();
    lock.unlock();
    write_flight_record(step, reason);
    lock.lock();
  }
}

std::string ClusterRuntime::write_flight_record(int64_t step_id, const std::string& reason) {
  if (rank_ != spec_.chief_rank() || !process_flight_recorder().enabled()) return {};
  std::lock_guard serial(flight_mu_);  // taken before mu_, never under it
  if (flight_steps_.contains(step_id) && step_id >= 0) return {};
  if (flight_files_ >= kMaxFlightRecordFiles) {
    if (!std::exchange(flight_limit_said_, true))
      std::cerr << "weft: flight records: " << kMaxFlightRecordFiles
                << " tried by this process already; no more are written (step " << step_id << " has none)\n";
    return {};
  }
  // Counted when tried, not when written: a disk that refuses every file must not make every
  // later failing step gather the cluster's rings again.
  flight_steps_.insert(step_id);
  const int index = flight_files_++;

  std::map<int, int64_t> sent_us;              // guarded by mu_: the answers' handler reads it
  std::map<int, TaskFlightRecord> answered;    // guarded by mu_
  Waiter w;
  w.what = "flight record";
  w.on_answer = [&](int rank, ControlReply& reply, int64_t received_us) {
    TaskFlightRecord t;
    t.rank = rank;
    t.task = task_name(rank);
    t.clock_offset_us = shifted(reply.task_time_us, sent_us.at(rank) / 2 + received_us / 2);
    t.recorded = reply.flight_recorded;
    t.entries = std::move(reply.flight);
    for (FlightRecordEntry& e : t.entries) {
      e.start_us = shifted(e.start_us, t.clock_offset_us);
      if (e.end_us != 0) e.end_us = shifted(e.end_us, t.clock_offset_us);
    }
    answered[rank] = std::move(t);
  };
  // This process's own first: later, they would end with this record's own requests.
  FlightRecord record;
  record.step = step_id;
  record.reason = reason;
  TaskFlightRecord own;
  own.rank = rank_;
  own.task = task_name(rank_);
  own.recorded = process_flight_recorder().recorded();
  for (const FlightEntry& e : process_flight_recorder().snapshot()) own.entries.push_back(to_record_entry(e));
  std::pair<int, uint64_t> key;
  int lost_rank;
  {
    std::lock_guard lock(mu_);
    lost_rank = lost_rank_;
    key = {static_cast<int>(proto::Reply::Kind::FLIGHT_RECORD), next_flight_id_++};
    for (int r = 0; r < spec_.num_tasks(); ++r)
      if (r != rank_ && r != lost_rank) w.pending.insert(r);
    waiters_[key] = &w;
  }
  for (int r : std::set<int>(w.pending)) {
    {
      std::lock_guard lock(mu_);
      sent_us[r] = timeline::now_us();
    }
    try {
      send_request(r, [&](capnp::MessageBuilder& b) {
        auto f = b.initRoot<proto::Request>().initFlightRecord();
        f.setId(key.second);
        f.setStepId(step_id);
      });
    } catch (const std::exception& e) {
      std::cerr << "weft: flight record: could not ask " << task_name(r) << ": " << e.what() << "\n";
    }
  }
  {
    std::unique_lock lock(mu_);
    cv_.wait_until(lock, std::chrono::steady_clock::now() + kFlightRecordWait,
                   [&] { return w.pending.empty() || stopping_; });
    waiters_.erase(key);
  }
  record.chief_time_us = flight_now_us();
  // Every task in rank order: the answers, the lost one, the silent ones.
  for (int r = 0; r < spec_.num_tasks(); ++r) {
    if (r == rank_) {
      record.tasks.push_back(std::move(own));
    } else if (auto it = answered.find(r); it != answered.end()) {
      record.tasks.push_back(std::move(it->second));
    } else {
      TaskFlightRecord t;
      t.rank = r;
      t.task = task_name(r);
      t.answered = false;
      t.why = r == lost_rank ? "lost (not asked)"
                             : "no answer within " + std::to_string(kFlightRecordWait.count()) + " ms";
      record.tasks.push_back(std::move(t));
    }
  }
  const std::string name = "weft_flight_" + file_safe(spec_.task(rank_).job) +
                           (step_id >= 0 ? "_step" + std::to_string(step_id) : std::string("_nostep")) + "_pid" +
                           std::to_string(::getpid()) + "_" + std::to_string(index) + ".json";
  const std::string path = (std::filesystem::path(flight_record_dir()) / name).string();
  try {
    const std::string text = flight_record_to_json(record);
    write_file_atomically(path, {{text.data(), text.size()}}, "flight record");
  } catch (const std::exception& e) {
    std::cerr << "weft: flight record of step " << step_id << " not written: " << e.what() << "\n";
    return {};
  }
  std::cerr << "weft: flight record of " << (step_id >= 0 ? "step " + std::to_string(step_id) : std::string("the job"))
            << " written to " << path << "\n"
            << std::flush;
  return path;
}

}  // namespace weft
