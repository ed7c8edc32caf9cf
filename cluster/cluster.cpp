#include "cluster/cluster.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "cluster/cluster_runtime.h"
#include "cluster/gpu_visibility.h"
#include "cluster/job_signals.h"
#include "cluster/proto/control.capnp.h"
#include "cluster/startup.h"
#include "cluster/task_server.h"
#include "comm/collective_executor.h"
#include "comm/mpi_collectives.h"
#include "kernels/register_all.h"
#include "runtime/device.h"
#include "scheduler/stall_watchdog.h"

namespace weft {

namespace {

ClusterRuntime* g_runtime = nullptr;  // this process's, once init has run; lives until exit

// How long a process that is about to MPI_Abort waits for what it just wrote to leave for mpirun.
constexpr std::chrono::milliseconds kReportForwardingPause{300};

// The chief, at exit: tells the tasks to leave their serve loops, then finalises MPI.
void shut_down_at_exit() {
  if (!g_runtime) return;
  job_signals::uninstall_hooks();  // a signal from here on just ends this process: MPI is going
  set_unreclaimable_handler(nullptr);
  if (g_runtime->lost()) {
    // A task is gone: finalising would wait for it. Ending the job makes every process that is
    // left exit non-zero, which is what a lost task means.
    std::cerr << "weft: a task of the cluster was lost; ending every process" << std::endl;
    std::this_thread::sleep_for(kReportForwardingPause);
    MPI_Abort(MPI_COMM_WORLD, 14);
  }
  g_runtime->shut_down_tasks();
  shut_down_process_collectives();
  // Give the shutdown messages a moment to leave before MPI is finalised.
  delete g_runtime;
  g_runtime = nullptr;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

[[noreturn]] void fail_everywhere(const std::string& message) {
  // One write: the tasks' reports reach mpirun's output whole, not interleaved piece by piece.
  const std::string line = "weft: " + message + "\n";
  std::fwrite(line.data(), 1, line.size(), stderr);
  std::fflush(stderr);
  // Every task read the same spec and fails the same way: no task waits for another.
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
  std::exit(1);
}

// SIGTERM and SIGINT end the whole job (cluster/job_signals.h): a task tells the chief; the chief
// tells every task to end and ends itself. Each process ends with MPI_Abort, status 128 + the
// signal's number: under mpirun --enable-recovery, one process's MPI_Abort ends that process alone.
void install_job_signals(ClusterRuntime& rt) {
  job_signals::Hooks hooks{.task = rt.task_name(rt.rank())};
  const int chief = rt.spec().chief_rank(), tasks = rt.spec().num_tasks();
  if (rt.rank() != chief)
    hooks.tell_chief = [&rt, chief](int signo) {
      capnp::MallocMessageBuilder message;
      auto reply = message.initRoot<proto::Reply>();
      reply.setKind(proto::Reply::Kind::SIGNAL);
      reply.setSignal(signo);
      rt.channel().send(chief, kReplyTag, message);
    };
  if (tasks > 1)
    hooks.end_job = [&rt, chief, tasks](int signo) {
      if (rt.rank() == chief) {
        for (int r = 0; r < tasks; ++r)
          if (r != chief) rt.send_request(r, [signo](capnp::MessageBuilder& b) { b.initRoot<proto::Request>().setEndJob(signo); });
        rt.channel().flush(std::chrono::seconds(1));  // bounded: a lost task never takes its message
      }
      MPI_Abort(MPI_COMM_WORLD, 128 + signo);
      std::_Exit(128 + signo);
    };
  job_signals::install(std::move(hooks));
  // A thread the stall watchdog cannot reclaim ends this process (scheduler/stall_watchdog.h)
  // through MPI: the other tasks then see it lost (mpirun --enable-recovery), or end with it.
  // The watchdog has written its report to stderr, a pipe that mpirun's daemon forwards when it
  // next reads it; MPI_Abort makes mpirun kill the job and exit, and the report could be lost on
  // the way (it was, now and then, on a loaded machine). A short pause lets it out first.
  set_unreclaimable_handler([](const std::string&) {
    std::this_thread::sleep_for(kReportForwardingPause);
    MPI_Abort(MPI_COMM_WORLD, kUnreclaimableExitStatus);
  });
}

// This task's place among the job's processes on its machine, from the launcher's environment
// (Open MPI's, MPICH's, Slurm's); alone when none says.
std::pair<int, int> local_rank_and_size() {
  auto number = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v ? std::atoi(v) : -1;
  };
  for (auto [rank, size] : {std::pair{"OMPI_COMM_WORLD_LOCAL_RANK", "OMPI_COMM_WORLD_LOCAL_SIZE"},
                            std::pair{"MPI_LOCALRANKID", "MPI_LOCALNRANKS"},
                            std::pair{"SLURM_LOCALID", "SLURM_NTASKS_PER_NODE"}})
    if (number(rank) >= 0 && number(size) > number(rank)) return {number(rank), number(size)};
  return {0, 1};
}

// The task's GPUs (cluster/gpu_visibility.h), set as CUDA_VISIBLE_DEVICES before CUDA starts.
// Returns the error of a spec index this task's process cannot see (empty: none); the device
// reports carry it to every task.
std::string choose_gpus(const TaskSpec& task) {
  GpuVisibilityInputs in;
  std::tie(in.local_rank, in.local_size) = local_rank_and_size();
  in.spec_gpus = task.devices.gpus;
  if (const char* v = std::getenv("CUDA_VISIBLE_DEVICES")) in.visible = v;
  in.machine_gpus = machine_gpu_count();
  const std::string name = "/job:" + task.job + "/task:" + std::to_string(task.index);
  try {
    const std::optional<std::string> value = cuda_visible_devices_for(in, name);
    if (!value || value == in.visible) return {};
    if (local_devices_created())
      throw FailedPrecondition("[cluster] task " + name + " must see GPUs '" + *value +
                               "', but its devices were made before cluster::init: call cluster::init first in main");
    setenv("CUDA_VISIBLE_DEVICES", value->c_str(), 1);
    return {};
  } catch (const Error& e) {
    return e.what();
  }
}

}  // namespace

Cluster cluster_from_runtime(ClusterRuntime* runtime) {
  Cluster c;
  c.runtime_ = runtime;
  return c;
}

int Cluster::num_tasks() const { return runtime_ ? runtime_->spec().num_tasks() : 1; }

void Cluster::reset_collectives() const {
  if (runtime_) runtime_->reset_collectives();
  else process_collectives().reset();
}

int Cluster::rank() const { return runtime_ ? runtime_->rank() : 0; }

std::vector<std::string> Cluster::task_names() const {
  if (!runtime_) return {local_task_name()};
  std::vector<std::string> out;
  for (int r = 0; r < runtime_->spec().num_tasks(); ++r) out.push_back(runtime_->task_name(r));
  return out;
}

std::vector<DeviceInfo> Cluster::devices() const { return runtime_ ? runtime_->devices : local_device_infos(); }

namespace cluster {

Cluster init(int& argc, char**& argv) {
  if (g_runtime) return cluster_from_runtime(g_runtime);
  // Bounds all of start-up, MPI_Init included: a process of the job that died before joining
  // ends the job with a report instead of a hang (cluster/startup.h).
  std::optional<StartupWatchdog> watchdog;
  watchdog.emplace(StartupWatchdog::timeout_from_environment(), StartupWatchdog::rank_from_environment());
  int initialized = 0;
  MPI_Initialized(&initialized);
  int provided = 0;
  if (!initialized) MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  else MPI_Query_thread(&provided);
  watchdog->mpi_ready();
  if (provided < MPI_THREAD_MULTIPLE)
    fail_everywhere("[cluster] MPI gives thread level " + std::to_string(provided) +
                    "; weft needs MPI_THREAD_MULTIPLE (is this Open MPI built with thread support?)");
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);

