// Standard CNNs (scripts/models/export_cnns.py: random weights, fixed input; SqueezeNet 1.1,
// ResNet-18, MobileNetV2, YOLOv3-tiny, CMakeLists.txt picks them) compiled by kann
// and run through the OpenCL ICD loader with kann::Session, compared with ONNX Runtime's
// outputs (scripts/models/prepare_cnn_tests.sh, the CTest fixture, writes both).
//
// Per model (one ctest per model, one OpenCL context per process):
//   Fp32FiveClusters / Fp32OneCluster / Fp16FiveClusters   mppa3, the whole device or a
//       1-cluster sub-device; FP32 within kFp32Abs + kFp32Rel * |ref|, FP16 within the
//       documented 2e-2 + 2e-2 * |ref| (docs/kann.md; DeepLabV3 in mixed precision: the
//       float32 operators chosen by kann::mixed on calibration samples, not the test input)
//   Binary16StorageError   (DeepLabV3) all-binary16 FP16 on 5 clusters against the deployed
//       network's weights (BatchNormalization folded, rounded to binary16) and ONNX Runtime's
//       emulation of binary16 activation storage: kann's FP16 error is that of the storage
//   Schedules   FP32 in the layer and pipeline schedules on 1, 2 and 5 clusters; auto and
//       layer bit-identical on 5 clusters without Winograd convolutions, auto predicted no
//       slower
//   SmallPreset   the `small` configuration (2 clusters x 256 KiB SPM: intra-cluster tiling
//       and spills), FP32
//   ConcurrentSubDevicesMatchSequential   the 1-cluster binary on 5 per-cluster sub-devices
//       at once, one host thread each, on 5 different inputs: bit-identical to the results
//       of the same inputs run one after the other on one sub-device.
#include <CL/cl.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "../../common/manycl_platform.h"
#include "kann/compile.h"
#include "kann/format.h"
#include "kann/mixed_precision.h"
#include "kann/npy.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/session.h"
#include "manycl/device/config.h"

namespace {

// FP32: measured max |diff| to ONNX Runtime 1e-6..3e-6 (outputs up to 4.5): 30x margin.
constexpr double kFp32Abs = 1e-4, kFp32Rel = 1e-4;
constexpr double kFp16Abs = 2e-2, kFp16Rel = 2e-2;

std::string model_path(const std::string &model, const std::string &suffix) {
  return std::string(MODELS_DIR) + "/" + model + suffix;
}

// The file name `reference.py` and `kann run` give an output tensor.
std::string safe_name(std::string name) {
  for (char &c : name)
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '.' && c != '-' && c != '_')
      c = '_';
  return name;
}

struct Devices {
  cl_context context = nullptr, small_context = nullptr;
  cl_device_id root = nullptr, small = nullptr;
  std::vector<cl_device_id> per_cluster; // sub-devices of mppa3, one cluster each
  cl_device_id two = nullptr;            // a 2-cluster sub-device of mppa3
  std::string error;
};

Devices &devices() {
  static Devices d;
  return d;
}

