// weft: everything a user program needs, in namespace weft.
//
//   #include <weft/weft.h>
//   auto x = weft::constant({1.f, 2.f, 3.f});
//   std::cout << x + 1 << "\n";   // Tensor([2 3 4], shape=(3,), dtype=float32)
#pragma once

#include "api/checkpoint/checkpoint.h"
#include "api/checkpoint/checkpoint_manager.h"
#include "api/control_flow.h"
#include "api/devices.h"
#include "cluster/cluster.h"
#include "api/data/dataset.h"
#include "api/data/idx.h"
#include "api/data/sharded_input.h"
#include "api/dispatch.h"
#include "api/distribute/data_parallel.h"
#include "api/function.h"
#include "api/graph.h"
#include "api/gradient_tape.h"
#include "api/nn/layers.h"
#include "api/nn/losses.h"
#include "api/ops/array.h"
#include "api/ops/collective.h"
#include "api/ops/creation.h"
#include "api/ops/linalg.h"
#include "api/ops/math.h"
#include "api/ops/nn.h"
#include "api/ops/random.h"
#include "api/ops/reduce.h"
#include "api/optim/optimizers.h"
#include "api/profiler.h"
#include "api/session.h"
#include "api/utils/progbar.h"
#include "api/variable.h"
#include "runtime/dtype.h"
#include "runtime/error.h"
#include "runtime/shape.h"
#include "runtime/tensor.h"
