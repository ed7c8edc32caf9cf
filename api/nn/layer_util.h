// Helpers the built-in layers share (internal to api/nn).
#pragma once

#include <string>

#include "api/dispatch.h"
#include "api/nn/layers.h"

namespace weft::nn::detail {

// " (called at train.cpp:42)": a layer's own argument checks name the line that called it.
std::string called_at(const SourceLocation& loc);
// The built-in activations, applied at the layer's call site; any other callable runs as given.
Tensor activate(const Activation& f, const Tensor& y, const SourceLocation& loc);

}  // namespace weft::nn::detail
