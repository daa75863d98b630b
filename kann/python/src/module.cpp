// The `kann` Python package's native part (_kann): compile ONNX models into kann program
// binaries in-process, and run them on ManyCL devices or sub-devices through the OpenCL ICD
// loader with kann::Session, NumPy in and out in ONNX Runtime's calling convention
// (session.run(output_names, {input_name: array})).
//
// The GIL is released while compiling and while the device runs, so sessions on different
// sub-devices run concurrently from Python threads; a session itself runs one call at a time.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <CL/cl.h>
#include <CL/cl_ext_manycl.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <fstream>
#include <memory>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <vector>

#include "kann/file.h"
#include "kann/compile.h"
#include "kann/custom_ops.h"
#include "kann/format.h"
#include "kann/mixed_precision.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/quantize.h"
#include "kann/session.h"
#include "manycl/device/config.h"

namespace py = pybind11;

namespace {

// kann.Error: compilation, loading or device failures (argument mistakes are ValueError /
// TypeError, as in NumPy and ONNX Runtime).
struct KannError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

std::string shape_text(const std::vector<int64_t> &shape) {
  std::string s = "(";
  for (size_t i = 0; i < shape.size(); ++i)
    s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + (shape.size() == 1 ? ",)" : ")");
}

std::vector<int64_t> signed_dims(const std::vector<uint64_t> &dims) {
  return std::vector<int64_t>(dims.begin(), dims.end());
}

const char *dtype_text(uint32_t dtype) {
  switch (dtype) {
  case 2:
    return "float16";
  case 3:
    return "int8";
  case 4:
    return "uint8";
  default:
    return "float32";
  }
}

std::vector<uint8_t> read_file(const std::string &path) {
  auto bytes = kann::io::read_file(path);
  if (!bytes)
    throw KannError(bytes.error().message);
  return std::move(bytes.value());
}

// Network inputs and outputs as the application sees them: float32, ONNX layout (quantized
// and FP16 tensors are converted by kann::Session).
struct TensorInfo {
  std::string name;
  std::vector<int64_t> shape;
  std::string storage; // element type on the device: float32, float16, int8, uint8
  std::string repr() const {
    return "kann.TensorInfo(name='" + name + "', shape=" + shape_text(shape) +
           ", dtype='float32', storage='" + storage + "')";
  }
};

// A compiled network: the kbin bytes and what they describe.
class Network {
public:
  static std::shared_ptr<Network> from_bytes(std::vector<uint8_t> bytes) {
    auto program = kann::format::read_kbin(bytes.data(), bytes.size());
    if (!program)
      throw KannError("not a valid kann binary: " + program.error().message);
    auto n = std::make_shared<Network>();
    n->bytes_ = std::move(bytes);
    n->program_ = std::move(program.value());
    for (const auto &t : n->program_.tensors)
      (t.role == KBIN_ROLE_INPUT ? n->inputs_ : n->outputs_)
          .push_back({t.name, signed_dims(t.dims), dtype_text(t.dtype)});
    return n;
  }
  const std::vector<uint8_t> &bytes() const { return bytes_; }
  const kann::format::Program &program() const { return program_; }
  const std::vector<TensorInfo> &inputs() const { return inputs_; }
  const std::vector<TensorInfo> &outputs() const { return outputs_; }
  void save(const std::string &path) const {
    std::ofstream f(path, std::ios::binary);
    f.write(reinterpret_cast<const char *>(bytes_.data()), std::streamsize(bytes_.size()));
    if (!f)
      throw KannError("cannot write '" + path + "'");
  }

private:
  std::vector<uint8_t> bytes_;
  kann::format::Program program_;
  std::vector<TensorInfo> inputs_, outputs_;
};

// A path (str or os.PathLike) as a string; anything else is a TypeError.
std::string fspath(const py::handle &object, const char *what) {
  try {
    return py::str(py::module_::import("os").attr("fspath")(object));
  } catch (py::error_already_set &) {
    throw py::type_error(std::string(what) + " must be a path, bytes or an onnx.ModelProto, not " +
                         std::string(py::str(py::type::of(object).attr("__name__"))));
  }
}

// Calibration data: for a single-input model one array of N stacked samples, a path to such a
// .npy, or a list of them; for any model a dict {input name: any of those}.
std::vector<kann::quantize::CalibrationSource> calibration_sources(const py::handle &calibration) {
  std::vector<std::pair<std::string, py::object>> items; // (input name or "", array or path)
  auto add = [&](const std::string &input, const py::handle &value) {
    if (py::isinstance<py::list>(value) || py::isinstance<py::tuple>(value)) {
      for (auto item : value)
        items.emplace_back(input, py::reinterpret_borrow<py::object>(item));
    } else {
      items.emplace_back(input, py::reinterpret_borrow<py::object>(value));
    }
  };
  if (py::isinstance<py::dict>(calibration)) {
    for (auto [key, value] : py::reinterpret_borrow<py::dict>(calibration)) {
      if (!py::isinstance<py::str>(key))
        throw py::type_error("calibration: the dict's keys must be input names");
      add(py::cast<std::string>(key), value);
    }
  } else {
    add("", calibration);
  }
  auto numpy = py::module_::import("numpy");
  std::vector<kann::quantize::CalibrationSource> sources;
  for (auto &[input, item] : items) {
    py::object array = item;
    kann::quantize::CalibrationSource src;
    src.input = input;
    src.origin = input.empty() ? "calibration" : "calibration['" + input + "']";
    if (py::isinstance<py::str>(item) || py::hasattr(item, "__fspath__")) {
      src.origin = py::str(item);
      array = numpy.attr("load")(item);
    }
    auto values = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(array);
    if (!values)
      throw py::type_error("calibration: expected NumPy arrays (or .npy paths) of float samples");
    src.values.assign(values.data(), values.data() + values.size());
    sources.push_back(std::move(src));
  }
  return sources;
}

std::shared_ptr<Network> compile(const py::object &model, py::object clusters,
                                 const std::string &precision, const py::object &calibration,
                                 const std::string &device_config, double percentile,
                                 const py::object &batch, const std::string &batch_split,
                                 const std::string &schedule, const py::object &fp16_tolerance,
                                 const py::object &fp32_operators, const std::string &winograd,
                                 bool residual_fusion) {
  auto config = manycl::device::config_from_spec(device_config);
  if (!config)
    throw py::value_error("device_config: " + config.error().message);
  kann::CompileOptions options;
  options.device = config.value();
  if (precision != "fp32" && precision != "fp16" && precision != "int8")
    throw py::value_error("precision must be 'fp32', 'fp16' or 'int8', not '" + precision + "'");
  options.precision = precision;
  options.clusters = config.value().clusters;
  if (!clusters.is_none()) {
    if (!py::isinstance<py::int_>(clusters) || py::isinstance<py::bool_>(clusters))
      throw py::type_error("clusters must be an int");
    const long long c = clusters.cast<long long>();
    if (c < 1 || c > config.value().clusters)
      throw py::value_error("clusters must be 1.." + std::to_string(config.value().clusters) +
                            " (the device '" + config.value().name + "' has " +
                            std::to_string(config.value().clusters) + "), not " +
                            std::to_string(c));
    options.clusters = unsigned(c);
  }
  if (!(percentile >= 50 && percentile <= 100))
    throw py::value_error("calibration_percentile must be in 50..100");
  // batch=N: images per inference (`kann compile --batch N`); None: the model's.
  if (!batch.is_none()) {
    if (!py::isinstance<py::int_>(batch) || py::isinstance<py::bool_>(batch))
      throw py::type_error("batch must be an int");
    const long long b = batch.cast<long long>();
    if (b < 1 || b > (1ll << 20))
      throw py::value_error("batch must be 1..1048576, not " + std::to_string(b));
    options.batch = b;
  }
  options.batch_split = batch_split;
  if (batch_split.rfind("clusters:", 0) == 0) { // groups of G clusters only
    const std::string g = batch_split.substr(9);
    if (g.empty() || g.size() > 2 || !std::all_of(g.begin(), g.end(), ::isdigit) || g == "0")
      throw py::value_error("batch_split 'clusters:G' needs G in 1..31");
    options.batch_split = "clusters";
    options.batch_group_clusters = unsigned(std::stoul(g));
  }
  if (options.batch_split != "auto" && options.batch_split != "sequential" &&
      options.batch_split != "clusters")
    throw py::value_error("batch_split must be 'auto', 'sequential', 'clusters' or "
                          "'clusters:G', not '" +
                          batch_split + "'");

  // schedule: `kann compile --schedule` (docs/kann.md, "Schedules").
  if (schedule != "auto" && schedule != "layer" && schedule != "pipeline" && schedule != "group")
    throw py::value_error("schedule must be 'auto', 'layer', 'pipeline' or 'group', not '" +
                          schedule + "'");
  options.schedule = schedule;
  // winograd: `kann compile --winograd` (docs/kann.md, "What the compiler does").
  if (winograd != "auto" && winograd != "all" && winograd != "off")
    throw py::value_error("winograd must be 'auto', 'all' or 'off', not '" + winograd + "'");
  options.winograd = winograd;
  options.fuse_residual_adds = residual_fusion; // `kann compile --no-residual-fusion`

  // The model: serialized bytes, an onnx.ModelProto, or a path.
  std::string bytes, path;
  if (py::isinstance<py::bytes>(model))
    bytes = model.cast<std::string>();
  else if (py::hasattr(model, "SerializeToString"))
    bytes = model.attr("SerializeToString")().cast<std::string>();
  else
    path = fspath(model, "model");

  manycl::Result<kann::ir::Graph> graph = manycl::make_error("");
  {
    py::gil_scoped_release released;
    graph = path.empty() ? kann::import_onnx_bytes(bytes) : kann::import_onnx_file(path);
    if (graph)
      if (auto r = kann::passes::optimize(graph.value()); !r)
        graph = r.error();
  }
  if (!graph)
    throw KannError(graph.error().message);
  auto &g = graph.value();

  const bool quantized = std::any_of(g.nodes.begin(), g.nodes.end(),
                                     [](const auto &n) { return !n.dead && n.ints.count("int8"); });
  // Mixed precision (docs/kann.md, "Mixed precision"): fp32_operators by name, or
  // fp16_tolerance=abs or (abs, rel) measured on the calibration samples.
  const bool mixed = !fp16_tolerance.is_none();
  kann::mixed::Tolerance tolerance;
  if ((mixed || !fp32_operators.is_none()) && precision != "fp16")
    throw py::value_error(std::string(mixed ? "fp16_tolerance" : "fp32_operators") +
                          " needs precision='fp16'");
  if (mixed && !fp32_operators.is_none())
    throw py::value_error("fp32_operators and fp16_tolerance exclude each other");
  if (!fp32_operators.is_none())
    for (const auto &name : fp32_operators)
      options.fp32_operators.insert(py::str(name).cast<std::string>());
  if (mixed) {
    if (py::isinstance<py::tuple>(fp16_tolerance) || py::isinstance<py::list>(fp16_tolerance)) {
      auto pair = fp16_tolerance.cast<std::vector<double>>();
      if (pair.size() != 2)
        throw py::value_error("fp16_tolerance: a number or (abs, rel)");
      tolerance.abs = pair[0], tolerance.rel = pair[1];
    } else {
      tolerance.abs = tolerance.rel = fp16_tolerance.cast<double>();
    }
    if (!(tolerance.abs >= 0 && tolerance.rel >= 0 && tolerance.abs + tolerance.rel > 0))
      throw py::value_error("fp16_tolerance must be positive");
    if (calibration.is_none())
      throw py::value_error("fp16_tolerance measures the error on calibration data: "
                            "calibration=array of samples stacked on the batch axis");
  }
  std::vector<std::vector<std::vector<float>>> samples;
  if (!calibration.is_none()) {
    if ((precision != "int8" && !mixed) || quantized)
      throw py::value_error(
          quantized ? "calibration: the model is already quantized (QDQ / QLinear)"
                    : "calibration is only used with precision='int8' or with fp16_tolerance");
    auto zipped = kann::quantize::calibration_samples(g, calibration_sources(calibration));
    if (!zipped)
      throw py::value_error(zipped.error().message);
    samples = std::move(zipped.value());
  } else if (precision == "int8" && !quantized) {
    throw py::value_error("precision='int8' on a float model needs calibration data: "
                          "calibration=array of samples stacked on the batch axis");
  }

  manycl::Result<kann::CompileOutput> out = manycl::make_error("");
  {
    py::gil_scoped_release released;
    manycl::Result<void> ready;
    if (mixed) {
      auto choice = kann::mixed::choose_fp32_operators(g, options, samples, tolerance);
      if (!choice)
        ready = choice.error();
      else
        options.fp32_operators = choice.value().fp32_operators;
    } else if (!samples.empty()) {
      kann::quantize::split_activations(g);
      kann::quantize::CalibrationOptions calibration_options;
      calibration_options.percentile = percentile;
      auto ranges = kann::quantize::calibrate(g, options, samples, calibration_options);
      if (!ranges)
        ready = ranges.error();
      else if (auto count = kann::quantize::quantize_int8(g, ranges.value()); !count)
        ready = count.error();
    }
    out = ready ? kann::compile_graph(g, options)
                : manycl::Result<kann::CompileOutput>(ready.error());
  }
  if (!out)
    throw KannError(out.error().message);
  auto kbin = kann::format::write_kbin(out.value().program);
  if (!kbin)
    throw KannError(kbin.error().message);
  return Network::from_bytes(std::move(kbin.value()));
}

std::shared_ptr<Network> as_network(const py::object &network) {
  if (py::isinstance<Network>(network))
    return network.cast<std::shared_ptr<Network>>();
  if (py::isinstance<py::bytes>(network)) {
    std::string s = network.cast<std::string>();
    return Network::from_bytes(std::vector<uint8_t>(s.begin(), s.end()));
  }
  std::string path = fspath(network, "network");
  auto bytes = read_file(path);
  try {
    return Network::from_bytes(std::move(bytes));
  } catch (const KannError &e) {
    throw KannError(path + ": " + e.what());
  }
}

cl_platform_id manycl_platform() {
  cl_uint count = 0;
  if (clGetPlatformIDs(0, nullptr, &count) == CL_SUCCESS && count > 0) {
    std::vector<cl_platform_id> platforms(count);
    clGetPlatformIDs(count, platforms.data(), nullptr);
    for (cl_platform_id p : platforms) {
      char name[128] = {};
      clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name - 1, name, nullptr);
      if (std::strcmp(name, "ManyCL") == 0)
        return p;
    }
  }
  throw KannError("no ManyCL OpenCL platform: install ManyCL (cmake --install) or point the ICD "
                  "loader at a build tree (OCL_ICD_VENDORS=<build>/vendors, or with the Khronos "
                  "loader OCL_ICD_FILENAMES=<build>/lib/libManyCL.so); a 'ManyCL:' line on "
                  "stderr explains a bad MANYCL_DEVICES setting");
}

