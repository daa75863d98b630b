// The analysis managers every run of LLVM's new pass manager needs, set up once.
#pragma once

#include <llvm/Passes/PassBuilder.h>

namespace manycl::compiler::detail {

// The four analysis managers, registered with `PB`'s analyses and wired to each other (the
// loop unroller, for one, asks for module analyses through the proxies). Declared in the
// order LLVM requires for their destruction.
struct AnalysisManagers {
  llvm::LoopAnalysisManager loop;
  llvm::FunctionAnalysisManager function;
  llvm::CGSCCAnalysisManager cgscc;
  llvm::ModuleAnalysisManager module;

  explicit AnalysisManagers(llvm::PassBuilder &PB) {
    PB.registerModuleAnalyses(module);
    PB.registerCGSCCAnalyses(cgscc);
    PB.registerFunctionAnalyses(function);
    PB.registerLoopAnalyses(loop);
    PB.crossRegisterProxies(loop, function, cgscc, module);
  }
};

} // namespace manycl::compiler::detail
