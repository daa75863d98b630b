// Guarded loops narrowed to the trips their guard lets through.
//
// A tree reduction's step `if (l < s) t[l] += t[l + s];` runs, after the region builder, as a
// work-item loop over the whole group whose body is guarded by `x < s`: the vectorizer turns it
// into masked loads and stores over all items, of which fewer than half do anything (8 steps x
// 256 items for 255 additions in groups of 256). Masked stores are cheap with AVX-512 and slow
// with AVX2 (vmaskmovps: tens of cycles on AMD Zen 3), and the <16 x i64> compares that build
// the masks spill on AVX2's 16 registers. Since `x` only grows, once the guard fails it fails
// for every later trip: the loop can stop there, and start only if the first trip passes it.
// The trips left run the body unconditionally, so it vectorizes without masks.
//
// The transformation (at the vectorizer's start, when loops are simplified, rotated and
// unswitched): an innermost loop whose block G, run on every trip (it dominates the latch),
// branches on `A pred B` where A grows by 1 per trip without wrapping (ScalarEvolution's
// {start,+,1} with the no-wrap flag of pred's signedness), B is loop invariant and pred keeps trips
// while A is below B (ult, ule, slt, sle; `A == 0` unsigned is `A <= 0`); the other successor
// reaches the latch without doing anything (it is the latch, or an empty block before it); no value
// of the loop is used after it (the trips dropped would not change any). Then: the preheader enters
// the loop only when the first trip passes the guard, the latch leaves when the next trip would
// fail it, and G branches to its guarded successor unconditionally. The loop gets `manycl.narrowed`
// in its loop ID (tests and dumps show which loops were narrowed). The cost instrumentation then
// costs the trips that run as work of every item (docs/device-model.md, "OpenCL C kernels").
#include "internal.h"

#include <llvm/Analysis/AssumptionCache.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/ScalarEvolution.h>
#include <llvm/Analysis/ScalarEvolutionExpressions.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/PatternMatch.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>
#include <llvm/Transforms/Utils/LoopUtils.h>
#include <llvm/Transforms/Utils/ScalarEvolutionExpander.h>

