// One registration function per op family, each defined in api/ops/<family>.cpp beside the
// family's front-ends; register_builtin_gradients() calls them all once.
#pragma once

namespace weft {
void register_math_gradients();
void register_linalg_gradients();
void register_array_gradients();
void register_reduce_gradients();
void register_nn_gradients();
void register_loss_gradients();
void register_broadcast_gradients();
void register_control_flow_gradients();
void register_conv_gradients();
void register_pooling_gradients();
void register_normalization_gradients();
void register_attention_gradients();
void register_attention_second_order_gradients();  // api/ops/attention_second_order.cpp, by the above
void register_trig_gradients();
void register_clipping_gradients();  // api/optim/clipping.cpp
}  // namespace weft
