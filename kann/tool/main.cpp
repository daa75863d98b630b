// kann: the model compiler's command-line tool.
//   kann compile model.onnx -o model.kbin [--clusters N] [--precision fp32|fp16|int8]
//                [--calibration [NAME=]inputs.npy ...] [--calibration-percentile P]
//                [--fp16-tolerance ABS[,REL] | --fp32-operators NAME,...]
//                [--device-config preset|file.json] [--report report.html] [--report-json f]
//                [--batch N] [--batch-split auto|sequential|clusters[:G]]
//   kann inspect model.kbin [--records]
//   kann simulate model.kbin --input x.npy [--output-dir DIR] [--device-config spec]
//                [--trace trace.json]
//                (runs the records on a simulated device directly, without OpenCL)
//   kann run ...  (through OpenCL: provided by the host library when linked in)
// Errors are one line on stderr and a non-zero exit code.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "kann/cli_number.h"
#include "kann/compile.h"
#include "kann/custom_ops.h"
#include "kann/file.h"
#include "kann/format.h"
#include "kann/input_shape.h"
#include "kann/mixed_precision.h"
#include "kann/npy.h"
#include "kann/onnx_import.h"
#include "kann/passes.h"
#include "kann/quantize.h"
#include "kann/timing.h"
#include "manycl/device/config.h"
#include "manycl/device/report.h"
#include "manycl/kbin_runner.h"

extern "C" int kann_run_main(int argc, char **argv) __attribute__((weak));

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "kann: %s\n", message.c_str());
  return 1;
}

// "a.so:b.so" -> {"a.so", "b.so"} (empty parts dropped).
std::vector<std::string> split_paths(const std::string &list) {
  std::vector<std::string> paths;
  std::stringstream in(list);
  for (std::string path; std::getline(in, path, ':');)
    if (!path.empty())
      paths.push_back(path);
  return paths;
}

int usage() {
  std::fprintf(
      stderr,
      "usage:\n"
      "  kann compile MODEL.onnx -o OUT.kbin [--clusters N] [--precision fp32|fp16|int8]\n"
      "               [--calibration [NAME=]INPUTS.npy ...] [--calibration-percentile P]\n"
      "               [--fp16-tolerance ABS[,REL] | --fp32-operators NAME,...]\n"
      "               [--device-config PRESET|FILE.json] [--report REPORT.html]\n"
      "               [--report-json FILE] [--dump-ir] [--dump-schedule]\n"
      "               [--no-residual-fusion] [--winograd auto|all|off]\n"
      "               [--batch N] [--batch-split auto|sequential|clusters[:G]]\n"
      "               [--schedule layer|pipeline|group|auto] [--custom-ops LIB.so[:LIB.so]]\n"
      "  kann inspect MODEL.kbin [--records]\n"
      "  kann simulate MODEL.kbin --input X.npy [--input NAME=X.npy ...]\n"
      "               [--output-dir DIR] [--device-config PRESET|FILE.json]\n"
      "               [--trace TRACE.json] [--custom-ops LIB.so[:LIB.so]]\n"
      "  kann run MODEL.kbin --input X.npy [--output-dir DIR] [--subdevices K]\n"
      "               [--iterations N] [--warmup N] [--trace TRACE.json]\n"
      "  kann --version\n");
  return 2;
}

struct Args {
  std::vector<std::string> positional;
  std::multimap<std::string, std::string> options;
  std::vector<std::string> flags;
  std::string error;
  std::string get(const std::string &key, const std::string &fallback = "") const {
    auto it = options.find(key);
    return it == options.end() ? fallback : it->second;
  }
  bool has(const std::string &flag) const {
    return std::find(flags.begin(), flags.end(), flag) != flags.end();
  }
};

Args parse(int argc, char **argv, const std::vector<std::string> &with_value,
           const std::vector<std::string> &flags) {
  Args a;
  for (int i = 0; i < argc; ++i) {
    std::string s = argv[i];
    if (s.rfind("-", 0) == 0) {
      if (std::find(flags.begin(), flags.end(), s) != flags.end()) {
        a.flags.push_back(s);
      } else if (std::find(with_value.begin(), with_value.end(), s) != with_value.end()) {
        if (i + 1 >= argc) {
          a.error = "option " + s + " needs a value";
          return a;
        }
        a.options.insert({s, argv[++i]});
      } else {
        a.error = "unknown option " + s;
        return a;
      }
    } else {
      a.positional.push_back(s);
    }
  }
  return a;
}

