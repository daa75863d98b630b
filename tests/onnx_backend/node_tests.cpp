// ONNX backend node tests (Debian's libonnx-testdata) compiled by kann and run through the
// OpenCL ICD loader with kann::Session, as an application would.
//
// Every node test directory (model.onnx + test_data_set_*/input_*.pb, output_*.pb) becomes
// one GoogleTest test, registered at startup:
//   <Operator>.<test>   every operator of the model is in kann's supported list
//                       (docs/kann.md): compiled for 1, 2 and 5 clusters of mppa3 (and a
//                       tiny-SPM device for a few tests, forcing intra-cluster tiling), run,
//                       and compared with output_*.pb; or, when expected_rejections.txt
//                       lists it, asserted to be rejected with the listed one-line reason.
//   Unsupported.<test>  the other operators: kann must reject them with a one-line error
//                       (or, should it compile one, compute the stored outputs).
// Tests of supported operators therefore fail on a regression in either direction.
//
// kann needs parameters to be constants (initializers), while the node tests feed every
// operand as a graph input. The harness binds the inputs that are parameters by the
// operator's definition (Conv W/B, Gemm B/C, Resize scales, Clip bounds, ...) as
// initializers holding the data set's values, writes that model to the build tree and
// compiles it with kann::compile_onnx_file; activation operands stay runtime inputs.
#include <CL/cl.h>

#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "../common/manycl_platform.h"
#include "kann/compile.h"
#include "kann/format.h"
#include "kann/session.h"
#include "manycl/device/config.h"

namespace fs = std::filesystem;