unsigned device_clusters(cl_platform_id platform, cl_device_id device) {
  auto fn = reinterpret_cast<clGetDeviceConfigMCL_fn>(
      clGetExtensionFunctionAddressForPlatform(platform, "clGetDeviceConfigMCL"));
  size_t size = 0;
  if (!fn || fn(device, 0, nullptr, &size) != CL_SUCCESS)
    throw KannError("cannot read the ManyCL device configuration (clGetDeviceConfigMCL)");
  std::string json(size, '\0');
  fn(device, size, json.data(), nullptr);
  const size_t at = json.find("\"clusters\":");
  return at == std::string::npos ? 0 : unsigned(std::strtoul(json.c_str() + at + 11, nullptr, 10));
}

std::string device_name(cl_device_id device) {
  char name[256] = {};
  clGetDeviceInfo(device, CL_DEVICE_NAME, sizeof name - 1, name, nullptr);
  return name;
}

// kann.Session: one compiled network on one ManyCL device or sub-device.
class Session {
public:
  Session(const py::object &network_object, unsigned device_index, const py::object &sub_device) {
    network_ = as_network(network_object);
    const unsigned need = network_->program().cluster_count;
    cl_platform_id platform = manycl_platform();
    cl_uint count = 0;
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 0, nullptr, &count);
    if (device_index >= count)
      throw py::value_error("device " + std::to_string(device_index) +
                            " does not exist: ManyCL has " + std::to_string(count) +
                            " device(s) (MANYCL_DEVICES)");
    std::vector<cl_device_id> roots(count);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, count, roots.data(), nullptr);
    cl_device_id root = roots[device_index];
    const unsigned clusters = device_clusters(platform, root);
    cl_uint units = 0;
    clGetDeviceInfo(root, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
    if (need > clusters)
      throw KannError("the network was compiled for " + std::to_string(need) +
                      " cluster(s); device " + std::to_string(device_index) + " (" +
                      device_name(root) + ") has " + std::to_string(clusters));
    // Sub-device k owns clusters [k*need, (k+1)*need): the device is partitioned into as many
    // sub-devices of the network's cluster count as fit.
    const unsigned fit = clusters / need;
    long long k = -1;
    if (!sub_device.is_none()) {
      if (!py::isinstance<py::int_>(sub_device) || py::isinstance<py::bool_>(sub_device))
        throw py::type_error("sub_device must be an int or None");
      k = sub_device.cast<long long>();
      if (k < 0 || k >= fit)
        throw py::value_error("sub_device " + std::to_string(k) + " does not exist: device " +
                              std::to_string(device_index) + " has " + std::to_string(clusters) +
                              " clusters, " + std::to_string(fit) + " sub-device(s) of " +
                              std::to_string(need) + " cluster(s) (0.." + std::to_string(fit - 1) +
                              ")");
    } else if (need != clusters) {
      k = 0; // the network fits in part of the device: its first clusters
    }
    cl_int err = CL_SUCCESS;
    if (k < 0) {
      device_ = root;
    } else {
      const cl_device_partition_property props[] = {
          CL_DEVICE_PARTITION_EQUALLY, cl_device_partition_property(need * (units / clusters)), 0};
      std::vector<cl_device_id> parts(fit);
      cl_uint made = 0;
      err = clCreateSubDevices(root, props, fit, parts.data(), &made);
      if (err != CL_SUCCESS || made <= cl_uint(k))
        throw KannError("clCreateSubDevices failed (OpenCL error " + std::to_string(err) + ")");
      for (cl_uint i = 0; i < made; ++i)
        if (i != cl_uint(k))
          clReleaseDevice(parts[i]);
      device_ = parts[size_t(k)];
      owns_device_ = true;
      sub_device_ = int(k);
    }
    context_ = clCreateContext(nullptr, 1, &device_, nullptr, nullptr, &err);
    if (err != CL_SUCCESS)
      throw KannError("clCreateContext failed (OpenCL error " + std::to_string(err) + ")");
    queue_ = clCreateCommandQueue(context_, device_, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS)
      throw KannError("clCreateCommandQueue failed (OpenCL error " + std::to_string(err) + ")");
    manycl::Result<std::unique_ptr<kann::Session>> session = manycl::make_error("");
    {
      py::gil_scoped_release released;
      session = kann::Session::load(context_, device_, network_->bytes());
    }
    if (!session)
      throw KannError(session.error().message);
    session_ = std::move(session.value());
    device_index_ = device_index;
  }

  py::list run(const py::object &output_names, const py::object &feeds, const py::object &options) {
    if (!options.is_none())
      throw py::type_error("run_options are not supported (pass None)");
    const auto &inputs = session_->inputs();
    const auto &outputs = session_->outputs();
    auto expected = [&](const std::vector<kann::TensorInfo> &infos) {
      std::string s;
      for (const auto &t : infos)
        s += (s.empty() ? "'" : ", '") + t.name + "' " + shape_text(signed_dims(t.dims));
      return s;
    };
    // Which outputs, in the caller's order.
    std::vector<size_t> wanted;
    if (output_names.is_none()) {
      for (size_t i = 0; i < outputs.size(); ++i)
        wanted.push_back(i);
    } else {
      if (py::isinstance<py::str>(output_names))
        throw py::type_error("output_names must be a list of names or None, not a str");
      for (auto name : output_names) {
        if (!py::isinstance<py::str>(name))
          throw py::type_error("output_names must hold str");
        const std::string n = name.cast<std::string>();
        auto it = std::find_if(outputs.begin(), outputs.end(),
                               [&](const kann::TensorInfo &t) { return t.name == n; });
        if (it == outputs.end())
          throw py::value_error("unknown output '" + n +
                                "'; the network's outputs: " + expected(outputs));
        wanted.push_back(size_t(it - outputs.begin()));
      }
    }
    if (!py::isinstance<py::dict>(feeds))
      throw py::type_error("feeds must be a dict {input name: array}");
    py::dict feed_dict = feeds.cast<py::dict>();
    for (auto item : feed_dict) {
      if (!py::isinstance<py::str>(item.first))
        throw py::type_error("feed names must be str");
      const std::string n = item.first.cast<std::string>();
      if (std::none_of(inputs.begin(), inputs.end(),
                       [&](const kann::TensorInfo &t) { return t.name == n; }))
        throw py::value_error("unknown input '" + n +
                              "'; the network's inputs: " + expected(inputs));
    }
    // Each input: its own shape (one sample) or N samples stacked on the first axis when that
    // axis is 1, as `kann run` takes them; every input must give the same N.
    std::vector<py::array_t<float, py::array::c_style | py::array::forcecast>> arrays;
    int64_t samples = -1;
    bool stacked = false; // inputs given as (N, ...): outputs are stacked the same way
    for (const auto &t : inputs) {
      if (!feed_dict.contains(t.name))
        throw py::value_error("missing input '" + t.name +
                              "'; the network's inputs: " + expected(inputs));
      py::object value = feed_dict[py::str(t.name)];
      auto array = py::array_t<float, py::array::c_style | py::array::forcecast>::ensure(value);
      if (!array)
        throw py::type_error("input '" + t.name + "': expected a NumPy array of numbers");
      std::vector<int64_t> shape(array.shape(), array.shape() + array.ndim());
      const auto dims = signed_dims(t.dims);
      int64_t n = -1;
      if (shape == dims)
        n = 1;
      else if (!dims.empty() && dims[0] == 1 && shape.size() == dims.size() && shape[0] >= 1 &&
               std::equal(dims.begin() + 1, dims.end(), shape.begin() + 1))
        n = shape[0], stacked = true;
      if (n < 0)
        throw py::value_error("input '" + t.name + "': shape " + shape_text(shape) +
                              " does not match the input's shape " + shape_text(dims) +
                              (dims.size() && dims[0] == 1 ? " (or (N, ...) for N samples)" : ""));
      if (samples >= 0 && n != samples)
        throw py::value_error("inputs hold different numbers of samples (" +
                              std::to_string(samples) + " and " + std::to_string(n) + ")");
      samples = n;
      arrays.push_back(std::move(array));
    }
    if (samples < 0)
      samples = 1;
    // Copies of the inputs, so the device runs without the GIL.
    std::vector<std::vector<float>> data(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      data[i].assign(arrays[i].data(), arrays[i].data() + arrays[i].size());
    std::vector<std::vector<float>> results(wanted.size());
    kann::RunStats total;
    std::string error;
    {
      py::gil_scoped_release released;
      std::lock_guard<std::mutex> lock(mutex_);
      const auto begin = std::chrono::steady_clock::now();
      for (int64_t s = 0; s < samples && error.empty(); ++s) {
        for (size_t i = 0; i < inputs.size() && error.empty(); ++i) {
          const size_t per = size_t(inputs[i].elements());
          std::vector<float> one(data[i].begin() + ptrdiff_t(s * per),
                                 data[i].begin() + ptrdiff_t((s + 1) * per));
          if (auto w = session_->write_input(queue_, i, one); !w)
            error = w.error().message;
        }
        if (!error.empty())
          break;
        auto done = session_->run(queue_);
        if (!done) {
          error = done.error().message;
          break;
        }
        for (size_t o = 0; o < wanted.size() && error.empty(); ++o) {
          auto out = session_->read_output(queue_, wanted[o], done.value());
          if (!out)
            error = out.error().message;
          else
            results[o].insert(results[o].end(), out.value().begin(), out.value().end());
        }
        if (error.empty()) {
          const kann::RunStats st = session_->stats(done.value());
          total.modeled_seconds += st.modeled_seconds;
          total.modeled_cycles += st.modeled_cycles;
          total.ddr_bytes_read += st.ddr_bytes_read;
          total.ddr_bytes_written += st.ddr_bytes_written;
        }
        clReleaseEvent(done.value());
      }
      total.host_seconds =
          std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
    }
    if (!error.empty())
      throw KannError(error);
    last_ = total;
    last_samples_ = samples;
    py::list list;
    for (size_t o = 0; o < wanted.size(); ++o) {
      std::vector<int64_t> shape = signed_dims(outputs[wanted[o]].dims);
      if (stacked) {
        if (!shape.empty() && shape[0] == 1)
          shape[0] = samples;
        else
          shape.insert(shape.begin(), samples);
      }
      py::array_t<float> array(shape);
      std::memcpy(array.mutable_data(), results[o].data(), results[o].size() * sizeof(float));
      list.append(std::move(array));
    }
    return list;
  }

  std::shared_ptr<Network> network() const { return network_; }
  std::vector<TensorInfo> infos(bool inputs) const {
    return inputs ? network_->inputs() : network_->outputs();
  }
  std::string device_text() const { return device_name(device_); }
  unsigned device_index() const { return device_index_; }
  py::object sub_device() const {
    return sub_device_ < 0 ? py::object(py::none()) : py::int_(sub_device_);
  }
  const kann::RunStats &last() const { return last_; }
  int64_t last_samples() const { return last_samples_; }

private:
  std::shared_ptr<Network> network_;
  // The OpenCL objects, released in reverse order also when the constructor throws half-way
  // (members are destroyed then, the destructor is not run).
  struct Handles {
    cl_device_id device = nullptr;
    bool owns_device = false;
    cl_context context = nullptr;
    cl_command_queue queue = nullptr;
    ~Handles() {
      if (queue)
        clReleaseCommandQueue(queue);
      if (context)
        clReleaseContext(context);
      if (owns_device)
        clReleaseDevice(device);
    }
  } cl_;
  cl_device_id &device_ = cl_.device;
  bool &owns_device_ = cl_.owns_device;
  cl_context &context_ = cl_.context;
  cl_command_queue &queue_ = cl_.queue;
  int sub_device_ = -1;
  unsigned device_index_ = 0;
  std::unique_ptr<kann::Session> session_; // destroyed before cl_ (declared after it)
  std::mutex mutex_; // one run at a time per session (its buffers are shared by the runs)
  kann::RunStats last_;
  int64_t last_samples_ = 0;
};

} // namespace

