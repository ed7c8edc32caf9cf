// A cluster start-up that cannot hang.
//
// Every step of start-up waits for every process of the job: MPI_Init (Open MPI's PMIx fence), the
// tasks' device reports to the chief, the dup of the runtime's communicators. A process that died
// before joining (killed, crashed, its node lost) would keep the others waiting for ever, and
// MPI_Init has no timeout of its own. So a watchdog bounds the whole of cluster::init: when
// start-up has not finished within WEFT_STARTUP_TIMEOUT_MS (default 30 s, as Horovod's start
// timeout; processes that mpirun starts together normally join within a second or two), it prints
// what start-up was waiting for and ends the job: MPI_Abort once MPI is up, _Exit before (MPI_Abort
// cannot be called then). Tasks other than the chief wait 2 s longer, so that the chief, which
// knows whose device report is missing, is the one that speaks:
//
//   weft: [cluster] start-up did not finish within 30000 ms (rank 0): no device report from
//   /job:worker/replica:0/task:2 (rank 2): it died, or is stuck, before cluster::init; ending the job
//
// The device reports travel point to point (not MPI_Gather) for that reason: the chief sees which
// have come.
#pragma once

#include <mpi.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "cluster/build_identity.h"
#include "runtime/device.h"

namespace weft {

class ClusterSpec;

class StartupWatchdog {
 public:
  // `rank` is the process's rank in the job, read before MPI_Init from the launcher's environment
  // (-1 when it gave none).
  StartupWatchdog(std::chrono::milliseconds timeout, int rank);
  ~StartupWatchdog();  // start-up finished: disarms
  StartupWatchdog(const StartupWatchdog&) = delete;
  StartupWatchdog& operator=(const StartupWatchdog&) = delete;

  // What start-up waits for now: the report's subject if the time runs out.
  void waiting_for(std::string what);
  // MPI_Init has returned: from now on the job is ended with MPI_Abort.
  void mpi_ready();

  // WEFT_STARTUP_TIMEOUT_MS, else 30 s.
  static std::chrono::milliseconds timeout_from_environment();
  // The rank mpirun (or srun, or another PMI launcher) gave this process; -1 when none.
  static int rank_from_environment();

 private:
  void watch(std::chrono::steady_clock::time_point deadline);

  std::chrono::milliseconds timeout_;
  int rank_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  bool mpi_ready_ = false;
  std::string waiting_for_ = "MPI_Init: the job's other processes have not all joined (did one die before joining?)";
  std::thread thread_;
};

// A task's device report, decoded as untrusted input (it comes over the network, before
// anything else is checked): its devices, or the start-up error it reports instead (`error`).
// InvalidArgument naming `task` for a report that is malformed: over kMaxDeviceReportBytes,
// nested deeper than a report is, not JSON, or a field missing, of the wrong type or out of range.
inline constexpr size_t kMaxDeviceReportBytes = size_t{1} << 20;
struct DeviceReport {
  std::vector<DeviceInfo> devices;
  std::string error;
  BuildIdentity build{"unknown", "unknown", "unknown"};  // its build of weft, when it says
};
DeviceReport parse_device_report(std::string_view text, const std::string& task);

// The chief receives every task's device report, in rank order, naming the missing tasks to the
// watchdog as it waits; the other tasks send theirs. A task with a start-up error of its own
// (`error`, such as a GPU its spec gives that it cannot see) reports that instead of devices. The
// chief then answers every task: when any reported an error, every task (the chief too) throws
// InvalidArgument with every error, so each prints them and the job ends. A malformed report, or
// one longer than kMaxDeviceReportBytes (its length is probed before anything is received or
// allocated), is such an error, naming the task. On MPI_COMM_WORLD, with
// tags of weft's own: nothing else runs on it yet.
std::vector<DeviceInfo> exchange_device_reports(const ClusterSpec& spec, int rank, StartupWatchdog& watchdog,
                                                const std::string& error = "");

}  // namespace weft
