// `kann run`: runs a compiled network through the OpenCL ICD loader, like any application,
// on the ManyCL device or on K sub-devices at once (one host thread and one kann::Session
// per sub-device), and reports latency and throughput in host time and modeled device time.
#include <CL/cl.h>
#include <CL/cl_ext_manycl.h>

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <latch>
#include <fstream>
#include <map>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include <unistd.h>

#include "kann/cli_number.h"
#include "kann/format.h"
#include "kann/input_shape.h"
#include "kann/npy.h"
#include "kann/session.h"

namespace {

int fail(const std::string &message) {
  std::fprintf(stderr, "kann run: %s\n", message.c_str());
  return 1;
}

// Inferences finished so far; workers report each one and their own exit.
struct Progress {
  std::mutex mutex;
  std::condition_variable changed;
  size_t finished = 0, running = 0;
  void add(size_t done, size_t exited) {
    {
      std::lock_guard<std::mutex> lock(mutex);
      finished += done;
      running -= exited;
    }
    changed.notify_all();
  }
};

// Long runs show progress on a terminal: a line rewritten twice a second once the run has
// lasted a second (never in logs, where stderr is not a terminal). Returns when every worker
// has exited.
void report_progress_until_done(Progress &progress, size_t total,
                                std::chrono::steady_clock::time_point start) {
  const bool terminal = isatty(STDERR_FILENO) == 1;
  bool shown = false;
  std::unique_lock<std::mutex> lock(progress.mutex);
  while (progress.running > 0) {
    progress.changed.wait_for(lock, std::chrono::milliseconds(500));
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    if (terminal && seconds >= 1.0) {
      std::fprintf(stderr, "\rkann run: %zu / %zu inferences, %.1f s", progress.finished, total,
                   seconds);
      shown = true;
    }
  }
  if (shown)
    std::fprintf(stderr, "\n");
}

double median(std::vector<double> v) {
  if (v.empty())
    return 0;
  std::sort(v.begin(), v.end());
  return v.size() % 2 ? v[v.size() / 2] : 0.5 * (v[v.size() / 2 - 1] + v[v.size() / 2]);
}

std::string file_name_for(const std::string &tensor) {
  std::string name = tensor;
  for (char &c : name)
    if (c == '/' || c == '\\' || c == ':' || c == ' ')
      c = '_';
  return name;
}

cl_platform_id find_manycl() {
  cl_uint count = 0;
  if (clGetPlatformIDs(0, nullptr, &count) != CL_SUCCESS || count == 0)
    return nullptr;
  std::vector<cl_platform_id> platforms(count);
  clGetPlatformIDs(count, platforms.data(), nullptr);
  for (cl_platform_id p : platforms) {
    char name[128] = {};
    clGetPlatformInfo(p, CL_PLATFORM_NAME, sizeof name, name, nullptr);
    if (std::strcmp(name, "ManyCL") == 0)
      return p;
  }
  return nullptr;
}

// Clusters of a device, through the ManyCL vendor extension.
unsigned device_clusters(cl_platform_id platform, cl_device_id device) {
  auto fn = reinterpret_cast<clGetDeviceConfigMCL_fn>(
      clGetExtensionFunctionAddressForPlatform(platform, "clGetDeviceConfigMCL"));
  if (!fn)
    return 0;
  size_t size = 0;
  if (fn(device, 0, nullptr, &size) != CL_SUCCESS)
    return 0;
  std::string json(size, '\0');
  fn(device, size, json.data(), nullptr);
  size_t at = json.find("\"clusters\":");
  return at == std::string::npos
             ? 0
             : static_cast<unsigned>(std::strtoul(json.c_str() + at + 11, nullptr, 10));
}

struct Worker {
  cl_device_id device = nullptr;
  cl_context context = nullptr;
  cl_command_queue queue = nullptr;
  std::unique_ptr<kann::Session> session;
  std::vector<double> host_latency, modeled_latency;
  std::chrono::steady_clock::time_point timed_start, timed_end; // after the warm-up passes
  std::vector<std::vector<float>> outputs; // per output, samples concatenated
  std::string error;
};

} // namespace

