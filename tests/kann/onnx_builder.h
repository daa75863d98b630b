// Builds small ONNX models in memory with the onnx protobuf API, for import, pass, tiler and
// end-to-end tests.
#pragma once

#include <cmath>
#include <string>
#include <vector>

#include <onnx/onnx_pb.h>

namespace kann::test {

class OnnxBuilder {
public:
  explicit OnnxBuilder(int opset = 13) {
    model_.set_ir_version(7);
    model_.set_producer_name("kann-tests");
    auto *o = model_.add_opset_import();
    o->set_domain("");
    o->set_version(opset);
    model_.mutable_graph()->set_name("test");
  }

  // dynamic_batch: the first dimension symbolic ("N"); dynamic_axis: that one ("D").
  void input(const std::string &name, std::vector<int64_t> shape, bool dynamic_batch = false,
             int dynamic_axis = -1) {
    auto *v = model_.mutable_graph()->add_input();
    v->set_name(name);
    auto *t = v->mutable_type()->mutable_tensor_type();
    t->set_elem_type(onnx::TensorProto::FLOAT);
    for (size_t i = 0; i < shape.size(); ++i) {
      auto *d = t->mutable_shape()->add_dim();
      if (i == 0 && dynamic_batch)
        d->set_dim_param("N");
      else if (int(i) == dynamic_axis)
        d->set_dim_param("D");
      else
        d->set_dim_value(shape[i]);
    }
  }
  void output(const std::string &name) {
    auto *v = model_.mutable_graph()->add_output();
    v->set_name(name);
    v->mutable_type()->mutable_tensor_type()->set_elem_type(onnx::TensorProto::FLOAT);
  }
  // A float initializer with deterministic pseudo-random values (or given ones).
  std::vector<float> weight(const std::string &name, std::vector<int64_t> shape, float scale = 0.3f,
                            std::vector<float> values = {}) {
    auto *t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::FLOAT);
    size_t n = 1;
    for (int64_t d : shape) {
      t->add_dims(d);
      n *= size_t(d);
    }
    if (values.empty())
      for (size_t i = 0; i < n; ++i)
        values.push_back(scale * std::sin(0.7f * float(i + 1) + float(seed_++)));
    for (float v : values)
      t->add_float_data(v);
    return values;
  }
  void int64s(const std::string &name, std::vector<int64_t> values) {
    auto *t = model_.mutable_graph()->add_initializer();
    t->set_name(name);
    t->set_data_type(onnx::TensorProto::INT64);
    t->add_dims(int64_t(values.size()));
    for (int64_t v : values)
      t->add_int64_data(v);
  }
  onnx::NodeProto &node(const std::string &op, std::vector<std::string> inputs,
                        std::vector<std::string> outputs, const std::string &name = "") {
    auto *n = model_.mutable_graph()->add_node();
    n->set_op_type(op);
    n->set_name(name.empty() ? outputs[0] : name);
    for (auto &i : inputs)
      n->add_input(i);
    for (auto &o : outputs)
      n->add_output(o);
    return *n;
  }
  static void ints(onnx::NodeProto &n, const std::string &key, std::vector<int64_t> v) {
    auto *a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INTS);
    for (int64_t x : v)
      a->add_ints(x);
  }
  static void int1(onnx::NodeProto &n, const std::string &key, int64_t v) {
    auto *a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::INT);
    a->set_i(v);
  }
  static void float1(onnx::NodeProto &n, const std::string &key, float v) {
    auto *a = n.add_attribute();
    a->set_name(key);
    a->set_type(onnx::AttributeProto::FLOAT);
    a->set_f(v);
  }
  std::string bytes() const { return model_.SerializeAsString(); }
  onnx::ModelProto &model() { return model_; }

private:
  onnx::ModelProto model_;
  int seed_ = 0;
};

} // namespace kann::test
