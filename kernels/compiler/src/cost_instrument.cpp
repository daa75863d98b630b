// Cost instrumentation: every basic block of a kernel's entry point adds its static cost on the
// modeled PE (manycl/compiler/cost_model.h) to the PE's counter in the work-item context.
//
// It runs on the optimized module, so what it costs is the code that really executes, and
// -cl-opt-disable costs only the extra code it leaves. Vector operations cost per element
// (the host vectorizer's lanes are not the PE's), and shuffles/inserts/extracts cost nothing,
// so vectorizing the work-item loop changes only the loop overhead it saves. One counter
// update per block (load, add, store; no call) keeps the host overhead small.
#include "internal.h"
#include "manycl/compiler/cost_model.h"

#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Operator.h>

namespace manycl::compiler::detail {
using namespace llvm;
using namespace manycl::compiler::cost;

static_assert(kCounterSlot == SlotCycles && SlotCycles < SlotCount);

namespace {

class BlockCoster {
public:
  BlockCoster(Function &F, const KernelInfo &k)
      : DL(F.getParent()->getDataLayout()), argv(F.getArg(0)), ctx(F.getArg(1)), k(k) {}

  uint64_t block(const BasicBlock &BB) {
    uint64_t t = 0;
    for (const Instruction &I : BB)
      t += inst(I);
    return t;
  }

private:
  const DataLayout &DL;
  const Value *argv, *ctx;
  const KernelInfo &k;

  static uint64_t lanes(const Type *t) {
    if (auto *v = dyn_cast<FixedVectorType>(t))
      return v->getNumElements();
    return 1;
  }
  static bool fp64(const Type *t) { return t->getScalarType()->isDoubleTy(); }
  static uint64_t cycles(uint64_t c) { return c * kTicksPerCycle; }
  static uint64_t fpSlots(const Type *t) { return lanes(t) * kSlot * (fp64(t) ? kFp64Slots : 1); }

  // True when `obj` (an underlying object of an address) is in the SPM: private data, the
  // kernel's arguments and context, __local arguments and kernel-scope __local variables.
  bool inSpm(const Value *obj, int depth = 0) const {
    if (depth > 4)
      return false;
    if (isa<AllocaInst>(obj) || obj == argv || obj == ctx)
      return true;
    if (Value *s = getSplatValue(obj))
      return allSpm(s, depth + 1);
    if (auto *ip = dyn_cast<IntToPtrInst>(obj)) {
      const Value *v = ip->getOperand(0);
      if (auto *bo = dyn_cast<BinaryOperator>(v); bo && bo->getOpcode() == Instruction::Add)
        v = bo->getOperand(0);
      if (auto *l = dyn_cast<LoadInst>(v))
        return ctxSlot(l) == SlotLocalStatic || ctxSlot(l) == SlotFrame;
      return false;
    }
    if (auto *l = dyn_cast<LoadInst>(obj)) {
      int64_t off = 0;
      const Value *base = GetPointerBaseWithConstantOffset(l->getPointerOperand(), off, DL);
      if (base == argv && off >= 0 && off % 8 == 0 && uint64_t(off / 8) < k.args.size()) {
        const KernelArgInfo &a = k.args[off / 8];
        return !a.is_pointer || a.address == AddressQual::Local ||
               a.address == AddressQual::Private;
      }
    }
    return false;
  }
  int64_t ctxSlot(const LoadInst *l) const {
    int64_t off = 0;
    const Value *base = GetPointerBaseWithConstantOffset(l->getPointerOperand(), off, DL);
    return base == ctx && off % 8 == 0 ? off / 8 : -1;
  }
  bool allSpm(const Value *ptr, int depth = 0) const {
    SmallVector<const Value *, 4> objs;
    getUnderlyingObjects(ptr, objs, nullptr, 16);
    if (objs.empty())
      return false;
    for (const Value *o : objs)
      if (!inSpm(o, depth))
        return false;
    return true;
  }

  uint64_t memory(const Value *ptr, const Type *valueType) const {
    uint64_t n = lanes(valueType);
    if (allSpm(ptr))
      return n * kSlot;
    uint64_t bytes = DL.getTypeStoreSize(const_cast<Type *>(valueType)).getFixedValue();
    return n * kSlot + bytes * kMissCycles * kTicksPerCycle / kLineBytes;
  }
  uint64_t atomic(const Value *ptr) const {
    return kSlot + cycles(allSpm(ptr) ? kLocalAtomicCycles : kGlobalAtomicCycles);
  }

