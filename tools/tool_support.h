// What weft-run and weft-inspect share: the error handling around a command-line tool, and the
// conventions of a saved model (its results are nodes named output_0, output_1, ...).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "runtime/graph.h"

namespace CLI {
class App;
}

namespace weft::tools {

// Parses the command line into `app`, then runs `body`. A usage error is reported by CLI11
// (with --help's hint); any error from `body` becomes one line, "<tool>: error: <message>", on
// stderr. Returns the process exit status: 0, or non-zero after an error.
int run_tool(CLI::App& app, int argc, char** argv, const std::function<void()>& body);

// The names of the nodes output_0, output_1, ... of `g`, in index order; else the graph's results
// ("MatMul:0"), for a graph that is a function body; else nothing.
std::vector<std::string> output_names(const GraphIR& g);

// The nodes of `g` (and of the graphs its control-flow nodes hold) whose ops read or write files
// (OpDef::file_attrs), each as "name (Op: attr=path, ...)": a graph is a program, and a user about
// to run one should know what it touches.
std::vector<std::string> file_system_nodes(const GraphIR& g);

}  // namespace weft::tools