bool write_file(const std::string &path, const void *data, size_t size) {
  std::ofstream f(path, std::ios::binary);
  f.write(static_cast<const char *>(data), std::streamsize(size));
  return bool(f);
}

// The samples of the --calibration files (each a .npy of N samples of one input stacked on the
// batch axis; NAME=FILE.npy names the input, as a model with several inputs needs).
manycl::Result<std::vector<std::vector<std::vector<float>>>>
read_calibration(const kann::ir::Graph &graph, const std::vector<std::string> &files) {
  std::vector<kann::quantize::CalibrationSource> sources;
  for (const auto &spec : files) {
    kann::quantize::CalibrationSource src;
    std::string path = spec;
    const size_t eq = spec.find('=');
    if (eq != std::string::npos) {
      const std::string name = spec.substr(0, eq);
      for (int t : graph.inputs)
        if (graph.tensors[t].name == name)
          src.input = name, path = spec.substr(eq + 1);
      if (src.input.empty() && graph.inputs.size() > 1)
        return manycl::make_error("--calibration " + spec + ": '" + name +
                                  "' is not an input of the model");
    }
    auto arr = kann::npy::read(path);
    if (!arr)
      return arr.error();
    src.origin = path;
    src.values = std::move(arr.value().data);
    sources.push_back(std::move(src));
  }
  return kann::quantize::calibration_samples(graph, sources);
}

// --precision int8 on a float model: calibrate on the samples of the --calibration files and
// quantize the graph.
manycl::Result<void> quantize_if_asked(kann::ir::Graph &graph, const kann::CompileOptions &options,
                                       const std::vector<std::string> &files,
                                       const std::string &percentile_text) {
  const bool quantized = std::any_of(graph.nodes.begin(), graph.nodes.end(),
                                     [](const auto &n) { return !n.dead && n.ints.count("int8"); });
  if (options.precision != "int8" || quantized) {
    if (quantized && !files.empty())
      return manycl::make_error("--calibration: the model is already quantized (QDQ / QLinear)");
    return {};
  }
  if (files.empty())
    return manycl::make_error(
        "--precision int8 on a float model needs calibration data: "
        "--calibration [NAME=]inputs.npy (samples stacked on the batch axis)");
  kann::quantize::CalibrationOptions calibration;
  try {
    size_t used = 0;
    calibration.percentile = std::stod(percentile_text, &used);
    if (used != percentile_text.size())
      throw std::invalid_argument(percentile_text);
  } catch (...) {
    return manycl::make_error("--calibration-percentile needs a number");
  }
  auto samples_or = read_calibration(graph, files);
  if (!samples_or)
    return samples_or.error();
  const auto &samples = samples_or.value();
  kann::quantize::split_activations(graph);
  std::fprintf(stderr, "kann: calibrating on %zu samples\n", samples.size());
  auto ranges = kann::quantize::calibrate(graph, options, samples, calibration);
  if (!ranges)
    return ranges.error();
  auto count = kann::quantize::quantize_int8(graph, ranges.value());
  if (!count)
    return count.error();
  std::fprintf(stderr, "kann: %d INT8 operators\n", count.value());
  return {};
}