namespace manycl::compiler::detail {
using namespace llvm;

namespace {

// True when `v`, which ScalarEvolution sees as {start,+,1} on `L`, takes start, start + 1, ...
// on the trips without wrapping in the predicate's signedness. ScalarEvolution's no-wrap flag
// shows it for an induction variable and its extensions; it loses it where the no-wrap flag sits
// on the IR instead: an id plus a loop-invariant base by an `add nuw` (the global id: group
// offset + local id, which the runtime keeps below 2^64), or an extension of such a value. Those
// flags are enough here: `v` feeds the guard's compare, and the guard's branch runs on every trip,
// so a trip on which the add wrapped would branch on poison, which is undefined.
bool growsWithoutWrap(Value *v, const Loop &L, ScalarEvolution &SE, bool isSigned,
                      unsigned depth = 0) {
  auto *ar = dyn_cast<SCEVAddRecExpr>(SE.getSCEV(v));
  if (!ar || ar->getLoop() != &L || !ar->isAffine())
    return false;
  auto *step = dyn_cast<SCEVConstant>(ar->getStepRecurrence(SE));
  if (!step || !step->getValue()->isOne())
    return false;
  if (isSigned ? ar->hasNoSignedWrap() : ar->hasNoUnsignedWrap())
    return true;
  if (depth > 4)
    return false;
  if (auto *add = dyn_cast<BinaryOperator>(v);
      add && add->getOpcode() == Instruction::Add &&
      (isSigned ? add->hasNoSignedWrap() : add->hasNoUnsignedWrap())) {
    for (unsigned i = 0; i < 2; ++i)
      if (SE.isLoopInvariant(SE.getSCEV(add->getOperand(1 - i)), &L) &&
          growsWithoutWrap(add->getOperand(i), L, SE, isSigned, depth + 1))
        return true;
    return false;
  }
  // A value in [0, 2^w) that only grows keeps doing so, zero-extended, in either signedness; a
  // sign-extended one only in the signed sense (-1 to 0 is an unsigned wrap).
  if (auto *z = dyn_cast<ZExtInst>(v))
    return growsWithoutWrap(z->getOperand(0), L, SE, false, depth + 1);
  if (auto *x = dyn_cast<SExtInst>(v); x && isSigned)
    return growsWithoutWrap(x->getOperand(0), L, SE, true, depth + 1);
  return false;
}

// The compared value A as {start,+,1} on `L`, when it does not wrap in the predicate's
// signedness (growsWithoutWrap; not a 32-bit truncation of a wider induction, whose flags
// ScalarEvolution cannot know).
const SCEVAddRecExpr *asInduction(Value *v, const Loop &L, ScalarEvolution &SE, bool isSigned) {
  if (!v->getType()->isIntegerTy() || !growsWithoutWrap(v, L, SE, isSigned))
    return nullptr;
  return cast<SCEVAddRecExpr>(SE.getSCEV(v));
}

// A bound that a work-item loop reads from memory at the start of each trip, before the trip
// writes anything (hashcat's `kernel_param->gid_max`, which LICM cannot hoist past the kernel's
// stores to other buffers): a simple load from a loop-invariant address on the straight path from
// the loop's header. Work-items run in no order, so every item may read it at the moment the first
// failing item reads it: the items after that one fail the guard too, and do nothing. Only loops
// the work-group builder marked as work-item loops (their loop ID's parallel accesses).
LoadInst *tripStartLoad(Value *v, const Loop &L) {
  auto *load = dyn_cast<LoadInst>(v);
  if (!load || !load->isSimple() || !L.contains(load) ||
      !L.isLoopInvariant(load->getPointerOperand()) ||
      !findOptionMDForLoop(&L, "llvm.loop.parallel_accesses"))
    return nullptr;
  for (BasicBlock *b = L.getHeader(); b && L.contains(b); b = b->getUniqueSuccessor())
    for (Instruction &I : *b) {
      if (&I == load)
        return load;
      if (I.mayWriteToMemory() || (I.isTerminator() && I.getNumSuccessors() != 1))
        return nullptr;
    }
  return nullptr;
}

void markNarrowed(Loop &L) {
  LLVMContext &C = L.getHeader()->getContext();
  SmallVector<Metadata *, 4> ops{nullptr};
  if (MDNode *id = L.getLoopID())
    for (unsigned i = 1; i < id->getNumOperands(); ++i)
      ops.push_back(id->getOperand(i));
  ops.push_back(MDNode::get(C, {MDString::get(C, kNarrowedLoopMd)}));
  MDNode *id = MDNode::getDistinct(C, ops);
  id->replaceOperandWith(0, id);
  L.setLoopID(id);
}

bool narrow(Loop &L, DominatorTree &DT, ScalarEvolution &SE) {
  BasicBlock *pre = L.getLoopPreheader(), *latch = L.getLoopLatch(), *exit = L.getUniqueExitBlock();
  if (!pre || !latch || !exit || L.getExitingBlock() != latch)
    return false;
  auto *latchBr = dyn_cast<BranchInst>(latch->getTerminator());
  auto *preBr = dyn_cast<BranchInst>(pre->getTerminator());
  if (!latchBr || !latchBr->isConditional() || !preBr || preBr->isConditional())
    return false;
  // No value of the loop may be used after it: trips dropped could have changed it.
  for (BasicBlock *b : L.blocks())
    for (Instruction &I : *b)
      for (User *u : I.users())
        if (!L.contains(cast<Instruction>(u)))
          return false;

  for (BasicBlock *g : L.blocks()) {
    if (g == latch || !DT.dominates(g, latch))
      continue;
    auto *br = dyn_cast<BranchInst>(g->getTerminator());
    if (!br || !br->isConditional())
      continue;
    auto *cmp = dyn_cast<ICmpInst>(br->getCondition());
    if (!cmp)
      continue;
    for (unsigned work = 0; work < 2; ++work) {
      BasicBlock *taken = br->getSuccessor(work), *skip = br->getSuccessor(1 - work);
      if (!L.contains(taken) || taken == skip)
        continue;
      if (skip != latch && !(L.contains(skip) && skip->getSinglePredecessor() == g &&
                             skip->getSingleSuccessor() == latch && skip->size() == 1))
        continue;
      // What a failing trip runs (every block the guarded successor does not dominate) must
      // do nothing: the trips dropped would have run it.
      if (!all_of(L.blocks(), [&](BasicBlock *b) {
            return DT.dominates(taken, b) || none_of(*b, [](Instruction &I) {
                     return !I.isTerminator() && I.mayHaveSideEffects();
                   });
          }))
        continue;
      // The predicate under which `taken` runs, with A on the left.
      CmpInst::Predicate pred = work == 0 ? cmp->getPredicate() : cmp->getInversePredicate();
      Value *a = cmp->getOperand(0), *b = cmp->getOperand(1);
      auto isBound = [&](Value *v) { return L.isLoopInvariant(v) || tripStartLoad(v, L); };
      if (!isBound(b)) {
        std::swap(a, b);
        pred = CmpInst::getSwappedPredicate(pred);
      }
      if (!isBound(b))
        continue;
      if (pred == CmpInst::ICMP_EQ && match(b, PatternMatch::m_Zero()))
        pred = CmpInst::ICMP_ULE; // A == 0 for an unsigned A that only grows
      if (pred != CmpInst::ICMP_ULT && pred != CmpInst::ICMP_ULE && pred != CmpInst::ICMP_SLT &&
          pred != CmpInst::ICMP_SLE)
        continue;
      const SCEVAddRecExpr *ind = asInduction(a, L, SE, CmpInst::isSigned(pred));
      if (!ind)
        continue;
      LoadInst *boundLoad = L.isLoopInvariant(b) ? nullptr : tripStartLoad(b, L);
      if (auto *bi = dyn_cast<Instruction>(b); bi && !boundLoad && !DT.dominates(bi, preBr))
        continue;
      auto *aI = dyn_cast<Instruction>(a);
      SCEVExpander expander(SE, g->getModule()->getDataLayout(), "narrow");
      if (!aI || !L.contains(aI) || !DT.dominates(aI, latchBr) ||
          !expander.isSafeToExpandAt(ind->getStart(), preBr))
        continue;

      // Enter only when the first trip passes the guard.
      Value *first = expander.expandCodeFor(ind->getStart(), a->getType(), preBr);
      IRBuilder<> P(preBr);
      // A bound read per trip is read once before the loop for the first trip's test.
      Value *firstBound = boundLoad ? P.Insert(boundLoad->clone(), "narrow.bound") : b;
      Value *enter = P.CreateICmp(pred, first, firstBound, "narrow.enter");
      P.CreateCondBr(enter, L.getHeader(), exit);
      preBr->eraseFromParent();
      // Values the exit's phis take from the loop are defined before it (none of the loop's are
      // used after it): the same from the preheader.
      for (PHINode &phi : exit->phis())
        phi.addIncoming(phi.getIncomingValueForBlock(latch), pre);
      // Stay while the next trip passes it: A + 1 < B for a strict bound (A < B <= max: no
      // wrap), A < B for an inclusive one (A + 1 <= B without computing A + 1, which wraps
      // when A = B = max).
      IRBuilder<> T(latchBr);
      Value *stay = CmpInst::isStrictPredicate(pred)
                        ? T.CreateICmp(pred, T.CreateAdd(a, ConstantInt::get(a->getType(), 1)), b,
                                       "narrow.stay")
                        : T.CreateICmp(CmpInst::getStrictPredicate(pred), a, b, "narrow.stay");
      Value *cond = latchBr->getCondition();
      latchBr->setCondition(latchBr->getSuccessor(0) == L.getHeader()
                                ? T.CreateAnd(cond, stay)
                                : T.CreateOr(cond, T.CreateNot(stay)));
      // The trips left all pass the guard.
      skip->removePredecessor(g);
      BranchInst::Create(taken, br);
      br->eraseFromParent();
      if (cmp->use_empty())
        cmp->eraseFromParent();
      if (skip != latch && pred_empty(skip))
        DeleteDeadBlock(skip);
      markNarrowed(L);
      return true;
    }
  }
  return false;
}

} // namespace

bool narrowGuardedLoops(Function &F) {
  if (F.isDeclaration())
    return false;
  TargetLibraryInfoImpl tlii(Triple(F.getParent()->getTargetTriple()));
  TargetLibraryInfo tli(tlii, &F);
  AssumptionCache AC(F);
  bool changed = false;
  // Fresh analyses after each narrowed loop (its edges changed); a narrowed loop has no guard
  // left, so each round narrows another one or stops.
  for (bool again = true; again;) {
    again = false;
    DominatorTree DT(F);
    LoopInfo LI(DT);
    ScalarEvolution SE(F, tli, AC, DT, LI);
    for (Loop *L : LI.getLoopsInPreorder())
      if (narrow(*L, DT, SE)) {
        changed = again = true;
        break;
      }
  }
  return changed;
}

} // namespace manycl::compiler::detail
