@0x8d9c037fd5497bb6;
using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("weft::proto");
# The weft graph file (runtime/graph_format.h). Files are written after an 8-byte magic,
# "WEFTGRPH", as one unpacked Cap'n Proto message whose root is GraphFile.
#
# Evolving the format: never renumber, retype or reuse a field; add fields after the last one,
# with defaults that mean what older files meant. Old files then keep loading unchanged. Raise
# formatVersion whenever the writer starts using something new; raise minReaderVersion only when
# a reader that ignores the new thing would run the graph wrongly (older readers refuse such files
# with a message naming both versions).

struct GraphFile {
  formatVersion @0 :UInt32;
  minReaderVersion @1 :UInt32;
  graph @2 :Graph;
  # The variables of the graph and of all its subgraphs, once each; graphs refer to them by index.
  variables @3 :List(VariableDecl);
}

enum DType {
  float16 @0;
  bfloat16 @1;
  float32 @2;
  float64 @3;
  int8 @4;
  uint8 @5;
  int32 @6;
  int64 @7;
  bool @8;
}

struct Graph {
  # Nodes in creation order; a node's index in this list is its id in the file.
  nodes @0 :List(Node);
  # Function bodies: the argument placeholders in order, and the results.
  args @1 :List(UInt32);
  results @2 :List(Endpoint);
  # The variables this graph reads or writes, under the name its nodes' "var" attribute uses.
  variables @3 :List(VariableRef);
  # TF1 graphs: the nodes that initialise variables created in the graph.
  initializers @4 :List(UInt32);
}

struct Endpoint {
  node @0 :UInt32;
  index @1 :UInt32;
}

struct Node {
  name @0 :Text;
  op @1 :Text;
  inputs @2 :List(Endpoint);
  controlInputs @3 :List(UInt32);
  attrs @4 :List(Attr);
  outputs @5 :List(TensorMeta);
  requestedDevice @6 :Text;
  assignedDevice @7 :Text;
  location @8 :SourceLocation;
}

struct SourceLocation {
  file @0 :Text;
  function @1 :Text;
  line @2 :UInt32;
}

struct TensorMeta {
  dtype @0 :DType;
  shape @1 :List(Int64);  # -1: unknown
}

struct TensorValue {
  dtype @0 :DType;
  shape @1 :List(Int64);
  data @2 :Data;  # row-major, little-endian
}

struct Attr {
  name @0 :Text;
  value :union {
    bool @1 :Bool;
    int @2 :Int64;
    float @3 :Float64;
    type @4 :DType;
    shape @5 :List(Int64);
    intList @6 :List(Int64);
    string @7 :Text;
    tensor @8 :TensorValue;
    graph @9 :Graph;
  }
}

struct VariableDecl {
  name @0 :Text;
  dtype @1 :DType;
  shape @2 :List(Int64);
  trainable @3 :Bool = true;
}

struct VariableRef {
  name @0 :Text;
  variable @1 :UInt32;  # index into GraphFile.variables
}
