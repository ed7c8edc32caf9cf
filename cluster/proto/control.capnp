@0xba334f1bc2442ff4;
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("weft::proto");
# The cluster's control protocol (cluster/control_channel.h): the chief sends Requests to a task,
# the task answers each with a Reply. Messages travel as unpacked Cap'n Proto messages over MPI,
# on a communicator of their own (tensors travel on another, through the MPI rendezvous).
# Messages are untrusted: every field is checked by its reader.
#
# Per step only RunStep (a handle, a step id and small feeds) and its Reply (small fetches) travel:
# partitions are registered once; other tensors move through Send and Recv (the MPI rendezvous).
# Small tensors ride in the step's own messages, as TensorFlow's RunGraph carries feeds and
# fetches, because a separate rendezvous message costs a second hop through another process's
# progress thread (comm/step_rendezvous.h).
# Evolving: never renumber, retype or reuse a field; add after the last one.

struct Request {
  union {
    register @0 :Register;      # ship a graph's partitions for this task, once
    runStep @1 :RunStep;        # run registered partitions for one step
    abortStep @2 :AbortStep;    # stop a running step (another task failed)
    release @3 :Release;        # forget a registered graph
    endSession @4 :UInt64;      # forget a session's variables
    shutdown @5 :Void;          # the chief is done: leave the serve loop and exit
    ping @6 :Void;              # liveness
    resetCollectives @7 :Void;  # drop pending collectives and remake their communicator (every task)
    timelineControl @8 :TimelineControl;  # start or stop recording the timeline; send its events
    stepDone @9 :Reply;         # a task's answer for itself and its subtree, to its parent in the step's tree
    endJob @10 :Int32;          # a task got this signal (SIGTERM, SIGINT): exit now, 128 + it (cluster/job_signals.h)
    stallReport @11 :Int64;     # a step has stalled: say what this task is running and waiting for
    flightRecord @12 :FlightRecordRequest;  # a step stalled or failed: send the flight recorder's entries
  }
}

# The chief gathers every task's flight recorder (runtime/flight_recorder.h) into one file
# (cluster/flight_record.h). The task answers with its entries and its clock on receipt, as for
# the timeline, so the chief can move them onto its own clock.
struct FlightRecordRequest {
  id @0 :UInt64;                # echoed in Reply.handle
  stepId @1 :Int64;             # the step it is for (for the task's log only)
}

# One transfer or collective (runtime/flight_recorder.h's FlightEntry).
struct FlightEntry {
  seq @0 :UInt64;
  kind @1 :Text;                # at most 64 bytes
  peer @2 :Int32;
  tag @3 :Int32;
  bytes @4 :UInt64;
  group @5 :Int64;
  step @6 :Int64;
  startUs @7 :Int64;            # the task's steady clock, microseconds
  endUs @8 :Int64;              # 0 while pending
  state @9 :UInt8;              # weft::FlightState
}

# The profiler (api/profiler.h): turns the task's timeline recording on or off and, when asked,
# answers with the events it recorded and its clock's reading on receipt (so the chief can put
# every task's events on its own clock: the task's offset is taskTime - (sent + received) / 2).
struct TimelineControl {
  id @0 :UInt64;                # echoed in Reply.handle
  enable @1 :Bool;              # record from now on (true) or stop (false)
  collect @2 :Bool;             # answer with the events recorded so far, taking them out
  chiefTime @3 :Int64;          # the chief's steady clock when it sent this, microseconds
}

struct Register {
  session @0 :UInt64;           # variables are shared by every graph of a session
  handle @1 :UInt64;            # chosen by the chief, unique in the job
  partitions @2 :List(Data);    # each a graph file (runtime/graph_format.h), one per device
  replyEdges @3 :List(Text);    # transfers (keys of step 0, as text) whose small tensors go back in the Reply
}

# A step travels down a tree over the tasks it touches (cluster/step_tree.h): the chief sends it to
# a few tasks, and each forwards it to the tasks of its subtree, so no process sends more than
# the tree's fan-out of messages per step. The answers come back up the same tree (Reply.gathered).
struct RunStep {
  handle @0 :UInt64;
  stepId @1 :Int64;
  tensors @2 :List(StepTensor); # sends of the chief's to this task, delivered before the step runs
  subtree @3 :List(ForwardedStep);  # the tasks this one forwards the step to, with their subtrees
}

struct ForwardedStep {
  rank @0 :Int32;
  tensors @1 :List(StepTensor);     # the chief's sends to that task
  subtree @2 :List(ForwardedStep);
}

# One task's answer to a step, carried up the tree by the tasks above it.
struct GatheredAnswer {
  rank @0 :Int32;
  hasError @1 :Bool;
  error @2 :ErrorInfo;
  tensors @3 :List(StepTensor);     # the task's small sends to the chief (replyEdges)
}

# A tensor sent under a rendezvous key (runtime/rendezvous.h), carried by a step's message.
struct StepTensor {
  key @0 :Text;                 # RendezvousKey::to_string(); its step is the message's
  dtype @1 :UInt32;             # weft::DType
  shape @2 :List(Int64);
  data @3 :Data;                # row-major, this machine's byte order
  isDead @4 :Bool;              # the producer's branch was not taken (control flow)
  hasValue @5 :Bool;            # false: no tensor (dtype, shape and data unset)
}

struct AbortStep {
  stepId @0 :Int64;
  error @1 :ErrorInfo;
}

struct Release {
  handle @0 :UInt64;
}

struct ErrorInfo {
  code @0 :UInt32;              # weft::ErrorCode
  message @1 :Text;             # names the task, the node and the user's file:line
}

struct Reply {
  # What is answered: the request's kind and, for a step, its id.
  kind @0 :Kind;
  stepId @1 :Int64;
  handle @2 :UInt64;
  error @3 :ErrorInfo;          # set when hasError
  hasError @4 :Bool;
  timeline @5 :Data;            # kind timeline: the task's events (runtime/timeline_format.h)
  taskTime @6 :Int64;           # kind timeline: the task's steady clock on receipt, microseconds
  tensors @7 :List(StepTensor); # kind runStep: sends of the task's to the chief (replyEdges)
  gathered @8 :List(GatheredAnswer);  # kind runStep: the answers of the sender's subtree
  signal @9 :Int32;             # kind signal: SIGTERM or SIGINT, which the task got (cluster/job_signals.h)
  report @10 :Text;             # kind stallReport: what the task runs and waits for, a line each
  inCollective @11 :Bool;       # kind stallReport: a collective of the task waits for its group
  flight @12 :List(FlightEntry);  # kind flightRecord: the task's entries, oldest first (taskTime set too)
  flightRecorded @13 :UInt64;   # kind flightRecord: entries the task recorded in all

  enum Kind {
    register @0;
    runStep @1;
    release @2;
    endSession @3;
    ping @4;
    resetCollectives @5;
    timeline @6;
    signal @7;                  # unasked: the task got a stop signal; the chief ends the job
    stallReport @8;             # handle: the step's id
    flightRecord @9;            # handle: the request's id
  }
}