extern "C" int kann_run_main(int argc, char **argv) {
  std::string kbin_path, output_dir, trace_path;
  std::vector<std::pair<std::string, std::string>> input_paths; // name (may be empty), path
  unsigned subdevices = 1, iterations = 1, warmup = 0;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto next = [&]() -> const char * { return i + 1 < argc ? argv[++i] : nullptr; };
    if (a == "--input") {
      const char *v = next();
      if (!v)
        return fail("--input needs a value");
      std::string s = v;
      size_t eq = s.find('=');
      if (eq != std::string::npos && s.find(".npy") > eq)
        input_paths.emplace_back(s.substr(0, eq), s.substr(eq + 1));
      else
        input_paths.emplace_back("", s);
    } else if (a == "--output-dir") {
      const char *v = next();
      if (!v)
        return fail("--output-dir needs a value");
      output_dir = v;
    } else if (a == "--trace") {
      const char *v = next();
      if (!v || !*v)
        return fail("--trace needs a file name");
      trace_path = v;
    } else if (a == "--subdevices" || a == "--iterations" || a == "--warmup") {
      const char *v = next();
      if (!v)
        return fail(a + " needs a value");
      // Sub-devices beyond the device's clusters are refused below, with the counts.
      const uint64_t most = a == "--subdevices" ? 256 : 1000000000;
      const uint64_t least = a == "--warmup" ? 0 : 1;
      uint64_t count = 0;
      std::string error;
      if (!kann::cli::parse_integer(a, v, least, most, count, error))
        return fail(error);
      (a == "--subdevices" ? subdevices : a == "--iterations" ? iterations : warmup) =
          static_cast<unsigned>(count);
    } else if (!a.empty() && a[0] == '-') {
      return fail("unknown option '" + a + "'");
    } else if (kbin_path.empty()) {
      kbin_path = a;
    } else {
      return fail("unexpected argument '" + a + "'");
    }
  }
  if (kbin_path.empty())
    return fail("usage: kann run MODEL.kbin --input X.npy [--output-dir DIR] [--subdevices K] "
                "[--iterations N] [--warmup N] [--trace TRACE.json]");
  if (!trace_path.empty()) {
    // The ICD writes the trace (MANYCL_TRACE) when the process exits; it reads the variable
    // when it first starts, which is the clGetPlatformIDs below. Opened here so that a path
    // that cannot be written is an error now, not a line at exit.
    if (!std::ofstream(trace_path))
      return fail("--trace: cannot write '" + trace_path + "'");
    setenv("MANYCL_TRACE", trace_path.c_str(), 1);
  }
  std::ifstream in(kbin_path, std::ios::binary | std::ios::ate);
  if (!in)
    return fail("cannot read '" + kbin_path + "'");
  // One read of the whole file (a YOLO binary is hundreds of MB: no byte-wise iteration).
  const std::streamsize kbin_size = in.tellg();
  std::vector<uint8_t> kbin(kbin_size > 0 ? static_cast<size_t>(kbin_size) : 0);
  in.seekg(0);
  if (kbin_size < 0 || !in.read(reinterpret_cast<char *>(kbin.data()), kbin_size))
    return fail("cannot read '" + kbin_path + "'");

  cl_platform_id platform = find_manycl();
  if (!platform)
    return fail("no ManyCL platform: if a 'ManyCL:' line is printed above, fix MANYCL_DEVICES / "
                "MANYCL_DEVICE_MODE as it says; otherwise install the ICD or set OCL_ICD_VENDORS "
                "to the build tree's vendors folder");
  cl_device_id root;
  if (clGetDeviceIDs(platform, CL_DEVICE_TYPE_ACCELERATOR, 1, &root, nullptr) != CL_SUCCESS)
    return fail("the ManyCL platform has no device");

  // The sub-devices: each must own exactly the clusters the network was compiled for.
  unsigned clusters = device_clusters(platform, root);
  cl_uint units = 0;
  clGetDeviceInfo(root, CL_DEVICE_MAX_COMPUTE_UNITS, sizeof units, &units, nullptr);
  if (clusters == 0)
    return fail("cannot read the device configuration (clGetDeviceConfigMCL)");
  unsigned units_per_cluster = units / clusters;
  auto parsed = kann::format::read_kbin(kbin.data(), kbin.size(), {}, kann::format::ReadParams::Skip);
  if (!parsed)
    return fail(kbin_path + ": not a valid kann binary: " + parsed.error().message);
  unsigned network_clusters = parsed->cluster_count;
  if (network_clusters == 0 || network_clusters > clusters)
    return fail("the network was compiled for " + std::to_string(network_clusters) +
                " cluster(s); the device has " + std::to_string(clusters));
  if (subdevices * network_clusters > clusters)
    return fail(std::to_string(subdevices) + " sub-devices of " + std::to_string(network_clusters) +
                " cluster(s) do not fit in " + std::to_string(clusters) + " clusters");

  std::vector<cl_device_id> devices;
  if (subdevices == 1 && network_clusters == clusters) {
    devices.push_back(root);
  } else {
    std::vector<cl_device_partition_property> props{CL_DEVICE_PARTITION_BY_COUNTS};
    for (unsigned k = 0; k < subdevices; ++k)
      props.push_back(network_clusters * units_per_cluster);
    props.push_back(CL_DEVICE_PARTITION_BY_COUNTS_LIST_END);
    props.push_back(0);
    devices.resize(subdevices);
    cl_uint made = 0;
    cl_int err = clCreateSubDevices(root, props.data(), subdevices, devices.data(), &made);
    if (err != CL_SUCCESS)
      return fail("clCreateSubDevices failed (" + std::to_string(err) + ")");
  }

  std::vector<Worker> workers(devices.size());
  for (size_t k = 0; k < devices.size(); ++k) {
    Worker &w = workers[k];
    cl_int err;
    w.device = devices[k];
    w.context = clCreateContext(nullptr, 1, &w.device, nullptr, nullptr, &err);
    if (err != CL_SUCCESS)
      return fail("clCreateContext failed (" + std::to_string(err) + ")");
    w.queue = clCreateCommandQueue(w.context, w.device, CL_QUEUE_PROFILING_ENABLE, &err);
    if (err != CL_SUCCESS)
      return fail("clCreateCommandQueue failed (" + std::to_string(err) + ")");
    auto session = kann::Session::load(w.context, w.device, kbin);
    if (!session)
      return fail(session.error().message);
    w.session = std::move(session.value());
  }
  const auto &input_infos = workers[0].session->inputs();
  const auto &output_infos = workers[0].session->outputs();

  // Inputs: one .npy per network input (by position, or NAME=path). An array with a leading
  // dimension holding several samples is run sample by sample, outputs stacked the same way.
  if (input_paths.size() != input_infos.size())
    return fail("the network takes " + std::to_string(input_infos.size()) + " input(s), " +
                std::to_string(input_paths.size()) + " given");
  std::vector<kann::npy::Array> arrays(input_infos.size());
  size_t samples = 0;
  for (size_t i = 0; i < input_paths.size(); ++i) {
    size_t slot = i;
    if (!input_paths[i].first.empty()) {
      auto it =
          std::find_if(input_infos.begin(), input_infos.end(),
                       [&](const kann::TensorInfo &t) { return t.name == input_paths[i].first; });
      if (it == input_infos.end())
        return fail("the network has no input named '" + input_paths[i].first + "'");
      slot = static_cast<size_t>(it - input_infos.begin());
    }
    auto array = kann::npy::read(input_paths[i].second);
    if (!array)
      return fail(input_paths[i].second + ": " + array.error().message);
    std::string shape_error;
    if (kann::cli::samples_of_shape(array->shape, input_infos[slot].dims, true, shape_error) == 0)
      return fail(input_paths[i].second + ": " + shape_error + " for input '" +
                  input_infos[slot].name + "'");
    uint64_t per_sample = input_infos[slot].elements();
    if (per_sample == 0 || array->data.size() % per_sample != 0)
      return fail(input_paths[i].second + ": " + std::to_string(array->data.size()) +
                  " values do not make samples of " + std::to_string(per_sample) + " for input '" +
                  input_infos[slot].name + "'");
    size_t n = array->data.size() / per_sample;
    if (samples && n != samples)
      return fail("inputs hold different sample counts");
    samples = n;
    arrays[slot] = std::move(array.value());
  }

  // The samples' values, cut once: every pass of every worker writes the same ones.
  std::vector<std::vector<std::vector<float>>> inputs(samples);
  for (size_t s = 0; s < samples; ++s)
    for (size_t i = 0; i < arrays.size(); ++i) {
      const uint64_t n = input_infos[i].elements();
      inputs[s].emplace_back(arrays[i].data.begin() + s * n, arrays[i].data.begin() + (s + 1) * n);
    }
  arrays.clear();

  // Each worker runs `warmup` untimed passes over the samples, waits until every worker has
  // done so (concurrent sub-devices are timed together), then `iterations` timed passes;
  // outputs of the first pass are kept.
  auto start = std::chrono::steady_clock::now();
  const size_t total = workers.size() * (size_t(warmup) + iterations) * samples;
  std::latch warmed_up(static_cast<std::ptrdiff_t>(workers.size()));
  Progress progress;
  progress.running = workers.size();
  std::vector<std::thread> threads;
  for (auto &w : workers) {
    threads.emplace_back([&, wp = &w] {
      struct Exit {
        Progress &progress;
        ~Exit() { progress.add(0, 1); }
      } exit{progress};
      Worker &worker = *wp;
      // A worker that fails during the warm-up still releases the others.
      struct WarmedUp {
        std::latch &latch;
        bool counted = false;
        void arrive() {
          if (!counted)
            latch.count_down();
          counted = true;
        }
        ~WarmedUp() { arrive(); }
      } warmed{warmed_up};
      worker.outputs.resize(output_infos.size());
      for (unsigned it = 0; it < warmup + iterations && worker.error.empty(); ++it) {
        const bool timed = it >= warmup;
        if (it == warmup) {
          warmed.arrive();
          warmed_up.wait();
          worker.timed_start = std::chrono::steady_clock::now();
        }
        for (size_t s = 0; s < samples && worker.error.empty(); ++s) {
          auto t0 = std::chrono::steady_clock::now();
          for (size_t i = 0; i < inputs[s].size(); ++i) {
            if (auto r = worker.session->write_input(worker.queue, i, inputs[s][i]); !r) {
              worker.error = r.error().message;
              return;
            }
          }
          auto event = worker.session->run(worker.queue);
          if (!event) {
            worker.error = event.error().message;
            return;
          }
          for (size_t o = 0; o < output_infos.size(); ++o) {
            auto values = worker.session->read_output(worker.queue, o, event.value());
            if (!values) {
              worker.error = values.error().message;
              break;
            }
            if (it == 0)
              worker.outputs[o].insert(worker.outputs[o].end(), values->begin(), values->end());
          }
          cl_int status = CL_COMPLETE;
          clGetEventInfo(event.value(), CL_EVENT_COMMAND_EXECUTION_STATUS, sizeof status, &status,
                         nullptr);
          if (status < 0 && worker.error.empty())
            worker.error =
                "the network command failed on the device (" + std::to_string(status) + ")";
          if (timed) {
            worker.host_latency.push_back(
                std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
            worker.modeled_latency.push_back(
                worker.session->stats(event.value()).modeled_seconds);
          }
          clReleaseEvent(event.value());
          progress.add(1, 0);
        }
      }
      worker.timed_end = std::chrono::steady_clock::now();
    });
  }
  report_progress_until_done(progress, total, start);
  for (auto &t : threads)
    t.join();
  for (auto &w : workers)
    if (!w.error.empty())
      return fail(w.error);
  // Throughput over the timed passes: from the first worker's start to the last one's end.
  auto timed_start = workers[0].timed_start, timed_end = workers[0].timed_end;
  for (auto &w : workers) {
    timed_start = std::min(timed_start, w.timed_start);
    timed_end = std::max(timed_end, w.timed_end);
  }
  double wall = std::chrono::duration<double>(timed_end - timed_start).count();

  // Every sub-device computed the same network on the same inputs: they must agree.
  for (size_t k = 1; k < workers.size(); ++k)
    if (workers[k].outputs != workers[0].outputs)
      return fail("sub-device " + std::to_string(k) +
                  " computed different outputs than sub-device 0");

  if (!output_dir.empty()) {
    std::error_code ec;
    std::filesystem::create_directories(output_dir, ec);
    for (size_t o = 0; o < output_infos.size(); ++o) {
      kann::npy::Array array;
      if (samples > 1)
        array.shape.push_back(static_cast<int64_t>(samples));
      for (uint64_t d : output_infos[o].dims)
        if (samples <= 1 || d != 1 || array.shape.size() > 1)
          array.shape.push_back(static_cast<int64_t>(d));
      array.data = workers[0].outputs[o];
      std::string path = output_dir + "/" + file_name_for(output_infos[o].name) + ".npy";
      if (auto r = kann::npy::write(path, array); !r)
        return fail(path + ": " + r.error().message);
    }
  }

  std::vector<double> host, modeled;
  for (auto &w : workers) {
    host.insert(host.end(), w.host_latency.begin(), w.host_latency.end());
    modeled.insert(modeled.end(), w.modeled_latency.begin(), w.modeled_latency.end());
  }
  size_t inferences = host.size();
  double modeled_latency = median(modeled);
  std::printf("network: %s, %zu input(s), %zu output(s), %u cluster(s) per inference\n",
              kbin_path.c_str(), input_infos.size(), output_infos.size(), network_clusters);
  std::printf("ran %zu inference(s) on %zu %s (%u iteration(s) x %zu sample(s) each, after %u "
              "untimed warm-up iteration(s))\n",
              inferences, workers.size(),
              workers.size() == 1 ? "device" : "concurrent sub-devices", iterations, samples,
              warmup);
  std::printf("host time:    latency %.3f ms (median), throughput %.1f inferences/s\n",
              median(host) * 1e3, inferences / wall);
  if (modeled_latency > 0)
    std::printf("modeled time: latency %.3f ms (median), throughput %.1f inferences/s on %zu "
                "sub-device(s)\n",
                modeled_latency * 1e3, workers.size() / modeled_latency, workers.size());
  for (size_t o = 0; o < output_infos.size() && samples == 1; ++o) {
    const auto &v = workers[0].outputs[o];
    std::printf("output %s:", output_infos[o].name.c_str());
    for (size_t i = 0; i < std::min<size_t>(v.size(), 10); ++i)
      std::printf(" %.5g", v[i]);
    std::printf(v.size() > 10 ? " ...\n" : "\n");
  }
  if (!output_dir.empty())
    std::printf("outputs written to %s\n", output_dir.c_str());
  if (!trace_path.empty())
    std::printf("trace (Perfetto / chrome://tracing JSON) written to %s at exit\n",
                trace_path.c_str());

  for (auto &w : workers) {
    w.session.reset();
    clReleaseCommandQueue(w.queue);
    clReleaseContext(w.context);
    if (w.device != root)
      clReleaseDevice(w.device);
  }
  return 0;
}
