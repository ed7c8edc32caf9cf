#include "scheduler/passes/fuse_elementwise.h"
namespace weft { int fuse_elementwise(GraphIR&) { return 0; } }