  uint64_t call(const CallBase &c) const {
    Type *rt = c.getType();
    if (auto *ii = dyn_cast<IntrinsicInst>(&c)) {
      if (ii->isAssumeLikeIntrinsic() || isa<DbgInfoIntrinsic>(ii))
        return 0;
      switch (ii->getIntrinsicID()) {
      case Intrinsic::lifetime_start:
      case Intrinsic::lifetime_end:
      case Intrinsic::experimental_noalias_scope_decl:
        return 0;
      case Intrinsic::fma:
      case Intrinsic::fmuladd:
        return fpSlots(rt);
      case Intrinsic::sqrt:
        return lanes(rt) * (kSlot + cycles(fp64(rt) ? kFp64SqrtCycles : kFp32SqrtCycles));
      case Intrinsic::exp:
      case Intrinsic::exp2:
      case Intrinsic::log:
      case Intrinsic::log2:
      case Intrinsic::log10:
      case Intrinsic::pow:
      case Intrinsic::powi:
      case Intrinsic::sin:
      case Intrinsic::cos:
        return lanes(rt) * (kSlot + cycles(fp64(rt) ? kFp64MathCycles : kFp32MathCycles));
      case Intrinsic::masked_load:
        return memory(c.getArgOperand(0), rt);
      case Intrinsic::masked_gather:
        return memory(c.getArgOperand(0), rt);
      case Intrinsic::masked_store:
      case Intrinsic::masked_scatter:
        return memory(c.getArgOperand(1), c.getArgOperand(0)->getType());
      case Intrinsic::memcpy:
      case Intrinsic::memmove:
      case Intrinsic::memset:
        if (auto *len = dyn_cast<ConstantInt>(c.getArgOperand(2)))
          return (len->getZExtValue() + 7) / 8 * kSlot;
        return 16 * kSlot;
      default:
        return lanes(rt) * kSlot;
      }
    }
    const Function *f = c.getCalledFunction();
    if (!f || !f->isDeclaration() || f->getName().startswith("__manycl_") ||
        f->getName().startswith("mem"))
      return kSlot;
    // What else the JIT code calls are the host libm's functions (transcendental builtins)
    // and native functions; natives account their own cycles, their call costs a slot.
    if (!rt->isFPOrFPVectorTy())
      return kSlot;
    return lanes(rt) * (kSlot + cycles(fp64(rt) ? kFp64MathCycles : kFp32MathCycles));
  }

  uint64_t inst(const Instruction &I) const {
    const Type *t = I.getType();
    switch (I.getOpcode()) {
    case Instruction::PHI:
    case Instruction::BitCast:
    case Instruction::AddrSpaceCast:
    case Instruction::PtrToInt:
    case Instruction::IntToPtr:
    case Instruction::Trunc:
    case Instruction::ZExt:
    case Instruction::SExt:
    case Instruction::ExtractElement:
    case Instruction::InsertElement:
    case Instruction::ShuffleVector:
    case Instruction::ExtractValue:
    case Instruction::InsertValue:
    case Instruction::Freeze:
    case Instruction::Alloca:
    case Instruction::Unreachable:
      return 0;
    case Instruction::GetElementPtr: {
      // Constant offsets fold into the load/store's addressing mode.
      auto *g = cast<GetElementPtrInst>(&I);
      return g->hasAllConstantIndices() ? 0 : lanes(t) * kSlot;
    }
    case Instruction::UDiv:
    case Instruction::SDiv:
    case Instruction::URem:
    case Instruction::SRem:
      return lanes(t) * (kSlot + cycles(kIntDivCycles));
    case Instruction::FAdd:
    case Instruction::FSub:
    case Instruction::FMul:
    case Instruction::FNeg:
      return fpSlots(t);
    case Instruction::FCmp:
      return fpSlots(I.getOperand(0)->getType());
    case Instruction::FDiv:
      return lanes(t) * (kSlot + cycles(fp64(t) ? kFp64DivCycles : kFp32DivCycles));
    case Instruction::FRem:
      return lanes(t) * (kSlot + cycles(fp64(t) ? kFp64MathCycles : kFp32MathCycles));
    case Instruction::Load:
      return memory(cast<LoadInst>(I).getPointerOperand(), t);
    case Instruction::Store: {
      auto &s = cast<StoreInst>(I);
      return memory(s.getPointerOperand(), s.getValueOperand()->getType());
    }
    case Instruction::AtomicRMW:
      return atomic(cast<AtomicRMWInst>(I).getPointerOperand());
    case Instruction::AtomicCmpXchg:
      return atomic(cast<AtomicCmpXchgInst>(I).getPointerOperand());
    case Instruction::Call:
      return call(cast<CallBase>(I));
    default:
      // Integer arithmetic, comparisons, selects, conversions, branches, returns: one slot
      // per element.
      return (t->isVoidTy() ? 1 : lanes(t)) * kSlot;
    }
  }
};

} // namespace

void instrumentCost(Module &M, const std::vector<KernelInfo> &kernels) {
  for (const KernelInfo &k : kernels) {
    std::string entry = !k.uses_barriers ? wgName(k.name)
                        : k.region_based ? regionName(k.name)
                                         : fiberName(k.name);
    Function *F = M.getFunction(entry);
    if (!F || F->isDeclaration() || F->arg_size() < 2)
      continue;
    BlockCoster coster(*F, k);
    std::vector<std::pair<BasicBlock *, uint64_t>> costs;
    for (BasicBlock &BB : *F)
      costs.emplace_back(&BB, coster.block(BB));
    Value *ctx = F->getArg(1);
    for (auto &[BB, ticks] : costs) {
      if (ticks == 0)
        continue;
      IRBuilder<> B(BB->getTerminator());
      Value *slot = B.CreateConstInBoundsGEP1_64(B.getInt64Ty(), ctx, kCounterSlot);
      Value *v = B.CreateLoad(B.getInt64Ty(), slot);
      B.CreateStore(B.CreateAdd(v, B.getInt64(ticks)), slot);
    }
  }
}

} // namespace manycl::compiler::detail
