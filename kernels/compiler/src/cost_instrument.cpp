// Cost instrumentation: every basic block of a kernel's entry point adds its static cost on the
// modeled PE (manycl/compiler/cost_model.h) to the PE's counter in the work-item context.
//
// It runs on the optimized module, so what it costs is the code that really executes, and
// -cl-opt-disable costs only the extra code it leaves. Vector operations cost per element
// (the host vectorizer's lanes are not the PE's), and shuffles/inserts/extracts cost nothing,
// so vectorizing the work-item loop changes only the loop overhead it saves. Each block adds its
// cost to a register (one add, no call, no memory), stored to the context once per call.
#include "internal.h"
#include "pass_managers.h"
#include "manycl/compiler/cost_model.h"

#include <llvm/Analysis/AssumptionCache.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/PostDominators.h>
#include <llvm/Analysis/ScalarEvolution.h>
#include <llvm/Analysis/ScalarEvolutionExpressions.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Analysis/VectorUtils.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/Module.h>
#include <llvm/IR/Operator.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/InstCombine/InstCombine.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>
#include <llvm/Transforms/Utils/PromoteMemToReg.h>
#include <llvm/Transforms/Utils/ScalarEvolutionExpander.h>

#include <array>
#include <map>

namespace manycl::compiler::detail {
using namespace llvm;
using namespace manycl::compiler::cost;

static_assert(kCounterSlot == SlotCycles && SlotCyclesItem < SlotCount &&
              SlotIntervalCycles < SlotCount && SlotShareRound < SlotCount);

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

  // A context-array access of a loop-barrier kernel: the host keeps a loop-carried value
  // there between the trips it runs as regions; the PE keeps it in a register.
  static bool loopFrameAccess(const Instruction &I) {
    const MDNode *scopes = I.getMetadata(LLVMContext::MD_alias_scope);
    if (!scopes || !I.mayReadOrWriteMemory())
      return false;
    for (const MDOperand &op : scopes->operands()) {
      auto *scope = dyn_cast<MDNode>(op.get());
      if (!scope || scope->getNumOperands() < 2)
        continue;
      auto *domain = dyn_cast<MDNode>(scope->getOperand(1).get());
      if (!domain || domain->getNumOperands() < 2)
        continue;
      if (auto *name = dyn_cast<MDString>(domain->getOperand(1).get());
          name && name->getString() == kLoopFrameDomain)
        return true;
    }
    return false;
  }

