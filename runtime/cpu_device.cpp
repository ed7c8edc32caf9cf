// The host CPU devices (one, or several logical ones sharing the cores), sized from hwloc's view
// of the machine, and the process's device set.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <optional>
#include <string_view>

#include "runtime/device.h"
#include "runtime/error.h"

namespace weft {

namespace {

// How many processes of this job the launcher started on this host (1 when it says nothing).
int local_processes_from_launcher() {
  for (const char* name : {"OMPI_COMM_WORLD_LOCAL_SIZE", "MPI_LOCALNRANKS", "SLURM_NTASKS_PER_NODE"})
    if (const char* v = std::getenv(name); v && std::atoi(v) > 0) return std::atoi(v);
  return 1;
}

// A whole number from 1 to `max` in `text`, else nullopt.
std::optional<int> parse_count(std::string_view text, int max) {
  int n = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (ec != std::errc() || end != text.data() + text.size() || n < 1 || n > max) return std::nullopt;
  return n;
}

constexpr const char* kThreadsVar = "WEFT_NUM_THREADS";

// WEFT_NUM_THREADS, 0 when unset. Read while the host topology is first made, where no error can
// be raised to a caller that could handle it: a malformed value is reported and ignored.
int threads_from_environment() {
  const char* value = std::getenv(kThreadsVar);
  if (!value || !*value) return 0;
  const std::optional<int> n = parse_count(value, 4096);
  if (!n) std::fprintf(stderr, "weft: [device] %s='%s' is not a thread count from 1 to 4096; ignored\n", kThreadsVar, value);
  return n.value_or(0);
}

HostTopology read_topology() {
  HostTopology t;
  hwloc_topology_t topo;
  if (hwloc_topology_init(&topo) != 0) return t;
  if (hwloc_topology_load(topo) == 0) {
    int cores = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_CORE);
    int pus = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_PU);
    int numa = hwloc_get_nbobjs_by_type(topo, HWLOC_OBJ_NUMANODE);
    t.physical_cores = cores > 0 ? cores : (pus > 0 ? pus : 1);
    t.logical_cores = pus > 0 ? pus : t.physical_cores;
    t.numa_nodes = numa > 0 ? numa : 1;
    hwloc_obj_t root = hwloc_get_root_obj(topo);
    if (root) t.memory_bytes = static_cast<int64_t>(root->total_memory);
    t.usable_cores = t.physical_cores;
    if (hwloc_bitmap_t bound = hwloc_bitmap_alloc()) {
      if (hwloc_get_cpubind(topo, bound, HWLOC_CPUBIND_PROCESS) == 0 && !hwloc_bitmap_iszero(bound)) {
        // Cores with at least one hardware thread in the binding.
        const int n = hwloc_get_nbobjs_inside_cpuset_by_type(topo, bound, HWLOC_OBJ_CORE);
        int partial = 0;
        for (hwloc_obj_t core = nullptr; (core = hwloc_get_next_obj_by_type(topo, HWLOC_OBJ_CORE, core));)
          if (hwloc_bitmap_intersects(core->cpuset, bound)) ++partial;
        t.usable_cores = std::max({n, partial, 1});
      }
      hwloc_bitmap_free(bound);
    }
  }
  hwloc_topology_destroy(topo);
  t.usable_cores = cores_for_this_process(t.physical_cores, std::min(t.usable_cores, t.physical_cores),
                                          local_processes_from_launcher(), threads_from_environment());
  // hwloc's root total can under-report (or be 0) where it cannot read NUMA memory, e.g. in some
  // containers; the kernel's page count is always there.
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) t.memory_bytes = std::max(t.memory_bytes, int64_t{pages} * page_size);
  return t;
}

class CpuDevice final : public Device {
 public:
  // Logical CPU `index` of `count`: the host's cores are shared out evenly, so `count` devices
  // running kernels at once do not oversubscribe the machine.
  CpuDevice(int index, int count) : Device(local_device_name(DeviceType::CPU, index), DeviceType::CPU, index) {
    const HostTopology& t = host_topology();
    memory_bytes_ = t.memory_bytes;
    cores_ = std::max(1, t.usable_cores / count);
    count_ = count;
    pool_ = std::make_unique<ThreadPool>(cores_);
  }
  std::string description() const override {
    const HostTopology& t = host_topology();
    std::string s = std::to_string(t.physical_cores) + " cores, " + std::to_string(t.logical_cores) +
                    " hardware threads, " + std::to_string(t.numa_nodes) + " NUMA node(s)";
    if (count_ > 1)
      s = "logical CPU " + std::to_string(index_) + " of " + std::to_string(count_) + ", " + std::to_string(cores_) +
          " thread(s) of the host's " + s;
    else if (t.usable_cores != t.physical_cores)
      s = std::to_string(cores_) + " thread(s) of the host's " + s;
    return s;
  }
  Allocator& allocator() override { return CpuAllocator::instance(); }
  ThreadPool& pool() override { return *pool_; }
  void copy_to_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }

 private:
  int count_ = 1;
  std::unique_ptr<ThreadPool> pool_;
};

struct DeviceSet {
  int cpus = 0;
  std::vector<std::unique_ptr<Device>> owned;
  std::vector<Device*> all;
};

constexpr const char* kLogicalCpusVar = "WEFT_LOGICAL_CPUS";

