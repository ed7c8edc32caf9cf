#include "kernels/register_all.h"

#include <mutex>

#include "kernels/cpu/gemm.h"

namespace weft {

void register_builtin_ops() {
  static std::once_flag once;
  std::call_once(once, [] {
    // OpenBLAS runs single-threaded and weft's pool threads its products (kernels/cpu/gemm.h):
    // its thread count is process-wide and changes the bits, so it is set once, here, and a
    // single set of busy threads keeps the cores (two busy pools of two threads each on two cores
    // made libtorch 4x slower).
    cpu::use_single_threaded_blas();

    defs::register_math_defs();
    defs::register_creation_defs();
    defs::register_nn_defs();
    defs::register_linalg_defs();
    defs::register_array_defs();
    defs::register_reduce_defs();
    defs::register_random_defs();
    defs::register_loss_defs();
    defs::register_training_defs();
    defs::register_broadcast_defs();
    defs::register_scatter_defs();
    defs::register_pad_defs();
    defs::register_graph_defs();
    defs::register_control_flow_defs();
    defs::register_fused_defs();
    defs::register_transfer_defs();
    defs::register_collective_defs();
    defs::register_input_defs();
    defs::register_conv_defs();
    defs::register_pooling_defs();
    defs::register_normalization_defs();
    defs::register_attention_defs();
    defs::register_trig_defs();

    cpu::register_math_kernels();
    cpu::register_cast_kernels();
    cpu::register_creation_kernels();
    cpu::register_nn_kernels();
    cpu::register_linalg_kernels();
    cpu::register_array_kernels();
    cpu::register_reduce_kernels();
    cpu::register_random_kernels();
    cpu::register_loss_kernels();
    cpu::register_training_kernels();
    cpu::register_broadcast_kernels();
    cpu::register_scatter_kernels();
    cpu::register_pad_kernels();
    cpu::register_graph_kernels();
    cpu::register_control_flow_kernels();
    cpu::register_fused_kernels();
    cpu::register_transfer_kernels();
    cpu::register_collective_kernels();
    cpu::register_input_kernels();
    cpu::register_conv_kernels();
    cpu::register_pooling_kernels();
    cpu::register_normalization_kernels();
    cpu::register_attention_kernels();
    cpu::register_trig_kernels();
    cuda::register_cuda_kernels();
  });
}

}  // namespace weft