// --precision fp16 with --fp32-operators (names) or --fp16-tolerance ABS[,REL] (measured on
// the --calibration samples, kann/mixed_precision.h): the operators computed in float32.
manycl::Result<void> mix_precision_if_asked(const kann::ir::Graph &graph,
                                            kann::CompileOptions &options,
                                            const std::vector<std::string> &files,
                                            const std::string &names,
                                            const std::string &tolerance_text) {
  const bool by_name = !names.empty(), measured = !tolerance_text.empty();
  if (options.precision != "fp16") {
    if (by_name || measured)
      return manycl::make_error(std::string(by_name ? "--fp32-operators" : "--fp16-tolerance") +
                                " needs --precision fp16");
    if (options.precision == "fp32" && !files.empty())
      return manycl::make_error(
          "--calibration is only used with --precision int8 or with --fp16-tolerance");
    return {};
  }
  if (by_name && measured)
    return manycl::make_error("--fp32-operators and --fp16-tolerance exclude each other");
  if (by_name) {
    std::stringstream in(names);
    for (std::string name; std::getline(in, name, ',');)
      if (!name.empty())
        options.fp32_operators.insert(name);
    return {};
  }
  if (!measured) {
    if (!files.empty())
      return manycl::make_error(
          "--calibration is only used with --precision int8 or with --fp16-tolerance");
    return {};
  }
  kann::mixed::Tolerance tolerance;
  std::string error;
  const size_t comma = tolerance_text.find(',');
  if (!kann::cli::parse_real("--fp16-tolerance", tolerance_text.substr(0, comma), 0, 1e6,
                             tolerance.abs, error))
    return manycl::make_error(error);
  tolerance.rel = tolerance.abs;
  if (comma != std::string::npos &&
      !kann::cli::parse_real("--fp16-tolerance", tolerance_text.substr(comma + 1), 0, 1e6,
                             tolerance.rel, error))
    return manycl::make_error(error);
  if (files.empty())
    return manycl::make_error(
        "--fp16-tolerance measures the error on calibration data: "
        "--calibration [NAME=]inputs.npy (samples stacked on the batch axis)");
  auto samples = read_calibration(graph, files);
  if (!samples)
    return samples.error();
  std::fprintf(stderr, "kann: choosing float32 operators on %zu samples\n", samples.value().size());
  auto choice = kann::mixed::choose_fp32_operators(graph, options, samples.value(), tolerance);
  if (!choice)
    return choice.error();
  std::fprintf(stderr, "kann: %s\n", choice.value().summary().c_str());
  for (const auto &kept : choice.value().kept_tensors)
    for (const auto &c : choice.value().ranking)
      if (c.tensor == kept)
        std::fprintf(stderr,
                     "kann:   keeps %s in float32: binary16 storage error %.3g (RMS), %.0f %% of "
                     "the error it carries, predicted RMS error at the outputs %.3g\n",
                     c.tensor.c_str(), c.storage_error, 100.0 * c.injected_share, c.score);
  if (!choice.value().fp32_operators.empty()) {
    std::string list;
    for (const auto &name : choice.value().fp32_operators)
      list += (list.empty() ? "" : ",") + name;
    std::fprintf(stderr, "kann: float32 operators: %s\n", list.c_str());
  }
  options.fp32_operators = choice.value().fp32_operators;
  return {};
}

// Progress of long compile steps, as one rewritten line on a terminal (nothing in logs).
class TerminalProgress {
public:
  bool enabled() const { return terminal_; }
  void update(const char *stage, size_t done, size_t total) {
    const auto now = std::chrono::steady_clock::now();
    if (stage_ == stage && now - last_ < std::chrono::milliseconds(100))
      return;
    stage_ = stage;
    last_ = now;
    if (total)
      std::fprintf(stderr, "\rkann: %s %zu/%zu\033[K", stage, done + 1, total);
    else
      std::fprintf(stderr, "\rkann: %s (step %zu)\033[K", stage, done + 1);
    shown_ = true;
  }
  void finish() {
    if (shown_)
      std::fprintf(stderr, "\r\033[K");
  }

private:
  bool terminal_ = isatty(STDERR_FILENO) == 1;
  bool shown_ = false;
  std::string stage_;
  std::chrono::steady_clock::time_point last_{};
};