class OpenCLEnvironment : public ::testing::Environment {
public:
  void SetUp() override {
    Devices &d = devices();
    cl_platform_id platform = manycl_test::find_manycl_platform(&d.error);
    if (!platform)
      return;
    cl_device_id roots[2] = {};
    cl_uint count = 0;
    if (!platform ||
        clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 2, roots, &count) != CL_SUCCESS ||
        count != 2) {
      d.error = "expected the ManyCL platform with two devices (MANYCL_DEVICES=mppa3,small)";
      return;
    }
    d.root = roots[0], d.small = roots[1];
    cl_device_partition_property props[] = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN,
                                            CL_DEVICE_AFFINITY_DOMAIN_NUMA, 0};
    cl_uint made = 0;
    clCreateSubDevices(d.root, props, 0, nullptr, &made);
    d.per_cluster.resize(made);
    if (made != 5 ||
        clCreateSubDevices(d.root, props, made, d.per_cluster.data(), nullptr) != CL_SUCCESS) {
      d.error = "cannot partition mppa3 into 5 one-cluster sub-devices";
      return;
    }
    cl_device_partition_property by_counts[] = {CL_DEVICE_PARTITION_BY_COUNTS, 2,
                                                CL_DEVICE_PARTITION_BY_COUNTS_LIST_END, 0};
    if (clCreateSubDevices(d.root, by_counts, 1, &d.two, nullptr) != CL_SUCCESS) {
      d.error = "cannot make a 2-cluster sub-device of mppa3";
      return;
    }
    std::vector<cl_device_id> all = {d.root, d.two};
    all.insert(all.end(), d.per_cluster.begin(), d.per_cluster.end());
    cl_int err = CL_SUCCESS, err2 = CL_SUCCESS;
    d.context = clCreateContext(nullptr, cl_uint(all.size()), all.data(), nullptr, nullptr, &err);
    // A buffer lives in one physical device's DDR: the small device gets its own context.
    d.small_context = clCreateContext(nullptr, 1, &d.small, nullptr, nullptr, &err2);
    if (err != CL_SUCCESS || err2 != CL_SUCCESS)
      d.error = "clCreateContext failed";
  }
  void TearDown() override {
    Devices &d = devices();
    for (cl_context c : {d.context, d.small_context})
      if (c)
        clReleaseContext(c);
    for (auto s : d.per_cluster)
      clReleaseDevice(s);
    if (d.two)
      clReleaseDevice(d.two);
  }
};

struct Queue {
  cl_command_queue queue = nullptr;
  Queue(cl_context context, cl_device_id device) {
    cl_int err = CL_SUCCESS;
    queue = clCreateCommandQueueWithProperties(context, device, nullptr, &err);
  }
  ~Queue() {
    if (queue)
      clReleaseCommandQueue(queue);
  }
};

// Compiled binaries, by model / configuration / precision / clusters (several tests share one).
std::mutex kbin_mutex;
std::map<std::string, std::vector<uint8_t>> kbin_cache;
std::map<std::string, uint64_t> predicted_cycles;
std::map<std::string, std::string> chosen_schedule; // CompileOutput::schedule_choice.chosen

// `schedule`: kann::CompileOptions::schedule (the default, "auto", keeps the key short).
std::string kbin_key(const std::string &model, const std::string &preset,
                     const std::string &precision, unsigned clusters, const std::string &schedule) {
  return model + "/" + preset + "/" + precision + "/" + std::to_string(clusters) +
         (schedule == "auto" ? "" : "/" + schedule);
}

// Calibration samples of the models' input distribution (export_cnns.py's "imagenet" kind:
// uniform noise, ImageNet-normalized), from a generator of their own: never the test input.
std::vector<std::vector<std::vector<float>>> calibration_samples(size_t count, size_t elements) {
  const float mean[3] = {0.485f, 0.456f, 0.406f}, stddev[3] = {0.229f, 0.224f, 0.225f};
  std::mt19937 random(20261127);
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::vector<std::vector<std::vector<float>>> samples(count);
  for (auto &sample : samples) {
    std::vector<float> x(elements);
    for (size_t k = 0; k < elements; ++k) {
      const size_t channel = k / (elements / 3);
      x[k] = (uniform(random) - mean[channel]) / stddev[channel];
    }
    sample.push_back(std::move(x));
  }
  return samples;
}

// Models whose FP16 binaries compute some operators in float32 (precision "fp16-mixed"),
// chosen by kann::mixed on calibration samples for the 2e-2 + 2e-2 |ref| bar. One choice per
// model (the operators' arithmetic does not depend on the cluster count).
std::map<std::string, kann::mixed::Choice> mixed_choices;

