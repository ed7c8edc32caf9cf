// Where random ops get their numbers. A random op (RandomNormal, RandomUniform: flag kRandom)
// draws with Philox (kernels/philox.h), keyed by a 64-bit seed, the block index in the counter's
// low 64 bits and a stream number in its high 64 bits. Which key and stream:
//
//  * An explicit seed (attr "seed" >= 0): key = seed, stream 0. The same numbers in every mode,
//    on every device, on every call (as before).
//  * Eager, unseeded (seed -1): key = the next seed of this process's sequence, stream 0. Each call
//    gives new numbers; set_global_seed (weft::random::set_seed) makes the sequence reproducible.
//  * An unseeded node of a compiled graph: key = its "stream_seed" attribute, stream = how many
//    times the node ran before in the executor that holds it (KernelContext::execution).
//
// Why the last rule (weft issue 14). Before it, an unseeded node drew from the sequence of the
// process that ran its kernel, when it ran. Placed on a worker task of a cluster it drew from the
// worker's sequence, so the numbers differed from the same program in one process even after
// set_seed on the chief; and in one process the parallel executor ran concurrent unseeded nodes
// in any order, so which node got which seed changed run to run. Now:
//  - CompiledGraph (scheduler/graph_compiler.cpp), the one funnel every graph goes through on
//    the process that owns it -- weft::function, Session and its initialisers, the cluster
//    Session, DataParallel -- gives every unseeded random node a stream_seed drawn from THIS
//    process's sequence (the chief's, in a cluster), in node order, after pruning and before
//    optimisation, placement and partitioning (scheduler/passes/random_streams.h). Only nodes
//    the plan runs draw (a weight initialiser lifted out of a traced function, left dead in its
//    graph, takes nothing from the sequence), and on its first call a traced function whose
//    random ops all run draws the numbers the same code draws eagerly. Partitions
//    are shipped as graphs with all their attributes, so a node on task 2 carries the key the
//    chief drew: the same key it gets in one process after the same set_seed, whatever the
//    placement.
//  - The per-run stream is a counter of the node's own runs, kept by the executor that runs it.
//    A node runs on exactly one task, once per step (or once per loop iteration inside a While
//    body), so its count is the same in one process and in a cluster, and no other node's
//    runs -- concurrent or not -- can change it. The step id was not used: a cluster numbers its
//    steps across every graph of the cluster, one process across its partitioned graphs only,
//    so the two would not agree. Every run draws a new stream: an unseeded op in a traced graph
//    still gives new numbers on every call, as TensorFlow's stateful random ops do.
//  - Compiling again (a retrace, a Session's new fetch set, a second Session of the same graph)
//    draws new keys, and a fresh executor counts from 0: after set_seed(s), rebuilding and
//    rerunning a program gives the same numbers.
//  - Data-parallel replicas: DataParallel replicates the traced step and compiles the replicated
//    graph, so each replica's copy of an unseeded op (dropout) gets its own key, in replica
//    order: different numbers per replica, as in TensorFlow, and the same on every run of the
//    program after set_seed.
// Limits: draws concurrent with compilation (eager unseeded ops on another thread) interleave
// with its draws nondeterministically; runs of one compiled graph from several threads at once
// take the node's run numbers in whatever order they reach it.
#pragma once

#include <cstdint>

namespace weft {

class Attrs;

// `seed` itself when >= 0, else the next seed of the sequence.
int64_t resolve_seed(int64_t seed);
// Restarts the sequence: the unseeded draws that follow are reproducible.
void set_global_seed(int64_t seed);

// The Philox key and stream one run of a random op draws with (rules above): `attrs` are the
// op's ("seed", and "stream_seed" when compiled), `execution` KernelContext::execution. A
// negative stream_seed (from a hand-written graph file) counts as absent.
struct RandomStream {
  uint64_t key = 0;
  uint64_t stream = 0;
};
RandomStream random_stream(const Attrs& attrs, uint64_t execution);

}  // namespace weft
