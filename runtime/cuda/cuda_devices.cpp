// CUDA devices, one per visible GPU. Without a GPU (or without a driver) the list is empty and
// everything else keeps working on the CPU.
#include <cuda_runtime.h>

#include <mutex>
#include <string>

#include "runtime/device.h"
#include "runtime/error.h"

namespace weft {

namespace {

void check(cudaError_t err, const char* what) {
  if (err != cudaSuccess)
    throw Internal(std::string("[cuda] ") + what + ": " + cudaGetErrorString(err));
}

class CudaAllocator final : public Allocator {
 public:
  explicit CudaAllocator(int device) : device_(device) {}
  std::string name() const override { return "cuda:" + std::to_string(device_); }
  void* allocate(size_t bytes) override {
    check(cudaSetDevice(device_), "cudaSetDevice");
    void* p = nullptr;
    if (cudaMalloc(&p, bytes ? bytes : 1) != cudaSuccess)
      throw Unavailable("[allocator] out of GPU memory allocating " + std::to_string(bytes) + " bytes on GPU:" +
                        std::to_string(device_));
    std::lock_guard<std::mutex> lock(mu_);
    stats_.num_allocs++;
    stats_.bytes_in_use += static_cast<int64_t>(bytes);
    if (stats_.bytes_in_use > stats_.peak_bytes_in_use) stats_.peak_bytes_in_use = stats_.bytes_in_use;
    return p;
  }
  void deallocate(void* ptr, size_t bytes) override {
    if (!ptr) return;
    cudaSetDevice(device_);
    cudaFree(ptr);
    std::lock_guard<std::mutex> lock(mu_);
    stats_.bytes_in_use -= static_cast<int64_t>(bytes);
  }
  AllocatorStats stats() const override {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }
  void reset_peak() override {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.peak_bytes_in_use = stats_.bytes_in_use;
  }

 private:
  int device_;
  mutable std::mutex mu_;
  AllocatorStats stats_;
};

class CudaDevice final : public Device {
 public:
  explicit CudaDevice(int index) : Device(local_device_name(DeviceType::CUDA, index), DeviceType::CUDA, index),
                                   allocator_(index) {
    cudaDeviceProp prop{};
    check(cudaGetDeviceProperties(&prop, index), "cudaGetDeviceProperties");
    memory_bytes_ = static_cast<int64_t>(prop.totalGlobalMem);
    cores_ = prop.multiProcessorCount;
    model_ = prop.name;
    check(cudaSetDevice(index), "cudaSetDevice");
    check(cudaStreamCreateWithFlags(&stream_, cudaStreamNonBlocking), "cudaStreamCreate");
  }
  std::string description() const override {
    return model_ + ", " + std::to_string(cores_) + " SMs";
  }
  Allocator& allocator() override { return allocator_; }
  ThreadPool& pool() override { return cpu_device()->pool(); }
  void copy_to_host(const void* src, void* dst, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToHost, stream_), "copy to host");
    check(cudaStreamSynchronize(stream_), "synchronize");
  }
  void copy_from_host(const void* src, void* dst, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyHostToDevice, stream_), "copy from host");
    check(cudaStreamSynchronize(stream_), "synchronize");
  }
  void copy_on_device(const void* src, void* dst, size_t bytes) override {
    check(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, stream_), "copy on device");
  }
  void* stream() override { return stream_; }
  void synchronize() override { check(cudaStreamSynchronize(stream_), "synchronize"); }

 private:
  CudaAllocator allocator_;
  cudaStream_t stream_ = nullptr;
  std::string model_;
};

}  // namespace

std::vector<std::unique_ptr<Device>> create_cuda_devices() {
  std::vector<std::unique_ptr<Device>> out;
  int count = 0;
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();  // clear the sticky "no driver" error
    return out;
  }
  for (int i = 0; i < count; ++i) out.push_back(std::make_unique<CudaDevice>(i));
  return out;
}

bool cuda_compiled_in() { return true; }

}  // namespace weft