manycl::Result<std::set<std::string>> fp32_operators(const std::string &model,
                                                     const kann::ir::Graph &graph,
                                                     const kann::CompileOptions &options) {
  if (auto it = mixed_choices.find(model); it != mixed_choices.end())
    return it->second.fp32_operators;
  const auto start = std::chrono::steady_clock::now();
  const size_t elements = size_t(graph.tensors[graph.inputs.at(0)].elements());
  auto choice =
      kann::mixed::choose_fp32_operators(graph, options, calibration_samples(2, elements), {});
  if (!choice)
    return choice.error();
  std::printf("[ mixed    ] %s: %s (%.1f s)\n", model.c_str(), choice.value().summary().c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  for (const auto &name : choice.value().fp32_operators)
    std::printf("[ mixed    ]   float32: %s\n", name.c_str());
  mixed_choices[model] = choice.value();
  return choice.value().fp32_operators;
}

// `precision`: fp32, fp16, or fp16-mixed (fp16 with the float32 operators of fp32_operators).
std::vector<uint8_t> compile(const std::string &model, const std::string &preset,
                             const std::string &precision, unsigned clusters, std::string &error,
                             const std::string &schedule = "auto") {
  const std::string key = kbin_key(model, preset, precision, clusters, schedule);
  std::lock_guard lock(kbin_mutex);
  if (auto it = kbin_cache.find(key); it != kbin_cache.end())
    return it->second;
  kann::CompileOptions options;
  options.device = manycl::device::preset(preset).value();
  options.clusters = clusters;
  options.precision = precision == "fp16-mixed" ? "fp16" : precision;
  // "<schedule>-direct": without Winograd convolutions, whose rounding depends on the band a
  // pixel falls in (docs/native.md), for the bit-for-bit comparisons of schedules.
  const std::string direct_suffix = "-direct";
  const bool direct = schedule.size() > direct_suffix.size() &&
                      schedule.ends_with(direct_suffix);
  options.schedule = direct ? schedule.substr(0, schedule.size() - direct_suffix.size()) : schedule;
  options.winograd = direct ? "off" : "auto";
  const auto start = std::chrono::steady_clock::now();
  auto graph = kann::import_onnx_file(model_path(model, ".onnx"));
  if (!graph || !kann::passes::optimize(graph.value())) {
    error = graph ? "optimize failed" : graph.error().message;
    return {};
  }
  if (precision == "fp16-mixed") {
    auto ops = fp32_operators(model, graph.value(), options);
    if (!ops) {
      error = ops.error().message;
      return {};
    }
    options.fp32_operators = ops.value();
  }
  auto out = kann::compile_graph(graph.value(), options);
  if (!out) {
    error = out.error().message;
    return {};
  }
  auto bytes = kann::format::write_kbin(out.value().program);
  if (!bytes) {
    error = bytes.error().message;
    return {};
  }
  std::printf("[ compile  ] %s: %.2f s, modeled %.2f ms, %zu spilled tensor(s)\n", key.c_str(),
              std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count(),
              1e3 * double(out.value().total_cycles) / options.device.clock_hz,
              out.value().spilled.size());
  predicted_cycles[key] = out.value().total_cycles;
  chosen_schedule[key] = out.value().schedule_choice.chosen;
  return kbin_cache[key] = bytes.value();
}

// The compiler's prediction of the modeled cycles of a kbin compile() made.
uint64_t predicted(const std::string &model, const std::string &preset,
                   const std::string &precision, unsigned clusters,
                   const std::string &schedule = "auto") {
  std::lock_guard lock(kbin_mutex);
  return predicted_cycles[kbin_key(model, preset, precision, clusters, schedule)];
}

// Runs `kbin` once per input; returns per input the outputs (in the session's order).
std::vector<std::vector<std::vector<float>>>
infer(cl_context context, cl_device_id device, const std::vector<uint8_t> &kbin,
      const std::vector<std::vector<float>> &inputs, std::string &error,
      std::vector<std::string> *names = nullptr, std::vector<uint64_t> *modeled = nullptr) {
  std::vector<std::vector<std::vector<float>>> results;
  auto session = kann::Session::load(context, device, kbin);
  if (!session) {
    error = "Session::load: " + session.error().message;
    return results;
  }
  kann::Session &s = *session.value();
  if (names)
    for (auto &o : s.outputs())
      names->push_back(o.name);
  Queue q(context, device);
  for (const auto &input : inputs) {
    if (auto w = s.write_input(q.queue, 0, input); !w) {
      error = "write_input: " + w.error().message;
      return results;
    }
    auto event = s.run(q.queue);
    if (!event) {
      error = "run: " + event.error().message;
      return results;
    }
    std::vector<std::vector<float>> outputs;
    for (size_t j = 0; j < s.outputs().size(); ++j) {
      auto out = s.read_output(q.queue, j, event.value());
      if (!out) {
        error = "read_output: " + out.error().message;
        clReleaseEvent(event.value());
        return results;
      }
      outputs.push_back(out.value());
    }
    if (modeled)
      modeled->push_back(s.stats(event.value()).modeled_cycles);
    clReleaseEvent(event.value());
    results.push_back(std::move(outputs));
  }
  return results;
}

class Cnn : public ::testing::TestWithParam<std::string> {
protected:
  void SetUp() override {
    ASSERT_TRUE(devices().error.empty()) << devices().error;
    auto x = kann::npy::read(model_path(GetParam(), ".input.npy"));
    ASSERT_TRUE(x.ok()) << x.error().message
                        << " (the cnn_models fixture, scripts/models/prepare_cnn_tests.sh, "
                           "prepares it)";
    input = x.value().data;
  }

  // Compiles and runs on `device`, compares every output with ONNX Runtime's.
  void check(const std::string &preset, const std::string &precision, unsigned clusters,
             cl_context context, cl_device_id device, double abs_tol, double rel_tol,
             const std::string &schedule = "auto", const std::string &reference = ".ort") {
    std::string error;
    auto kbin = compile(GetParam(), preset, precision, clusters, error, schedule);
    ASSERT_FALSE(kbin.empty()) << error;
    std::vector<std::string> names;
    const auto start = std::chrono::steady_clock::now();
    std::vector<uint64_t> modeled;
    auto results = infer(context, device, kbin, {input}, error, &names, &modeled);
    ASSERT_EQ(results.size(), 1u) << error;
    // One cost model: the compiler's prediction and the simulated run agree (issue bar: 5 %).
    const uint64_t want = predicted(GetParam(), preset, precision, clusters, schedule);
    ASSERT_EQ(modeled.size(), 1u);
    std::printf("[ cycles   ] %s %s %s x%u: predicted %llu, simulated %llu\n", GetParam().c_str(),
                preset.c_str(), precision.c_str(), clusters, (unsigned long long)want,
                (unsigned long long)modeled[0]);
    EXPECT_LE(std::fabs(double(want) - double(modeled[0])), 0.05 * double(modeled[0]))
        << "predicted " << want << " vs simulated " << modeled[0] << " modeled cycles";
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    compare(reference, names, results[0], abs_tol, rel_tol, preset, precision, clusters, seconds);
    last_names = names;
    last_outputs = results[0];
  }

  // Every output against reference directory NAME<suffix>/ (prepare_cnn_tests.sh).
  void compare(const std::string &suffix, const std::vector<std::string> &names,
               const std::vector<std::vector<float>> &outputs, double abs_tol, double rel_tol,
               const std::string &preset, const std::string &precision, unsigned clusters,
               double seconds) {
    for (size_t j = 0; j < names.size(); ++j) {
      auto ref =
          kann::npy::read(model_path(GetParam(), suffix + "/") + safe_name(names[j]) + ".npy");
      ASSERT_TRUE(ref.ok()) << ref.error().message;
      const auto &got = outputs[j];
      ASSERT_EQ(got.size(), ref.value().data.size()) << names[j];
      double max_diff = 0, max_ref = 0;
      size_t bad = 0, first_bad = 0;
      for (float v : ref.value().data)
        max_ref = std::max(max_ref, std::fabs(double(v)));
      // Networks with small outputs (random-weight MobileNetV3 logits stay below 0.1) get
      // an absolute tolerance scaled to their output range, so the check still bites.
      const double abs_eff = abs_tol * std::min(1.0, max_ref);
      for (size_t k = 0; k < got.size(); ++k) {
        const double want = ref.value().data[k], d = std::fabs(double(got[k]) - want);
        max_diff = std::max(max_diff, std::isnan(d) ? INFINITY : d);
        if (!(d <= abs_eff + rel_tol * std::fabs(want)) && bad++ == 0)
          first_bad = k;
      }
      std::printf("[ result   ] %s %s %s x%u: %s max |diff| %.3g vs %s (max |ref| %.3g), run "
                  "%.2f s\n",
                  GetParam().c_str(), preset.c_str(), precision.c_str(), clusters, names[j].c_str(),
                  max_diff, suffix.c_str() + 1, max_ref, seconds);
      EXPECT_EQ(bad, 0u) << names[j] << " vs " << suffix << ": " << bad
                         << " elements out of tolerance, first [" << first_bad
                         << "] = " << got[first_bad] << " vs " << ref.value().data[first_bad]
                         << ", max |diff| " << max_diff;
    }
  }

  std::vector<float> input;
  std::vector<std::string> last_names; // the last check's outputs
  std::vector<std::vector<float>> last_outputs;
};

TEST_P(Cnn, Fp32FiveClusters) {
  check("mppa3", "fp32", 5, devices().context, devices().root, kFp32Abs, kFp32Rel);
}

TEST_P(Cnn, Fp32OneCluster) {
  check("mppa3", "fp32", 1, devices().context, devices().per_cluster[0], kFp32Abs, kFp32Rel);
}

// The schedules (`kann compile --schedule`): layer, pipeline and group each on 1, 2 and 5
// clusters against ONNX Runtime (FP32; the check also asks predicted = simulated cycles);
// the group schedule finds a layer group in every model (its largest activation's). Then auto
// (the default) and group give the same bytes as layer on 5 clusters: the schedules differ in
// when parameters load, in how convolutions are split and in which rows a call computes, not
// in the order of the arithmetic of an output element; and auto is predicted no slower than
// layer.
TEST_P(Cnn, Schedules) {
  Devices &d = devices();
  for (const char *schedule : {"layer", "pipeline", "group"}) {
    SCOPED_TRACE(schedule);
    check("mppa3", "fp32", 5, d.context, d.root, kFp32Abs, kFp32Rel, schedule);
    check("mppa3", "fp32", 2, d.context, d.two, kFp32Abs, kFp32Rel, schedule);
    check("mppa3", "fp32", 1, d.context, d.per_cluster[0], kFp32Abs, kFp32Rel, schedule);
  }
  for (unsigned clusters : {1u, 2u, 5u}) {
    std::lock_guard lock(kbin_mutex);
    EXPECT_EQ(chosen_schedule[kbin_key(GetParam(), "mppa3", "fp32", clusters, "group")], "group")
        << clusters << " cluster(s)";
  }
  std::string error;
  auto layer = compile(GetParam(), "mppa3", "fp32", 5, error, "layer-direct");
  auto automatic = compile(GetParam(), "mppa3", "fp32", 5, error, "auto-direct");
  auto grouped = compile(GetParam(), "mppa3", "fp32", 5, error, "group-direct");
  ASSERT_FALSE(layer.empty() || automatic.empty() || grouped.empty()) << error;
  EXPECT_LE(predicted(GetParam(), "mppa3", "fp32", 5),
            predicted(GetParam(), "mppa3", "fp32", 5, "layer"));
  auto a = infer(d.context, d.root, layer, {input}, error);
  ASSERT_EQ(a.size(), 1u) << error;
  for (const auto *kbin : {&automatic, &grouped}) {
    const char *name = kbin == &automatic ? "auto" : "group";
    auto b = infer(d.context, d.root, *kbin, {input}, error);
    ASSERT_EQ(b.size(), 1u) << error;
    ASSERT_EQ(a[0].size(), b[0].size());
    for (size_t j = 0; j < a[0].size(); ++j) {
      ASSERT_EQ(a[0][j].size(), b[0][j].size());
      EXPECT_EQ(std::memcmp(a[0][j].data(), b[0][j].data(), a[0][j].size() * sizeof(float)), 0)
          << "output " << j << ": " << name << " and layer differ";
    }
  }
}

// FP16 binaries of these models compute in float32 the operators kann::mixed chooses on
// calibration samples (DeepLabV3: all-binary16 is 0.026 off FP32 on the test input, 1.11x the
// bar; docs/kann.md, "Mixed precision"); the others are all binary16.
std::string fp16_precision(const std::string &model) {
  return model == "deeplabv3_mobilenet" ? "fp16-mixed" : "fp16";
}

// Where a model's FP16 error comes from (models prepared with --fp16-analysis): the weights
// of the network an FP16 deployment runs (BatchNormalization folded, then rounded to
// binary16: NAME.fp16_deployed, ONNX Runtime in FP32) and binary16 activation storage
// (NAME.fp16_storage: the same with every activation rounded). kann's FP16 binary, against
// the deployed network, must be within the FP16 bar (2e-2 + 2e-2 |ref|) and at least as
// close as the storage emulation is (RMS over all outputs and max |diff| within 1.15x: kann
// adds no error of its own: accumulation, folding, Resize).
double rms_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double sum = 0;
  for (size_t i = 0; i < a.size(); ++i)
    sum += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return std::sqrt(sum / double(std::max<size_t>(1, a.size())));
}
double max_diff(const std::vector<float> &a, const std::vector<float> &b) {
  double m = 0;
  for (size_t i = 0; i < a.size(); ++i)
    m = std::max(m, std::fabs(double(a[i]) - b[i]));
  return m;
}