namespace {

// docs/kann.md, "What is supported": the operators kann compiles (Constant nodes fold).
const std::set<std::string> kSupportedOps = {"Conv",
                                             "MaxPool",
                                             "AveragePool",
                                             "GlobalAveragePool",
                                             "GlobalMaxPool",
                                             "Gemm",
                                             "MatMul",
                                             "Add",
                                             "Sub",
                                             "Mul",
                                             "Div",
                                             "BatchNormalization",
                                             "Relu",
                                             "Clip",
                                             "LeakyRelu",
                                             "Sigmoid",
                                             "Tanh",
                                             "HardSigmoid",
                                             "HardSwish",
                                             "Softmax",
                                             "Concat",
                                             "Resize",
                                             "Flatten",
                                             "Reshape",
                                             "Identity",
                                             "Dropout",
                                             "QuantizeLinear",
                                             "DequantizeLinear",
                                             "Squeeze",
                                             "Transpose",
                                             "ReduceMean",
                                             "Slice",
                                             "Expand",
                                             "Tile",
                                             "DepthToSpace",
                                             "SpaceToDepth",
                                             "LogSoftmax",
                                             "PRelu",
                                             "Max",
                                             "Min",
                                             "Sum",
                                             "Mean",
                                             "ReduceMax",
                                             "ReduceMin",
                                             "ReduceSum",
                                             "ReduceProd",
                                             "ReduceL1",
                                             "ReduceL2",
                                             "ReduceSumSquare",
                                             "ReduceLogSum",
                                             "ReduceLogSumExp",
                                             "Unsqueeze",
                                             "Abs",
                                             "Neg",
                                             "Exp",
                                             "Log",
                                             "Sqrt",
                                             "Reciprocal",
                                             "Floor",
                                             "Ceil",
                                             "Round",
                                             "Sign",
                                             "Sin",
                                             "Cos",
                                             "Tan",
                                             "Asin",
                                             "Acos",
                                             "Atan",
                                             "Sinh",
                                             "Cosh",
                                             "Asinh",
                                             "Acosh",
                                             "Atanh",
                                             "Erf",
                                             "Softplus",
                                             "Softsign",
                                             "Elu",
                                             "Selu",
                                             "Celu",
                                             "ThresholdedRelu",
                                             "Shrink",
                                             "ConvTranspose",
                                             "Pad"};

// Operand positions that are parameters of the operator (kann wants them constant).
const std::map<std::string, std::set<int>> kParameterOperands = {
    {"Conv", {1, 2}},
    {"ConvTranspose", {1, 2}},
    {"Pad", {1, 2, 3}},
    {"Gemm", {1, 2}},
    {"MatMul", {1}},
    {"BatchNormalization", {1, 2, 3, 4}},
    {"Clip", {1, 2}},
    {"Resize", {1, 2, 3}},
    {"Reshape", {1}},
    {"Squeeze", {1}},
    {"Unsqueeze", {1}},
    {"ReduceMean", {1}},
    {"ReduceMax", {1}},
    {"ReduceSum", {1}},
    {"Slice", {1, 2, 3, 4}},
    {"Expand", {1}},
    {"Tile", {1}},
    {"PRelu", {1}},
    {"ReduceMin", {1}},
    {"ReduceProd", {1}},
    {"ReduceL1", {1}},
    {"ReduceL2", {1}},
    {"ReduceSumSquare", {1}},
    {"ReduceLogSum", {1}},
    {"ReduceLogSumExp", {1}},
    {"Dropout", {1, 2}},
    {"QuantizeLinear", {1, 2}},
    {"DequantizeLinear", {1, 2}}};

// Operators whose result is one IEEE operation (or a selection/copy) per element: kann must
// reproduce the reference bit for bit. Others: |got - want| <= kAbsTol + kRelTol * |want|
// (different summation order, exp/tanh implementations, reciprocal multiplies).
const std::set<std::string> kExactOps = {
    "Relu",      "MaxPool", "GlobalMaxPool", "Clip",  "Concat",       "Identity",     "Flatten",
    "Reshape",   "Dropout", "Add",           "Sub",   "Mul",          "Squeeze",      "Unsqueeze",
    "Transpose", "Slice",   "Expand",        "Tile",  "DepthToSpace", "SpaceToDepth", "Max",
    "Min",       "Abs",     "Neg",           "Floor", "Ceil",         "Round",        "Sign"};
constexpr double kAbsTol = 1e-4;
constexpr double kRelTol = 1e-4;

// Tests that also run on the tiny-SPM device (tiny_spm.json): their operator must be
// tiled inside the clusters there (the test checks the compile report says so).
const std::set<std::string> kTiledTests = {"test_maxpool_2d_default", "test_averagepool_2d_pads",
                                           "test_maxpool_2d_pads"};

std::string read_bytes(const std::string &path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool load_tensor(const std::string &path, onnx::TensorProto &t) {
  std::string bytes = read_bytes(path);
  return !bytes.empty() && t.ParseFromString(bytes);
}

// Elements of a TensorProto as doubles (the numeric types the node tests use).
bool tensor_values(const onnx::TensorProto &t, std::vector<double> &out) {
  int64_t n = 1;
  for (auto d : t.dims())
    n *= d;
  out.clear();
  out.reserve(size_t(n));
  const std::string &raw = t.raw_data();
  auto from_raw = [&](auto zero) {
    using T = decltype(zero);
    if (raw.size() != size_t(n) * sizeof(T))
      return false;
    for (int64_t i = 0; i < n; ++i) {
      T v;
      std::memcpy(&v, raw.data() + i * sizeof(T), sizeof(T));
      out.push_back(double(v));
    }
    return true;
  };
  const bool has_raw = t.has_raw_data();
  switch (t.data_type()) {
  case onnx::TensorProto::FLOAT:
    if (has_raw)
      return from_raw(float{});
    out.assign(t.float_data().begin(), t.float_data().end());
    break;
  case onnx::TensorProto::DOUBLE:
    if (has_raw)
      return from_raw(double{});
    out.assign(t.double_data().begin(), t.double_data().end());
    break;
  case onnx::TensorProto::UINT8:
    if (has_raw)
      return from_raw(uint8_t{});
    out.assign(t.int32_data().begin(), t.int32_data().end());
    break;
  case onnx::TensorProto::INT8:
    if (has_raw)
      return from_raw(int8_t{});
    out.assign(t.int32_data().begin(), t.int32_data().end());
    break;
  case onnx::TensorProto::INT32:
    if (has_raw)
      return from_raw(int32_t{});
    out.assign(t.int32_data().begin(), t.int32_data().end());
    break;
  case onnx::TensorProto::INT64:
    if (has_raw)
      return from_raw(int64_t{});
    out.assign(t.int64_data().begin(), t.int64_data().end());
    break;
  default:
    return false;
  }
  return out.size() == size_t(n);
}

struct NodeCase {
  std::string name, dir, suite;
  std::set<std::string> ops;
  bool supported = false;
};

struct Expectation {
  std::string kind; // "reject" or "deviates"
  std::string reason;
};

// expected_rejections.txt: `reject TEST REASON...` (kann's one-line error must contain
// REASON) or `deviates TEST REASON...` (kann compiles and runs it, and its result differs
// from the stored reference for the documented reason). '#' starts a comment.
std::map<std::string, Expectation> load_expectations(const std::string &path, std::string &error) {
  std::map<std::string, Expectation> e;
  std::ifstream in(path);
  if (!in) {
    error = "cannot read " + path;
    return e;
  }
  std::string line;
  int number = 0;
  while (std::getline(in, line)) {
    ++number;
    if (line.empty() || line[0] == '#')
      continue;
    std::istringstream s(line);
    std::string kind, test, reason;
    s >> kind >> test;
    std::getline(s >> std::ws, reason);
    if ((kind != "reject" && kind != "deviates") || test.empty() || reason.empty() ||
        e.count(test)) {
      error = path + ":" + std::to_string(number) + ": malformed or duplicate entry";
      return e;
    }
    e[test] = {kind, reason};
  }
  return e;
}

// The devices a test runs on. The contexts live for the whole process (not one per test):
// one for mppa3 and its sub-devices, one for the tiny-SPM device (a buffer lives in the DDR
// of one physical device, so two root devices cannot share a context's buffers).
struct Target {
  std::string label;
  manycl::device::DeviceConfig config;
  unsigned clusters = 0;
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
};

struct OpenCL {
  cl_context mppa3_context = nullptr, tiny_context = nullptr;
  std::vector<Target> targets; // mppa3 x1, x2, x5, tiny-SPM
  std::vector<cl_device_id> sub_devices;
  std::string error;
};

OpenCL &opencl() {
  static OpenCL cl;
  return cl;
}

std::mutex summary_mutex;
struct Summary {
  std::map<std::string, int> passed_by_op, rejected_by_op, deviations_by_op;
  int unsupported_rejected = 0, unsupported_matched = 0, tiled_runs = 0;
} summary;

class OpenCLEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    OpenCL &cl = opencl();
    cl_platform_id platform = manycl_test::find_manycl_platform(&cl.error);
    if (!platform)
      return;
    cl_uint count = 0;
    if (!platform ||
        clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 0, nullptr, &count) != CL_SUCCESS ||
        count != 2) {
      cl.error =
          "expected the ManyCL platform with two devices (MANYCL_DEVICES=mppa3,<tiny_spm.json>)";
      return;
    }
    std::vector<cl_device_id> roots(count);
    clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, count, roots.data(), nullptr);
    auto mppa3 = manycl::device::preset("mppa3");
    auto tiny = manycl::device::config_from_spec(TINY_SPM_CONFIG);
    if (!mppa3 || !tiny) {
      cl.error = "cannot read the device configurations";
      return;
    }
    // A 1-cluster and a 2-cluster sub-device of mppa3 (compute units per cluster: 1 in
    // SPMD mode, the PEs in LWI mode).
    cl_uint units = 0;
    clGetDeviceInfo(roots[0], CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
    const cl_device_partition_property per_cluster = units / mppa3->clusters;
    cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_COUNTS, per_cluster,
                                            2 * per_cluster, CL_DEVICE_PARTITION_BY_COUNTS_LIST_END,
                                            0};
    cl.sub_devices.resize(2);
    if (clCreateSubDevices(roots[0], props, 2, cl.sub_devices.data(), nullptr) != CL_SUCCESS) {
      cl.error = "cannot create the 1- and 2-cluster sub-devices";
      return;
    }
    cl.targets = {{"mppa3 x1", *mppa3, 1, cl.sub_devices[0]},
                  {"mppa3 x2", *mppa3, 2, cl.sub_devices[1]},
                  {"mppa3 x5", *mppa3, mppa3->clusters, roots[0]},
                  {"tiny-SPM x" + std::to_string(tiny->clusters), *tiny, tiny->clusters, roots[1]}};
    cl_device_id mppa3_devices[] = {cl.targets[0].device, cl.targets[1].device,
                                    cl.targets[2].device};
    cl_int err = CL_SUCCESS, err2 = CL_SUCCESS;
    cl.mppa3_context = clCreateContext(nullptr, 3, mppa3_devices, nullptr, nullptr, &err);
    cl.tiny_context = clCreateContext(nullptr, 1, &roots[1], nullptr, nullptr, &err2);
    if (err != CL_SUCCESS || err2 != CL_SUCCESS) {
      cl.error =
          "clCreateContext failed (" + std::to_string(err) + ", " + std::to_string(err2) + ")";
      return;
    }
    for (auto &t : cl.targets) {
      t.context = &t == &cl.targets[3] ? cl.tiny_context : cl.mppa3_context;
      t.queue = clCreateCommandQueueWithProperties(t.context, t.device, nullptr, &err);
      if (err != CL_SUCCESS) {
        cl.error = "clCreateCommandQueue failed on " + t.label;
        return;
      }
    }
  }

  void TearDown() override {
    OpenCL &cl = opencl();
    for (auto &t : cl.targets)
      if (t.queue)
        clReleaseCommandQueue(t.queue);
    for (cl_context c : {cl.mppa3_context, cl.tiny_context})
      if (c)
        clReleaseContext(c);
    for (auto d : cl.sub_devices)
      if (d)
        clReleaseDevice(d);
    std::lock_guard lock(summary_mutex);
    int passed = 0, rejected = 0, deviating = 0;
    std::string per_op;
    std::set<std::string> ops;
    for (auto &[op, k] : summary.passed_by_op)
      ops.insert(op);
    for (auto &[op, k] : summary.rejected_by_op)
      ops.insert(op);
    for (auto &op : ops) {
      passed += summary.passed_by_op[op];
      rejected += summary.rejected_by_op[op];
      deviating += summary.deviations_by_op[op];
      per_op += " " + op + " " + std::to_string(summary.passed_by_op[op]) + "/" +
                std::to_string(summary.rejected_by_op[op]);
    }
    std::printf("onnx_backend summary: supported-operator node tests: %d passed (every data set, "
                "1/2/5 clusters), %d expected rejections, %d documented deviations; tiled "
                "(tiny SPM) runs %d; unsupported-operator tests: %d rejected cleanly, %d "
                "compiled and matched\n  per suite (passed/rejected):%s\n",
                passed, rejected, deviating, summary.tiled_runs, summary.unsupported_rejected,
                summary.unsupported_matched, per_op.c_str());
  }
};