int compile(int argc, char **argv) {
  Args a = parse(argc, argv,
                 {"-o", "--clusters", "--precision", "--device-config", "--report", "--report-json",
                  "--calibration", "--calibration-percentile", "--batch", "--batch-split",
                  "--schedule", "--custom-ops", "--fp32-operators", "--fp16-tolerance",
                  "--winograd"},
                 {"--dump-ir", "--dump-schedule", "--no-residual-fusion"});
  if (!a.error.empty())
    return fail(a.error);
  if (a.positional.size() != 1 || a.get("-o").empty())
    return usage();
  const std::string winograd = a.get("--winograd", "auto");
  if (winograd != "auto" && winograd != "all" && winograd != "off")
    return fail("--winograd must be auto, all or off");
  // Custom operators (docs/kann.md): LIB.so[:LIB2.so...], each exporting mcl_custom_operators.
  for (const std::string &library : split_paths(a.get("--custom-ops")))
    if (auto loaded = kann::custom::load_library(library); !loaded)
      return fail("--custom-ops: " + loaded.error().message);
  auto config = manycl::device::config_from_spec(a.get("--device-config", "mppa3"));
  if (!config)
    return fail("--device-config: " + config.error().message);
  kann::CompileOptions options;
  options.device = config.value();
  options.precision = a.get("--precision", "fp32");
  if (options.precision != "fp32" && options.precision != "fp16" && options.precision != "int8")
    return fail("--precision must be fp32, fp16 or int8");
  options.clusters = config.value().clusters;
  if (a.options.count("--clusters")) {
    const uint64_t most = std::min<uint64_t>(config.value().clusters, KBIN_MAX_CLUSTERS);
    uint64_t clusters = 0;
    std::string error;
    if (!kann::cli::parse_integer("--clusters", a.get("--clusters"), 1, most, clusters, error))
      return fail(error + "; the device '" + config.value().name + "' has " +
                  std::to_string(config.value().clusters) + " clusters");
    options.clusters = unsigned(clusters);
  }
  if (a.options.count("--batch")) {
    uint64_t batch = 0;
    std::string error;
    if (!kann::cli::parse_integer("--batch", a.get("--batch"), 1, 1u << 20, batch, error))
      return fail(error);
    options.batch = int64_t(batch);
  }
  options.batch_split = a.get("--batch-split", "auto");
  if (options.batch_split.rfind("clusters:", 0) == 0) { // clusters:G, groups of G clusters
    uint64_t group = 0;
    std::string error;
    if (!kann::cli::parse_integer("--batch-split clusters:G", options.batch_split.substr(9), 1,
                                  KBIN_MAX_CLUSTERS, group, error))
      return fail(error);
    options.batch_split = "clusters";
    options.batch_group_clusters = unsigned(group);
  }
  if (options.batch_split != "auto" && options.batch_split != "sequential" &&
      options.batch_split != "clusters")
    return fail("--batch-split must be auto, sequential, clusters or clusters:G");
  options.schedule = a.get("--schedule", "auto");
  if (options.schedule != "auto" && options.schedule != "layer" && options.schedule != "pipeline" &&
      options.schedule != "group")
    return fail("--schedule must be layer, pipeline, group or auto");
  if (a.options.count("--calibration-percentile")) {
    double percentile = 0;
    std::string error;
    if (!kann::cli::parse_real("--calibration-percentile", a.get("--calibration-percentile"), 50,
                               100, percentile, error))
      return fail(error);
  }
  std::fprintf(stderr, "kann: importing %s\n", a.positional[0].c_str());
  auto graph = kann::import_onnx_file(a.positional[0]);
  if (!graph)
    return fail(graph.error().message);
  if (auto r = kann::passes::optimize(graph.value()); !r)
    return fail(r.error().message);
  std::vector<std::string> calibration_files;
  for (const auto &[key, value] : a.options)
    if (key == "--calibration")
      calibration_files.push_back(value);
  if (auto r = quantize_if_asked(graph.value(), options, calibration_files,
                                 a.get("--calibration-percentile", "100"));
      !r)
    return fail(r.error().message);
  if (auto r = mix_precision_if_asked(graph.value(), options, calibration_files,
                                      a.get("--fp32-operators"), a.get("--fp16-tolerance"));
      !r)
    return fail(r.error().message);
  if (a.has("--dump-ir"))
    std::fputs(graph.value().dump().c_str(), stderr);
  std::fprintf(stderr, "kann: compiling for %u clusters of '%s'\n", options.clusters,
               options.device.name.c_str());
  options.dump_schedule = a.has("--dump-schedule");
  options.fuse_residual_adds = !a.has("--no-residual-fusion");
  options.winograd = winograd;
  TerminalProgress progress;
  if (progress.enabled())
    options.progress = [&](const char *stage, size_t done, size_t total) {
      progress.update(stage, done, total);
    };
  auto out = kann::compile_graph(graph.value(), options);
  progress.finish();
  if (!out)
    return fail(out.error().message);
  if (options.dump_schedule)
    std::fputs(out.value().schedule.c_str(), stderr);
  auto bytes = kann::format::write_kbin(out.value().program);
  if (!bytes)
    return fail(bytes.error().message);
  if (!write_file(a.get("-o"), bytes.value().data(), bytes.value().size()))
    return fail("cannot write '" + a.get("-o") + "'");
  if (!a.get("--report").empty()) {
    std::string html = out.value().report_html();
    if (!write_file(a.get("--report"), html.data(), html.size()))
      return fail("cannot write '" + a.get("--report") + "'");
  }
  if (!a.get("--report-json").empty()) {
    std::string json = out.value().report_json();
    if (!write_file(a.get("--report-json"), json.data(), json.size()))
      return fail("cannot write '" + a.get("--report-json") + "'");
  }
  std::fputs(out.value().report_text().c_str(), stdout);
  std::printf("wrote %s (%zu bytes)\n", a.get("-o").c_str(), bytes.value().size());
  return 0;
}

