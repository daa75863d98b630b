#include "kann/custom_ops.h"

#include <dlfcn.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <mutex>

#include "manycl/kbin_runner.h"

namespace kann::custom {

namespace {

// Node string attributes the importer sets (names no ONNX attribute uses: they hold a '.').
constexpr const char *kDomainKey = "kann.custom_domain";
constexpr const char *kOpTypeKey = "kann.custom_op_type";

struct Registry {
  std::mutex mutex;
  // Stable addresses: find() hands out pointers.
  std::vector<std::unique_ptr<Operator>> operators;
  std::vector<void *> libraries; // dlopen handles, never closed
};

Registry &registry() {
  static Registry *r = new Registry; // never destroyed: compiled programs may outlive main
  return *r;
}

bool is_identifier(const std::string &s) {
  if (s.empty() || s.size() >= MCL_CUSTOM_FUNCTION_MAX || (s[0] >= '0' && s[0] <= '9'))
    return false;
  for (char ch : s)
    if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') ||
          ch == '_'))
      return false;
  return true;
}

} // namespace

manycl::Result<size_t> register_operators(const mcl_custom_op *table, uint32_t count,
                                          const std::string &source) {
  if (!table && count)
    return manycl::make_error(source + ": no operator table");
  std::vector<std::unique_ptr<Operator>> loaded;
  for (uint32_t i = 0; i < count; ++i) {
    const mcl_custom_op &d = table[i];
    const std::string where = source + ", operator " + std::to_string(i);
    if (!d.domain || !d.op_type || !d.function || !*d.domain || !*d.op_type)
      return manycl::make_error(where + ": domain, op_type and function must be set");
    auto op = std::make_unique<Operator>();
    op->domain = d.domain;
    op->op_type = d.op_type;
    op->function = d.function;
    op->kind = d.kind;
    op->dtypes = d.dtypes ? d.dtypes : 1u << MCL_DTYPE_F32;
    op->cycles_per_element = d.cycles_per_element;
    op->cost = d.cost;
    op->output_shape = d.output_shape;
    if (!is_identifier(op->function))
      return manycl::make_error(where + ": function '" + op->function +
                                "' is not a C identifier shorter than " +
                                std::to_string(MCL_CUSTOM_FUNCTION_MAX) + " bytes");
    if (op->kind != MCL_CUSTOM_ELEMENTWISE && op->kind != MCL_CUSTOM_WHOLE)
      return manycl::make_error(where + ": unknown kind " + std::to_string(op->kind) +
                                " (MCL_CUSTOM_ELEMENTWISE or MCL_CUSTOM_WHOLE)");
    if (op->kind == MCL_CUSTOM_ELEMENTWISE && op->output_shape)
      return manycl::make_error(where + ": an element-wise operator has its input's shape "
                                        "(output_shape is for MCL_CUSTOM_WHOLE)");
    if (!(op->cycles_per_element >= 0) || !std::isfinite(op->cycles_per_element))
      return manycl::make_error(where + ": cycles_per_element must be a finite number >= 0");
    for (size_t a = 0; d.attributes && d.attributes[a]; ++a) {
      if (a >= MCL_CUSTOM_PARAM_MAX)
        return manycl::make_error(where + ": more than " + std::to_string(MCL_CUSTOM_PARAM_MAX) +
                                  " attributes");
      op->attributes.emplace_back(d.attributes[a]);
      op->defaults.push_back(d.attribute_defaults ? d.attribute_defaults[a] : 0.0f);
    }
    loaded.push_back(std::move(op));
  }
  auto &r = registry();
  std::lock_guard lock(r.mutex);
  for (auto &op : loaded) // an operator registered earlier keeps precedence (find: first)
    r.operators.push_back(std::move(op));
  return static_cast<size_t>(count);
}

manycl::Result<size_t> load_library(const std::string &path) {
  void *handle = dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (!handle) {
    const char *why = dlerror();
    return manycl::make_error("cannot load custom-operator library '" + path +
                              "': " + (why ? why : "unknown error"));
  }
  void *symbol = dlsym(handle, MCL_CUSTOM_OPERATORS_SYMBOL);
  if (!symbol)
    return manycl::make_error("custom-operator library '" + path + "' does not export " +
                              MCL_CUSTOM_OPERATORS_SYMBOL + "() (manycl/native/custom.h)");
  uint32_t count = 0;
  const mcl_custom_op *table = reinterpret_cast<mcl_custom_operators_fn>(symbol)(&count);
  auto registered = register_operators(table, count, "custom-operator library '" + path + "'");
  if (!registered)
    return registered;
  auto &r = registry();
  std::lock_guard lock(r.mutex);
  r.libraries.push_back(handle);
  // Calibration and `kann simulate` run programs with custom records in this process.
  manycl::interp::set_custom_resolver(&resolve_function);
  return registered;
}

void *resolve_function(const char *name) {
  auto &r = registry();
  std::lock_guard lock(r.mutex);
  for (void *handle : r.libraries)
    if (void *address = dlsym(handle, name))
      return address;
  return nullptr;
}

