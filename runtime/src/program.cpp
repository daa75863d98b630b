#include "manycl/runtime/program.h"

#include <algorithm>
#include <cstring>
#include <span>

#include "manycl/runtime/device.h"
#include "manycl/runtime/info.h"
#include "manycl/runtime/kbin.h"

namespace manycl::rt {

compiler::DeviceDesc device_desc(const Device &device) {
  compiler::DeviceDesc desc;
  const auto &config = device.config();
  desc.address_bits = 64;
  desc.local_mem_size = config.local_mem_bytes();
  desc.mode = config.mode == device::ExecutionMode::SPMD ? compiler::ExecMode::SPMD : compiler::ExecMode::LWI;
  desc.pes_per_cluster = config.pes_per_cluster;
  desc.fp64 = true; // cl_khr_fp64: reported by the device (device.cpp), defined in kernels
  desc.fp16 = false;
  return desc;
}

cl_int compiler_error_to_cl(compiler::ErrorCode code, cl_int build_failure) {
  switch (code) {
  case compiler::ErrorCode::Ok:
    return CL_SUCCESS;
  case compiler::ErrorCode::InvalidOptions:
    return build_failure == CL_COMPILE_PROGRAM_FAILURE ? CL_INVALID_COMPILER_OPTIONS
           : build_failure == CL_LINK_PROGRAM_FAILURE  ? CL_INVALID_LINKER_OPTIONS
                                                       : CL_INVALID_BUILD_OPTIONS;
  case compiler::ErrorCode::InvalidBinary:
    return CL_INVALID_BINARY;
  case compiler::ErrorCode::OutOfResources:
    return CL_OUT_OF_RESOURCES;
  case compiler::ErrorCode::InvalidWorkGroup:
    return CL_INVALID_WORK_GROUP_SIZE;
  case compiler::ErrorCode::InvalidArgs:
    return CL_INVALID_KERNEL_ARGS;
  default:
    return build_failure;
  }
}

Program::Program(Context *context, std::vector<Device *> devices, std::string source)
    : context_(context), devices_(std::move(devices)), source_(std::move(source)), from_source_(true) {
  for (Device *d : devices_)
    d->retain();
}

Program::~Program() {
  for (Device *d : devices_)
    d->release();
}

bool Program::has_device(const Device *d) const {
  return std::find(devices_.begin(), devices_.end(), d) != devices_.end();
}

Result<Program *> Program::from_binaries(Context *context, std::vector<Device *> devices,
                                         std::vector<std::vector<uint8_t>> binaries,
                                         std::vector<cl_int> &binary_status) {
  std::map<const Device *, Build> builds;
  cl_int result = CL_SUCCESS;
  binary_status.assign(devices.size(), CL_SUCCESS);
  for (size_t i = 0; i < devices.size(); ++i) {
    if (is_kbin(binaries[i].data(), binaries[i].size())) {
      // Validated in full against the device by clBuildProgram, which can explain a
      // rejection in the build log.
      Build build;
      build.is_kbin = true;
      build.binary = std::move(binaries[i]); // a network binary can be hundreds of MB
      builds[devices[i]] = std::move(build);
      continue;
    }
    auto info = compiler::inspectBinary(binaries[i]);
    if (!info || info->kind == compiler::BinaryKind::None ||
        info->device_key != device_desc(*devices[i]).key()) {
      binary_status[i] = CL_INVALID_BINARY;
      result = CL_INVALID_BINARY;
      continue;
    }
    Build build;
    build.kind = info->kind;
    build.options = info->options;
    build.log = info->log;
    build.binary = std::move(binaries[i]);
    build.kernels = info->kernels;
    // A binary is "built" once it is loaded; clBuildProgram on it only (re)loads.
    build.status = CL_BUILD_NONE;
    builds[devices[i]] = std::move(build);
  }
  if (result != CL_SUCCESS)
    return make_error("invalid binary", result);
  auto *program = new Program(context, std::move(devices), std::string());
  program->from_source_ = false;
  program->builds_ = std::move(builds);
  return program;
}

// A build for a device also covers those of its sub-devices (at any depth) that are in the
// program's device list: they have the same configuration and run the same code, and programs
// written for a parent device use them without building again (CTS device_partition builds for
// the parent, then checks the build status of every device in the program).
cl_int Program::build(const std::vector<Device *> &targets, const std::string &options) {
  const auto &requested = targets.empty() ? devices_ : targets;
  auto is_requested = [&](const Device *d) {
    return std::find(requested.begin(), requested.end(), d) != requested.end();
  };
  std::map<std::string, const Device *> built_with_desc;
  cl_int result = CL_SUCCESS;
  for (Device *device : requested)
    if (cl_int r = build_one(*device, options, built_with_desc); r != CL_SUCCESS)
      result = r;
  for (Device *device : devices_) {
    if (is_requested(device))
      continue;
    for (Device *ancestor = device->parent(); ancestor; ancestor = ancestor->parent())
      if (is_requested(ancestor)) {
        if (!from_source_) {
          // A binary given for the ancestor only serves the sub-device too: an OpenCL C
          // executable as it was loaded for the ancestor; a kbin is validated and uploaded
          // for the sub-device's own clusters.
          std::unique_lock lock(mutex_);
          auto own = builds_.find(device);
          auto theirs = builds_.find(ancestor);
          if (own == builds_.end() && theirs != builds_.end()) {
            builds_[device] = theirs->second;
            if (!theirs->second.is_kbin)
              break;
          }
        }
        build_one(*device, options, built_with_desc); // its own status and log
        break;
      }
  }
  return result;
}

cl_int Program::build_one(Device &device_ref, const std::string &options,
                          std::map<std::string, const Device *> &built_with_desc) {
  Device *device = &device_ref;
  cl_int result = CL_SUCCESS;
  // Source compiles to the same code for every device with the same compiler description:
  // build once, share the result.
  std::string desc_key;
  if (from_source_) {
    desc_key = device_desc(*device).key();
    if (auto it = built_with_desc.find(desc_key); it != built_with_desc.end()) {
      std::lock_guard lock(mutex_);
      Build shared = builds_[it->second];
      bool ok = shared.status == CL_BUILD_SUCCESS;
      builds_[device] = std::move(shared);
      return ok ? CL_SUCCESS : CL_BUILD_PROGRAM_FAILURE;
    }
  }
  do {
    Build build;
    build.options = options;
    if (from_source_) {
      auto built = compiler::build(source_, options, device_desc(*device));
      build.log = built.log;
      if (!built.ok()) {
        if (!built.status.message.empty() && build.log.find(built.status.message) == std::string::npos)
          build.log += built.status.message + "\n";
        build.status = CL_BUILD_ERROR;
        result = compiler_error_to_cl(built.status.code, CL_BUILD_PROGRAM_FAILURE);
      } else {
        build.binary = std::move(built.binary);
        build.kind = built.kind;
        build.kernels = std::move(built.kernels);
      }
    } else if (Build existing = build_for(device); existing.is_kbin) {
      build = std::move(existing);
      build.options = options;
      cl_int status = build_kbin(*device, build);
      if (status != CL_SUCCESS)
        result = status;
      std::lock_guard lock(mutex_);
      builds_[device] = std::move(build);
      break;
    } else {
      if (existing.kind == compiler::BinaryKind::None) {
        result = CL_INVALID_BINARY;
        break;
      }
      build = std::move(existing);
      if (build.kind != compiler::BinaryKind::Executable) {
        // A compiled object given as binary is linked into an executable here.
        std::vector<std::span<const uint8_t>> inputs{std::span<const uint8_t>(build.binary)};
        auto linked = compiler::link(inputs, options, device_desc(*device));
        build.log = linked.log;
        if (!linked.ok()) {
          build.status = CL_BUILD_ERROR;
          result = compiler_error_to_cl(linked.status.code, CL_BUILD_PROGRAM_FAILURE);
          std::lock_guard lock(mutex_);
          builds_[device] = std::move(build);
          break;
        }
        build.binary = std::move(linked.binary);
        build.kind = linked.kind;
        build.kernels = std::move(linked.kernels);
      }
    }
    if (build.status != CL_BUILD_ERROR) {
      auto loaded = compiler::load(build.binary);
      if (!loaded) {
        build.status = CL_BUILD_ERROR;
        build.log += loaded.status().message + "\n";
        result = from_source_ ? CL_BUILD_PROGRAM_FAILURE : CL_INVALID_BINARY;
      } else {
        build.loaded = std::move(loaded.value());
        build.status = CL_BUILD_SUCCESS;
      }
    }
    std::lock_guard lock(mutex_);
    builds_[device] = std::move(build);
  } while (false);
  if (!desc_key.empty())
    built_with_desc.emplace(desc_key, device);
  return result;
}

cl_int Program::build_kbin(Device &device, Build &build) {
  build.log.clear();
  build.kbin.reset();
  build.loaded.reset();
  auto executable = KbinExecutable::load(build.binary, device);
  if (!executable) {
    build.status = CL_BUILD_ERROR;
    build.log = executable.error().message + "\n";
    return executable.error().code == CL_MEM_OBJECT_ALLOCATION_FAILURE ? CL_OUT_OF_RESOURCES : CL_INVALID_BINARY;
  }
  register_kbin_natives();
  auto interpreter = compiler::build(executable.value()->interpreter_source(), "", device_desc(device));
  if (!interpreter.ok()) {
    build.status = CL_BUILD_ERROR;
    build.log = "interpreter kernel: " + interpreter.status.message + "\n" + interpreter.log;
    return CL_BUILD_PROGRAM_FAILURE;
  }
  auto loaded = compiler::load(interpreter.binary);
  if (!loaded) {
    build.status = CL_BUILD_ERROR;
    build.log = "interpreter kernel: " + loaded.status().message + "\n";
    return CL_BUILD_PROGRAM_FAILURE;
  }
  const auto &program = executable.value()->program();
  build.log = "kann program: " + std::to_string(program.cluster_count) + " cluster(s), " +
              std::to_string(program.tensors.size()) + " tensors, " + std::to_string(program.params.size()) +
              " B of parameters uploaded\n";
  build.kind = compiler::BinaryKind::Executable;
  build.kernels = interpreter.kernels;
  build.loaded = std::move(loaded.value());
  build.kbin = std::move(executable.value());
  build.status = CL_BUILD_SUCCESS;
  return CL_SUCCESS;
}

cl_int Program::compile(const std::vector<Device *> &targets, const std::string &options,
                        const std::vector<compiler::HeaderSource> &headers) {
  const auto &devices = targets.empty() ? devices_ : targets;
  cl_int result = CL_SUCCESS;
  for (Device *device : devices) {
    Build build;
    build.options = options;
    auto compiled = compiler::compile(source_, options, device_desc(*device), headers);
    build.log = compiled.log;
    if (!compiled.ok()) {
      if (!compiled.status.message.empty() && build.log.find(compiled.status.message) == std::string::npos)
        build.log += compiled.status.message + "\n";
      build.status = CL_BUILD_ERROR;
      result = compiler_error_to_cl(compiled.status.code, CL_COMPILE_PROGRAM_FAILURE);
    } else {
      build.status = CL_BUILD_SUCCESS;
      build.binary = std::move(compiled.binary);
      build.kind = compiled.kind;
    }
    std::lock_guard lock(mutex_);
    builds_[device] = std::move(build);
  }
  return result;
}

Program *Program::link(Context *context, std::vector<Device *> devices, const std::string &options,
                       const std::vector<Program *> &inputs, cl_int &result) {
  auto *program = new Program(context, devices, std::string());
  program->from_source_ = false;
  result = CL_SUCCESS;
  for (Device *device : devices) {
    std::vector<Build> parts;
    std::vector<std::span<const uint8_t>> spans;
    for (Program *input : inputs) {
      parts.push_back(input->build_for(device));
      if (parts.back().kind != compiler::BinaryKind::Object && parts.back().kind != compiler::BinaryKind::Library) {
        program->release();
        result = CL_INVALID_OPERATION; // an input has no compiled object for the device
        return nullptr;
      }
    }
    for (auto &part : parts)
      spans.emplace_back(part.binary);
    auto linked = compiler::link(spans, options, device_desc(*device));
    Build build;
    build.options = options;
    build.log = linked.log;
    if (!linked.ok()) {
      if (!linked.status.message.empty() && build.log.find(linked.status.message) == std::string::npos)
        build.log += linked.status.message + "\n";
      build.status = CL_BUILD_ERROR;
      result = compiler_error_to_cl(linked.status.code, CL_LINK_PROGRAM_FAILURE);
    } else {
      build.binary = std::move(linked.binary);
      build.kind = linked.kind;
      build.kernels = std::move(linked.kernels);
      build.status = CL_BUILD_SUCCESS;
      if (build.kind == compiler::BinaryKind::Executable) {
        auto loaded = compiler::load(build.binary);
        if (!loaded) {
          build.status = CL_BUILD_ERROR;
          build.log += loaded.status().message + "\n";
          result = CL_LINK_PROGRAM_FAILURE;
        } else {
          build.loaded = std::move(loaded.value());
        }
      }
    }
    program->builds_[device] = std::move(build);
  }
  if (result == CL_INVALID_LINKER_OPTIONS) {
    program->release();
    return nullptr;
  }
  // On CL_LINK_PROGRAM_FAILURE the program is still returned, so its log can be read.
  return program;
}

Program::Build Program::build_for(const Device *device) const {
  std::lock_guard lock(mutex_);
  auto it = builds_.find(device);
  return it == builds_.end() ? Build() : it->second;
}

bool Program::has_executable() const {
  std::lock_guard lock(mutex_);
  for (auto &[device, build] : builds_)
    if (build.loaded)
      return true;
  return false;
}

std::vector<compiler::KernelInfo> Program::kernel_infos() const {
  std::lock_guard lock(mutex_);
  for (auto &[device, build] : builds_)
    if (build.loaded)
      return build.kernels;
  return {};
}

cl_int Program::info(cl_program_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_PROGRAM_REFERENCE_COUNT:
    return out.scalar<cl_uint>(api_ref_count());
  case CL_PROGRAM_CONTEXT:
    return out.scalar<cl_context>(context_->handle());
  case CL_PROGRAM_NUM_DEVICES:
    return out.scalar<cl_uint>(static_cast<cl_uint>(devices_.size()));
  case CL_PROGRAM_DEVICES: {
    std::vector<cl_device_id> handles;
    for (Device *d : devices_)
      handles.push_back(d->handle());
    return out.array(handles);
  }
  case CL_PROGRAM_SOURCE:
    return out.string(source_);
  case CL_PROGRAM_BINARY_SIZES: {
    std::vector<size_t> sizes;
    for (Device *d : devices_)
      sizes.push_back(build_for(d).binary.size());
    return out.array(sizes);
  }
  case CL_PROGRAM_BINARIES: {
    // An array of application-owned buffers, each CL_PROGRAM_BINARY_SIZES[i] bytes.
    size_t needed = devices_.size() * sizeof(unsigned char *);
    if (value) {
      if (size < needed)
        return CL_INVALID_VALUE;
      auto **targets = static_cast<unsigned char **>(value);
      for (size_t i = 0; i < devices_.size(); ++i) {
        Build b = build_for(devices_[i]);
        if (targets[i] && !b.binary.empty())
          std::memcpy(targets[i], b.binary.data(), b.binary.size());
      }
    }
    if (size_ret)
      *size_ret = needed;
    return CL_SUCCESS;
  }
  case CL_PROGRAM_NUM_KERNELS:
  case CL_PROGRAM_KERNEL_NAMES: {
    if (!has_executable())
      return CL_INVALID_PROGRAM_EXECUTABLE;
    auto kernels = kernel_infos();
    if (param == CL_PROGRAM_NUM_KERNELS)
      return out.scalar<size_t>(kernels.size());
    std::string names;
    for (auto &k : kernels)
      names += (names.empty() ? "" : ";") + k.name;
    return out.string(names);
  }
  case CL_PROGRAM_IL:
    return out.bytes(nullptr, 0);
  case CL_PROGRAM_SCOPE_GLOBAL_CTORS_PRESENT:
  case CL_PROGRAM_SCOPE_GLOBAL_DTORS_PRESENT:
    return out.scalar<cl_bool>(CL_FALSE);
  default:
    return CL_INVALID_VALUE;
  }
}