int inspect(int argc, char **argv) {
  Args a = parse(argc, argv, {}, {"--records"});
  if (!a.error.empty())
    return fail(a.error);
  if (a.positional.size() != 1)
    return usage();
  auto bytes = kann::io::read_file(a.positional[0]);
  if (!bytes)
    return fail(bytes.error().message);
  auto p = kann::format::read_kbin(bytes.value().data(), bytes.value().size());
  if (!p)
    return fail(a.positional[0] + ": " + p.error().message);
  const auto &prog = p.value();
  std::printf("kbin %u.%u: %u clusters (%u PEs), preset '%s', SPM %llu of %llu B, params %zu B, "
              "scratch %llu B\n",
              KBIN_VERSION_MAJOR, prog.version_minor, prog.cluster_count, prog.pes_per_cluster,
              prog.preset.c_str(), (unsigned long long)prog.spm_required,
              (unsigned long long)prog.spm_bytes, prog.params.size(),
              (unsigned long long)prog.scratch_size);
  std::printf("kernel arguments:\n");
  for (const auto &t : prog.tensors) {
    std::string dims;
    for (uint64_t d : t.dims)
      dims += (dims.empty() ? "" : "x") + std::to_string(d);
    std::printf("  arg %u %-6s %-24s %s[%s] %llu B\n", t.arg_index,
                t.role == KBIN_ROLE_INPUT ? "input" : "output", t.name.c_str(),
                kann::format::dtype_name(t.dtype), dims.c_str(), (unsigned long long)t.byte_size);
  }
  for (uint32_t k = 0; k < prog.cluster_count; ++k) {
    std::map<std::string, int> counts;
    int step = 0;
    for (const auto &r : prog.streams[k]) {
      std::string d = kann::format::describe_record(r);
      counts[d.substr(0, d.find(' ')) +
             (r.function_id == KBIN_FN_DMA ? " " + d.substr(4, d.find(' ', 4) - 4) : "")]++;
    }
    std::printf("cluster %u: %zu records:", k, prog.streams[k].size());
    for (auto &[name, n] : counts)
      std::printf(" %s=%d", name.c_str(), n);
    std::printf("\n");
    if (a.has("--records"))
      for (size_t i = 0; i < prog.streams[k].size(); ++i) {
        const auto &r = prog.streams[k][i];
        std::printf("  [step %d] %4zu %s\n", step, i, kann::format::describe_record(r).c_str());
        if (r.function_id == KBIN_FN_BARRIER ||
            (prog.cluster_count == 1 && r.function_id == KBIN_FN_WAIT_DMA))
          ++step;
      }
  }
  if (!prog.report_json.empty()) {
    std::printf("compile report (JSON):\n%s\n", prog.report_json.c_str());
  }
  return 0;
}

