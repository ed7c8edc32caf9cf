#include "cluster/startup.h"

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster/build_identity.h"
#include "cluster/cluster_spec.h"
#include "runtime/duration_setting.h"
#include "runtime/error.h"

namespace weft {

namespace {

// The chief speaks first: see startup.h.
constexpr std::chrono::milliseconds kTaskGrace{2000};
// A tag of weft's own on MPI_COMM_WORLD, used only before cluster::init returns.
constexpr int kDeviceReportTag = 0x7765;  // "we"
constexpr int kVerdictTag = 0x7766;

nlohmann::json identity_json(const BuildIdentity& b) {
  return {{"version", b.version}, {"build", b.build}, {"registry", b.registry}};
}

// {"weft": {...}, "devices": [...]}, or {"weft": {...}, "error": "..."} from a task that cannot
// start (its devices are not made). "weft" is its build (cluster/build_identity.h).
std::string device_report_text(const std::string& error) {
  if (!error.empty()) return nlohmann::json{{"weft", identity_json(this_build())}, {"error", error}}.dump();
  nlohmann::json mine = nlohmann::json::array();
  for (Device* d : local_devices())
    mine.push_back({{"name", cluster_device_name(*d)},
                    {"type", device_type_name(d->type())},
                    {"memory", d->memory_bytes()},
                    {"cores", d->cores()},
                    {"description", d->description()}});
  return nlohmann::json{{"weft", identity_json(this_build())}, {"devices", std::move(mine)}}.dump();
}

// Nesting of a report: {"devices": [{...}]} is 3 deep. Checked before parsing, so that a report
// of a million brackets costs a scan, not a parser's stack.
constexpr int kMaxReportDepth = 4;
constexpr size_t kMaxReportDevices = 4096;
// The chief's answer lists every task's error: bounded as generously as all their reports.
constexpr size_t kMaxVerdictBytes = size_t{16} << 20;

int nesting_depth(std::string_view text) {
  int depth = 0, deepest = 0;
  bool in_string = false, escaped = false;
  for (char c : text) {
    if (in_string) {
      if (escaped) escaped = false;
      else if (c == '\\') escaped = true;
      else if (c == '"') in_string = false;
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      deepest = std::max(deepest, ++depth);
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return deepest;
}

// The MPI_Status's length of a probed message; -1 when MPI cannot say.
int probed_length(const MPI_Status& status) {
  int length = 0;
  if (MPI_Get_count(&status, MPI_CHAR, &length) != MPI_SUCCESS || length == MPI_UNDEFINED) return -1;
  return length;
}

// Takes a probed message that is too long (or of no length MPI can say) without writing a byte:
// a receive of nothing fails (truncation) instead of ending the job, MPI_COMM_WORLD's errors made
// to return for the moment (nothing else runs on it during start-up).
void discard(MPI_Message& message) {
  MPI_Errhandler previous;
  MPI_Comm_get_errhandler(MPI_COMM_WORLD, &previous);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Mrecv(nullptr, 0, MPI_CHAR, &message, MPI_STATUS_IGNORE);
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, previous);
  MPI_Errhandler_free(&previous);
}

}  // namespace

DeviceReport parse_device_report(std::string_view text, const std::string& task) {
  const std::string from = "[cluster] the device report of " + task + " ";
  if (text.size() > kMaxDeviceReportBytes)
    throw InvalidArgument(from + "has " + std::to_string(text.size()) + " bytes, over the limit of " +
                          std::to_string(kMaxDeviceReportBytes));
  if (const int depth = nesting_depth(text); depth > kMaxReportDepth)
    throw InvalidArgument(from + "is nested " + std::to_string(depth) + " deep, more than a report is (" +
                          std::to_string(kMaxReportDepth) + ")");
  DeviceReport out;
  try {
    const nlohmann::json report = nlohmann::json::parse(text);
    if (!report.is_object()) throw InvalidArgument(from + "is not a JSON object");
    if (const auto w = report.find("weft"); w != report.end()) {
      auto field = [&](const char* name) {
        const auto v = w->is_object() ? w->find(name) : w->end();
        if (v == w->end() || !v->is_string() || v->get_ref<const std::string&>().size() > 64)
          throw InvalidArgument(from + "gives its build of weft as " + w->dump().substr(0, 200) +
                                ", not an object of version, build and registry");
        return v->get<std::string>();
      };
      out.build = {field("version"), field("build"), field("registry")};
    }
    if (const auto e = report.find("error"); e != report.end()) {
      out.error = e->get<std::string>();
      return out;
    }
    const nlohmann::json& devices = report.at("devices");
    if (!devices.is_array() || devices.size() > kMaxReportDevices)
      throw InvalidArgument(from + "does not list devices as an array of at most " + std::to_string(kMaxReportDevices));
    for (const auto& d : devices) {
      // nlohmann converts numbers silently (1.5 to 1, 2^40 to an int's low bits): checked here.
      auto count = [&](const char* field, int64_t most) {
        const nlohmann::json& v = d.at(field);
        if (!v.is_number_integer() || (v.is_number_unsigned() && v.get<uint64_t>() > static_cast<uint64_t>(most)) ||
            v.get<int64_t>() < 0 || v.get<int64_t>() > most)
          throw InvalidArgument(from + "gives a device's " + field + " as " + v.dump() + ", not a count from 0 to " +
                                std::to_string(most));
        return v.get<int64_t>();
      };
      DeviceInfo info{d.at("name").get<std::string>(), d.at("type").get<std::string>(),
                      count("memory", INT64_MAX), static_cast<int>(count("cores", INT_MAX)),
                      d.at("description").get<std::string>()};
      if (info.name.empty()) throw InvalidArgument(from + "lists a device with an empty name");
      out.devices.push_back(std::move(info));
    }
  } catch (const nlohmann::json::exception& e) {
    // Never std::terminate: every malformation is an error naming the task.
    throw InvalidArgument(from + "is malformed: " + e.what());
  }
  return out;
}

StartupWatchdog::StartupWatchdog(std::chrono::milliseconds timeout, int rank) : timeout_(timeout), rank_(rank) {
  const auto deadline = std::chrono::steady_clock::now() + timeout_ + (rank_ > 0 ? kTaskGrace : std::chrono::milliseconds(0));
  thread_ = std::thread([this, deadline] { watch(deadline); });
}

StartupWatchdog::~StartupWatchdog() {
  {
    std::lock_guard lock(mu_);
    done_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void StartupWatchdog::waiting_for(std::string what) {
  std::lock_guard lock(mu_);
  waiting_for_ = std::move(what);
}

void StartupWatchdog::mpi_ready() {
  std::lock_guard lock(mu_);
  mpi_ready_ = true;
}

void StartupWatchdog::watch(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  if (cv_.wait_until(lock, deadline, [&] { return done_; })) return;
  // One write: the reports of several tasks reach mpirun's output whole.
  const std::string line = "weft: [cluster] start-up did not finish within " + std::to_string(timeout_.count()) +
                           " ms (rank " + std::to_string(rank_) + "): " + waiting_for_ +
                           "; ending the job (WEFT_STARTUP_TIMEOUT_MS sets the limit)\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  std::fflush(stdout);
  // The main thread is blocked inside MPI for good; nothing it holds needs unwinding.
  if (mpi_ready_) MPI_Abort(MPI_COMM_WORLD, 15);
  std::_Exit(1);
}

std::chrono::milliseconds StartupWatchdog::timeout_from_environment() {
  // Nothing can be raised this early (MPI is not up): a bad value is reported and 30 s used.
  return milliseconds_setting("WEFT_STARTUP_TIMEOUT_MS", std::getenv("WEFT_STARTUP_TIMEOUT_MS"), std::chrono::seconds(30));
}

int StartupWatchdog::rank_from_environment() {
  for (const char* name : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"})
    if (const char* r = std::getenv(name); r && *r) return std::atoi(r);
  return -1;
}

std::vector<DeviceInfo> exchange_device_reports(const ClusterSpec& spec, int rank, StartupWatchdog& watchdog,
                                                const std::string& error) {
  const int chief = spec.chief_rank();
  std::string mine = device_report_text(error);
  if (rank != chief) {
    watchdog.waiting_for("sending this task's device report to the chief");
    MPI_Send(mine.data(), static_cast<int>(mine.size()), MPI_CHAR, chief, kDeviceReportTag, MPI_COMM_WORLD);
    watchdog.waiting_for("the chief's answer to the device reports did not come (the chief died?)");
    MPI_Status status;
    MPI_Message message;
    MPI_Mprobe(chief, kVerdictTag, MPI_COMM_WORLD, &message, &status);
    const int length = probed_length(status);
    if (length < 0 || static_cast<size_t>(length) > kMaxVerdictBytes) {
      discard(message);
      throw InvalidArgument("[cluster] the chief's answer to the device reports has " + std::to_string(length) +
                            " bytes, over the limit of " + std::to_string(kMaxVerdictBytes));
    }
    std::string errors(static_cast<size_t>(length), '\0');
    MPI_Mrecv(errors.data(), length, MPI_CHAR, &message, MPI_STATUS_IGNORE);
    if (!errors.empty()) throw InvalidArgument(errors);
    return {};
  }
  const int n = spec.num_tasks();
  std::vector<std::string> reports(static_cast<size_t>(n));
  std::vector<std::string> too_long(static_cast<size_t>(n));  // a report refused unread, by rank
  reports[static_cast<size_t>(chief)] = std::move(mine);
  std::set<int> missing;
  for (int r = 0; r < n; ++r)
    if (r != chief) missing.insert(r);
  while (!missing.empty()) {
    std::string names;
    for (int r : missing) {
      if (names.size() > 400) {
        names += " and " + std::to_string(missing.size()) + " in all";
        break;
      }
      names += (names.empty() ? "" : ", ") + spec.task(r).name() + " (rank " + std::to_string(r) + ")";
    }
    watchdog.waiting_for("no device report from " + names + ": died, or stuck, before cluster::init?");
    // Probed first: the length is checked before a byte is received or allocated.
    MPI_Status status;
    MPI_Message message;
    MPI_Mprobe(MPI_ANY_SOURCE, kDeviceReportTag, MPI_COMM_WORLD, &message, &status);
    const int src = status.MPI_SOURCE;
    const int length = probed_length(status);
    if (length < 0 || static_cast<size_t>(length) > kMaxDeviceReportBytes) {
      discard(message);
      too_long[static_cast<size_t>(src)] = "[cluster] the device report of " + spec.task(src).name() + " (rank " +
                                           std::to_string(src) + ") has " + std::to_string(length) +
                                           " bytes, over the limit of " + std::to_string(kMaxDeviceReportBytes);
    } else {
      std::string text(static_cast<size_t>(length), '\0');
      MPI_Mrecv(text.data(), length, MPI_CHAR, &message, MPI_STATUS_IGNORE);
      reports[static_cast<size_t>(src)] = std::move(text);
    }
    missing.erase(src);
  }
  std::vector<DeviceInfo> out;
  std::string errors;
  const BuildIdentity chief_build = this_build();  // hashes the op registry: once, not per task
  auto add_error = [&](const std::string& e) { errors += (errors.empty() ? "" : "; ") + e; };
  for (int r = 0; r < n; ++r) {
    if (!too_long[static_cast<size_t>(r)].empty()) {
      add_error(too_long[static_cast<size_t>(r)]);
      continue;
    }
    try {
      DeviceReport report =
          parse_device_report(reports[static_cast<size_t>(r)], spec.task(r).name() + " (rank " + std::to_string(r) + ")");
      // One weft in a job (cluster/build_identity.h).
      if (const std::string why = build_mismatch(spec.task(r).name(), report.build, "the chief", chief_build); !why.empty())
        add_error(why);
      if (!report.error.empty()) add_error(report.error);
      for (DeviceInfo& d : report.devices) out.push_back(std::move(d));
    } catch (const InvalidArgument& e) {
      add_error(e.what());
    }
  }
  watchdog.waiting_for("answering the device reports");
  for (int r = 0; r < n; ++r)
    if (r != chief) MPI_Send(errors.data(), static_cast<int>(errors.size()), MPI_CHAR, r, kVerdictTag, MPI_COMM_WORLD);
  if (!errors.empty()) throw InvalidArgument(errors);
  return out;
}

}  // namespace weft
