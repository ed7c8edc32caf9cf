// nn::Module: a callable holder of variables, the base of layers and models (like tf.Module /
// keras.Layer). Modules are handles: copies share the same layer and its variables.
//
//   nn::Sequential model{nn::Dense(128, nn::relu), nn::Dropout(0.2), nn::Dense(10)};
//   Tensor logits = model(x, /*training=*/true);     // variables are built on the first call
//   std::vector<Variable> vars = model.trainable_variables();   // stable order and names
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "api/variable.h"
#include "runtime/tensor.h"

namespace weft::nn {

class ModuleImpl {
 public:
  explicit ModuleImpl(std::string name) : name_(std::move(name)) {}
  virtual ~ModuleImpl() = default;
  virtual Tensor call(const Tensor& x, bool training) = 0;
  // Own variables first, then those of sub-modules, in creation order.
  virtual std::vector<Variable> variables() const { return {}; }
  const std::string& name() const { return name_; }

 private:
  std::string name_;
};

class Module {
 public:
  Module() = default;
  explicit Module(std::shared_ptr<ModuleImpl> impl) : impl_(std::move(impl)) {}

  Tensor operator()(const Tensor& x, bool training = false) const;
  std::vector<Variable> variables() const;
  std::vector<Variable> trainable_variables() const;
  const std::string& name() const;
  bool defined() const { return impl_ != nullptr; }
  ModuleImpl* impl() const { return impl_.get(); }

 protected:
  std::shared_ptr<ModuleImpl> impl_;
};

// Keras-style unique layer names: "dense", "dense_1", "dense_2", ... per base name, per process.
std::string unique_layer_name(const std::string& base);
// Resets the counters (tests and notebooks that rebuild models from scratch).
void reset_layer_names();

}  // namespace weft::nn
