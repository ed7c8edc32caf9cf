#include "tools/tool_support.h"

#include <algorithm>
#include <charconv>
#include <exception>
#include <iostream>

#include <CLI/CLI.hpp>

#include "runtime/error.h"

namespace weft::tools {

namespace {

// Messages are one line, so scripts can grep them; an error that spans lines is joined.
std::string one_line(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  std::replace(s.begin(), s.end(), '\n', ' ');
  return s;
}

}  // namespace

int run_tool(CLI::App& app, int argc, char** argv, const std::function<void()>& body) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e);
  }
  const std::string tool = app.get_name();
  try {
    body();
    return 0;
  } catch (const Error& e) {
    std::cerr << tool << ": error: " << one_line(e.what()) << "\n";
  } catch (const std::exception& e) {
    std::cerr << tool << ": error: " << one_line(e.what()) << "\n";
  } catch (...) {
    std::cerr << tool << ": error: unknown exception\n";
  }
  return 1;
}

std::vector<std::string> output_names(const GraphIR& g) {
  std::vector<std::pair<long, std::string>> outputs;
  for (int32_t id : g.node_ids()) {
    const std::string& name = g.node(id).name;
    constexpr std::string_view kPrefix = "output_";
    if (name.size() <= kPrefix.size() || name.compare(0, kPrefix.size(), kPrefix) != 0) continue;
    long index = 0;
    const char* first = name.data() + kPrefix.size();
    const char* last = name.data() + name.size();
    auto [end, ec] = std::from_chars(first, last, index);
    // Only "output_<decimal>", as Function::save names them: not "output_1b" or "output_01".
    if (ec != std::errc() || end != last || (*first == '0' && last - first > 1)) continue;
    outputs.emplace_back(index, name);
  }
  std::sort(outputs.begin(), outputs.end());
  std::vector<std::string> names;
  for (auto& [index, name] : outputs) names.push_back(std::move(name));
  if (names.empty())
    for (const Endpoint& e : g.results) names.push_back(g.endpoint_name(e));
  return names;
}

std::vector<std::string> file_system_nodes(const GraphIR& g) {
  std::vector<std::string> out;
  for (int32_t id : g.node_ids()) {
    const Node& n = g.node(id);
    if (!n.op->file_attrs.empty()) {
      std::string line = n.name + " (" + n.type();
      for (size_t i = 0; i < n.op->file_attrs.size(); ++i) {
        const AttrValue* v = n.attrs.find(n.op->file_attrs[i]);
        const std::string* path = v ? std::get_if<std::string>(v) : nullptr;
        line += (i ? ", " : ": ") + n.op->file_attrs[i] + "=" + (path ? *path : "?");
      }
      out.push_back(line + ")");
    }
    for (const auto& [name, value] : n.attrs)
      if (const GraphAttr* body = std::get_if<GraphAttr>(&value); body && *body)
        for (std::string& inner : file_system_nodes(**body)) out.push_back(n.name + "/" + inner);
  }
  return out;
}

}  // namespace weft::tools