int simulate(int argc, char **argv) {
  Args a = parse(argc, argv,
                 {"--input", "--output-dir", "--device-config", "--trace", "--custom-ops"}, {});
  if (!a.error.empty())
    return fail(a.error);
  if (a.positional.size() != 1)
    return usage();
  for (const std::string &library : split_paths(a.get("--custom-ops")))
    if (auto loaded = kann::custom::load_library(library); !loaded)
      return fail("--custom-ops: " + loaded.error().message);
  auto bytes = kann::io::read_file(a.positional[0]);
  if (!bytes)
    return fail(bytes.error().message);
  auto p = kann::format::read_kbin(bytes.value().data(), bytes.value().size());
  if (!p)
    return fail(a.positional[0] + ": " + p.error().message);
  const auto &prog = p.value();
  auto config = manycl::device::config_from_spec(a.get("--device-config", prog.preset));
  if (!config)
    return fail("--device-config: " + config.error().message);
  if (config.value().clusters < prog.cluster_count || config.value().spm_bytes < prog.spm_required)
    return fail("the device '" + config.value().name + "' is too small for this program");
  std::vector<std::vector<uint8_t>> args(prog.arg_count);
  std::vector<std::string> inputs;
  for (auto [k, v] : a.options)
    if (k == "--input")
      inputs.push_back(v);
  size_t next = 0;
  for (const auto &t : prog.tensors) {
    if (t.role != KBIN_ROLE_INPUT)
      continue;
    std::string path;
    for (const auto &in : inputs)
      if (in.rfind(t.name + "=", 0) == 0)
        path = in.substr(t.name.size() + 1);
    if (path.empty() && next < inputs.size() && inputs[next].find('=') == std::string::npos)
      path = inputs[next++];
    if (path.empty())
      return fail("no --input for '" + t.name + "'");
    auto arr = kann::npy::read(path);
    if (!arr)
      return fail(arr.error().message);
    std::string shape_error;
    if (kann::cli::samples_of_shape(arr.value().shape, t.dims, false, shape_error) != 1)
      return fail(path + ": " + shape_error + " for input '" + t.name + "'");
    if (arr.value().data.size() * 4 != t.byte_size)
      return fail(path + ": " + std::to_string(arr.value().data.size()) + " elements, input '" +
                  t.name + "' needs " + std::to_string(t.byte_size / 4));
    args[t.arg_index].resize(t.byte_size);
    std::memcpy(args[t.arg_index].data(), arr.value().data.data(), t.byte_size);
  }
  const std::string trace = a.get("--trace");
  if (!trace.empty())
    manycl::device::Reports::instance().set_trace_path(trace);
  manycl::device::Device device(config.value());
  auto run = manycl::interp::run_kbin(device, prog, args);
  if (!run)
    return fail(run.error().message);
  if (!trace.empty()) {
    if (auto written = manycl::device::Reports::instance().flush(); !written)
      return fail("--trace: " + written.error().message);
    std::printf("trace (Perfetto / chrome://tracing JSON) written to %s\n", trace.c_str());
  }
  const std::string dir = a.get("--output-dir", ".");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    return fail("cannot create '" + dir + "': " + ec.message());
  for (const auto &t : prog.tensors) {
    if (t.role != KBIN_ROLE_OUTPUT)
      continue;
    kann::npy::Array arr;
    for (uint64_t d : t.dims)
      arr.shape.push_back(int64_t(d));
    arr.data.resize(t.byte_size / 4);
    std::memcpy(arr.data.data(), run.value().outputs[t.arg_index].data(), t.byte_size);
    std::string safe = t.name;
    for (char &c : safe)
      if (c == '/' || c == '\\')
        c = '_';
    if (auto r = kann::npy::write(dir + "/" + safe + ".npy", arr); !r)
      return fail(r.error().message);
    std::printf("%s -> %s/%s.npy\n", t.name.c_str(), dir.c_str(), safe.c_str());
  }
  const auto &s = run.value().stats;
  std::printf("modeled %llu cycles (%.3f ms at %.2f GHz), host %.3f ms, DDR read %llu B, "
              "written %llu B, multicast saved %llu B, SPM high water %llu B\n",
              (unsigned long long)s.cycles(), s.modeled_seconds() * 1e3, s.clock_hz / 1e9,
              s.host_seconds * 1e3, (unsigned long long)s.ddr_bytes_read,
              (unsigned long long)s.ddr_bytes_written, (unsigned long long)s.multicast_saved_bytes,
              (unsigned long long)s.spm_high_water);
  // The compiler's prediction of the same run (the record streams replayed under the
  // simulator's timing rules, native costs from the same library): the two should agree.
  auto predicted = kann::predict_timing(prog, config.value(), config.value().ddr_bytes_per_cycle);
  if (predicted && s.cycles() > 0)
    std::printf("predicted %llu cycles by the compiler (%.4f x simulated)\n",
                (unsigned long long)predicted.value().total_cycles,
                double(predicted.value().total_cycles) / double(s.cycles()));
  else if (!predicted)
    std::printf("no prediction: %s\n", predicted.error().message.c_str());
  return 0;
}

} // namespace

int main(int argc, char **argv) {
  if (argc < 2)
    return usage();
  const std::string cmd = argv[1];
  if (cmd == "compile")
    return compile(argc - 2, argv + 2);
  if (cmd == "inspect")
    return inspect(argc - 2, argv + 2);
  if (cmd == "simulate")
    return simulate(argc - 2, argv + 2);
  if (cmd == "run") {
    if (kann_run_main)
      return kann_run_main(argc - 1, argv + 1);
    return fail("'kann run' needs the OpenCL host library, which this build does not include; "
                "'kann simulate' runs a binary on the simulated device directly");
  }
  if (cmd == "--version" || cmd == "version") {
    // The CMake project version: the same string as `pkg-config --modversion manycl`.
    std::printf("kann %s\n", KANN_VERSION);
    return 0;
  }
  if (cmd == "-h" || cmd == "--help" || cmd == "help") {
    usage();
    return 0;
  }
  return fail("unknown command '" + cmd + "' (compile, inspect, simulate, run)");
}