  std::optional<ClusterSpec> spec;
  try {
    spec = ClusterSpec::from_command_line_or_environment(argc, argv);
    if (!spec) spec = ClusterSpec::without_spec(size);
    spec->check_process_count(size);
  } catch (const Error& e) {
    fail_everywhere(std::string(e.what()) + (rank == 0 ? "" : " (task rank " + std::to_string(rank) + ")"));
  }
  const TaskSpec& task = spec->task(rank);
  set_local_task(task.job, task.index);
  if (task.devices.logical_cpus && !local_devices_created()) set_logical_cpus(*task.devices.logical_cpus);
  const std::string gpu_error = choose_gpus(task);
  register_builtin_ops();
  std::vector<DeviceInfo> devices;
  try {
    devices = exchange_device_reports(*spec, rank, *watchdog, gpu_error);
  } catch (const InvalidArgument& e) {
    fail_everywhere(e.what());
  }

  // Control, tensors and collectives each on a communicator of their own. Collectives get a parent
  // that only ever makes their communicator (now, and again at each reset: comm/mpi_collectives.h).
  watchdog->waiting_for(rank == spec->chief_rank()
                           ? "every task reported its devices, but making the cluster's communicators did not finish "
                             "(a task died since?)"
                           : "making the cluster's communicators did not finish (the chief or another task died?)");
  MPI_Comm control, data, collectives_parent;
  MPI_Comm_dup(MPI_COMM_WORLD, &control);
  MPI_Comm_dup(MPI_COMM_WORLD, &data);
  MPI_Comm_dup(MPI_COMM_WORLD, &collectives_parent);
  g_runtime = new ClusterRuntime(std::move(*spec), rank, control, data);
  g_runtime->devices = std::move(devices);
  std::vector<std::string> task_names;
  for (int r = 0; r < size; ++r) task_names.push_back(g_runtime->task_name(r));
  set_process_collectives(
      std::make_unique<CollectiveExecutor>(std::make_unique<MpiCollectives>(collectives_parent, std::move(task_names))));
  watchdog.reset();  // started: from here on, liveness and step deadlines bound every wait
  install_job_signals(*g_runtime);

  if (rank != g_runtime->spec().chief_rank()) {
    {
      TaskServer server(*g_runtime);
      server.serve();
    }
    job_signals::uninstall_hooks();
    set_unreclaimable_handler(nullptr);
    shut_down_process_collectives();
    delete g_runtime;
    g_runtime = nullptr;
    MPI_Finalize();
    std::exit(0);
  }
  std::atexit(shut_down_at_exit);
  return cluster_from_runtime(g_runtime);
}

}  // namespace cluster

// For list_devices() on the chief: every task's devices (api/devices.cpp asks).
const std::vector<DeviceInfo>* cluster_devices() { return g_runtime ? &g_runtime->devices : nullptr; }

ClusterRuntime* chief_runtime() {
  // init returns only on the chief, so a runtime here is the chief's.
  return g_runtime && g_runtime->spec().num_tasks() > 1 ? g_runtime : nullptr;
}

}  // namespace weft
