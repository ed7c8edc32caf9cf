// The profiler: a timeline of what ran where, across every task of the cluster, written as a
// Chrome trace (open it in ui.perfetto.dev or chrome://tracing).
//
//   weft::profiler::start();                 // every task records from now on
//   for (int i = 0; i < 10; ++i) sess.run({{x, batch}}, {loss}, {train});
//   weft::profiler::stop("trace.json");      // gathered on the chief, written there
//
// Recorded: every kernel the executors run (named after its node; the track is the device it ran
// on), Send, each Recv's whole wait (from its start until its tensor came), asynchronous kernels
// such as collectives, and each step on each task. In a cluster, start() and stop() act on every
// task (this process must be the chief); each task's events are moved onto the chief's clock.
// Without a cluster, they act on this process alone. Off, recording costs the executor one
// relaxed atomic load per node.
#pragma once

#include <string>

namespace weft::profiler {

// Starts recording, discarding anything recorded before. FailedPrecondition when already
// started; in a cluster, Unavailable or DeadlineExceeded naming a task that does not answer.
void start();

// Stops recording everywhere and writes the trace to `path` (on the chief).
// FailedPrecondition without start(); an error naming `path` when it cannot be written; in a
// cluster, Unavailable or DeadlineExceeded naming a task that does not answer (recording has
// stopped here either way).
void stop(const std::string& path);

// Whether start() was called and stop() not yet.
bool started();

}  // namespace weft::profiler