TEST_P(Cnn, Binary16StorageError) {
  check("mppa3", "fp16", 5, devices().context, devices().root, kFp16Abs, kFp16Rel, "auto",
        ".fp16_deployed");
  for (size_t j = 0; j < last_names.size(); ++j) {
    auto read = [&](const char *suffix) {
      auto r = kann::npy::read(model_path(GetParam(), suffix) + safe_name(last_names[j]) + ".npy");
      EXPECT_TRUE(r.ok()) << r.error().message << " (prepare_cnn_tests.sh --fp16-analysis)";
      return r.ok() ? r.value().data : std::vector<float>{};
    };
    const auto fp32 = read(".ort/"), deployed = read(".fp16_deployed/"),
               storage = read(".fp16_storage/");
    const auto &kann16 = last_outputs[j];
    ASSERT_TRUE(fp32.size() == kann16.size() && deployed.size() == kann16.size() &&
                storage.size() == kann16.size());
    std::printf("[ binary16 ] %s %s: max |diff| (rms) vs FP32: weights rounded %.4f (%.5f), "
                "+ activations rounded %.4f (%.5f), kann %.4f (%.5f); vs the rounded weights: "
                "activations rounded %.4f (%.5f), kann %.4f (%.5f)\n",
                GetParam().c_str(), last_names[j].c_str(), max_diff(deployed, fp32),
                rms_diff(deployed, fp32), max_diff(storage, fp32), rms_diff(storage, fp32),
                max_diff(kann16, fp32), rms_diff(kann16, fp32), max_diff(storage, deployed),
                rms_diff(storage, deployed), max_diff(kann16, deployed),
                rms_diff(kann16, deployed));
    EXPECT_LE(rms_diff(kann16, deployed), 1.15 * rms_diff(storage, deployed));
    EXPECT_LE(max_diff(kann16, deployed), 1.15 * max_diff(storage, deployed));
    size_t over = 0;
    for (size_t k = 0; k < kann16.size(); ++k)
      over += std::fabs(double(kann16[k]) - deployed[k]) >
              kFp16Abs + kFp16Rel * std::fabs(double(deployed[k]));
    EXPECT_EQ(over, 0u) << "elements outside 2e-2 + 2e-2 |ref| of the deployed network";
  }
}

