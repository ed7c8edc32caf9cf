// The shared state behind a Variable handle. It lives in the runtime layer so that graphs can
// hold the variables they read and write, and kernels (ReadVariable, AssignVariable) can reach
// them through the RunContext, without knowing the api layer's Variable class.
#pragma once

#include <string>

#include "runtime/tensor.h"

namespace weft {

struct VariableState {
  Tensor value;  // undefined until initialised (a Variable made in a Graph waits for its Session)
  DType dtype = DType::Float32;
  Shape shape;
  std::string name;
  bool trainable = true;
  // The device requested where it was made (a DeviceScope around its creation), "" for none.
  // Placement keeps every node of the variable there, whichever graph or plan is compiled.
  std::string device;
};

}  // namespace weft
