#pragma once
#include "internal.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>

#include <memory>

namespace manycl::compiler::detail {

struct FrontendOutput {
  bool ok = false;
  bool invalidOptions = false;
  std::string log;
  std::unique_ptr<llvm::Module> module;
  std::string preprocessed; // token stream (preprocessOnly)
};

FrontendOutput runFrontend(llvm::LLVMContext &ctx, std::string_view source, const ParsedOptions &po,
                           const DeviceDesc &dev, std::span<const HeaderSource> headers,
                           bool preprocessOnly);

/// Turns a linked frontend module into the final executable module:
/// links builtins, generates work-group entry points, optimizes, checks
/// that every external symbol resolves. Fills `kernels`.
Status finalizeModule(llvm::Module &M, const ParsedOptions &po, const DeviceDesc &dev,
                      std::vector<KernelInfo> &kernels, std::string &log);

/// Kernel metadata from a frontend module (before finalization).
std::vector<KernelInfo> extractKernels(llvm::Module &M);

/// Host target machine helpers.
std::string hostCpu();
std::string hostFeatures();
void initLLVM();

/// The CPU whose LLVM cost model shapes the optimized IR when kernels are costed: the costs
/// are counted on that IR, so it must not depend on the host (docs/device-model.md, "OpenCL C
/// kernels"). Code is generated for the host afterwards.
inline constexpr const char *kCostedIrCpu = "znver4";

} // namespace manycl::compiler::detail
