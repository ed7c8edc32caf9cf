// Session: runs a Graph, TF1 style.
//
//   Session sess(g);
//   auto out = sess.run({{"x:0", batch}}, {"y:0"});          // feeds, fetches by name
//   sess.run({{x, batch}}, {loss}, /*targets=*/{"train"});   // or by Tensor handle
//
// Only what the fetches and targets need runs; a feed overrides any tensor (its producers do not
// run unless something else needs them). A needed placeholder left unfed, or a feed whose dtype
// or shape contradicts its tensor, is an InvalidArgument naming it. Variables created in the
// graph are initialised on the session's first run. Each distinct (feeds, fetches, targets)
// combination is planned and optimised once and cached.
#pragma once

#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <utility>
#include <vector>

#include "api/graph.h"

namespace weft {

class Executor;

// A tensor named by string ("y:0", "y") or by handle.
class TensorRef {
 public:
  TensorRef(const char* name) : name_(name) {}  // NOLINT: implicit by design
  TensorRef(std::string name) : name_(std::move(name)) {}  // NOLINT
  TensorRef(const Tensor& t) : tensor_(t) {}  // NOLINT
  // The endpoint in `g`; NotFound / InvalidArgument when it is not a tensor of `g`.
  Endpoint resolve(const GraphIR& g) const;

 private:
  std::string name_;
  Tensor tensor_;
};

// An operation named by string or handle, for targets.
class OperationRef {
 public:
  OperationRef(const char* name) : name_(name) {}  // NOLINT
  OperationRef(std::string name) : name_(std::move(name)) {}  // NOLINT
  OperationRef(const Operation& op) : name_(op.name()) {}  // NOLINT
  OperationRef(const Tensor& t);  // NOLINT: the tensor's producing operation
  int32_t resolve(const GraphIR& g) const;

 private:
  std::string name_;
};

struct SessionOptions {
  bool optimize = true;  // run the pass pipeline on each plan
};

class Session {
 public:
  explicit Session(const Graph& graph, SessionOptions options = {});
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  std::vector<Tensor> run(const std::vector<std::pair<TensorRef, Tensor>>& feeds, const std::vector<TensorRef>& fetches,
                          const std::vector<OperationRef>& targets = {});
  std::vector<Tensor> run(const std::vector<TensorRef>& fetches) { return run({}, fetches); }

  const Graph& graph() const { return graph_; }

 private:
  struct Plan;
  const Plan& plan_for(const std::vector<Endpoint>& feeds, const std::vector<Endpoint>& fetches,
                       const std::vector<int32_t>& targets);
  void initialize_variables();

  Graph graph_;
  SessionOptions options_;
  std::mutex mu_;
  bool initialized_ = false;
  std::map<std::string, std::unique_ptr<Plan>> plans_;
};

}  // namespace weft
