#pragma once
#include "internal.h"

#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/CodeGen.h>

#include <memory>

namespace llvm {
class TargetMachine;
}

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
std::unique_ptr<llvm::TargetMachine> makeTargetMachine(const std::string &cpu,
                                                       const std::string &features,
                                                       llvm::CodeGenOpt::Level level);

/// MANYCL_DUMP_IR: writes `M` to the file it names (to `<file>.<fileSuffix>` with a suffix), or
/// into the directory it names (ending in '/') with its source and options.
void dumpModule(llvm::Module &M, std::string_view source = {}, std::string_view options = {},
                std::string_view fileSuffix = {});

/// Gives the module's mutable internal variables (program-scope variables) external linkage
/// under reserved names, so that a specialization of one of its entry points (the same module,
/// exposed the same way) refers to the program's variables instead of copies.
void exposeProgramVariables(llvm::Module &M);

/// A module whose only external definition is `specializedName`: the entry point `entryName`
/// of a program's final module (`bitcode`) for full groups of `local` work-items, optimized
/// again (specialize.cpp). Same signature as the entry; the work-item bounds it is called with
/// are ignored (a full group's).
Result<std::unique_ptr<llvm::Module>> specializeEntry(llvm::LLVMContext &context,
                                                      std::string_view bitcode,
                                                      const std::string &entryName,
                                                      bool regionEntry, const uint64_t local[3],
                                                      const std::string &specializedName);

/// The CPU whose LLVM cost model shapes the optimized IR when kernels are costed: the costs
/// are counted on that IR, so it must not depend on the host (docs/device-model.md, "OpenCL C
/// kernels"). Code is generated for the host afterwards.
inline constexpr const char *kCostedIrCpu = "znver4";

} // namespace manycl::compiler::detail
