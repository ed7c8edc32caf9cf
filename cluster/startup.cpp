#include "cluster/startup.h"

#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <set>

#include "cluster/build_identity.h"
#include "cluster/cluster_spec.h"
#include "cluster/duration_setting.h"
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

// Appends to `errors` why the report's build is not the chief's, if it is not.
void check_build(const nlohmann::json& report, const std::string& task, std::string& errors) {
  static const BuildIdentity chief = this_build();
  BuildIdentity theirs{"unknown", "unknown", "unknown"};
  if (const auto w = report.find("weft"); w != report.end() && w->is_object())
    theirs = {w->value("version", "unknown"), w->value("build", "unknown"), w->value("registry", "unknown")};
  const std::string why = build_mismatch(task, theirs, "the chief", chief);
  if (!why.empty()) errors += (errors.empty() ? "" : "; ") + why;
}

// Appends a report's devices, or its error to `errors`; and why its build is not the chief's.
void read_report(const std::string& text, const std::string& task, std::vector<DeviceInfo>& out, std::string& errors) {
  const nlohmann::json report = nlohmann::json::parse(text);
  check_build(report, task, errors);
  if (const auto e = report.find("error"); e != report.end()) {
    errors += (errors.empty() ? "" : "; ") + e->get<std::string>();
    return;
  }
  for (const auto& d : report.at("devices"))
    out.push_back({d.at("name").get<std::string>(), d.at("type").get<std::string>(), d.at("memory").get<int64_t>(),
                   d.at("cores").get<int>(), d.at("description").get<std::string>()});
}

}  // namespace

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
    MPI_Probe(chief, kVerdictTag, MPI_COMM_WORLD, &status);
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string errors(static_cast<size_t>(length), '\0');
    MPI_Recv(errors.data(), length, MPI_CHAR, chief, kVerdictTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    if (!errors.empty()) throw InvalidArgument(errors);
    return {};
  }
  const int n = spec.num_tasks();
  std::vector<std::string> reports(static_cast<size_t>(n));
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
    MPI_Status status;
    MPI_Probe(MPI_ANY_SOURCE, kDeviceReportTag, MPI_COMM_WORLD, &status);
    int length = 0;
    MPI_Get_count(&status, MPI_CHAR, &length);
    std::string text(static_cast<size_t>(length), '\0');
    MPI_Recv(text.data(), length, MPI_CHAR, status.MPI_SOURCE, kDeviceReportTag, MPI_COMM_WORLD, MPI_STATUS_IGNORE);
    reports[static_cast<size_t>(status.MPI_SOURCE)] = std::move(text);
    missing.erase(status.MPI_SOURCE);
  }
  std::vector<DeviceInfo> out;
  std::string errors;
  for (int r = 0; r < n; ++r) read_report(reports[static_cast<size_t>(r)], spec.task(r).name(), out, errors);
  watchdog.waiting_for("answering the device reports");
  for (int r = 0; r < n; ++r)
    if (r != chief) MPI_Send(errors.data(), static_cast<int>(errors.size()), MPI_CHAR, r, kVerdictTag, MPI_COMM_WORLD);
  if (!errors.empty()) throw InvalidArgument(errors);
  return out;
}

}  // namespace weft
