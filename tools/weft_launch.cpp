// weft-launch: starts a weft program as a cluster, one process per task.
//
//   weft-launch -np 4 ./train --epochs 3            # 4 tasks on this machine
//   weft-launch --cluster=spec.json ./train          # the spec's tasks, on the spec's hosts
//   weft-launch --dry-run -np 2 ./train              # print the command instead of running it
//   weft-launch --max-restarts 3 -np 4 ./train       # a failed job is started again, up to 3 times
//
// It runs mpirun (srun under Slurm, when SLURM_JOB_ID is set) with:
//  - the process count (-np, or the spec's task count),
//  - the hosts of the spec's addresses when they are not all this machine,
//  - --oversubscribe when there are more processes than cores here, and --allow-run-as-root as
//    root,
//  - on this machine, each task bound to its own share of the cores (binding_options below),
//  - --enable-recovery, so that when a task dies mpirun does not kill the others at once: the
//    chief's liveness check reports the lost task by name (an Unavailable) and every process
//    then exits non-zero. With recovery on, mpirun itself exits 0 whatever its processes did, so
//    each task runs under weft-launch's status wrapper and weft-launch exits with the first
//    non-zero status by rank (tools/launch_status.h),
//  - odls_base_signal_direct_children_only, so that a signal mpirun forwards (weft-launch's stop
//    signals, tools/launch_job.h) reaches each task's wrapper, not its whole process group,
//  - WEFT_CLUSTER=<spec> exported to every task.
// Signals to weft-launch and restarts: tools/launch_job.h. Any error is one line,
// "weft-launch: error: ...", and a non-zero exit status.
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>

#include "cluster/cluster_spec.h"
#include "runtime/device.h"
#include "runtime/error.h"
#include "tools/launch_job.h"
#include "tools/launch_status.h"
#include "tools/tool_support.h"

namespace weft::tools {
namespace {

bool is_this_machine(const std::string& host) {
  if (host == "localhost" || host == "127.0.0.1" || host == "::1") return true;
  char name[256] = {};
  return gethostname(name, sizeof(name) - 1) == 0 && host == name;
}

// Where the tasks of a job on this machine run. mpirun's own default binds each of up to two
// processes to ONE core and leaves more than the cores unbound; instead:
//  - fewer tasks than cores: each is bound to cores/np cores of its own (--map-by slot:PE=k), so two
//    tasks on a 16-core machine get 8 cores each, not one;
//  - at least as many tasks as cores: each is bound to one core, round-robin. Unbound, the
//    scheduler kept moving the tasks' polling threads between cores and the null step of
//    bench_distributed (4 tasks, 2 cores) took 60 to 105 us from run to run; bound, 57 to 59 us, and
//    the MLP step with its variables on a worker 0.58-0.62 ms instead of 0.83.
// Each task sizes its thread pools to the cores of its binding (runtime/device.h), so the threads of
// one task never outnumber its cores. Tasks on other hosts are left unbound: their cores are not
// known here.
std::vector<std::string> binding_options(int np, bool all_local) {
  if (!all_local) return {"--bind-to", "none"};
  const int cores = std::max(1, host_topology().physical_cores);
  if (np >= cores) return {"--bind-to", "core:overload-allowed"};
  return {"--map-by", "slot:PE=" + std::to_string(cores / np), "--bind-to", "core"};
}

Launch launch_command(int np, const std::string& spec_path, const std::vector<std::string>& program) {
  std::vector<std::string> hosts;
  if (!spec_path.empty()) {
    const ClusterSpec spec = ClusterSpec::load(spec_path);
    if (np > 0 && np != spec.num_tasks())
      throw InvalidArgument("-np " + std::to_string(np) + " contradicts " + spec_path + ", which has " +
                            std::to_string(spec.num_tasks()) + " tasks; leave -np out");
    np = spec.num_tasks();
    bool all_here = true;
    for (const TaskSpec& t : spec.tasks()) {
      hosts.push_back(t.address.substr(0, t.address.rfind(':')));
      all_here &= is_this_machine(hosts.back());
    }
    if (all_here) hosts.clear();
  }
  if (np < 1) throw InvalidArgument("give the number of tasks with -np N, or a spec with --cluster=FILE");
  if (program.empty()) throw InvalidArgument("no program to launch");

  std::vector<std::string> cmd;
  const std::string spec_abs = spec_path.empty() ? "" : std::filesystem::absolute(spec_path).string();
  if (std::getenv("SLURM_JOB_ID")) {
    cmd = {"srun", "-n", std::to_string(np)};
    if (!spec_abs.empty()) cmd.push_back("--export=ALL,WEFT_CLUSTER=" + spec_abs);
  } else {
    // Signals mpirun forwards reach the task wrappers alone, which pass them on as the stop
    // signals (tools/launch_job.h); to the whole process group they would kill each program too.
    cmd = {"mpirun", "-np", std::to_string(np), "--enable-recovery", "--mca", "odls_base_signal_direct_children_only", "1"};
    if (geteuid() == 0) cmd.push_back("--allow-run-as-root");
    if (hosts.empty() && np > std::max(1, host_topology().physical_cores)) cmd.push_back("--oversubscribe");
    const std::vector<std::string> binding = binding_options(np, hosts.empty());
    cmd.insert(cmd.end(), binding.begin(), binding.end());
    if (!hosts.empty()) {
      // One slot per task on each host, in the spec's order (ranks follow it, chief first).
      std::string list;
      for (const std::string& h : hosts) list += (list.empty() ? "" : ",") + h;
      cmd.insert(cmd.end(), {"--host", list});
    }
    if (!spec_abs.empty()) cmd.insert(cmd.end(), {"-x", "WEFT_CLUSTER=" + spec_abs});
  }
  return {cmd, program, np, !std::getenv("SLURM_JOB_ID"), hosts.empty()};
}

}  // namespace
}  // namespace weft::tools

