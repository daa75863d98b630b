// kann program binaries (kbin) in the runtime: validation against a (sub-)device, the
// parameter upload, the OpenCL C interpreter kernel and the per-launch state its native
// half reads. The format is the contract with kann (docs/kbin-format.md); the runtime never
// trusts it: read_kbin validates everything before anything runs.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "kann/format.h"
#include "manycl/device/device.h"
#include "manycl/device_api.h"
#include "manycl/result.h"

namespace manycl::rt {

class Device;

// The kernel every kbin program exposes; its arguments are the network's input and output
// buffers in kernel-argument order (see the binary's tensor descriptors).
inline constexpr const char *kKbinKernelName = "kann_network";

bool is_kbin(const uint8_t *data, size_t size);

// A program's parameters in device DDR, shared by the loaded programs with the same
// parameters on the same hardware (kbin.cpp).
// Its bytes never change (written once, before it is shared): `generation`, unique in the
// process, names them for the native functions' caches (mcl_kbin_cluster_run), which forget
// it when the block is freed.
struct SharedParams {
  SharedParams(device::Device &hardware, uint64_t offset);
  ~SharedParams();
  SharedParams(const SharedParams &) = delete;
  SharedParams &operator=(const SharedParams &) = delete;
  static Result<std::shared_ptr<const SharedParams>>
  find_or_upload(device::Device &hardware, const std::vector<uint8_t> &bytes);
  device::Device &hardware;
  const uint64_t offset;
  const uint64_t generation;
};

// A kbin validated for one device and with its parameters resident in that device's DDR.
class KbinExecutable {
public:
  static Result<std::shared_ptr<KbinExecutable>> load(const std::vector<uint8_t> &bytes,
                                                      Device &device);
  ~KbinExecutable();

  const kann::format::Program &program() const { return program_; }
  const std::vector<uint8_t> &stream(unsigned cluster) const { return streams_[cluster]; }
  // Trace names of the operator steps (kann::format::step_names), as the interpreter takes them.
  const std::vector<const char *> &step_names() const { return step_name_ptrs_; }
  // The parameters in device DDR (program().params is emptied once they are uploaded).
  mcl_ddr_window params() const {
    return {params_block_ ? params_block_->offset : 0, params_size_};
  }
  // The parameters' host bytes and generation (SharedParams); null and 0 without parameters.
  const uint8_t *params_host() const;
  uint64_t params_generation() const { return params_block_ ? params_block_->generation : 0; }
  device::Device &hardware() const { return *hardware_; }
  // The OpenCL C source of the interpreter kernel for this program's argument count.
  std::string interpreter_source() const;
  // DDR scratch for one launch (program().scratch_size bytes): a block a finished launch gave
  // back, else a new one. Reusing blocks spares every inference the page faults of freshly
  // released DDR; concurrent launches each get their own.
  Result<uint64_t> take_scratch() const;
  void give_back_scratch(uint64_t offset) const;
  // The interpreter's resolver of custom-operator functions (mcl_kbin_cluster_run::resolve):
  // `user` is the executable; the names were resolved when it was loaded.
  static void *resolve_custom(void *user, const char *name);

private:
  KbinExecutable() = default;
  kann::format::Program program_;
  std::vector<std::vector<uint8_t>> streams_;
  std::vector<std::string> step_names_;
  std::vector<const char *> step_name_ptrs_;
  device::Device *hardware_ = nullptr;
  std::shared_ptr<const SharedParams> params_block_;
  uint64_t params_size_ = 0;
  mutable std::mutex scratch_mutex_;
  mutable std::vector<uint64_t> idle_scratch_; // blocks of finished launches
  // Custom-operator functions the records name, resolved in the registered native libraries
  // at load time (a missing one rejects the binary); read-only afterwards.
  std::vector<std::pair<std::string, void *>> custom_functions_;
};

// What one launch of a kbin kernel passes to the interpreter on each cluster
// (run_kbin_cluster).
struct KbinLaunch {
  std::shared_ptr<const KbinExecutable> executable;
  mcl_ddr_window scratch{0, 0};
  std::vector<mcl_ddr_window> args;
};

// Runs cluster `group`'s record stream of `launch` on the current cluster context: what the
// interpreter kernel's work-group `group` does.
void run_kbin_cluster(const KbinLaunch *launch, uint32_t group);

// Makes the interpreter's native entry point resolvable by the OpenCL C compiler.
void register_kbin_natives();

} // namespace manycl::rt