const Operator *find(const std::string &domain, const std::string &op_type) {
  auto &r = registry();
  std::lock_guard lock(r.mutex);
  for (const auto &op : r.operators)
    if (op->domain == domain && op->op_type == op_type)
      return op.get();
  return nullptr;
}

manycl::Result<void> import_node(const std::string &domain, const std::string &op_type,
                                 ir::Node &n) {
  if (!find(domain, op_type))
    return manycl::make_error("operator domain '" + domain +
                              "' is not supported (a custom operator needs its library: "
                              "kann compile --custom-ops LIB.so)");
  n.op = ir::Op::Custom;
  n.strings[kDomainKey] = domain;
  n.strings[kOpTypeKey] = op_type;
  return {};
}

const Operator *of(const ir::Node &n) {
  auto domain = n.strings.find(kDomainKey);
  auto op_type = n.strings.find(kOpTypeKey);
  if (domain == n.strings.end() || op_type == n.strings.end())
    return nullptr;
  return find(domain->second, op_type->second);
}

std::vector<float> params_of(const Operator &op, const ir::Node &n) {
  std::vector<float> params;
  for (size_t i = 0; i < op.attributes.size(); ++i) {
    float value = op.defaults[i];
    if (auto f = n.floats.find(op.attributes[i]); f != n.floats.end())
      value = f->second;
    else if (auto k = n.ints.find(op.attributes[i]); k != n.ints.end() && k->second.size() == 1)
      value = static_cast<float>(k->second[0]);
    params.push_back(value);
  }
  return params;
}

manycl::Result<std::vector<int64_t>>
output_shape(const Operator &op, const ir::Node &n,
             const std::vector<std::vector<int64_t>> &input_shapes) {
  if (input_shapes.empty())
    return manycl::make_error("no input");
  if (!op.output_shape)
    return input_shapes[0];
  std::vector<mcl_custom_shape> in(input_shapes.size());
  for (size_t i = 0; i < input_shapes.size(); ++i) {
    if (input_shapes[i].size() > MCL_CUSTOM_RANK_MAX)
      return manycl::make_error("input " + std::to_string(i) + " has more than " +
                                std::to_string(MCL_CUSTOM_RANK_MAX) + " dimensions");
    in[i].rank = static_cast<uint32_t>(input_shapes[i].size());
    std::copy(input_shapes[i].begin(), input_shapes[i].end(), in[i].dims);
  }
  const std::vector<float> params = params_of(op, n);
  mcl_custom_shape out{};
  const int status = op.output_shape(in.data(), static_cast<uint32_t>(in.size()), params.data(),
                                     static_cast<uint32_t>(params.size()), &out);
  if (status != 0)
    return manycl::make_error("the output_shape callback of " + op.domain + "::" + op.op_type +
                              " returned " + std::to_string(status));
  if (out.rank == 0 || out.rank > MCL_CUSTOM_RANK_MAX)
    return manycl::make_error("the output_shape callback of " + op.domain + "::" + op.op_type +
                              " gave a rank of " + std::to_string(out.rank));
  std::vector<int64_t> shape(out.dims, out.dims + out.rank);
  for (int64_t d : shape)
    if (d <= 0 || d > (int64_t(1) << 24))
      return manycl::make_error("the output_shape callback of " + op.domain + "::" + op.op_type +
                                " gave a dimension of " + std::to_string(d));
  return shape;
}

mcl_custom_args make_args(const Operator &op, const ir::Node &n,
                          const std::vector<mcl_tile> &inputs, const mcl_tile &output,
                          uint32_t pes_per_cluster) {
  mcl_custom_args a{};
  a.input = inputs.at(0);
  a.output = output;
  a.input_count = static_cast<uint32_t>(std::min<size_t>(inputs.size(), MCL_CUSTOM_INPUT_MAX));
  for (uint32_t i = 1; i < a.input_count; ++i)
    a.more_inputs[i - 1] = inputs[i];
  std::memcpy(a.function, op.function.data(), op.function.size()); // < MCL_CUSTOM_FUNCTION_MAX
  a.kind = op.kind;
  const std::vector<float> params = params_of(op, n);
  a.param_count = static_cast<uint32_t>(params.size());
  std::copy(params.begin(), params.end(), a.params);
  const uint32_t pes = pes_per_cluster ? pes_per_cluster : 1;
  if (op.cost) {
    mcl_custom_call geometry{};
    geometry.input_tile = a.input;
    geometry.output_tile = output;
    geometry.input_count = a.input_count;
    for (uint32_t i = 0; i < a.input_count; ++i)
      geometry.input_tiles[i] = inputs[i];
    geometry.params = a.params;
    geometry.param_count = a.param_count;
    geometry.pe_count = pes;
    a.cycles = op.cost(&geometry);
  } else {
    const double elements = double(output.h) * output.w * output.c;
    a.cycles = static_cast<uint64_t>(std::ceil(op.cycles_per_element * elements / pes));
  }
  return a;
}

} // namespace kann::custom
