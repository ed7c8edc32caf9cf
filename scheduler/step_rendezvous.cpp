#include "scheduler/step_rendezvous.h"

#include "runtime/device_transfer.h"

namespace weft {

bool fits_step_message(const Tensor& value) {
  return !value.defined() || (readable_on(cpu_device(), value) && value.nbytes() <= kMaxStepMessageTensorBytes);
}

std::string transfer_name(const RendezvousKey& key) {
  RendezvousKey k = key;
  k.step_id = 0;
  return k.to_string();
}

void StepRendezvous::send(const RendezvousKey& key, Tensor value, bool is_dead) {
  if (!edges_.skip && !edges_.capture) return base_.send(key, std::move(value), is_dead);
  const std::string name = transfer_name(key);
  if (edges_.skip && edges_.skip->contains(name)) return;
  if (edges_.capture && edges_.capture->contains(name) && fits_step_message(value)) {
    std::lock_guard lock(mu_);
    captured_.push_back({key, std::move(value), is_dead});
    return;
  }
  base_.send(key, std::move(value), is_dead);
}

std::vector<StepTensor> StepRendezvous::take_captured() {
  std::lock_guard lock(mu_);
  return std::exchange(captured_, {});
}

}  // namespace weft