PYBIND11_MODULE(_kann, m) {
  m.doc() = "kann: compile ONNX models for ManyCL and run them through OpenCL (native part)";
  m.attr("__version__") = KANN_VERSION;
  static py::exception<KannError> error(m, "Error", PyExc_RuntimeError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const KannError &e) {
      PyErr_SetString(error.ptr(), e.what());
    }
  });

  py::class_<TensorInfo>(m, "TensorInfo", "A network input or output (float32 NumPy arrays).")
      .def_readonly("name", &TensorInfo::name)
      .def_property_readonly("shape",
                             [](const TensorInfo &t) { return py::tuple(py::cast(t.shape)); })
      .def_property_readonly("dtype", [](const TensorInfo &) { return "float32"; })
      .def_readonly("storage", &TensorInfo::storage, "element type on the device")
      .def("__repr__", &TensorInfo::repr);

  py::class_<Network, std::shared_ptr<Network>>(m, "Network",
                                                "A compiled network (a kann program binary).")
      .def(py::init([](const py::bytes &kbin) {
             std::string s = kbin;
             return Network::from_bytes(std::vector<uint8_t>(s.begin(), s.end()));
           }),
           py::arg("kbin"), "From the bytes of a .kbin file.")
      .def_static(
          "load", [](const py::object &path) { return as_network(py::str(fspath(path, "path"))); },
          py::arg("path"), "Reads a .kbin file.")
      .def(
          "save", [](const Network &n, const py::object &path) { n.save(fspath(path, "path")); },
          py::arg("path"), "Writes the .kbin file.")
      .def("to_bytes",
           [](const Network &n) {
             return py::bytes(reinterpret_cast<const char *>(n.bytes().data()), n.bytes().size());
           })
      .def_property_readonly("inputs", &Network::inputs)
      .def_property_readonly("outputs", &Network::outputs)
      .def_property_readonly("clusters", [](const Network &n) { return n.program().cluster_count; })
      .def_property_readonly("device_config", [](const Network &n) { return n.program().preset; })
      .def_property_readonly("spm_required",
                             [](const Network &n) { return n.program().spm_required; })
      .def_property_readonly("report_json",
                             [](const Network &n) { return n.program().report_json; })
      .def("__repr__", [](const Network &n) {
        return "<kann.Network: " + std::to_string(n.inputs().size()) + " input(s), " +
               std::to_string(n.outputs().size()) + " output(s), " +
               std::to_string(n.program().cluster_count) + " cluster(s) of '" + n.program().preset +
               "', " + std::to_string(n.bytes().size()) + " bytes>";
      });

  m.def("compile", &compile, py::arg("model"), py::kw_only(), py::arg("clusters") = py::none(),
        py::arg("precision") = "fp32", py::arg("calibration") = py::none(),
        py::arg("device_config") = "mppa3", py::arg("calibration_percentile") = 100.0,
        py::arg("batch") = py::none(), py::arg("batch_split") = "auto",
        py::arg("schedule") = "auto", py::arg("fp16_tolerance") = py::none(),
        py::arg("fp32_operators") = py::none(), py::arg("winograd") = "auto",
        py::arg("residual_fusion") = true,
        "Compiles an ONNX model (path, bytes or onnx.ModelProto) into a Network.");
  m.def(
      "load_custom_ops",
      [](const py::object &path) {
        const std::string library = py::str(fspath(path, "path"));
        if (auto loaded = kann::custom::load_library(library); !loaded)
          throw KannError(loaded.error().message);
        // Sessions load binaries through OpenCL: the platform resolves the functions there.
        cl_platform_id platform = manycl_platform();
        auto add = reinterpret_cast<clAddNativeLibraryMCL_fn>(
            clGetExtensionFunctionAddressForPlatform(platform, "clAddNativeLibraryMCL"));
        if (!add || add(platform, library.c_str()) != CL_SUCCESS)
          throw KannError("clAddNativeLibraryMCL('" + library + "') failed");
      },
      py::arg("path"),
      "Loads a custom-operator library (manycl/native/custom.h) for compile() and Session "
      "(kann compile --custom-ops and clAddNativeLibraryMCL in one).");
  m.def(
      "load", [](const py::object &path) { return as_network(py::str(fspath(path, "path"))); },
      py::arg("path"), "Reads a .kbin file into a Network.");

  py::class_<Session>(m, "Session", "A network loaded on a ManyCL device or sub-device.")
      .def(py::init<const py::object &, unsigned, const py::object &>(), py::arg("network"),
           py::kw_only(), py::arg("device") = 0, py::arg("sub_device") = py::none())
      .def("run", &Session::run, py::arg("output_names"), py::arg("input_feed"),
           py::arg("run_options") = py::none(),
           "Runs the network: output_names (None: all) and {input name: array}; returns a list "
           "of float32 arrays.")
      .def("get_inputs", [](const Session &s) { return s.infos(true); })
      .def("get_outputs", [](const Session &s) { return s.infos(false); })
      .def_property_readonly("network", &Session::network)
      .def_property_readonly("device", &Session::device_index)
      .def_property_readonly("sub_device", &Session::sub_device)
      .def_property_readonly("device_name", &Session::device_text)
      .def_property_readonly("samples", &Session::last_samples, "samples in the last run()")
      .def_property_readonly(
          "host_seconds", [](const Session &s) { return s.last().host_seconds; },
          "host wall time of the last run() (all its samples)")
      .def_property_readonly(
          "modeled_seconds", [](const Session &s) { return s.last().modeled_seconds; },
          "modeled device time of the last run() (sum over its samples)")
      .def_property_readonly("modeled_cycles",
                             [](const Session &s) { return s.last().modeled_cycles; })
      .def_property_readonly("ddr_bytes_read",
                             [](const Session &s) { return s.last().ddr_bytes_read; })
      .def_property_readonly("ddr_bytes_written",
                             [](const Session &s) { return s.last().ddr_bytes_written; });
}