// The model with its parameter operands bound to the data set's values; `runtime_inputs`
// gets the graph inputs left (index of input_K.pb, name).
bool freeze_parameters(const NodeCase &c, const std::string &data_set, const std::string &out_path,
                       std::vector<std::pair<int, std::string>> &runtime_inputs,
                       std::string &error) {
  onnx::ModelProto model;
  if (!model.ParseFromString(read_bytes(c.dir + "/model.onnx"))) {
    error = "cannot parse model.onnx";
    return false;
  }
  auto *graph = model.mutable_graph();
  std::set<std::string> parameters;
  for (const auto &node : graph->node()) {
    auto it = kParameterOperands.find(node.op_type());
    if (it == kParameterOperands.end())
      continue;
    for (int k : it->second)
      if (k < node.input_size() && !node.input(k).empty())
        parameters.insert(node.input(k));
  }
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> kept;
  for (int k = 0; k < graph->input_size(); ++k) {
    const auto &input = graph->input(k);
    if (!parameters.count(input.name())) {
      runtime_inputs.push_back({k, input.name()});
      *kept.Add() = input;
      continue;
    }
    onnx::TensorProto value;
    if (!load_tensor(data_set + "/input_" + std::to_string(k) + ".pb", value)) {
      error = "cannot read the value of parameter '" + input.name() + "'";
      return false;
    }
    value.set_name(input.name());
    *graph->add_initializer() = value;
  }
  graph->mutable_input()->Swap(&kept);
  std::ofstream out(out_path, std::ios::binary);
  if (!model.SerializeToOstream(&out)) {
    error = "cannot write " + out_path;
    return false;
  }
  return true;
}

