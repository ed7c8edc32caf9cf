// weft-run: runs a saved model (or a graph file) from the shell, on .npy inputs.
//
//   weft-run model_dir --feed input_0=x.npy --fetch output_0 --out out_dir   # out_dir/output_0.npy
//   weft-run model_dir --feed input_0=x.npy                                  # prints every output_i
//
// A feed or fetch names a tensor: "input_0" means "input_0:0". Without --fetch, the model's
// outputs (output_0, output_1, ...) are fetched; a model without outputs runs its side effects
// (the target "side_effects"). A graph whose nodes read or write files (a graph is a program:
// ReadShardedBatch reads the files it names) is said so in one line on stderr before it runs. Any
// failure is one line on stderr,
// "weft-run: error: ...", and a non-zero exit status.
#include <cctype>
#include <filesystem>
#include <iostream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include <CLI/CLI.hpp>

#include "api/graph.h"
#include "api/saved_model.h"
#include "api/session.h"
#include "runtime/npy.h"
#include "tools/tool_support.h"

namespace weft::tools {
namespace {

namespace fs = std::filesystem;

struct Options {
  std::string model;
  std::vector<std::string> feeds;    // NAME=FILE
  std::vector<std::string> fetches;  // NAME or NAME:INDEX
  std::string out_dir;
};

std::pair<std::string, std::string> split_feed(const std::string& feed) {
  const size_t eq = feed.find('=');
  if (eq == std::string::npos || eq == 0 || eq + 1 == feed.size())
    throw InvalidArgument("--feed '" + feed + "' is not of the form NAME=FILE.npy");
  return {feed.substr(0, eq), feed.substr(eq + 1)};
}

// The file a fetch is written to, in one flat directory: "output_0" and "output_0:0" give
// output_0.npy, "dense/MatMul:1" gives dense_MatMul_1.npy. Characters other than letters,
// digits, '-', '_' and '.' become '_', so no node name can reach outside the directory.
std::string file_name_for(const GraphIR& g, Endpoint e) {
  std::string stem = g.node(e.node).name;
  if (e.index != 0) stem += "_" + std::to_string(e.index);
  for (char& c : stem)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') c = '_';
  return stem + ".npy";
}

void run(const Options& o) {
  Graph graph = Graph::load(o.model);  // loading opens no file the graph names
  const GraphIR& g = graph.ir();
  // A graph is a program: before running it, one line says which of its nodes touch files.
  if (const std::vector<std::string> touching = file_system_nodes(g); !touching.empty()) {
    std::string line = "weft-run: nodes of this graph that read or write files:";
    for (size_t i = 0; i < touching.size(); ++i) line += (i ? "; " : " ") + touching[i];
    std::cerr << line << "\n";
  }

  std::vector<std::pair<TensorRef, Tensor>> feeds;
  std::map<Endpoint, std::string> fed;
  for (const std::string& f : o.feeds) {
    auto [name, path] = split_feed(f);
    const Endpoint e = g.parse_endpoint(name);  // NotFound, with close names, if absent
    if (auto [it, inserted] = fed.emplace(e, name); !inserted)
      throw InvalidArgument("--feed " + name + " and --feed " + it->second + " name the same tensor, " +
                            g.endpoint_name(e));
    feeds.emplace_back(g.endpoint_name(e), load_npy(path));
  }

  std::vector<std::string> fetches = o.fetches;
  if (fetches.empty()) fetches = output_names(g);
  if (fetches.empty()) {
    // A saved function that returns nothing still has its effects to run (variable updates, prints).
    if (!g.find(kSideEffectsNode))
      throw InvalidArgument(o.model + " has no output_0, output_1, ... nodes and no results: name what to fetch with --fetch");
    Session(graph).run(feeds, {}, {kSideEffectsNode});
    std::cout << o.model << " has no outputs; ran its " << kSideEffectsNode << "\n";
    return;
  }
  std::vector<TensorRef> refs;
  std::vector<std::string> files;
  std::map<std::string, std::string> by_file;
  for (const std::string& f : fetches) {
    const Endpoint e = g.parse_endpoint(f);
    refs.emplace_back(g.endpoint_name(e));
    files.push_back(file_name_for(g, e));
    if (auto [it, inserted] = by_file.emplace(files.back(), f); !inserted && !o.out_dir.empty())
      throw InvalidArgument("--fetch " + f + " and --fetch " + it->second + " would both be written to " + files.back());
  }

  Session session(graph);
  const std::vector<Tensor> results = session.run(feeds, refs);

  if (o.out_dir.empty()) {
    for (size_t i = 0; i < results.size(); ++i) std::cout << fetches[i] << ": " << results[i] << "\n";
    return;
  }
  std::error_code ec;
  fs::create_directories(o.out_dir, ec);
  if (ec) throw Unavailable("cannot create the directory " + o.out_dir + ": " + ec.message());
  for (size_t i = 0; i < results.size(); ++i) {
    const std::string path = (fs::path(o.out_dir) / files[i]).string();
    save_npy(path, results[i]);
    std::cout << fetches[i] << " -> " << path << "\n";
  }
}

}  // namespace
}  // namespace weft::tools

int main(int argc, char** argv) {
  weft::tools::Options o;
  CLI::App app("Runs a saved weft model on .npy inputs and prints or saves its outputs.", "weft-run");
  app.add_option("model", o.model, "a saved-model directory (Function::save) or a graph file")->required();
  app.add_option("--feed", o.feeds, "NAME=FILE.npy: feed a tensor (input_0 means input_0:0); repeatable")
      ->type_name("NAME=FILE")
      ->allow_extra_args(false);  // one value per --feed, so the model path may come after it
  app.add_option("--fetch", o.fetches, "a tensor to fetch; repeatable (default: output_0, output_1, ...)")
      ->type_name("NAME")
      ->allow_extra_args(false);
  app.add_option("--out", o.out_dir, "write each fetch to DIR/<name>.npy instead of printing it")->type_name("DIR");
  return weft::tools::run_tool(app, argc, argv, [&] { weft::tools::run(o); });
}
