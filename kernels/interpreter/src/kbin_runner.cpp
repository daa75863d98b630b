#include "manycl/kbin_runner.h"

#include <atomic>
#include <cstring>
#include <string>

#include "kann/steps.h"
#include "manycl/interpreter.h"

namespace manycl::interp {

namespace {
std::atomic<void *(*)(const char *)> g_custom_resolver{nullptr};

void *resolve_custom(void *, const char *name) {
  auto resolve = g_custom_resolver.load(std::memory_order_acquire);
  return resolve ? resolve(name) : nullptr;
}

// Frees DDR blocks on every path out of run_kbin.
struct DdrBlocks {
  device::Ddr &ddr;
  std::vector<uint64_t> offsets;
  ~DdrBlocks() {
    for (uint64_t o : offsets)
      ddr.free(o);
  }
  Result<mcl_ddr_window> allocate(uint64_t size, const void *data, uint64_t data_size) {
    if (size == 0)
      return mcl_ddr_window{0, 0};
    auto r = ddr.allocate(size, data && data_size >= size ? device::Ddr::Contents::Overwritten
                                                          : device::Ddr::Contents::Zero);
    if (!r)
      return r.error();
    offsets.push_back(r.value());
    if (data && data_size)
      std::memcpy(ddr.at(r.value()), data, std::min(size, data_size));
    return mcl_ddr_window{r.value(), size};
  }
};
} // namespace

void set_custom_resolver(void *(*resolve)(const char *name)) {
  g_custom_resolver.store(resolve, std::memory_order_release);
}

Result<KbinRunResult> run_kbin(device::Device &device, const kann::format::Program &program,
                               const std::vector<std::vector<uint8_t>> &args,
                               unsigned first_cluster) {
  if (first_cluster + program.cluster_count > device.cluster_count())
    return make_error("program needs " + std::to_string(program.cluster_count) +
                      " clusters, device has " + std::to_string(device.cluster_count()));
  if (args.size() != program.arg_count)
    return make_error("program takes " + std::to_string(program.arg_count) + " arguments, got " +
                      std::to_string(args.size()));
  DdrBlocks blocks{device.ddr(), {}};
  auto params =
      blocks.allocate(program.params.size(), program.params.data(), program.params.size());
  if (!params)
    return params.error();
  auto scratch = blocks.allocate(program.scratch_size, nullptr, 0);
  if (!scratch)
    return scratch.error();
  std::vector<mcl_ddr_window> windows(program.arg_count);
  for (const auto &t : program.tensors) {
    const auto &bytes = args[t.arg_index];
    if (t.role == KBIN_ROLE_INPUT && bytes.size() != t.byte_size)
      return make_error("input '" + t.name + "' needs " + std::to_string(t.byte_size) +
                        " bytes, got " + std::to_string(bytes.size()));
    auto w = blocks.allocate(t.byte_size, bytes.data(), bytes.size());
    if (!w)
      return w.error();
    windows[t.arg_index] = w.value();
  }
  const std::vector<std::string> step_names = kann::format::step_names(program);
  std::vector<const char *> step_name_ptrs;
  for (const auto &n : step_names)
    step_name_ptrs.push_back(n.c_str());
  std::vector<std::vector<uint8_t>> streams;
  for (const auto &s : program.streams)
    streams.push_back(kann::format::serialize_stream(s));

  std::vector<unsigned> clusters;
  for (unsigned i = 0; i < program.cluster_count; ++i)
    clusters.push_back(first_cluster + i);
  auto recorder = device::CommandRecorder::begin(device, "kbin", clusters);
  if (!recorder)
    return recorder.error();
  auto rec = recorder.value();
  std::vector<std::string> messages(program.cluster_count);
  auto status = rec->run([&](device::ClusterContext &context) {
    const unsigned g = context.group_index();
    mcl_kbin_cluster_run run{};
    run.records = streams[g].data();
    run.records_size = streams[g].size();
    run.params = params.value();
    run.scratch = scratch.value();
    run.args = windows.data();
    run.arg_count = static_cast<uint32_t>(windows.size());
    run.step_names = step_name_ptrs.data();
    run.step_name_count = static_cast<uint32_t>(step_name_ptrs.size());
    run.resolve = resolve_custom;
    char msg[512];
    if (mcl_kbin_run_cluster(&run, msg, sizeof msg) != 0)
      messages[g] = msg;
  });
  KbinRunResult result;
  result.stats = rec->end();
  for (unsigned g = 0; g < program.cluster_count; ++g)
    if (!messages[g].empty())
      return make_error("cluster " + std::to_string(g) + ": " + messages[g]);
  if (!status)
    return status.error();
  for (uint32_t i = 0; i < program.arg_count; ++i) {
    const auto *p = reinterpret_cast<const uint8_t *>(device.ddr().at(windows[i].base));
    result.outputs.emplace_back(p, p + windows[i].size);
  }
  return result;
}

} // namespace manycl::interp
