#include "manycl/runtime/kbin.h"

#include <cstring>
#include <map>
#include <mutex>

#include "kann/steps.h"
#include "manycl/compiler/compiler.h"
#include "manycl/interpreter.h"
#include "manycl/native/custom.h"
#include "manycl/native/native.h"
#include "manycl/runtime/device.h"

namespace manycl::rt {

namespace {
// The native half of the interpreter kernel, which the kernel needs to build. Launches of kbin
// programs never run the kernel's code: the runtime calls run_kbin_cluster() with the launch
// (kernel.cpp), so reaching this means the kernel ran outside a kbin command.
void kbin_cluster_entry(uint32_t group) {
  run_kbin_cluster(nullptr, group);
}
} // namespace

void run_kbin_cluster(const KbinLaunch *launch, uint32_t group) {
  if (!launch || !launch->executable || group >= launch->executable->program().cluster_count) {
    mcl_fail("kann_network: launched outside a kbin command or with a bad group id");
    return;
  }
  const auto &stream = launch->executable->stream(group);
  mcl_kbin_cluster_run run{};
  run.records = stream.data();
  run.records_size = stream.size();
  run.params = launch->executable->params();
  run.scratch = launch->scratch;
  run.args = launch->args.data();
  run.arg_count = static_cast<uint32_t>(launch->args.size());
  run.step_names = launch->executable->step_names().data();
  run.step_name_count = static_cast<uint32_t>(launch->executable->step_names().size());
  run.resolve = &KbinExecutable::resolve_custom;
  run.resolve_user = const_cast<KbinExecutable *>(launch->executable.get());
  run.params_host = launch->executable->params_host();
  run.params_generation = launch->executable->params_generation();
  char message[512];
  // A failure marks the device command failed; the runtime turns that into the event's error.
  mcl_kbin_run_cluster(&run, message, sizeof message);
}

bool is_kbin(const uint8_t *data, size_t size) {
  return size >= 8 && std::memcmp(data, KBIN_MAGIC, 8) == 0;
}

// Programs loaded with the same parameters on the same hardware (sub-devices share their
// root's DDR) share one device copy: K sessions of a network on K sub-devices hold its
// parameters once, as one device's clusters would, instead of K times. Blocks are matched by
// size and contents; the last program that uses one frees it.
namespace {
std::mutex g_shared_params_mutex;
std::multimap<std::pair<const device::Device *, size_t>, std::weak_ptr<SharedParams>>
    g_shared_params;

} // namespace

SharedParams::SharedParams(device::Device &hardware, uint64_t offset)
    : hardware(hardware), offset(offset), generation(mcl_native_new_generation()) {}

SharedParams::~SharedParams() {
  // The block's offset may hold other bytes next: values cached from these go first.
  mcl_native_forget_generation(generation);
  hardware.ddr().free(offset);
}

const uint8_t *KbinExecutable::params_host() const {
  return params_block_
             ? reinterpret_cast<const uint8_t *>(hardware_->ddr().at(params_block_->offset))
             : nullptr;
}

Result<std::shared_ptr<const SharedParams>>
SharedParams::find_or_upload(device::Device &hardware, const std::vector<uint8_t> &bytes) {
  std::lock_guard lock(g_shared_params_mutex);
  const auto key = std::make_pair(static_cast<const device::Device *>(&hardware), bytes.size());
  for (auto [it, end] = g_shared_params.equal_range(key); it != end;) {
    auto shared = it->second.lock();
    if (!shared) {
      it = g_shared_params.erase(it);
      continue;
    }
    if (std::memcmp(hardware.ddr().at(shared->offset), bytes.data(), bytes.size()) == 0)
      return std::shared_ptr<const SharedParams>(std::move(shared));
    ++it;
  }
  auto block = hardware.ddr().allocate(bytes.size(), device::Ddr::Contents::Overwritten);
  if (!block)
    return block.error();
  std::memcpy(hardware.ddr().at(block.value()), bytes.data(), bytes.size());
  auto shared = std::make_shared<SharedParams>(hardware, block.value());
  g_shared_params.emplace(key, shared);
  return std::shared_ptr<const SharedParams>(std::move(shared));
}

Result<std::shared_ptr<KbinExecutable>> KbinExecutable::load(const std::vector<uint8_t> &bytes,
                                                             Device &device) {
  kann::format::DeviceLimits limits;
  limits.cluster_count = static_cast<uint32_t>(device.clusters().size());
  limits.spm_bytes = device.config().spm_bytes;
  auto program = kann::format::read_kbin(bytes.data(), bytes.size(), limits);
  if (!program)
    return make_error("kbin rejected for " + device.config().name + " with " +
                          std::to_string(limits.cluster_count) + " cluster(s) of " +
                          std::to_string(limits.spm_bytes) + " B SPM: " + program.error().message,
                      -42 /* CL_INVALID_BINARY */);
  std::shared_ptr<KbinExecutable> exe(new KbinExecutable());
  exe->program_ = std::move(program.value());
  for (const auto &records : exe->program_.streams)
    exe->streams_.push_back(kann::format::serialize_stream(records));
  exe->step_names_ = kann::format::step_names(exe->program_);
  for (const auto &name : exe->step_names_)
    exe->step_name_ptrs_.push_back(name.c_str());
  // Custom operators (manycl/native/custom.h): every function a record names must be exported
  // by a library registered with clAddNativeLibraryMCL / MANYCL_NATIVE_PATH before now.
  for (const auto &records : exe->program_.streams)
    for (const auto &record : records) {
      mcl_custom_args custom;
      if (record.function_id != MCL_NATIVE_FN_CUSTOM || !record.decode(custom))
        continue;
      const std::string name(custom.function); // NUL-terminated: read_kbin validated it
      bool known = false;
      for (const auto &entry : exe->custom_functions_)
        known = known || entry.first == name;
      if (known)
        continue;
      void *address = compiler::resolveNative(name);
      if (!address)
        return make_error("kbin calls custom operator function '" + name +
                              "', which no native library registered with clAddNativeLibraryMCL "
                              "or MANYCL_NATIVE_PATH exports",
                          -42 /* CL_INVALID_BINARY */);
      exe->custom_functions_.emplace_back(name, address);
    }
  exe->hardware_ = &device.hardware();
  exe->params_size_ = exe->program_.params.size();
  if (!exe->program_.params.empty()) {
    auto block = SharedParams::find_or_upload(*exe->hardware_, exe->program_.params);
    if (!block)
      return make_error("kbin parameters (" + std::to_string(exe->params_size_) +
                            " B) do not fit in the device DDR: " + block.error().message,
                        -4 /* CL_MEM_OBJECT_ALLOCATION_FAILURE */);
    exe->params_block_ = std::move(block.value());
    // The device copy is the only one read from now on.
    std::vector<uint8_t>().swap(exe->program_.params);
  }
  return exe;
}

void *KbinExecutable::resolve_custom(void *user, const char *name) {
  const auto *exe = static_cast<const KbinExecutable *>(user);
  for (const auto &entry : exe->custom_functions_)
    if (entry.first == name)
      return entry.second;
  return nullptr;
}

KbinExecutable::~KbinExecutable() {
  for (uint64_t block : idle_scratch_)
    hardware_->ddr().free(block);
}

Result<uint64_t> KbinExecutable::take_scratch() const {
  {
    std::lock_guard lock(scratch_mutex_);
    if (!idle_scratch_.empty()) {
      const uint64_t block = idle_scratch_.back();
      idle_scratch_.pop_back();
      return block;
    }
  }
  return hardware_->ddr().allocate(program_.scratch_size);
}

void KbinExecutable::give_back_scratch(uint64_t offset) const {
  // Keep as many blocks as launches ran at once, up to a few: more would only hold DDR.
  constexpr size_t kMaxIdle = 8;
  {
    std::lock_guard lock(scratch_mutex_);
    if (idle_scratch_.size() < kMaxIdle) {
      idle_scratch_.push_back(offset);
      return;
    }
  }
  hardware_->ddr().free(offset);
}

std::string KbinExecutable::interpreter_source() const {
  // Each work-group is one cluster walking its own record stream; the buffers arrive as the
  // kernel's arguments, the records and parameters stay with the loaded program.
  std::string source = "void __mcl_kbin_cluster(uint group) __attribute__((mppa_native));\n"
                       "kernel __attribute__((reqd_work_group_size(1, 1, 1))) void ";
  source += kKbinKernelName;
  source += "(";
  for (uint32_t i = 0; i < program_.arg_count; ++i)
    source += (i ? ", " : "") + std::string("global uchar *arg") + std::to_string(i);
  source += ") {\n  __mcl_kbin_cluster((uint)get_group_id(0));\n}\n";
  return source;
}

void register_kbin_natives() {
  static std::once_flag once;
  std::call_once(once, [] {
    compiler::addNativeResolver([](std::string_view name) -> void * {
      if (name == "__mcl_kbin_cluster")
        return reinterpret_cast<void *>(&kbin_cluster_entry);
      return nullptr;
    });
  });
}

} // namespace manycl::rt