cl_int Program::build_info(Device *device, cl_program_build_info param, size_t size, void *value,
                           size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  Build b = build_for(device);
  switch (param) {
  case CL_PROGRAM_BUILD_STATUS:
    return out.scalar<cl_build_status>(b.status);
  case CL_PROGRAM_BUILD_OPTIONS:
    return out.string(b.options);
  case CL_PROGRAM_BUILD_LOG:
    return out.string(b.log);
  case CL_PROGRAM_BINARY_TYPE: {
    cl_program_binary_type type = CL_PROGRAM_BINARY_TYPE_NONE;
    if (b.kind == compiler::BinaryKind::Executable)
      type = CL_PROGRAM_BINARY_TYPE_EXECUTABLE;
    else if (b.kind == compiler::BinaryKind::Object)
      type = CL_PROGRAM_BINARY_TYPE_COMPILED_OBJECT;
    else if (b.kind == compiler::BinaryKind::Library)
      type = CL_PROGRAM_BINARY_TYPE_LIBRARY;
    return out.scalar(type);
  }
  case CL_PROGRAM_BUILD_GLOBAL_VARIABLE_TOTAL_SIZE:
    return out.scalar<size_t>(0);
  default:
    return CL_INVALID_VALUE;
  }
}

} // namespace manycl::rt