  uint64_t inst(const Instruction &I) const {
    const Type *t = I.getType();
    if (loopFrameAccess(I))
      return 0;
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

// Where a block's cost is paid, from the loop nest of the entry point (work-group and region
// functions: an outer loop over rows, work-item loops inside it): once per call (no loop), once
// per row (in a row loop, outside the work-item loops) or per work-item (in a work-item loop or
// deeper).
// Divergent: a block of the work-item loops that only some work-items run (below).
enum CostClass : unsigned { PerCall = 0, PerRow = 1, PerItem = 2, Divergent = 3 };
/// Issue slots of one trip of a loop on the PE: what a loop-barrier kernel's region call costs
/// each of its items besides their own code. The plain function's latch is 3 slots (counter,
/// compare, branch) per trip, less where the optimizer unrolls the loop; 2 keeps the modeled
/// cycles of the exchanged kernels within a few percent of the plain ones for loops of a dozen
/// operations and within 25 % for a 2-flop trip (KernelCost.LoopBarriersKeepModeledCyclesClose).
constexpr uint64_t kLoopTripSlots = 2;
CostClass classOf(const LoopInfo &LI, const BasicBlock *BB,
                  const SmallPtrSetImpl<const BasicBlock *> &divergent) {
  if (divergent.contains(BB))
    return Divergent;
  unsigned d = LI.getLoopDepth(BB);
  return d == 0 ? PerCall : d == 1 ? PerRow : PerItem;
}

// The blocks of the work-item loops (loop depth 2 and deeper: work-group and region functions
// loop over rows, then over items) that run for some work-items and not for others: those
// control dependent on a branch whose condition may differ between items (it depends on the
// row or item induction variables, on private or other memory). The host compiler turned most
// divergent code of vectorized work-item loops into masked operations that every item pays;
// what remains are branches of scalar loops. The exits of the row and work-item loops
// themselves are not divergence.
SmallPtrSet<const BasicBlock *, 16> divergentBlocks(Function &F, const LoopInfo &LI) {
  SmallPtrSet<const BasicBlock *, 16> out;
  SmallPtrSet<const Value *, 32> varying;
  std::vector<const Value *> work;
  auto mark = [&](const Value *v) {
    if (varying.insert(v).second)
      work.push_back(v);
  };
  for (BasicBlock &BB : F) {
    const Loop *L = LI.getLoopFor(&BB);
    for (Instruction &I : BB) {
      if (auto *ld = dyn_cast<LoadInst>(&I); ld && ld->getMetadata(LLVMContext::MD_invariant_load))
        continue;
      if ((isa<PHINode>(I) && L && L->getHeader() == &BB && L->getLoopDepth() <= 2) ||
          isa<AllocaInst>(I) || I.mayReadFromMemory())
        mark(&I);
    }
  }
  PostDominatorTree PDT(F);
  SmallPtrSet<const Instruction *, 16> followed;
  for (bool more = true; more;) {
    while (!work.empty()) {
      const Value *v = work.back();
      work.pop_back();
      for (const User *U : v->users())
        if (isa<Instruction>(U))
          mark(U);
    }
    more = false;
    for (BasicBlock &BB : F) {
      const Loop *L = LI.getLoopFor(&BB);
      if (!L || L->getLoopDepth() < 2)
        continue;
      Instruction *T = BB.getTerminator();
      const Value *cond = nullptr;
      if (auto *br = dyn_cast<BranchInst>(T); br && br->isConditional())
        cond = br->getCondition();
      else if (auto *sw = dyn_cast<SwitchInst>(T))
        cond = sw->getCondition();
      if (!cond || !varying.contains(cond) || !followed.insert(T).second)
        continue;
      if (L->getLoopDepth() == 2 && L->isLoopExiting(&BB))
        continue; // the work-item loop's own exit
      const Loop *items = L;
      while (items->getLoopDepth() > 2)
        items = items->getParentLoop();
      const BasicBlock *join = nullptr;
      if (DomTreeNode *n = PDT.getNode(&BB); n && n->getIDom())
        join = n->getIDom()->getBlock();
      std::vector<BasicBlock *> stack(succ_begin(&BB), succ_end(&BB));
      while (!stack.empty()) {
        BasicBlock *b = stack.back();
        stack.pop_back();
        if (!items->contains(b))
          continue;
        if (b == join) { // values merged there differ per item
          for (PHINode &phi : b->phis())
            mark(&phi);
          continue;
        }
        if (!out.insert(b).second)
          continue;
        for (PHINode &phi : b->phis())
          mark(&phi);
        for (BasicBlock *sb : successors(b))
          stack.push_back(sb);
      }
      more = true;
    }
  }
  return out;
}

} // namespace

// True when `BB`, whose innermost loop is `L`, runs exactly once per trip of `L`: it dominates
// the latch and every block leaving the loop, and no trip ends inside the loop.
bool oncePerTrip(const Loop &L, const BasicBlock &BB, const DominatorTree &DT) {
  if (&BB == L.getHeader())
    return true;
  const BasicBlock *latch = L.getLoopLatch();
  if (!latch || !DT.dominates(&BB, latch))
    return false;
  SmallVector<BasicBlock *, 4> exiting;
  L.getExitingBlocks(exiting);
  for (const BasicBlock *e : exiting)
    if (!DT.dominates(&BB, e))
      return false;
  for (const BasicBlock *b : L.blocks())
    if (succ_empty(b))
      return false;
  return true;
}

namespace {
// One addition of ticks to a cost class's accumulator, at the end of block `at`.
struct TickAdd {
  BasicBlock *at;
  unsigned cls;
  uint64_t ticks;
};

// True when `S` is cheap to compute before a loop: no recurrence (it would need an induction
// variable of its own), no division other than by a power of two, a few operations.
bool cheapTripTicks(const SCEV *S) {
  if (S->getExpressionSize() > 32)
    return false;
  return !SCEVExprContains(S, [](const SCEV *e) {
    if (isa<SCEVAddRecExpr>(e))
      return true;
    if (auto *d = dyn_cast<SCEVUDivExpr>(e)) {
      auto *c = dyn_cast<SCEVConstant>(d->getRHS());
      return !c || !c->getAPInt().isPowerOf2();
    }
    return false;
  });
}

// Emits the additions. An addition in a block that runs once per trip of its loop is made once
// before the loop instead, multiplied by the loop's trip count, when the count is known on
// entry to the loop (ScalarEvolution's exact backedge-taken count + 1, for every entry into the
// loop: it runs to completion, no trip ends inside it) and cheap to compute; again for the
// enclosing loops while the product does not change within them. A work-item loop then adds
// its ticks once per call (or row) instead of once per trip: for short loops (a barrier
// interval of a few items, a scalar loop over the group that one item works in) the add's
// dependency chain and code size were most of the instrumentation's host time. The modeled
// ticks are the same (MANYCL_COST=per-trip keeps the per-trip additions, for checking).
void addTicks(Function &F, LoopInfo &LI, DominatorTree &DT, const std::vector<TickAdd> &adds,
              AllocaInst *const acc[4]) {
  Type *i64 = Type::getInt64Ty(F.getContext());
  TargetLibraryInfoImpl TLII(Triple(F.getParent()->getTargetTriple()));
  TargetLibraryInfo TLI(TLII, &F);
  AssumptionCache AC(F);
  ScalarEvolution SE(F, TLI, AC, DT, LI);
  SCEVExpander expander(SE, F.getParent()->getDataLayout(), "mcl.ticks");
  // Sum of the additions per block and class, in the order blocks were first named.
  std::map<std::pair<BasicBlock *, unsigned>, const SCEV *> sums;
  std::vector<std::pair<BasicBlock *, unsigned>> order;
  for (const TickAdd &a : adds) {
    BasicBlock *at = a.at;
    const SCEV *ticks = SE.getConstant(i64, a.ticks);
    for (Loop *L = LI.getLoopFor(at); L && !costPerTrip(); L = LI.getLoopFor(at)) {
      // Before the loop when it has a preheader, else after it when it leaves to one block
      // that only the loop reaches (the vectorizer's main loop, entered from a branch that
      // may skip it, leaves to its middle block): either runs once per entry into the loop.
      BasicBlock *to = L->getLoopPreheader();
      if (!to) {
        to = L->getUniqueExitBlock();
        if (to && !all_of(predecessors(to), [&](BasicBlock *p) { return L->contains(p); }))
          to = nullptr;
      }
      if (!to || !oncePerTrip(*L, *at, DT) || !SE.isLoopInvariant(ticks, L))
        break;
      const SCEV *taken = SE.getBackedgeTakenCount(L);
      if (isa<SCEVCouldNotCompute>(taken) || !taken->getType()->isIntegerTy() ||
          taken->getType()->getIntegerBitWidth() > 64)
        break;
      const SCEV *trips = SE.getAddExpr(SE.getNoopOrZeroExtend(taken, i64), SE.getConstant(i64, 1));
      const SCEV *total = SE.getMulExpr(ticks, trips);
      if (!cheapTripTicks(total) || !expander.isSafeToExpandAt(total, to->getTerminator()))
        break;
      ticks = total;
      at = to;
    }
    auto key = std::make_pair(at, a.cls);
    auto [it, fresh] = sums.emplace(key, ticks);
    if (fresh)
      order.push_back(key);
    else
      it->second = SE.getAddExpr(it->second, ticks);
  }
  for (auto &key : order) {
    Instruction *T = key.first->getTerminator();
    Value *ticks = expander.expandCodeFor(sums[key], i64, T);
    IRBuilder<> B(T);
    B.CreateStore(B.CreateAdd(B.CreateLoad(i64, acc[key.second]), ticks), acc[key.second]);
  }
}
} // namespace

// Stores a call's ticks by class to the context (SlotCycles and the parts the executor splits
// over the PEs); `accumulate`: adds them to what is there (fibers: one work-item per call).
static void storeSums(IRBuilder<> &B, Value *ctx, Value *const v[4], bool accumulate) {
  Type *i64 = B.getInt64Ty();
  auto add = [&](unsigned slot, Value *ticks) {
    Value *p = B.CreateConstInBoundsGEP1_64(i64, ctx, slot);
    B.CreateStore(accumulate ? B.CreateAdd(B.CreateLoad(i64, p), ticks) : ticks, p);
  };
  Value *items = B.CreateAdd(v[PerItem], v[Divergent]);
  add(SlotCycles, B.CreateAdd(B.CreateAdd(v[PerCall], v[PerRow]), items));
  add(SlotCyclesRow, v[PerRow]);
  add(SlotCyclesItem, items);
  add(SlotCyclesDivergent, v[Divergent]);
}

// A region function's call is one barrier interval of the group: adds the interval's cycles on
// the slowest modeled PE to the group's total (SlotIntervalCycles), with the PE shares the
// executor set for the group (runRegionsCosted in program.cpp, which does the same sum in C++
// when the group's size is not a power of two, and then leaves SlotShareRow at 0):
//   per call + (per row x SlotShareRow + per item x SlotShareItem + SlotShareRound)
//   >> SlotShareShift + divergent, in ticks, rounded up to cycles.
// The executor then does no arithmetic per interval; here it is a few register operations
// while the function returns (128-bit products: the weights are below 2^62), instead of
// storing the sums by class for the executor.
// Loop-barrier kernels (`inTicks`) add ticks instead: their intervals are trips of a loop, a
// fraction of a cycle each per PE, which the executor rounds once for the group.
static void addIntervalCycles(IRBuilder<> &B, Value *ctx, Value *const v[4], Value *rowWeight,
                              bool inTicks) {
  Type *i64 = B.getInt64Ty(), *i128 = B.getInt128Ty();
  auto slot = [&](unsigned s) { return B.CreateConstInBoundsGEP1_64(i64, ctx, s); };
  Value *itemWeight = B.CreateLoad(i64, slot(SlotShareItem));
  Value *shift = B.CreateLoad(i64, slot(SlotShareShift));
  Value *round = B.CreateLoad(i64, slot(SlotShareRound));
  Value *num =
      B.CreateAdd(B.CreateMul(B.CreateZExt(v[PerRow], i128), B.CreateZExt(rowWeight, i128)),
                  B.CreateMul(B.CreateZExt(v[PerItem], i128), B.CreateZExt(itemWeight, i128)));
  num = B.CreateAdd(num, B.CreateZExt(round, i128));
  Value *share = B.CreateTrunc(B.CreateLShr(num, B.CreateZExt(shift, i128)), i64);
  Value *ticks = B.CreateAdd(B.CreateAdd(v[PerCall], share), v[Divergent]);
  Value *cycles = inTicks ? ticks
                          : B.CreateUDiv(B.CreateAdd(ticks, B.getInt64(kTicksPerCycle - 1)),
                                         B.getInt64(kTicksPerCycle));
  Value *total = slot(SlotIntervalCycles);
  B.CreateStore(B.CreateAdd(B.CreateLoad(i64, total), cycles), total);
}

void instrumentCost(Module &M, std::vector<KernelInfo> &kernels) {
  // The additions are made after the optimizer ran, one per block on the counters' paths: along
  // a path of blocks each adds its constant to the sum of the ones before. InstCombine folds
  // those into one constant per path (phis of constants where paths join) and the products of
  // the trip counts into the code around them: fewer instructions per call, which is what
  // short calls (a barrier interval of a few vector iterations) pay.
  PassBuilder PB;
  AnalysisManagers am(PB);
  FunctionPassManager cleanup;
  cleanup.addPass(InstCombinePass());
  for (KernelInfo &k : kernels) {
    std::string entry = !k.uses_barriers ? wgName(k.name)
                        : k.region_based ? regionName(k.name)
                                         : fiberName(k.name);
    Function *F = M.getFunction(entry);
    if (!F || F->isDeclaration() || F->arg_size() < 2)
      continue;
    DominatorTree DT(*F);
    LoopInfo LI(DT);
    // Uniform when the work-group builder found that all work-items take the same path;
    // fibers run one work-item per call, their ticks are shared among the PEs as a whole.
    if (k.cost != KernelInfo::Cost::Uniform || (k.uses_barriers && !k.region_based))
      k.cost = KernelInfo::Cost::Divergent;
    SmallPtrSet<const BasicBlock *, 16> divergent;
    if (k.cost == KernelInfo::Cost::Divergent && (!k.uses_barriers || k.region_based))
      divergent = divergentBlocks(*F, LI);
    // The blocks' costs before any instrumentation is added.
    BlockCoster coster(*F, k);
    std::vector<std::pair<BasicBlock *, uint64_t>> costs;
    for (BasicBlock &BB : *F)
      costs.emplace_back(&BB, coster.block(BB));
    // One accumulator per cost class, kept in a register (promoted below) and stored to the
    // context once per call: a counter in memory would put a load and a store in every block,
    // and its store-to-load chain would bound a tight work-item loop. A block executed exactly
    // once per trip of its innermost loop adds its ticks at the loop's header, together with
    // the others: one add per trip (a one-cycle dependency, like the loop's own counter) for
    // loops without branches inside. Other blocks add their own.
    IRBuilder<> E(&*F->getEntryBlock().getFirstInsertionPt());
    AllocaInst *acc[4];
    for (AllocaInst *&a : acc) {
      a = E.CreateAlloca(E.getInt64Ty());
      E.CreateStore(E.getInt64(0), a);
    }
    std::map<Loop *, uint64_t> perTrip;
    std::vector<Loop *> tripOrder;
    std::vector<ReturnInst *> rets;
    std::vector<TickAdd> adds;
    for (auto &[BB, ticks] : costs) {
      if (auto *ret = dyn_cast<ReturnInst>(BB->getTerminator()))
        rets.push_back(ret);
      if (ticks == 0)
        continue;
      if (Loop *L = LI.getLoopFor(BB);
          L && oncePerTrip(*L, *BB, DT) &&
          classOf(LI, BB, divergent) == classOf(LI, L->getHeader(), divergent)) {
        if (perTrip.emplace(L, 0).second)
          tripOrder.push_back(L);
        perTrip[L] += ticks;
        continue;
      }
      adds.push_back({BB, classOf(LI, BB, divergent), ticks});
    }
    for (Loop *L : tripOrder)
      adds.push_back({L->getHeader(), classOf(LI, L->getHeader(), divergent), perTrip[L]});
    // Loop-barrier kernels run each trip of a uniform loop as one call over the group: what a
    // call does outside its work-item loop, per call or per row (dispatch, the uniform slots,
    // the loop's counter and code hoisted out of the work-item loop) is the host's bookkeeping
    // of the exchanged loops. On the PE each work-item runs the trip with its loop overhead
    // (kLoopTripSlots): charged per item of the call, with the items' own code.
    if (k.loop_barriers) {
      std::erase_if(adds, [](const TickAdd &a) { return a.cls == PerCall || a.cls == PerRow; });
      Value *x0 = F->getArg(3), *x1 = F->getArg(4), *r0 = F->getArg(5), *r1 = F->getArg(6);
      Value *cols = E.CreateSelect(E.CreateICmpULT(x0, x1), E.CreateSub(x1, x0), E.getInt64(0));
      Value *rows = E.CreateSelect(E.CreateICmpULT(r0, r1), E.CreateSub(r1, r0), E.getInt64(0));
      E.CreateStore(E.CreateMul(E.CreateMul(cols, rows), E.getInt64(kLoopTripSlots * kSlot)),
                    acc[PerItem]);
    }
    addTicks(*F, LI, DT, adds, acc);
    // The sums at each return, read before the accumulators become SSA values (the handles
    // follow the loads' replacement).
    std::vector<std::pair<ReturnInst *, std::array<WeakTrackingVH, 4>>> sums;
    for (ReturnInst *ret : rets) {
      IRBuilder<> B(ret);
      std::array<WeakTrackingVH, 4> v;
      for (unsigned c = 0; c < 4; ++c)
        v[c] = B.CreateLoad(B.getInt64Ty(), acc[c]);
      sums.emplace_back(ret, v);
    }
    PromoteMemToReg(acc, DT);
    Value *ctx = F->getArg(1);
    for (auto &[ret, handles] : sums) {
      Value *v[4];
      for (unsigned c = 0; c < 4; ++c)
        v[c] = handles[c];
      if (!k.uses_barriers || !k.region_based) {
        // Work-group functions report each call's cost (the executor reads it after the
        // call); a fiber function runs one work-item per call and adds to its PE's total.
        IRBuilder<> B(ret);
        storeSums(B, ctx, v, k.uses_barriers);
        continue;
      }
      // Region functions: when the executor set the group's shares (a non-zero row weight),
      // add the interval's cycles to the group's; else report the sums, as above.
      IRBuilder<> B(ret);
      Value *rowWeight = B.CreateLoad(
          B.getInt64Ty(), B.CreateConstInBoundsGEP1_64(B.getInt64Ty(), ctx, SlotShareRow));
      Instruction *report = nullptr, *sum = nullptr;
      SplitBlockAndInsertIfThenElse(B.CreateICmpEQ(rowWeight, B.getInt64(0)), ret, &report, &sum);
      IRBuilder<> R(report);
      storeSums(R, ctx, v, false);
      IRBuilder<> S(sum);
      addIntervalCycles(S, ctx, v, rowWeight, k.loop_barriers);
    }
    cleanup.run(*F, am.function);
  }
}

} // namespace manycl::compiler::detail
