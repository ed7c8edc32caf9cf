// random_streams: gives every unseeded random node (a kRandom op whose "seed" is -1) of a graph,
// and of the If/While bodies it holds, a "stream_seed" drawn from this process's seed sequence,
// in node order (ids, creation order; a body's nodes right after the node that holds it). Run
// by CompiledGraph on the process that owns the graph -- the chief in a cluster -- before
// placement and partitioning, so that wherever a node runs it draws the numbers it would draw
// in one process after the same weft::random::set_seed. The reasoning is in runtime/random_seed.h.
//
//   int given = give_random_streams(g);
#pragma once

#include "runtime/graph.h"

namespace weft {

// Overwrites any stream_seed already there (a graph compiled before and compiled again gets new
// keys, as every compilation does). Bodies that hold an unseeded random node are copied first:
// other graphs may share them. Returns how many nodes got a stream_seed.
int give_random_streams(GraphIR& g);

}  // namespace weft