std::vector<std::string> data_sets(const NodeCase &c) {
  std::vector<std::string> sets;
  for (auto &e : fs::directory_iterator(c.dir))
    if (e.is_directory() && e.path().filename().string().rfind("test_data_set_", 0) == 0)
      sets.push_back(e.path().string());
  std::sort(sets.begin(), sets.end());
  return sets;
}

struct Comparison {
  bool ok = true;
  double max_diff = 0;
  std::string detail;
};

// Runs a compiled model on `target` with the data set's runtime inputs and compares every
// output with output_K.pb.
Comparison run_and_compare(const Target &target, const std::vector<uint8_t> &kbin,
                           const std::string &data_set,
                           const std::vector<std::pair<int, std::string>> &runtime_inputs,
                           const onnx::GraphProto &graph, bool exact) {
  Comparison result;
  auto fail = [&](const std::string &why) {
    result.ok = false;
    result.detail = why;
    return result;
  };
  auto session = kann::Session::load(target.context, target.device, kbin);
  if (!session)
    return fail("Session::load: " + session.error().message);
  kann::Session &s = *session.value();
  for (size_t i = 0; i < s.inputs().size(); ++i) {
    const auto &info = s.inputs()[i];
    auto it = std::find_if(runtime_inputs.begin(), runtime_inputs.end(),
                           [&](auto &p) { return p.second == info.name; });
    if (it == runtime_inputs.end())
      return fail("the binary's input '" + info.name + "' is no runtime input of the model");
    onnx::TensorProto tensor;
    std::vector<double> values;
    if (!load_tensor(data_set + "/input_" + std::to_string(it->first) + ".pb", tensor) ||
        !tensor_values(tensor, values))
      return fail("cannot read input '" + info.name + "'");
    if (values.size() != info.elements())
      return fail("input '" + info.name + "' has " + std::to_string(values.size()) +
                  " elements, the binary wants " + std::to_string(info.elements()));
    if (auto w = s.write_input(target.queue, i, std::vector<float>(values.begin(), values.end()));
        !w)
      return fail("write_input: " + w.error().message);
  }
  auto event = s.run(target.queue);
  if (!event)
    return fail("run: " + event.error().message);
  for (size_t j = 0; j < s.outputs().size(); ++j) {
    const auto &info = s.outputs()[j];
    int index = -1;
    for (int k = 0; k < graph.output_size(); ++k)
      if (graph.output(k).name() == info.name)
        index = k;
    if (index < 0)
      return fail("the binary's output '" + info.name + "' is no model output");
    onnx::TensorProto tensor;
    std::vector<double> want;
    if (!load_tensor(data_set + "/output_" + std::to_string(index) + ".pb", tensor) ||
        !tensor_values(tensor, want))
      return fail("cannot read output_" + std::to_string(index) + ".pb");
    std::vector<uint64_t> want_dims(tensor.dims().begin(), tensor.dims().end());
    if (want_dims != info.dims)
      return fail("output '" + info.name + "': shape differs from the reference");
    std::vector<double> got;
    if (info.dtype == 3 || info.dtype == 4) {
      // Quantized outputs: the integers in the buffer, as ONNX stores them.
      std::vector<uint8_t> raw(info.byte_size);
      if (clEnqueueReadBuffer(target.queue, s.output_buffer(j), CL_TRUE, 0, raw.size(), raw.data(),
                              1, &event.value(), nullptr) != CL_SUCCESS)
        return fail("clEnqueueReadBuffer failed");
      for (uint8_t b : raw)
        got.push_back(info.dtype == 3 ? double(int8_t(b)) : double(b));
    } else {
      auto out = s.read_output(target.queue, j, event.value());
      if (!out)
        return fail("read_output: " + out.error().message);
      got.assign(out.value().begin(), out.value().end());
    }
    if (got.size() != want.size())
      return fail("output '" + info.name + "': element count differs");
    for (size_t k = 0; k < got.size(); ++k) {
      const double d = std::fabs(got[k] - want[k]);
      result.max_diff = std::max(result.max_diff, std::isnan(d) ? INFINITY : d);
      const double allowed = exact ? 0.0 : kAbsTol + kRelTol * std::fabs(want[k]);
      if (!(d <= allowed) && result.ok) {
        result.ok = false;
        result.detail = "output '" + info.name + "'[" + std::to_string(k) +
                        "] = " + std::to_string(got[k]) + ", reference " + std::to_string(want[k]) +
                        (exact ? " (exact operator)" : "");
      }
    }
  }
  clReleaseEvent(event.value());
  return result;
}

