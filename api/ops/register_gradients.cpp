#include "api/ops/register_gradients.h"

#include <mutex>

#include "api/distribute/replica_context.h"
#include "api/gradient_registry.h"

namespace weft {

void register_builtin_gradients() {
  static std::once_flag once;
  std::call_once(once, [] {
    register_math_gradients();
    register_linalg_gradients();
    register_array_gradients();
    register_reduce_gradients();
    register_nn_gradients();
    register_loss_gradients();
    register_broadcast_gradients();
    register_control_flow_gradients();
    register_conv_gradients();
    register_pooling_gradients();
    register_normalization_gradients();
    register_attention_gradients();
    register_trig_gradients();
    register_clipping_gradients();
    distribute::register_replica_gradients();
  });
}

}  // namespace weft
