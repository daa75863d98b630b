#include "kann/ir.h"

#include <algorithm>
#include <sstream>

namespace kann::ir {

const char *dtype_name(DType t) {
  switch (t) {
  case DType::F32:
    return "f32";
  case DType::F16:
    return "f16";
  case DType::S8:
    return "s8";
  case DType::U8:
    return "u8";
  case DType::I64:
    return "i64";
  }
  return "?";
}

uint32_t dtype_size(DType t) {
  switch (t) {
  case DType::F32:
    return 4;
  case DType::F16:
    return 2;
  case DType::S8:
  case DType::U8:
    return 1;
  case DType::I64:
    return 8;
  }
  return 0;
}

int64_t Tensor::elements() const {
  int64_t n = 1;
  for (int64_t d : shape)
    n *= d;
  return n;
}

int64_t Node::attr(const std::string &key, int64_t fallback) const {
  auto it = ints.find(key);
  return it == ints.end() || it->second.empty() ? fallback : it->second[0];
}

std::vector<int64_t> Node::attrs(const std::string &key, std::vector<int64_t> fallback) const {
  auto it = ints.find(key);
  return it == ints.end() ? fallback : it->second;
}

float Node::attrf(const std::string &key, float fallback) const {
  auto it = floats.find(key);
  return it == floats.end() ? fallback : it->second;
}

int Graph::add_tensor(Tensor t) {
  tensors.push_back(std::move(t));
  return static_cast<int>(tensors.size()) - 1;
}

int Graph::find(const std::string &name) const {
  for (size_t i = 0; i < tensors.size(); ++i)
    if (tensors[i].name == name)
      return static_cast<int>(i);
  return -1;
}

std::vector<int> Graph::consumers(int t) const {
  std::vector<int> out;
  for (size_t i = 0; i < nodes.size(); ++i)
    if (!nodes[i].dead && std::count(nodes[i].inputs.begin(), nodes[i].inputs.end(), t))
      out.push_back(static_cast<int>(i));
  return out;
}

bool Graph::is_output(int t) const {
  return std::find(outputs.begin(), outputs.end(), t) != outputs.end();
}

void Graph::compact() {
  std::vector<Node> alive;
  for (auto &n : nodes)
    if (!n.dead)
      alive.push_back(std::move(n));
  nodes = std::move(alive);
  for (auto &t : tensors)
    t.producer = -1;
  for (size_t i = 0; i < nodes.size(); ++i)
    for (int o : nodes[i].outputs)
      tensors[o].producer = static_cast<int>(i);
}

std::string Graph::dump() const {
  std::ostringstream o;
  auto shape = [&](int t) {
    std::string s = tensors[t].name + ":" + dtype_name(tensors[t].dtype) + "[";
    for (size_t i = 0; i < tensors[t].shape.size(); ++i)
      s += (i ? "," : "") + std::to_string(tensors[t].shape[i]);
    return s + "]";
  };
  for (const Node &n : nodes) {
    if (n.dead)
      continue;
    o << op_name(n.op);
    if (n.act.kind != MCL_ACT_NONE)
      o << "+act" << n.act.kind;
    o << " " << n.name << " (";
    for (size_t i = 0; i < n.inputs.size(); ++i)
      o << (i ? ", " : "") << (n.inputs[i] < 0 ? "-" : shape(n.inputs[i]))
        << (n.inputs[i] >= 0 && tensors[n.inputs[i]].is_const ? "=const" : "");
    o << ") -> ";
    for (size_t i = 0; i < n.outputs.size(); ++i)
      o << (i ? ", " : "") << shape(n.outputs[i]);
    o << "\n";
  }
  return o.str();
}

} // namespace kann::ir
