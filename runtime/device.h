// A Device is a place where kernels run and tensors live: the host CPU (one per process, or
// several logical ones) or a CUDA GPU. Devices are discovered once, on first use, and live for
// the whole process.
//
//   for (Device* d : local_devices()) std::cout << d->name() << "\n";
//   Device* gpu = find_device("/gpu:0");   // nullptr when there is no such device
#pragma once

#include <cstdint>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "runtime/allocator.h"
#include "runtime/device_info.h"
#include "runtime/device_name.h"
#include "runtime/thread_pool.h"

namespace weft {

class Device {
 public:
  virtual ~Device() = default;
  const std::string& name() const { return name_; }
  DeviceType type() const { return type_; }
  int index() const { return index_; }
  int64_t memory_bytes() const { return memory_bytes_; }
  int cores() const { return cores_; }
  virtual std::string description() const = 0;

  virtual Allocator& allocator() = 0;
  // Intra-op pool for CPU kernels (the host pool for a GPU device's host-side work).
  virtual ThreadPool& pool() = 0;
  // copy_to_host returns when dst holds the bytes. copy_from_host returns once src has been read
  // (the caller may reuse it) and is ordered before every kernel queued on the device after it:
  // on a GPU the DMA may still be running, but the compute stream waits for it. copy_on_device is
  // queued in order with the device's kernels (on a GPU, its compute stream).
  virtual void copy_to_host(const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_from_host(const void* src, void* dst, size_t bytes) = 0;
  virtual void copy_on_device(const void* src, void* dst, size_t bytes) = 0;
  // copy_to_host without holding the caller: `done` runs once dst holds the bytes (null) or the
  // copy failed, exactly once, on any thread (a GPU's copy thread); both buffers stay alive until
  // then. The default copies at once and calls done inline.
  virtual void copy_to_host_async(const void* src, void* dst, size_t bytes,
                                  std::function<void(std::exception_ptr)> done);
  // Whether copy_to_peer can copy from this device to `to` without the host. Never between CPUs,
  // which share host memory and need no copy; between two GPUs with a peer path.
  virtual bool can_copy_to_peer(Device& /*to*/) { return false; }
  // Queues a copy of `bytes` from `src` on this device into `dst` on `to` (can_copy_to_peer(to)),
  // ordered after the work queued on both devices so far and before the work queued on `to`
  // afterwards. Returns at once; `read` runs once, on any thread, when the copy has read `src`,
  // and the caller holds the source until then (its tensor: while it is held, the allocator does
  // not reuse its block, and no kernel writes it in place). Neither device waits for the other's
  // later work. On a throw `read` has run. FailedPrecondition when the two have no peer path.
  virtual void copy_to_peer(const void* src, Device& to, void* dst, size_t bytes, std::function<void()> read);
  // Waits for the work queued on the device (a GPU's compute stream). CUDA kernels reach their
  // stream through cuda_context(device) (runtime/cuda/cuda_context.h).
  //
  // On a GPU, synchronize() and the copies to the host (copy_to_host, and copy_to_host_async
  // through `done`) are where the host waits for kernels, so they also raise the InvalidArgument
  // of an out-of-range id a kernel met since the last such wait (GatherV2, UnsortedSegmentSum:
  // runtime/cuda/index_error_record.h), naming the op that met it.
  virtual void synchronize() {}

 protected:
  Device(std::string name, DeviceType type, int index) : name_(std::move(name)), type_(type), index_(index) {}
  std::string name_;
  DeviceType type_;
  int index_;
  int64_t memory_bytes_ = 0;
  int cores_ = 0;
};

// Every device of this process: the logical CPUs in index order, then GPUs in CUDA order. The
// first call creates them (and throws InvalidArgument when WEFT_LOGICAL_CPUS is malformed).
const std::vector<Device*>& local_devices();
// /cpu:0, the device of tensors made without one.
Device* cpu_device();
// The number of logical CPU devices: the devices' own count once they exist, else what they will
// be created with (set_logical_cpus, else WEFT_LOGICAL_CPUS, else 1; a bad variable throws).
int logical_cpus();
// Whether local_devices() has created the devices; from then on their count is fixed.
bool local_devices_created();
// Accepts any form of device name; nullptr when it names no local device. Throws
// InvalidArgument for a name that does not parse.
Device* find_device(std::string_view name);

// In a cluster, this process is one task, "/job:worker/replica:0/task:2": graphs name its devices
// by that prefix ("/job:worker/replica:0/task:2/device:CPU:0"), and find_device accepts such
// names as well as the local ones. Set once, by cluster::init; alone, the task is
// "/job:localhost/replica:0/task:0". InvalidArgument for an empty job or a negative task.
void set_local_task(std::string_view job, int task);
std::string local_task_name();
// The device's full name as the cluster knows it: local_task_name() + "/device:CPU:0".
std::string cluster_device_name(const Device& device);

// Facts about the host used to size pools; read with hwloc.
struct HostTopology {
  int physical_cores = 1;  // the machine's
  int logical_cores = 1;
  int numa_nodes = 1;
  int64_t memory_bytes = 0;
  // The cores this process keeps busy, which size its pools (see cores_for_this_process).
  int usable_cores = 1;
};
const HostTopology& host_topology();

// The cores a process uses, so that the processes of one job on one host do not oversubscribe it
// (with 2 ranks on 2 cores, each running 2 threads, their products took twice as long):
// - `threads_override` (WEFT_NUM_THREADS; 0 when unset) wins;
// - otherwise the fewer of: the cores of its binding (mpirun binds each of up to 2 ranks to a
//   core; `bound_cores` 0: unknown) and its share of the machine's cores among the processes of
//   its job on this host (`local_processes`, from the launcher: OMPI_COMM_WORLD_LOCAL_SIZE,
//   MPI_LOCALNRANKS, SLURM_NTASKS_PER_NODE), at least one, as torchrun gives each of several
//   processes per node one OpenMP thread. The share also covers ranks bound to a whole socket
//   each (mpirun's default beyond 2 ranks), which may hold more cores than their share.
int cores_for_this_process(int machine_cores, int bound_cores, int local_processes, int threads_override);

// Creates the CUDA devices of this process (none when built without CUDA or without a GPU).
std::vector<std::unique_ptr<Device>> create_cuda_devices();
bool cuda_compiled_in();

}  // namespace weft