TEST_P(Cnn, Fp16FiveClusters) {
  check("mppa3", fp16_precision(GetParam()), 5, devices().context, devices().root, kFp16Abs,
        kFp16Rel);
}

TEST_P(Cnn, Fp16OneCluster) {
  check("mppa3", fp16_precision(GetParam()), 1, devices().context, devices().per_cluster[0],
        kFp16Abs, kFp16Rel);
}

// Models the `small` configuration (256 KiB SPM per cluster) cannot hold, and why: kann must
// reject them with a one-line error naming the SPM (docs/kann.md, limits), never crash or
// spill silently wrong. A model that starts compiling fails here: move it to the runs.
const std::map<std::string, std::string> kSmallPresetRejections = {
    // layer4 3x3 convolutions: even their smallest output-channel slice of weights (16
    // channels, 295 KB) exceeds the SPM.
    {"resnet18", "SPM"},
    // The final GlobalAveragePool reads 1000 x 13 x 13 floats, channel-split over 2 clusters
    // (338 KB each), and global pooling is not tiled inside the clusters.
    {"squeezenet1_1", "SPM"},
    // The 512 -> 1024 3x3 convolution: 16 output channels of weights are 295 KB.
    {"yolov3_tiny", "SPM"},
};

TEST_P(Cnn, SmallPreset) {
  if (auto it = kSmallPresetRejections.find(GetParam()); it != kSmallPresetRejections.end()) {
    std::string error;
    auto kbin = compile(GetParam(), "small", "fp32", 2, error);
    ASSERT_TRUE(kbin.empty()) << "compiles for `small` now: remove it from kSmallPresetRejections";
    EXPECT_NE(error.find(it->second), std::string::npos) << error;
    EXPECT_EQ(error.find('\n'), std::string::npos) << error;
    std::printf("[ rejected ] %s on small: %s\n", GetParam().c_str(), error.c_str());
    return;
  }
  check("small", "fp32", 2, devices().small_context, devices().small, kFp32Abs, kFp32Rel);
}