class NodeTest : public ::testing::Test {
public:
  NodeTest(NodeCase c, const Expectation *expectation)
      : case_(std::move(c)),
        expected_(expectation ? std::optional<Expectation>(*expectation) : std::nullopt) {}

  void TestBody() override {
    ASSERT_TRUE(opencl().error.empty()) << opencl().error;
    const auto sets = data_sets(case_);
    ASSERT_FALSE(sets.empty()) << case_.dir << ": no test_data_set_*";
    const std::string work = std::string(WORK_DIR) + "/" + case_.name;
    fs::create_directories(work);
    onnx::ModelProto original;
    ASSERT_TRUE(original.ParseFromString(read_bytes(case_.dir + "/model.onnx")));
    const bool exact = std::all_of(case_.ops.begin(), case_.ops.end(), [](auto &op) {
      return op == "Constant" || kExactOps.count(op);
    });
    std::vector<const Target *> targets;
    // Other operators: one target is enough to check the rejection.
    for (size_t t = case_.supported ? 0 : 2; t < 3; ++t)
      targets.push_back(&opencl().targets[t]);
    const bool tiled = kTiledTests.count(case_.name) > 0;
    if (tiled)
      targets.push_back(&opencl().targets[3]);
    bool compiled_any = false, rejected_any = false;
    for (size_t d = 0; d < sets.size(); ++d) {
      const std::string model_path = work + "/model_" + std::to_string(d) + ".onnx";
      std::vector<std::pair<int, std::string>> runtime_inputs;
      std::string error;
      ASSERT_TRUE(freeze_parameters(case_, sets[d], model_path, runtime_inputs, error)) << error;
      for (const Target *target : targets) {
        SCOPED_TRACE(target->label + ", " + fs::path(sets[d]).filename().string());
        kann::CompileOptions options;
        options.device = target->config;
        options.clusters = target->clusters;
        auto out = kann::compile_onnx_file(model_path, options);
        if (!out) {
          // Rejections are one clean line.
          const std::string message = out.error().message;
          EXPECT_FALSE(message.empty());
          EXPECT_EQ(message.find('\n'), std::string::npos) << message;
          rejected_any = true;
          if (!case_.supported)
            continue;
          ASSERT_TRUE(expected_ && expected_->kind == "reject")
              << "kann rejects a node test of a supported operator: '" << message
              << "' (fix kann, or list it in expected_rejections.txt if the limit is documented)";
          EXPECT_NE(message.find(expected_->reason), std::string::npos)
              << "kann's reason: '" << message << "', expected_rejections.txt: '"
              << expected_->reason << "'";
          continue;
        }
        compiled_any = true;
        ASSERT_FALSE(expected_ && expected_->kind == "reject")
            << "expected_rejections.txt says kann rejects it (" << expected_->reason
            << ") but it compiles: update the file";
        auto bytes = kann::format::write_kbin(out.value().program);
        ASSERT_TRUE(bytes.ok()) << bytes.error().message;
        if (target == &opencl().targets[3]) {
          bool any_tiled =
              std::any_of(out.value().ops.begin(), out.value().ops.end(),
                          [](auto &op) { return op.split.find(" x") != std::string::npos; });
          EXPECT_TRUE(any_tiled) << "the tiny-SPM device no longer forces intra-cluster tiling";
        }
        Comparison cmp = run_and_compare(*target, bytes.value(), sets[d], runtime_inputs,
                                         original.graph(), exact);
        if (expected_ && expected_->kind == "deviates") {
          EXPECT_FALSE(cmp.ok) << "expected_rejections.txt documents a deviation ("
                               << expected_->reason
                               << ") but kann now matches the reference: update the file";
          EXPECT_TRUE(cmp.detail.find("output '") == 0)
              << cmp.detail; // ran, and differed numerically
          continue;
        }
        EXPECT_TRUE(cmp.ok) << cmp.detail << " (max |diff| " << cmp.max_diff << ")";
        if (cmp.ok && target == &opencl().targets[3]) {
          std::lock_guard lock(summary_mutex);
          ++summary.tiled_runs;
        }
      }
    }
    if (HasFailure())
      return;
    std::lock_guard lock(summary_mutex);
    if (!case_.supported) {
      ++(compiled_any ? summary.unsupported_matched : summary.unsupported_rejected);
      return;
    }
    if (!expected_)
      ++summary.passed_by_op[case_.suite];
    else if (expected_->kind == "reject" && rejected_any)
      ++summary.rejected_by_op[case_.suite];
    else
      ++summary.deviations_by_op[case_.suite];
  }

private:
  NodeCase case_;
  std::optional<Expectation> expected_;
};

