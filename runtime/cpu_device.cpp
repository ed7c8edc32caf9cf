// The host CPU device, sized from hwloc's view of the machine.
#include <hwloc.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <mutex>

#include "runtime/device.h"
#include "runtime/error.h"

namespace weft {

namespace {

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
  }
  hwloc_topology_destroy(topo);
  // hwloc's root total can under-report (or be 0) where it cannot read NUMA memory, e.g. in some
  // containers; the kernel's page count is always there.
  long pages = sysconf(_SC_PHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) t.memory_bytes = std::max(t.memory_bytes, int64_t{pages} * page_size);
  return t;
}

class CpuDevice final : public Device {
 public:
  CpuDevice() : Device(local_device_name(DeviceType::CPU, 0), DeviceType::CPU, 0) {
    const HostTopology& t = host_topology();
    memory_bytes_ = t.memory_bytes;
    cores_ = t.physical_cores;
    pool_ = std::make_unique<ThreadPool>(t.physical_cores);
  }
  std::string description() const override {
    const HostTopology& t = host_topology();
    return std::to_string(t.physical_cores) + " cores, " + std::to_string(t.logical_cores) +
           " hardware threads, " + std::to_string(t.numa_nodes) + " NUMA node(s)";
  }
  Allocator& allocator() override { return CpuAllocator::instance(); }
  ThreadPool& pool() override { return *pool_; }
  void copy_to_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_from_host(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }
  void copy_on_device(const void* src, void* dst, size_t bytes) override { std::memcpy(dst, src, bytes); }

 private:
  std::unique_ptr<ThreadPool> pool_;
};

struct DeviceSet {
  std::vector<std::unique_ptr<Device>> owned;
  std::vector<Device*> all;
};

DeviceSet& device_set() {
  // Leaked on purpose: tensors held by static objects may be destroyed after main returns.
  static DeviceSet* set = [] {
    auto* s = new DeviceSet();
    s->owned.push_back(std::make_unique<CpuDevice>());
    for (auto& d : create_cuda_devices()) s->owned.push_back(std::move(d));
    for (auto& d : s->owned) s->all.push_back(d.get());
    return s;
  }();
  return *set;
}

}  // namespace

const HostTopology& host_topology() {
  static const HostTopology t = read_topology();
  return t;
}

const std::vector<Device*>& local_devices() { return device_set().all; }

Device* cpu_device() {
  static Device* cpu = device_set().all.front();
  return cpu;
}

Device* find_device(std::string_view name) {
  DeviceSpec want = DeviceSpec::parse(name);
  if (want.job && *want.job != "localhost") return nullptr;
  if ((want.replica && *want.replica != 0) || (want.task && *want.task != 0)) return nullptr;
  for (Device* d : local_devices()) {
    if (want.type && *want.type != d->type()) continue;
    if (want.index && *want.index != d->index()) continue;
    return d;
  }
  return nullptr;
}

}  // namespace weft
