#include "comm/step_collectives.h"

#include "comm/collective_executor.h"
#include "runtime/error.h"

#ifdef WEFT_WITH_NCCL
#include "comm/nccl/nccl_collectives.h"
#endif

namespace weft {

namespace {

class ProcessStepCollectives final : public Collectives {
 public:
  void run_async(const CollectiveParams& p, int64_t step_id, std::vector<Tensor> inputs,
                 CancellationManager* cancellation, Done done) override {
    process_collectives().run_async(p, step_id, std::move(inputs), cancellation, std::move(done));
  }

  void run_on_device_async(DeviceCollectiveCall call, std::function<void(std::exception_ptr)> done) override {
#ifdef WEFT_WITH_NCCL
    process_nccl_collectives().run_async(NcclCall{.p = std::move(call.p),
                                                  .step_id = call.step_id,
                                                  .cancellation = call.cancellation,
                                                  .device = call.device,
                                                  .compute = static_cast<cudaStream_t>(call.stream),
                                                  .inputs = std::move(call.inputs),
                                                  .outputs = std::move(call.outputs)},
                                         std::move(done));
#else
    done(std::make_exception_ptr(
        FailedPrecondition("[" + call.p.op + "] weft was built without CUDA, so without NCCL")));
#endif
  }
};

}  // namespace

Collectives& process_step_collectives() {
  static ProcessStepCollectives collectives;
  return collectives;
}

}  // namespace weft