std::vector<NodeCase> discover(const std::string &root) {
  std::vector<NodeCase> cases;
  std::error_code ec;
  for (auto &e : fs::directory_iterator(root, ec)) {
    if (!fs::exists(e.path() / "model.onnx"))
      continue;
    NodeCase c;
    c.name = e.path().filename().string();
    c.dir = e.path().string();
    onnx::ModelProto model;
    if (model.ParseFromString(read_bytes(c.dir + "/model.onnx")))
      for (const auto &n : model.graph().node())
        c.ops.insert(n.op_type());
    std::set<std::string> computing = c.ops;
    computing.erase("Constant");
    c.supported =
        !computing.empty() && std::all_of(computing.begin(), computing.end(),
                                          [](auto &op) { return kSupportedOps.count(op) > 0; });
    // Suite: the operator (several operators of an expanded function: joined by '_').
    for (auto &op : computing)
      c.suite += (c.suite.empty() ? "" : "_") + op;
    if (!c.supported)
      c.suite = "Unsupported";
    cases.push_back(c);
  }
  std::sort(cases.begin(), cases.end(), [](auto &a, auto &b) { return a.name < b.name; });
  return cases;
}

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  const auto cases = discover(ONNX_NODE_TEST_DIR);
  std::string error;
  static const auto expectations = load_expectations(EXPECTATIONS_FILE, error);
  // The data and the expectations file themselves: present, and every entry names a node
  // test of a supported operator (a stale entry is an error, not a silent no-op).
  ::testing::RegisterTest(
      "Expectations", "NameSupportedNodeTests", nullptr, nullptr, __FILE__, __LINE__,
      [cases, error]() -> ::testing::Test * {
        struct Check : ::testing::Test {
          std::vector<NodeCase> cases;
          std::string error;
          void TestBody() override {
            ASSERT_TRUE(error.empty()) << error;
            ASSERT_GT(cases.size(), 500u) << "ONNX node tests missing under " ONNX_NODE_TEST_DIR
                                             " (apt-get install libonnx-testdata)";
            for (auto &[name, e] : expectations) {
              auto it =
                  std::find_if(cases.begin(), cases.end(), [&](auto &c) { return c.name == name; });
              EXPECT_TRUE(it != cases.end() && it->supported)
                  << name << " (expected_rejections.txt) is no node test of a supported operator";
            }
          }
        };
        auto *t = new Check;
        t->cases = cases;
        t->error = error;
        return t;
      });
  for (const auto &c : cases) {
    auto it = expectations.find(c.name);
    const Expectation *e = it == expectations.end() ? nullptr : &it->second;
    ::testing::RegisterTest(c.suite.c_str(), c.name.c_str(), nullptr, nullptr, __FILE__, __LINE__,
                            [c, e]() -> ::testing::Test * { return new NodeTest(c, e); });
  }
  ::testing::AddGlobalTestEnvironment(new OpenCLEnvironment);
  return RUN_ALL_TESTS();
}
