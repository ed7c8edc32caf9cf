// What an array file's header declares (IDX, .npy), read without the data: the element type weft
// reads it as and the shape.
#pragma once

#include "runtime/dtype.h"
#include "runtime/shape.h"

namespace weft {

struct ArrayHeader {
  DType dtype = DType::UInt8;
  Shape shape;
};

}  // namespace weft