TEST_P(Cnn, ConcurrentSubDevicesMatchSequential) {
  std::string error;
  auto kbin = compile(GetParam(), "mppa3", "fp32", 1, error);
  ASSERT_FALSE(kbin.empty()) << error;
  const auto &subs = devices().per_cluster;
  // Five different inputs: the stored one, mirrored, scaled, shifted, negated.
  std::vector<std::vector<float>> inputs(subs.size(), input);
  std::reverse(inputs[1].begin(), inputs[1].end());
  for (auto &v : inputs[2])
    v *= 0.5f;
  for (auto &v : inputs[3])
    v += 0.25f;
  for (auto &v : inputs[4])
    v = -v;
  auto sequential = infer(devices().context, subs[0], kbin, inputs, error);
  ASSERT_EQ(sequential.size(), inputs.size()) << error;
  std::vector<std::vector<std::vector<std::vector<float>>>> concurrent(subs.size());
  std::vector<std::string> errors(subs.size());
  std::vector<std::thread> threads;
  for (size_t k = 0; k < subs.size(); ++k)
    threads.emplace_back([&, k] {
      concurrent[k] = infer(devices().context, subs[k], kbin, {inputs[k]}, errors[k]);
    });
  for (auto &t : threads)
    t.join();
  for (size_t k = 0; k < subs.size(); ++k) {
    ASSERT_EQ(concurrent[k].size(), 1u) << "sub-device " << k << ": " << errors[k];
    EXPECT_EQ(concurrent[k][0], sequential[k]) << "sub-device " << k << " (input " << k << ")";
  }
  // The inputs differ, so do the results (the comparison above is not vacuous).
  EXPECT_NE(sequential[0], sequential[2]);
}

// CNN_MODELS: "name,name,..." from CMakeLists.txt (the fixture prepares the same list).
std::vector<std::string> model_names() {
  std::vector<std::string> names;
  std::string list = CNN_MODELS;
  for (size_t at = 0; at <= list.size();) {
    size_t comma = std::min(list.find(',', at), list.size());
    names.push_back(list.substr(at, comma - at));
    at = comma + 1;
  }
  return names;
}

INSTANTIATE_TEST_SUITE_P(Models, Cnn, ::testing::ValuesIn(model_names()),
                         [](const auto &info) { return info.param; });

} // namespace

int main(int argc, char **argv) {
  ::testing::InitGoogleTest(&argc, argv);
  ::testing::AddGlobalTestEnvironment(new OpenCLEnvironment);
  return RUN_ALL_TESTS();
}
