// Registers every op definition and every kernel of this library, once. Called by the dispatch
// funnel (and by tools that load graphs) before the first op lookup; safe to call repeatedly.
#pragma once

namespace weft {

void register_builtin_ops();

namespace defs {
void register_math_defs();
void register_nn_defs();
void register_linalg_defs();
void register_array_defs();
void register_reduce_defs();
void register_random_defs();
void register_creation_defs();
void register_loss_defs();
void register_training_defs();
void register_broadcast_defs();
void register_scatter_defs();
void register_pad_defs();
void register_graph_defs();
void register_control_flow_defs();
void register_fused_defs();
void register_transfer_defs();
void register_collective_defs();
void register_input_defs();
void register_conv_defs();
void register_pooling_defs();
void register_normalization_defs();
void register_attention_defs();
void register_trig_defs();
}  // namespace defs

namespace cpu {
void register_math_kernels();
void register_nn_kernels();
void register_linalg_kernels();
void register_array_kernels();
void register_reduce_kernels();
void register_random_kernels();
void register_cast_kernels();
void register_creation_kernels();
void register_loss_kernels();
void register_training_kernels();
void register_broadcast_kernels();
void register_scatter_kernels();
void register_pad_kernels();
void register_graph_kernels();
void register_control_flow_kernels();
void register_fused_kernels();
void register_transfer_kernels();
void register_collective_kernels();
void register_input_kernels();
void register_conv_kernels();
void register_pooling_kernels();
void register_normalization_kernels();
void register_attention_kernels();
void register_trig_kernels();
}  // namespace cpu

namespace cuda {
// Registers GPU kernels when weft is built with CUDA; a no-op otherwise.
void register_cuda_kernels();
}  // namespace cuda

}  // namespace weft