// The device set is made once, on first use, with the CPU count fixed by then; creation may throw
// (a malformed WEFT_LOGICAL_CPUS), in which case the next use tries again.
std::mutex g_devices_mu;
int g_requested_cpus = 0;  // set_logical_cpus; 0: not called. Guarded by g_devices_mu.
std::atomic<DeviceSet*> g_devices{nullptr};

int cpus_from_environment() {
  const char* value = std::getenv(kLogicalCpusVar);
  if (!value || !*value) return 1;
  const std::optional<int> n = parse_count(value, kMaxLogicalCpus);
  if (!n)
    throw InvalidArgument(std::string("[") + kLogicalCpusVar + "] environment variable " + kLogicalCpusVar + "='" +
                          value + "' is not a number of logical CPU devices from 1 to " +
                          std::to_string(kMaxLogicalCpus));
  return *n;
}

DeviceSet& create_devices() {
  std::lock_guard<std::mutex> lock(g_devices_mu);
  if (DeviceSet* s = g_devices.load(std::memory_order_relaxed)) return *s;
  int cpus = g_requested_cpus ? g_requested_cpus : cpus_from_environment();
  // Leaked on purpose: tensors held by static objects may be destroyed after main returns.
  auto* s = new DeviceSet();
  s->cpus = cpus;
  for (int i = 0; i < cpus; ++i) s->owned.push_back(std::make_unique<CpuDevice>(i, cpus));
  for (auto& d : create_cuda_devices()) s->owned.push_back(std::move(d));
  for (auto& d : s->owned) s->all.push_back(d.get());
  g_devices.store(s, std::memory_order_release);
  return *s;
}

DeviceSet& device_set() {
  DeviceSet* s = g_devices.load(std::memory_order_acquire);
  return s ? *s : create_devices();
}

}  // namespace

int cores_for_this_process(int machine_cores, int bound_cores, int local_processes, int threads_override) {
  if (threads_override > 0) return threads_override;
  machine_cores = std::max(1, machine_cores);
  const int share = std::max(1, machine_cores / std::max(1, local_processes));
  const int bound = bound_cores > 0 ? std::min(bound_cores, machine_cores) : machine_cores;
  return std::min(bound, share);
}

const HostTopology& host_topology() {
  static const HostTopology t = read_topology();
  return t;
}

const std::vector<Device*>& local_devices() { return device_set().all; }

std::vector<DeviceInfo> local_device_infos() {
  std::vector<DeviceInfo> out;
  for (Device* d : local_devices())
    out.push_back({d->name(), device_type_name(d->type()), d->memory_bytes(), d->cores(), d->description()});
  return out;
}

Device* cpu_device() {
  static Device* cpu = device_set().all.front();
  return cpu;
}

bool local_devices_created() { return g_devices.load(std::memory_order_acquire) != nullptr; }

void set_logical_cpus(int n) {
  if (n < 1 || n > kMaxLogicalCpus)
    throw InvalidArgument("[set_logical_cpus] asked for " + std::to_string(n) +
                          " logical CPU devices; the count must be from 1 to " + std::to_string(kMaxLogicalCpus));
  std::lock_guard<std::mutex> lock(g_devices_mu);
  if (DeviceSet* s = g_devices.load(std::memory_order_relaxed)) {
    if (s->cpus != n)
      throw FailedPrecondition("[set_logical_cpus] asked for " + std::to_string(n) +
                               " logical CPU devices, but this process already created its devices with " +
                               std::to_string(s->cpus) +
                               "; call set_logical_cpus before the first op, tensor or device lookup");
    return;
  }
  g_requested_cpus = n;
}

int logical_cpus() {
  {
    std::lock_guard<std::mutex> lock(g_devices_mu);
    if (DeviceSet* s = g_devices.load(std::memory_order_relaxed)) return s->cpus;
    if (g_requested_cpus) return g_requested_cpus;
  }
  return cpus_from_environment();
}

namespace {

std::mutex g_task_mu;
std::string g_task_job = "localhost";  // guarded by g_task_mu
int g_task_index = 0;                  // guarded by g_task_mu

}  // namespace

void set_local_task(std::string_view job, int task) {
  if (job.empty() || task < 0)
    throw InvalidArgument("[set_local_task] needs a job name and a task index >= 0, got '" + std::string(job) + "', " +
                          std::to_string(task));
  std::lock_guard<std::mutex> lock(g_task_mu);
  g_task_job = job;
  g_task_index = task;
}

std::string local_task_name() {
  std::lock_guard<std::mutex> lock(g_task_mu);
  return "/job:" + g_task_job + "/replica:0/task:" + std::to_string(g_task_index);
}

std::string cluster_device_name(const Device& device) {
  return local_task_name() + "/device:" + device_type_name(device.type()) + ":" + std::to_string(device.index());
}

Device* find_device(std::string_view name) {
  DeviceSpec want = DeviceSpec::parse(name);
  if (want.replica && *want.replica != 0) return nullptr;
  {
    // Either the process's own names (job localhost, task 0) or its task's in the cluster.
    std::lock_guard<std::mutex> lock(g_task_mu);
    const bool as_local = (!want.job || *want.job == "localhost") && (!want.task || *want.task == 0);
    const bool as_task = (!want.job || *want.job == g_task_job) && (!want.task || *want.task == g_task_index);
    if (!as_local && !as_task) return nullptr;
  }
  for (Device* d : local_devices()) {
    if (want.type && *want.type != d->type()) continue;
    if (want.index && *want.index != d->index()) continue;
    return d;
  }
  return nullptr;
}

}  // namespace weft
