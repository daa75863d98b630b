// Specialization of a kernel's entry point for one local size (docs/compiler.md,
// "Specialization by local size").
//
// The program's final module (optimized, cost-instrumented, retargeted to the host) is read
// again, the entry point's work-item bounds and its reads of the local-size slots become
// constants, and the optimizer runs once more over that entry alone. Loops over the work-items
// get constant trip counts (no remainder, no runtime checks), and the addresses that depend on
// the local size fold into constant offsets. The counters of the modeled cost are plain values of
// the code, which the optimizer preserves: a specialized group costs what the generic one does.
#include "frontend.h"
#include "pass_managers.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Target/TargetMachine.h>

namespace manycl::compiler::detail {

using namespace llvm;

namespace {

// The slot's value in every full group of the launch, or null when it is not a local size.
Constant *localSizeSlotValue(Type *i64, uint64_t slot, const uint64_t local[3]) {
  for (unsigned base : {unsigned(SlotLocalSize), unsigned(SlotEnqLocalSize)})
    if (slot >= base && slot < base + 4)
      return ConstantInt::get(i64, slot - base < 3 ? local[slot - base] : 1);
  return nullptr;
}

// Replaces the loads of local-size slots from `ctx` (scalar, or vectors of adjacent slots that
// are all local sizes) by their values.
void foldLocalSizeLoads(Function &F, Value *ctx, const uint64_t local[3]) {
  const DataLayout &DL = F.getParent()->getDataLayout();
  Type *i64 = Type::getInt64Ty(F.getContext());
  SmallVector<std::pair<LoadInst *, Constant *>, 16> folds;
  for (BasicBlock &BB : F)
    for (Instruction &I : BB) {
      auto *L = dyn_cast<LoadInst>(&I);
      if (!L || L->isVolatile())
        continue;
      int64_t offset = 0;
      if (GetPointerBaseWithConstantOffset(L->getPointerOperand(), offset, DL) != ctx ||
          offset < 0 || offset % 8 != 0)
        continue;
      const uint64_t slot = static_cast<uint64_t>(offset) / 8;
      Type *t = L->getType();
      if (t == i64) {
        if (Constant *c = localSizeSlotValue(i64, slot, local))
          folds.push_back({L, c});
        continue;
      }
      auto *vt = dyn_cast<FixedVectorType>(t);
      if (!vt || vt->getElementType() != i64)
        continue;
      SmallVector<Constant *, 8> lanes;
      for (unsigned i = 0; i < vt->getNumElements(); ++i)
        if (Constant *c = localSizeSlotValue(i64, slot + i, local))
          lanes.push_back(c);
      if (lanes.size() == vt->getNumElements())
        folds.push_back({L, ConstantVector::get(lanes)});
    }
  for (auto &[load, value] : folds) {
    load->replaceAllUsesWith(value);
    load->eraseFromParent();
  }
}

// Keeps what the specialized entry may duplicate (code, constants) and refers to the program's
// own copy of everything else, so that both versions share program-scope variables. False when
// the entry's module has state that cannot be shared that way (mutable internal variables that
// exposeProgramVariables() did not expose).
bool isolateEntry(Module &M, Function &entry) {
  SmallVector<GlobalVariable *, 4> drop;
  for (GlobalVariable &G : M.globals()) {
    if (G.hasAppendingLinkage()) { // llvm.used, constructors: the program's, not ours
      drop.push_back(&G);
      continue;
    }
    if (G.isDeclaration())
      continue;
    if (G.hasLocalLinkage()) {
      if (!G.isConstant() && !G.use_empty())
        return false;
      continue;
    }
    G.setInitializer(nullptr);
    G.setLinkage(GlobalValue::ExternalLinkage);
    G.setComdat(nullptr);
    G.setDSOLocal(false);
  }
  for (GlobalVariable *G : drop)
    G->eraseFromParent();
  for (GlobalAlias &A : M.aliases())
    if (!A.hasLocalLinkage())
      A.setLinkage(GlobalValue::InternalLinkage);
  for (Function &F : M)
    if (&F != &entry && !F.isDeclaration()) {
      F.setLinkage(GlobalValue::InternalLinkage);
      F.setComdat(nullptr);
    }
  return true;
}

} // namespace

void exposeProgramVariables(Module &M) {
  for (GlobalVariable &G : M.globals())
    if (G.hasLocalLinkage() && !G.isConstant() && !G.isDeclaration()) {
      G.setName("__manycl_var." + G.getName());
      G.setLinkage(GlobalValue::ExternalLinkage);
    }
}

Result<std::unique_ptr<Module>> specializeEntry(LLVMContext &context, std::string_view bitcode,
                                                const std::string &entryName, bool regionEntry,
                                                const uint64_t local[3],
                                                const std::string &specializedName) {
  auto buffer =
      MemoryBuffer::getMemBuffer(StringRef(bitcode.data(), bitcode.size()), "program", false);
  auto parsed = parseBitcodeFile(buffer->getMemBufferRef(), context);
  if (!parsed)
    return Status::error(ErrorCode::Internal, "specialization: " + toString(parsed.takeError()));
  std::unique_ptr<Module> M = std::move(*parsed);
  Function *entry = M->getFunction(entryName);
  // The entry points' signatures (wgfunc.cpp): (args, ctx, x0, x1, r0, r1), region entries
  // with the region id before x0.
  const unsigned firstBound = regionEntry ? 3 : 2;
  if (!entry || entry->isDeclaration() || entry->arg_size() != firstBound + 4)
    return Status::error(ErrorCode::Internal, "specialization: no entry point " + entryName);
  exposeProgramVariables(*M);
  if (!isolateEntry(*M, *entry))
    return Status::error(ErrorCode::Internal,
                         "specialization: the program has mutable internal variables");
  entry->setName(specializedName);
  entry->setLinkage(GlobalValue::ExternalLinkage);

  // A full group: items [0, local[0]) of rows [0, local[1] * local[2]).
  Type *i64 = Type::getInt64Ty(context);
  const uint64_t bounds[4] = {0, local[0], 0, local[1] * local[2]};
  for (unsigned i = 0; i < 4; ++i)
    entry->getArg(firstBound + i)->replaceAllUsesWith(ConstantInt::get(i64, bounds[i]));
  foldLocalSizeLoads(*entry, entry->getArg(1), local);

  // Code is generated for the host: the module's functions carry its CPU and features already.
  auto TM = makeTargetMachine(hostCpu(), hostFeatures(), CodeGenOpt::Aggressive);
  if (!TM)
    return Status::error(ErrorCode::Internal, "specialization: no host target machine");
  PassBuilder PB(TM.get());
  AnalysisManagers am(PB);
  PB.buildPerModuleDefaultPipeline(OptimizationLevel::O3).run(*M, am.module);

  std::string err;
  raw_string_ostream es(err);
  if (verifyModule(*M, &es))
    return Status::error(ErrorCode::Internal, "specialization: invalid module: " + es.str());
  dumpModule(*M, {}, {}, specializedName + ".ll");
  return M;
}

} // namespace manycl::compiler::detail