int main(int argc, char** argv) {
  using namespace weft::tools;
  CLI::App app{"weft-launch: run a weft program as a cluster of processes (mpirun, or srun under Slurm)"};
  int np = 0;
  std::string spec;
  bool dry_run = false;
  int max_restarts = 0;
  app.add_option("-n,--np", np, "number of tasks (processes); -np N as with mpirun");
  app.add_option("--cluster", spec, "cluster spec file (TF_CONFIG's shape)")->check(CLI::ExistingFile);
  app.add_flag("--dry-run", dry_run, "print the command instead of running it");
  app.add_option("--max-restarts", max_restarts, "start a failed job again, up to N times (it resumes from its checkpoint)")
      ->check(CLI::NonNegativeNumber);
  app.prefix_command();  // the program and everything after it are passed on
  app.footer("PROGRAM [ARGS...] follow the options.");
  // mpirun's spelling, -np, is one option here too.
  std::vector<std::string> spelled;
  for (int i = 0; i < argc; ++i) spelled.push_back(std::strcmp(argv[i], "-np") == 0 ? "--np" : argv[i]);
  std::vector<char*> args;
  for (std::string& a : spelled) args.push_back(a.data());
  // Task mode, inside mpirun: run the program and leave its status for the launcher.
  if (argc >= 3 && std::strcmp(argv[1], kTaskStatusOption) == 0)
    return run_task(argv[2], std::vector<std::string>(argv + 3, argv + argc));
  block_stop_signals();  // before any thread: weft-launch waits for its signals (tools/launch_job.h)
  LaunchResult result;
  const int parsed = run_tool(app, argc, args.data(), [&] {
    const Launch launch = launch_command(np, spec, app.remaining());
    if (dry_run) {
      std::vector<std::string> cmd = launch.launcher;
      cmd.insert(cmd.end(), launch.program.begin(), launch.program.end());
      for (size_t i = 0; i < cmd.size(); ++i) std::cout << (i ? " " : "") << cmd[i];
      std::cout << "\n";
      return;
    }
    result = run_with_restarts(launch, max_restarts);
  });
  if (result.signal) end_by_signal(result.signal);
  return parsed != 0 ? parsed : result.status;
}
