// Work-group function generation: turns OpenCL kernels (single work-item
// functions) into entry points the executor calls per work-group.
//
//   __manycl_wg_K(void **args, WiCtx *ctx, x0, x1, r0, r1)
//       barrier-free kernels: loops r in [r0,r1) (y = r % ly, z = r / ly)
//       and x in [x0,x1); the inner loop is vectorizable across work-items.
//   __manycl_fiber_K(void **args, WiCtx *ctx, x, y, z)
//       kernels with barriers: one work-item; barrier() switches fibers.
#include "frontend.h"
#include "pass_managers.h"

#include <llvm/ADT/SmallPtrSet.h>
#include <llvm/Analysis/AssumptionCache.h>
#include <llvm/Analysis/LoopInfo.h>
#include <llvm/Analysis/PostDominators.h>
#include <llvm/Analysis/ScalarEvolution.h>
#include <llvm/Analysis/TargetLibraryInfo.h>
#include <llvm/Analysis/ValueTracking.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/IR/Constants.h>
#include <llvm/IR/DataLayout.h>
#include <llvm/IR/Dominators.h>
#include <llvm/IR/IRBuilder.h>
#include <llvm/IR/InstIterator.h>
#include <llvm/IR/Instructions.h>
#include <llvm/IR/IntrinsicInst.h>
#include <llvm/IR/LegacyPassManager.h>
#include <llvm/IR/MDBuilder.h>
#include <llvm/IR/ValueHandle.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Linker/Linker.h>
#include <llvm/MC/TargetRegistry.h>
#include <llvm/Passes/PassBuilder.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/TargetSelect.h>
#include <llvm/Target/TargetMachine.h>
#include <llvm/Target/TargetOptions.h>
#include <llvm/TargetParser/Host.h>
#include <llvm/TargetParser/Triple.h>
#include <llvm/Transforms/Scalar/LoopPassManager.h>
#include <llvm/Transforms/Scalar/LoopRotation.h>
#include <llvm/Transforms/Scalar/LoopUnrollPass.h>
#include <llvm/Transforms/Scalar/SROA.h>
#include <llvm/Transforms/Scalar/SimplifyCFG.h>
#include <llvm/Transforms/Utils/BasicBlockUtils.h>
#include <llvm/Transforms/Utils/Cloning.h>
#include <llvm/Transforms/Utils/Local.h>
#include <llvm/Transforms/Utils/LoopSimplify.h>
#include <llvm/Transforms/Utils/Mem2Reg.h>
#include <llvm/Transforms/Utils/ValueMapper.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <mutex>
#include <set>

extern "C" const char manycl_builtins_bc[];
extern "C" const char manycl_builtins_bc_end[];

namespace manycl::compiler::detail {

using namespace llvm;

void initLLVM() {
  static std::once_flag once;
  std::call_once(once, [] {
    InitializeNativeTarget();
    InitializeNativeTargetAsmPrinter();
    InitializeNativeTargetAsmParser();
  });
}

std::string hostCpu() {
  return sys::getHostCPUName().str();
}

std::string hostFeatures() {
  StringMap<bool> f;
  std::string s;
  if (sys::getHostCPUFeatures(f)) {
    for (auto &kv : f) {
      if (!s.empty())
        s += ',';
      s += (kv.second ? "+" : "-") + kv.first().str();
    }
  }
  return s;
}

// ---------------------------------------------------------------- metadata
static std::string mdString(MDNode *n, unsigned i) {
  if (!n || i >= n->getNumOperands())
    return {};
  if (auto *s = dyn_cast_or_null<MDString>(n->getOperand(i).get()))
    return s->getString().str();
  return {};
}
static int64_t mdInt(MDNode *n, unsigned i) {
  if (!n || i >= n->getNumOperands())
    return 0;
  if (auto *c = mdconst::dyn_extract_or_null<ConstantInt>(n->getOperand(i)))
    return c->getSExtValue();
  return 0;
}

static std::string typeName(Type *t, bool isSigned) {
  if (auto *vt = dyn_cast<FixedVectorType>(t))
    return typeName(vt->getElementType(), isSigned) + std::to_string(vt->getNumElements());
  if (t->isFloatTy())
    return "float";
  if (t->isDoubleTy())
    return "double";
  if (t->isHalfTy())
    return "half";
  if (t->isIntegerTy(8))
    return isSigned ? "char" : "uchar";
  if (t->isIntegerTy(16))
    return isSigned ? "short" : "ushort";
  if (t->isIntegerTy(32))
    return isSigned ? "int" : "uint";
  if (t->isIntegerTy(64))
    return isSigned ? "long" : "ulong";
  return "unknown";
}

static bool isKernel(const Function &F) {
  return !F.isDeclaration() && F.getMetadata("kernel_arg_addr_space") != nullptr;
}

std::vector<KernelInfo> extractKernels(Module &M) {
  std::vector<KernelInfo> out;
  const DataLayout &DL = M.getDataLayout();
  for (Function &F : M) {
    if (!isKernel(F))
      continue;
    KernelInfo k;
    k.name = F.getName().str();
    MDNode *as = F.getMetadata("kernel_arg_addr_space");
    MDNode *acc = F.getMetadata("kernel_arg_access_qual");
    MDNode *ty = F.getMetadata("kernel_arg_type");
    MDNode *tq = F.getMetadata("kernel_arg_type_qual");
    MDNode *nm = F.getMetadata("kernel_arg_name");
    for (unsigned i = 0; i < F.arg_size(); ++i) {
      KernelArgInfo a;
      Argument *arg = F.getArg(i);
      int64_t space = mdInt(as, i);
      a.address = space >= 0 && space <= 3 ? static_cast<AddressQual>(space) : AddressQual::Private;
      std::string accs = mdString(acc, i);
      a.access = accs == "read_only"    ? AccessQual::ReadOnly
                 : accs == "write_only" ? AccessQual::WriteOnly
                 : accs == "read_write" ? AccessQual::ReadWrite
                                        : AccessQual::None;
      a.type_name = mdString(ty, i);
      std::string q = mdString(tq, i);
      if (q.find("const") != std::string::npos)
        a.type_qual |= TypeQualConst;
      if (q.find("restrict") != std::string::npos)
        a.type_qual |= TypeQualRestrict;
      if (q.find("volatile") != std::string::npos)
        a.type_qual |= TypeQualVolatile;
      if (q.find("pipe") != std::string::npos)
        a.type_qual |= TypeQualPipe;
      a.name = mdString(nm, i);
      Type *t = arg->getType();
      if (a.address != AddressQual::Private || (t->isPointerTy() && !arg->hasByValAttr())) {
        a.is_pointer = true;
        a.size = 8;
        a.align = 8;
      } else if (arg->hasByValAttr()) {
        Type *bt = arg->getParamByValType();
        a.size = static_cast<uint32_t>(DL.getTypeAllocSize(bt));
        a.align = static_cast<uint32_t>(DL.getABITypeAlign(bt).value());
      } else {
        a.size = static_cast<uint32_t>(DL.getTypeAllocSize(t));
        a.align = static_cast<uint32_t>(DL.getABITypeAlign(t).value());
      }
      k.args.push_back(std::move(a));
    }
    std::string attrs;
    if (MDNode *r = F.getMetadata("reqd_work_group_size")) {
      for (int d = 0; d < 3; ++d)
        k.reqd_work_group_size[d] = static_cast<uint32_t>(mdInt(r, d));
      attrs += "reqd_work_group_size(" + std::to_string(k.reqd_work_group_size[0]) + "," +
               std::to_string(k.reqd_work_group_size[1]) + "," +
               std::to_string(k.reqd_work_group_size[2]) + ")";
    }
    if (MDNode *h = F.getMetadata("work_group_size_hint")) {
      for (int d = 0; d < 3; ++d)
        k.work_group_size_hint[d] = static_cast<uint32_t>(mdInt(h, d));
      if (!attrs.empty())
        attrs += ' ';
      attrs += "work_group_size_hint(" + std::to_string(k.work_group_size_hint[0]) + "," +
               std::to_string(k.work_group_size_hint[1]) + "," +
               std::to_string(k.work_group_size_hint[2]) + ")";
    }
    if (MDNode *v = F.getMetadata("vec_type_hint")) {
      if (v->getNumOperands() >= 1) {
        if (auto *c = mdconst::dyn_extract_or_null<Constant>(v->getOperand(0))) {
          k.vec_type_hint = typeName(c->getType(), mdInt(v, 1) != 0);
          if (!attrs.empty())
            attrs += ' ';
          attrs += "vec_type_hint(" + k.vec_type_hint + ")";
        }
      }
    }
    k.attributes = attrs;
    out.push_back(std::move(k));
  }
  return out;
}

// ---------------------------------------------------------------- helpers
std::unique_ptr<TargetMachine> makeTargetMachine(const std::string &cpu, const std::string &features,
                                             CodeGenOpt::Level lvl) {
  initLLVM();
  std::string triple = sys::getProcessTriple();
  std::string err;
  const Target *T = TargetRegistry::lookupTarget(triple, err);
  if (!T)
    return nullptr;
  TargetOptions opts;
  return std::unique_ptr<TargetMachine>(
      T->createTargetMachine(triple, cpu, features, opts, Reloc::PIC_, std::nullopt, lvl));
}

// The optimizer's target: with cost instrumentation, the fixed kCostedIrCpu (its own feature
// set), so that the vectorizer's widths and every other target-dependent decision, and with
// them the costed IR, are the same on every host; without it, the host, for the best code.
struct OptimizationTarget {
  std::string cpu, features;
};
static OptimizationTarget optimizationTarget() {
  if (costInstrumentation())
    return {kCostedIrCpu, ""};
  return {hostCpu(), hostFeatures()};
}

static void setTarget(Function &F, const OptimizationTarget &target) {
  F.removeFnAttr("target-cpu");
  F.removeFnAttr("target-features");
  F.removeFnAttr("tune-cpu");
  if (F.isDeclaration())
    return;
  F.addFnAttr("target-cpu", target.cpu);
  if (!target.features.empty())
    F.addFnAttr("target-features", target.features);
}

// Functions optimized for kCostedIrCpu may use features the host lacks: code generation must
// see the host's (16-wide vectors of an AVX-512 reference become two AVX2 registers).
static void retargetToHost(Module &M) {
  const OptimizationTarget host{hostCpu(), hostFeatures()};
  for (Function &F : M)
    setTarget(F, host);
}

/// Replaces constant-expression users of `G` by instructions so that every
/// use of G is an instruction operand.
// Rewrites every constant expression that uses G (transitively) as instructions at its uses, so
// that G's uses inside functions can be replaced per function. Users are looked up afresh after
// each expansion: one constant expression may use G through several operands (e.g. `&d.a - &d`
// with `a` at offset 0 is `sub (ptrtoint G), (ptrtoint G)`), and expanding one user may destroy
// another, so a list taken up front could name a destroyed constant.
static void expandConstantUsers(Constant *G) {
  SmallPtrSet<ConstantExpr *, 8> kept; // users that also serve non-instruction users
  for (;;) {
    ConstantExpr *ce = nullptr;
    for (User *U : G->users())
      if (auto *c = dyn_cast<ConstantExpr>(U); c && !kept.contains(c)) {
        ce = c;
        break;
      }
    if (!ce)
      return;
    expandConstantUsers(ce);
    SmallVector<Use *, 8> uses;
    for (Use &u : ce->uses())
      if (isa<Instruction>(u.getUser()))
        uses.push_back(&u);
    for (Use *u : uses) {
      auto *I = cast<Instruction>(u->getUser());
      Instruction *ni = ce->getAsInstruction();
      if (auto *phi = dyn_cast<PHINode>(I))
        ni->insertBefore(phi->getIncomingBlock(*u)->getTerminator());
      else
        ni->insertBefore(I);
      u->set(ni);
    }
    if (ce->use_empty())
      ce->destroyConstant();
    else
      kept.insert(ce);
  }
}

static LoadInst *loadSlot(IRBuilder<> &B, Value *ctx, Value *index) {
  Value *p = B.CreateInBoundsGEP(B.getInt64Ty(), ctx, index);
  LoadInst *l = B.CreateLoad(B.getInt64Ty(), p);
  l->setMetadata(LLVMContext::MD_invariant_load, MDNode::get(B.getContext(), {}));
  return l;
}

/// ctx[base + min(dim,3)]
static Value *loadDim(IRBuilder<> &B, Value *ctx, unsigned base, Value *dim) {
  Value *d = B.CreateZExtOrTrunc(dim, B.getInt64Ty());
  if (auto *c = dyn_cast<ConstantInt>(d)) {
    uint64_t v = std::min<uint64_t>(c->getZExtValue(), 3);
    return loadSlot(B, ctx, B.getInt64(base + v));
  }
  Value *cl = B.CreateSelect(B.CreateICmpULT(d, B.getInt64(3)), d, B.getInt64(3));
  return loadSlot(B, ctx, B.CreateAdd(cl, B.getInt64(base)));
}

struct WiArgs {
  Value *ctx, *x, *y, *z;
};

static Value *localId(IRBuilder<> &B, const WiArgs &w, Value *dim) {
  Value *d = B.CreateZExtOrTrunc(dim, B.getInt64Ty());
  if (auto *c = dyn_cast<ConstantInt>(d)) {
    switch (c->getZExtValue()) {
    case 0:
      return w.x;
    case 1:
      return w.y;
    case 2:
      return w.z;
    default:
      return B.getInt64(0);
    }
  }
  Value *r = B.CreateSelect(B.CreateICmpEQ(d, B.getInt64(2)), w.z, B.getInt64(0));
  r = B.CreateSelect(B.CreateICmpEQ(d, B.getInt64(1)), w.y, r);
  return B.CreateSelect(B.CreateICmpEQ(d, B.getInt64(0)), w.x, r);
}

static Value *globalId(IRBuilder<> &B, const WiArgs &w, Value *dim) {
  // The group's first global id (computed per group by the launch) plus the local id, without
  // wrapping: the launch keeps offset + global size below 2^64 (Launch::prepare). One add of
  // a loaded value and the id, which reassociation leaves alone (its no-wrap flag survives), lets
  // narrowGuardedLoops stop a work-item loop at a bounds check on the global id.
  return B.CreateAdd(loadDim(B, w.ctx, SlotGroupBase, dim), localId(B, w, dim), "gid", true);
}

/// Replaces work-item function calls, barriers and __manycl_wctx() inside
/// a work-item function. Returns true if it contains barriers.
static bool lowerWorkItemCalls(Function &F, const WiArgs &w, FunctionCallee barrierFn) {
  bool barriers = false;
  std::vector<CallInst *> calls;
  for (Instruction &I : instructions(F))
    if (auto *ci = dyn_cast<CallInst>(&I))
      if (Function *cf = ci->getCalledFunction(); cf && cf->isDeclaration())
        calls.push_back(ci);
  for (CallInst *ci : calls) {
    StringRef n = ci->getCalledFunction()->getName();
    IRBuilder<> B(ci);
    Value *r = nullptr;
    auto arg0 = [&]() { return ci->getArgOperand(0); };
    if (n == "_Z12get_local_idj")
      r = localId(B, w, arg0());
    else if (n == "_Z13get_global_idj")
      r = globalId(B, w, arg0());
    else if (n == "_Z14get_local_sizej")
      r = loadDim(B, w.ctx, SlotLocalSize, arg0());
    else if (n == "_Z23get_enqueued_local_sizej")
      r = loadDim(B, w.ctx, SlotEnqLocalSize, arg0());
    else if (n == "_Z15get_global_sizej")
      r = loadDim(B, w.ctx, SlotGlobalSize, arg0());
    else if (n == "_Z14get_num_groupsj")
      r = loadDim(B, w.ctx, SlotNumGroups, arg0());
    else if (n == "_Z12get_group_idj")
      r = loadDim(B, w.ctx, SlotGroupId, arg0());
    else if (n == "_Z17get_global_offsetj")
      r = loadDim(B, w.ctx, SlotGlobalOffset, arg0());
    else if (n == "_Z12get_work_dimv")
      r = B.CreateTrunc(loadSlot(B, w.ctx, B.getInt64(SlotWorkDim)), B.getInt32Ty());
    else if (n == "_Z19get_local_linear_idv") {
      Value *l0 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize));
      Value *l1 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize + 1));
      r = B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(w.z, l1), w.y), l0), w.x);
    } else if (n == "_Z20get_global_linear_idv") {
      Value *g[3];
      for (unsigned d = 0; d < 3; ++d)
        g[d] = B.CreateSub(globalId(B, w, B.getInt32(d)),
                           loadSlot(B, w.ctx, B.getInt64(SlotGlobalOffset + d)));
      Value *s0 = loadSlot(B, w.ctx, B.getInt64(SlotGlobalSize));
      Value *s1 = loadSlot(B, w.ctx, B.getInt64(SlotGlobalSize + 1));
      r = B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(g[2], s1), g[1]), s0), g[0]);
    } else if (n == "__manycl_wctx") {
      r = w.ctx;
    } else if (n == "__manycl_local_linear_id") {
      Value *l0 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize));
      Value *l1 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize + 1));
      r = B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(w.z, l1), w.y), l0), w.x);
    } else if (n == "_Z7barrierj" || n.startswith("_Z18work_group_barrierj")) {
      B.CreateCall(barrierFn, {w.ctx});
      barriers = true;
      ci->eraseFromParent();
      continue;
    } else {
      continue;
    }
    if (r->getType() != ci->getType())
      r = B.CreateZExtOrTrunc(r, ci->getType());
    ci->replaceAllUsesWith(r);
    ci->eraseFromParent();
  }
  return barriers;
}

// Inlines every call of a defined function into F, and the calls that brings in, in one pass
// over a worklist (the call sites InlineFunction reports), so the cost is linear in the code
// inlined. Scanning F from the top for the next call after each inlining was quadratic: on
// hashcat's SHA2-256 program (six kernels, thousands of helper calls each) it took seconds.
// Each call site carries the chain of functions inlined to reach it: a callee already in the
// chain is recursion, which OpenCL C forbids.
static Status inlineAll(Function &F) {
  struct Site {
    WeakTrackingVH call;
    int history; // index into `chain`, -1 for F's own calls
  };
  std::vector<std::pair<Function *, int>> chain; // (function inlined, its parent's entry)
  std::vector<Site> work;
  for (Instruction &I : instructions(F))
    if (auto *cb = dyn_cast<CallBase>(&I))
      work.push_back({cb, -1});
  constexpr size_t kMaxInlined = 2'000'000;
  size_t inlined = 0;
  // Depth first in program order: the worklist is a stack, pushed in reverse.
  std::reverse(work.begin(), work.end());
  while (!work.empty()) {
    Site site = work.back();
    work.pop_back();
    auto *cb = dyn_cast_or_null<CallBase>(site.call);
    if (!cb)
      continue;
    Function *cf = cb->getCalledFunction();
    if (!cf || cf->isDeclaration() || cf->isIntrinsic())
      continue;
    if (cf == &F)
      return Status::error(ErrorCode::BuildFailure, "recursion is not supported in OpenCL C");
    for (int h = site.history; h >= 0; h = chain[h].second)
      if (chain[h].first == cf)
        return Status::error(ErrorCode::BuildFailure, "recursion is not supported in OpenCL C");
    if (++inlined > kMaxInlined)
      return Status::error(ErrorCode::BuildFailure, "call graph too large to inline");
    InlineFunctionInfo ifi;
    InlineResult r = InlineFunction(*cb, ifi);
    if (!r.isSuccess())
      return Status::error(ErrorCode::BuildFailure,
                           std::string("cannot inline call: ") + r.getFailureReason());
    chain.emplace_back(cf, site.history);
    const int me = static_cast<int>(chain.size()) - 1;
    for (auto it = ifi.InlinedCallSites.rbegin(); it != ifi.InlinedCallSites.rend(); ++it)
      work.push_back({*it, me});
  }
  return Status::success();
}

static uint64_t allocaBytes(Function &F) {
  const DataLayout &DL = F.getParent()->getDataLayout();
  uint64_t total = 0;
  for (Instruction &I : instructions(F))
    if (auto *a = dyn_cast<AllocaInst>(&I))
      if (auto sz = a->getAllocationSizeInBits(DL))
        total += (*sz + 7) / 8;
  return total;
}

static std::vector<Value *> unpackArgs(IRBuilder<> &B, Value *argv, Function *wi,
                                       const KernelInfo &k) {
  std::vector<Value *> vals;
  for (unsigned i = 0; i < k.args.size(); ++i) {
    Argument *p = wi->getArg(i);
    Value *slotp = B.CreateInBoundsGEP(B.getPtrTy(), argv, B.getInt64(i));
    LoadInst *slot = B.CreateLoad(B.getPtrTy(), slotp);
    slot->setMetadata(LLVMContext::MD_invariant_load, MDNode::get(B.getContext(), {}));
    if (k.args[i].is_pointer || p->hasByValAttr()) {
      vals.push_back(slot);
    } else {
      vals.push_back(B.CreateAlignedLoad(p->getType(), slot, Align(1)));
    }
  }
  return vals;
}

/// Marks a work-item loop parallel: every simple load/store of the loop body
/// (blocks reachable from `head` before `exit`) whose memory is not a
/// private alloca joins one access group listed on the latch branch.
static void markParallel(LLVMContext &C, BasicBlock *head, BasicBlock *exit, BranchInst *latch) {
  MDNode *ag = MDNode::getDistinct(C, {});
  SmallPtrSet<BasicBlock *, 32> body;
  std::vector<BasicBlock *> work{head};
  body.insert(head);
  while (!work.empty()) {
    BasicBlock *b = work.back();
    work.pop_back();
    for (BasicBlock *sb : successors(b))
      if (sb != exit && body.insert(sb).second)
        work.push_back(sb);
  }
  bool any = false;
  for (BasicBlock *b : body)
    for (Instruction &I : *b) {
      Value *ptrOp = nullptr;
      if (auto *ld = dyn_cast<LoadInst>(&I); ld && ld->isSimple())
        ptrOp = ld->getPointerOperand();
      else if (auto *st = dyn_cast<StoreInst>(&I); st && st->isSimple())
        ptrOp = st->getPointerOperand();
      if (!ptrOp || isa<AllocaInst>(getUnderlyingObject(ptrOp, 12)))
        continue;
      I.setMetadata(LLVMContext::MD_access_group, ag);
      any = true;
    }
  if (!any)
    return;
  MDNode *par = MDNode::get(C, {MDString::get(C, "llvm.loop.parallel_accesses"), ag});
  MDNode *loopId = MDNode::getDistinct(C, {nullptr, par});
  loopId->replaceOperandWith(0, loopId);
  latch->setMetadata(LLVMContext::MD_loop, loopId);
}

// ------------------------------------------------------------- uniformity
// Which values of a work-item function (clean SSA, before the work-group loops exist) may
// differ between the work-items of a group ("varying"); the others are work-group uniform.
// Sources of variation: the item's ids x, y, z, private memory (allocas: one copy per item) and
// memory reads (memory may differ per item, or have been written by one; invariant context and
// argument loads excepted). Variation flows along data dependences and along control: after a
// branch on a varying condition, the phis where its paths join (up to its immediate
// post-dominator) are varying, and so is every value of a loop that such a branch leaves
// (items leave it at different trips). Phis are otherwise optimistic: a loop counter fed by
// uniform values is uniform.
class ItemUniformity {
public:
  ItemUniformity(Function &F, std::initializer_list<const Value *> ids) {
    DominatorTree DT(F);
    PostDominatorTree PDT(F);
    LoopInfo LI(DT);
    for (const Value *v : ids)
      mark(v);
    for (Instruction &I : instructions(F)) {
      if (auto *ld = dyn_cast<LoadInst>(&I); ld && ld->getMetadata(LLVMContext::MD_invariant_load))
        continue;
      if (isa<AllocaInst>(I) || I.mayReadFromMemory())
        mark(&I);
    }
    SmallPtrSet<const Instruction *, 16> done; // varying branches already followed
    for (;;) {
      while (!work_.empty()) {
        const Value *v = work_.back();
        work_.pop_back();
        for (const User *U : v->users())
          if (isa<Instruction>(U))
            mark(U);
      }
      bool more = false;
      for (BasicBlock &BB : F) {
        Instruction *T = BB.getTerminator();
        if (!isVaryingBranch(*T) || !done.insert(T).second)
          continue;
        more = true;
        uniformControl_ = false;
        BasicBlock *join = nullptr;
        if (DomTreeNode *n = PDT.getNode(&BB); n && n->getIDom())
          join = n->getIDom()->getBlock();
        SmallPtrSet<BasicBlock *, 16> seen;
        std::vector<BasicBlock *> stack(succ_begin(&BB), succ_end(&BB));
        while (!stack.empty()) {
          BasicBlock *b = stack.back();
          stack.pop_back();
          if (!seen.insert(b).second)
            continue;
          for (PHINode &phi : b->phis())
            mark(&phi);
          if (b != join) {
            divergent_.insert(b);
            for (BasicBlock *sb : successors(b))
              stack.push_back(sb);
          }
        }
        for (Loop *L = LI.getLoopFor(&BB); L; L = L->getParentLoop())
          if (L->isLoopExiting(&BB))
            for (BasicBlock *b : L->blocks()) {
              divergent_.insert(b);
              for (Instruction &I : *b)
                mark(&I);
            }
      }
      if (!more)
        break;
    }
  }
  bool varying(const Value *v) const { return varying_.contains(v); }
  // Every branch depends only on uniform values: all work-items take the same path.
  bool uniformControl() const { return uniformControl_; }
  // Some work-items may run this block and others not (it depends on a varying branch, or is
  // in a loop that a varying branch leaves).
  bool divergent(const BasicBlock *b) const { return divergent_.contains(b); }

private:
  void mark(const Value *v) {
    if (varying_.insert(v).second)
      work_.push_back(v);
  }
  bool isVaryingBranch(const Instruction &T) const {
    if (auto *br = dyn_cast<BranchInst>(&T); br && br->isConditional())
      return varying(br->getCondition());
    if (auto *sw = dyn_cast<SwitchInst>(&T))
      return varying(sw->getCondition());
    return isa<IndirectBrInst>(T) || isa<CallBrInst>(T) || isa<InvokeInst>(T);
  }
  SmallPtrSet<const Value *, 32> varying_;
  SmallPtrSet<const BasicBlock *, 16> divergent_;
  std::vector<const Value *> work_;
  bool uniformControl_ = true;
};

// ----------------------------------------------------------------- regions
// Barrier kernels as barrier-free regions ("continuation-based"): the
// single work-item function is cut at every barrier; each piece (a
// sub-CFG from the function entry or from a barrier to the next barriers or
// the return) becomes a loop over the work-items. Values live across a
// barrier, and remaining allocas, move to per-work-item context arrays
// (struct of arrays in a frame the executor provides through SlotFrame).
static bool isBarrierCall(const Instruction &I) {
  if (auto *ci = dyn_cast<CallInst>(&I))
    if (Function *f = ci->getCalledFunction())
      return f->getName() == "__manycl_barrier";
  return false;
}

/// Metadata kind on the barriers that addLoopBarriers adds (not from the source).
static constexpr const char *kLoopBarrierMd = "manycl.loop.barrier";

static bool isLoopBarrier(const Instruction &I) {
  return I.getMetadata(kLoopBarrierMd) != nullptr;
}

static Value *linearId(IRBuilder<> &B, const WiArgs &w) {
  Value *l0 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize));
  Value *l1 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize + 1));
  return B.CreateAdd(B.CreateMul(B.CreateAdd(B.CreateMul(w.z, l1), w.y), l0), w.x);
}

static Value *groupItems(IRBuilder<> &B, const WiArgs &w) {
  Value *l0 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize));
  Value *l1 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize + 1));
  Value *l2 = loadSlot(B, w.ctx, B.getInt64(SlotLocalSize + 2));
  return B.CreateMul(B.CreateMul(l0, l1), l2);
}

/// A value that can be recomputed anywhere from the work-item function's
/// arguments (kernel args, ctx, x, y, z), constants and invariant context
/// loads: recomputed in each region instead of being stored per work-item.
static bool recomputable(Value *v, int &budget) {
  if (isa<Constant>(v) || isa<Argument>(v))
    return true;
  auto *I = dyn_cast<Instruction>(v);
  if (!I || --budget < 0)
    return false;
  if (auto *L = dyn_cast<LoadInst>(I)) {
    if (!L->getMetadata(LLVMContext::MD_invariant_load))
      return false;
  } else if (!(isa<BinaryOperator>(I) || isa<CastInst>(I) || isa<GetElementPtrInst>(I) ||
               isa<CmpInst>(I) || isa<SelectInst>(I))) {
    return false;
  }
  for (Value *op : I->operands())
    if (!recomputable(op, budget))
      return false;
  return true;
}

static Value *rematerialize(Value *v, Instruction *before, DenseMap<Value *, Value *> &memo) {
  auto *I = dyn_cast<Instruction>(v);
  if (!I)
    return v;
  if (auto it = memo.find(v); it != memo.end())
    return it->second;
  Instruction *c = I->clone();
  for (unsigned i = 0; i < c->getNumOperands(); ++i)
    c->setOperand(i, rematerialize(c->getOperand(i), before, memo));
  c->insertBefore(before);
  memo[v] = c;
  return c;
}

/// Builds __manycl_region_K from the work-item function. Returns false (and
/// leaves the module unchanged apart from `wi`) when the shape is not
/// supported; the caller then falls back to fibers.
static bool buildRegions(Module &M, Function *wi, const KernelInfo &k, uint64_t &frameSize,
                         uint64_t &uniformSize, uint32_t &sourceBarriers, std::string &why,
                         bool loopBarriers = false) {
  LLVMContext &C = M.getContext();
  const DataLayout &DL = M.getDataLayout();
  const unsigned nargs = static_cast<unsigned>(k.args.size());
  WiArgs w{wi->getArg(nargs), wi->getArg(nargs + 1), wi->getArg(nargs + 2), wi->getArg(nargs + 3)};

  // 1. Each barrier alone in its block, followed by a fresh block.
  std::vector<CallInst *> barriers;
  for (Instruction &I : instructions(*wi))
    if (isBarrierCall(I))
      barriers.push_back(cast<CallInst>(&I));
  if (barriers.empty()) {
    why = "no barriers";
    return false;
  }
  // The source's barriers first: they get region ids 1..sourceBarriers, the loop barriers the
  // ids above (KernelInfo::source_barriers tells the executor which are PE barriers).
  std::stable_partition(barriers.begin(), barriers.end(),
                        [](CallInst *b) { return !isLoopBarrier(*b); });
  sourceBarriers = static_cast<uint32_t>(std::count_if(
      barriers.begin(), barriers.end(), [](CallInst *b) { return !isLoopBarrier(*b); }));
  std::vector<BasicBlock *> barrierBlocks;
  for (CallInst *b : barriers) {
    BasicBlock *bb = b->getParent();
    BasicBlock *bar = bb->splitBasicBlock(b, "barrier");
    bar->splitBasicBlock(b->getNextNode(), "after.barrier");
    barrierBlocks.push_back(bar);
  }
  SmallPtrSet<BasicBlock *, 16> isBarrier(barrierBlocks.begin(), barrierBlocks.end());
  // Region entries: function entry, then the successor of each barrier.
  std::vector<BasicBlock *> entries{&wi->getEntryBlock()};
  std::map<BasicBlock *, int> barrierTarget; // barrier block -> region id
  for (BasicBlock *bb : barrierBlocks) {
    barrierTarget[bb] = static_cast<int>(entries.size());
    entries.push_back(bb->getSingleSuccessor());
  }
  // Region membership.
  std::vector<std::vector<BasicBlock *>> regions(entries.size());
  for (size_t r = 0; r < entries.size(); ++r) {
    SmallPtrSet<BasicBlock *, 32> seen;
    std::vector<BasicBlock *> work{entries[r]};
    seen.insert(entries[r]);
    while (!work.empty()) {
      BasicBlock *b = work.back();
      work.pop_back();
      regions[r].push_back(b);
      for (BasicBlock *s : successors(b))
        if (!isBarrier.count(s) && seen.insert(s).second)
          work.push_back(s);
    }
  }

  // 2. Values live across a barrier -> demoted to allocas (until none is
  // left: demoting a phi creates a load that may itself cross a barrier). Work-group uniform
  // values get allocas that become one slot per group (step 3), not per-work-item arrays.
  Instruction *allocaPt = &*wi->getEntryBlock().getFirstInsertionPt();
  const ItemUniformity uni(*wi, {w.x, w.y, w.z});
  SmallPtrSet<const Instruction *, 32> analysed; // what `uni` knows
  for (Instruction &I : instructions(*wi))
    analysed.insert(&I);
  SmallPtrSet<AllocaInst *, 8> uniformAllocas;
  auto isUniform = [&](Instruction *I) {
    if (analysed.contains(I))
      return !uni.varying(I);
    // A load made by an earlier demotion reads what its alloca holds.
    if (auto *ld = dyn_cast<LoadInst>(I))
      if (auto *a = dyn_cast<AllocaInst>(ld->getPointerOperand()))
        return uniformAllocas.contains(a);
    return false;
  };
  for (int iter = 0;; ++iter) {
    std::vector<Instruction *> demote;
    for (BasicBlock &BB : *wi) {
      for (Instruction &I : BB) {
        if (I.getType()->isVoidTy() || isa<AllocaInst>(I))
          continue;
        bool live = false;
        for (Use &U : I.uses()) {
          auto *user = cast<Instruction>(U.getUser());
          BasicBlock *start = user->getParent();
          if (auto *phi = dyn_cast<PHINode>(user))
            start = phi->getIncomingBlock(U);
          else if (start == &BB)
            continue;
          if (start == &BB)
            continue; // phi use at the end of the defining block
          SmallPtrSet<BasicBlock *, 32> seen;
          std::vector<BasicBlock *> work{start};
          seen.insert(start);
          while (!work.empty() && !live) {
            BasicBlock *b = work.back();
            work.pop_back();
            if (isBarrier.count(b)) {
              live = true;
              break;
            }
            for (BasicBlock *p : predecessors(b))
              if (p != &BB && seen.insert(p).second)
                work.push_back(p);
          }
          if (live)
            break;
        }
        if (live)
          demote.push_back(&I);
      }
    }
    if (demote.empty())
      break;
    if (iter > 20) {
      why = "cannot demote values live across barriers";
      return false;
    }
    for (Instruction *I : demote) {
      int budget = 24;
      if (!isa<PHINode>(I) && recomputable(I, budget)) {
        std::vector<Use *> uses;
        for (Use &U : I->uses())
          uses.push_back(&U);
        for (Use *U : uses) {
          auto *user = cast<Instruction>(U->getUser());
          Instruction *at = user;
          if (auto *phi = dyn_cast<PHINode>(user))
            at = phi->getIncomingBlock(*U)->getTerminator();
          else if (user->getParent() == I->getParent())
            continue;
          DenseMap<Value *, Value *> memo;
          U->set(rematerialize(I, at, memo));
        }
        continue;
      }
      const bool uniform = isUniform(I) && I->getType()->isFirstClassType() &&
                           !I->getType()->isAggregateType() &&
                           DL.getTypeStoreSize(I->getType()).getFixedValue() <= 16;
      AllocaInst *a = nullptr;
      if (auto *phi = dyn_cast<PHINode>(I))
        a = DemotePHIToStack(phi, allocaPt);
      else
        a = DemoteRegToStack(*I, false, allocaPt);
      if (uniform && a)
        uniformAllocas.insert(a);
    }
  }

  // 3. All allocas -> context arrays: frame + L*offset + lin*size. Uniform ones -> one slot
  // per group below the frame, twice (double buffered: a region reads the copy of its barrier
  // interval's parity and writes the other, so host threads running slices of the same region
  // never write what another still reads).
  std::vector<AllocaInst *> allocas;
  struct UniformSlot {
    AllocaInst *alloca;
    uint64_t offset, size; // offset from the start of the uniform area; size of one copy
  };
  std::vector<UniformSlot> uniforms;
  uint64_t uoff = 0;
  for (Instruction &I : instructions(*wi))
    if (auto *a = dyn_cast<AllocaInst>(&I)) {
      if (uniformAllocas.contains(a)) {
        uint64_t size = (DL.getTypeStoreSize(a->getAllocatedType()).getFixedValue() + 7) / 8 * 8;
        uoff = (uoff + size - 1) / size * size;
        uniforms.push_back({a, uoff, size});
        uoff += 2 * size;
      } else {
        allocas.push_back(a);
      }
    }
  uniformSize = (uoff + 63) / 64 * 64;
  uint64_t off = 0;
  Type *i64 = Type::getInt64Ty(C);
  // Loop-barrier kernels (addLoopBarriers): each context array is its own alias scope. The
  // arrays are disjoint, but their addresses (frame + L*offset + lin*size, L known only at run
  // time) do not show it, so without the scopes a store to one value's array keeps the loads
  // of every other from being forwarded or moved (vector-typed values then go through memory
  // element by element). The domain's name also tells the cost instrumentation that these
  // accesses exist only on the host (kLoopFrameDomain). Kernels with barriers of their own get
  // scopes too (domain kFrameDomain: the cost instrumentation charges their accesses as private
  // memory): CLBlast's Xgemm keeps its tiles of A and B and its accumulators in private arrays
  // across its barriers, and without the scopes every multiply-add of its inner loop went
  // through a store and a reload of the accumulator (3 to 4 GFLOP/s against PoCL's 11 to 23).
  MDBuilder mdb(C);
  std::vector<MDNode *> scopes;
  if (allocas.size() <= 64) {
    MDNode *domain =
        mdb.createAnonymousAliasScopeDomain(loopBarriers ? kLoopFrameDomain : kFrameDomain);
    for (size_t i = 0; i < allocas.size(); ++i)
      scopes.push_back(mdb.createAnonymousAliasScope(domain));
  }
  // Accesses through the kernel's buffer arguments and its kernel-scope __local variables never
  // reach the frame, which only the executor knows: they are outside every array's scope. In
  // CLBlast's Xgemm the `k` loop reads the __local tiles between the accumulators' updates;
  // without this the accumulators (in registers) were still stored to the frame at every trip,
  // since any tile load might have read them back.
  if (!scopes.empty()) {
    MDNode *allScopes = MDNode::get(C, SmallVector<Metadata *, 16>(scopes.begin(), scopes.end()));
    auto outsideFrame = [&](const Value *obj) {
      if (auto *arg = dyn_cast<Argument>(obj))
        return arg->getParent() == wi && arg->getArgNo() < nargs;
      auto *ip = dyn_cast<IntToPtrInst>(obj);
      auto *ld = ip ? dyn_cast<LoadInst>(ip->getOperand(0)) : nullptr;
      auto *slot = ld ? dyn_cast<GetElementPtrInst>(ld->getPointerOperand()) : nullptr;
      auto *idx = slot && slot->getPointerOperand() == w.ctx && slot->getNumIndices() == 1
                      ? dyn_cast<ConstantInt>(slot->getOperand(1))
                      : nullptr;
      return idx && idx->getZExtValue() == SlotLocalStatic;
    };
    for (Instruction &I : instructions(*wi)) {
      Value *ptrOp = nullptr;
      if (auto *ld = dyn_cast<LoadInst>(&I))
        ptrOp = ld->getPointerOperand();
      else if (auto *st = dyn_cast<StoreInst>(&I))
        ptrOp = st->getPointerOperand();
      if (!ptrOp)
        continue;
      SmallVector<const Value *, 4> objs;
      getUnderlyingObjects(ptrOp, objs, nullptr, 16);
      if (objs.empty() || !all_of(objs, outsideFrame))
        continue;
      I.setMetadata(LLVMContext::MD_noalias,
                    MDNode::concatenate(I.getMetadata(LLVMContext::MD_noalias), allScopes));
    }
  }
  for (size_t ai = 0; ai < allocas.size(); ++ai) {
    AllocaInst *a = allocas[ai];
    MDNode *scope = nullptr, *others = nullptr;
    if (!scopes.empty()) {
      scope = MDNode::get(C, {scopes[ai]});
      SmallVector<Metadata *, 16> rest;
      for (size_t j = 0; j < scopes.size(); ++j)
        if (j != ai)
          rest.push_back(scopes[j]);
      others = MDNode::get(C, rest);
    }
    auto bits = a->getAllocationSizeInBits(DL);
    if (!bits) {
      why = "dynamic alloca";
      return false;
    }
    uint64_t size = std::max<uint64_t>(1, (*bits + 7) / 8);
    // Natural sizes stay dense (unit stride across work-items: vectorizable).
    uint64_t slot = (size == 1 || size == 2 || size == 4 || size == 8 || size == 16)
                        ? size
                        : (size + 7) / 8 * 8;
    uint64_t al = std::min<uint64_t>(slot, 16);
    off = (off + al - 1) / al * al;
    uint64_t myOff = off;
    off += slot;
    // Loads and stores of the array through element addresses (GEPs, casts) get the array's
    // scope too: private arrays (CLBlast's accumulators) are reached through GEPs only.
    if (scope) {
      std::vector<Instruction *> work;
      for (User *u : a->users())
        if (isa<GetElementPtrInst>(u) || isa<CastInst>(u))
          work.push_back(cast<Instruction>(u));
      SmallPtrSet<Instruction *, 32> seen;
      while (!work.empty()) {
        Instruction *addr = work.back();
        work.pop_back();
        if (!seen.insert(addr).second)
          continue;
        for (Use &u : addr->uses()) {
          auto *user = cast<Instruction>(u.getUser());
          if (isa<GetElementPtrInst>(user) || isa<CastInst>(user))
            work.push_back(user);
          else if (isa<LoadInst>(user) || (isa<StoreInst>(user) && u.getOperandNo() == 1)) {
            user->setMetadata(LLVMContext::MD_alias_scope, scope);
            user->setMetadata(LLVMContext::MD_noalias, others);
          }
        }
      }
    }
    std::vector<Use *> uses;
    for (Use &u : a->uses())
      uses.push_back(&u);
    for (Use *u : uses) {
      auto *user = cast<Instruction>(u->getUser());
      if (auto *ii = dyn_cast<IntrinsicInst>(user))
        if (ii->isLifetimeStartOrEnd()) {
          ii->eraseFromParent();
          continue;
        }
      Instruction *ip = user;
      if (auto *phi = dyn_cast<PHINode>(user))
        ip = phi->getIncomingBlock(*u)->getTerminator();
      IRBuilder<> B(ip);
      Value *frame = B.CreateIntToPtr(loadSlot(B, w.ctx, B.getInt64(SlotFrame)), B.getPtrTy());
      Value *L = groupItems(B, w);
      Value *lin = linearId(B, w);
      Value *byteOff = B.CreateAdd(B.CreateMul(L, ConstantInt::get(i64, myOff)),
                                   B.CreateMul(lin, ConstantInt::get(i64, slot)));
      u->set(B.CreateInBoundsGEP(B.getInt8Ty(), frame, byteOff));
      if (scope && (isa<LoadInst>(user) || (isa<StoreInst>(user) && u->getOperandNo() == 1))) {
        user->setMetadata(LLVMContext::MD_alias_scope, scope);
        user->setMetadata(LLVMContext::MD_noalias, others);
      }
    }
    if (a->use_empty())
      a->eraseFromParent();
  }
  frameSize = (off + 15) / 16 * 16;

  // 4. The region function.
  PointerType *ptr = PointerType::get(C, 0);
  Type *i32 = Type::getInt32Ty(C);
  auto *ft = FunctionType::get(i32, {ptr, ptr, i32, i64, i64, i64, i64}, false);
  Function *rf = Function::Create(ft, GlobalValue::ExternalLinkage, regionName(k.name), &M);
  rf->addFnAttr(Attribute::NoUnwind);
  for (const char *a : {"target-cpu", "target-features"})
    if (wi->hasFnAttribute(a))
      rf->addFnAttr(wi->getFnAttribute(a));
  Argument *argv = rf->getArg(0), *ctx = rf->getArg(1), *rid = rf->getArg(2), *x0 = rf->getArg(3),
           *x1 = rf->getArg(4), *r0 = rf->getArg(5), *r1 = rf->getArg(6);
  BasicBlock *entry = BasicBlock::Create(C, "entry", rf);
  BasicBlock *done = BasicBlock::Create(C, "done", rf);
  IRBuilder<> B(entry);
  AllocaInst *nextSlot = B.CreateAlloca(i32, nullptr, "next");
  // Each uniform value: the current work-item's copy (SSA after promotion). Every region loads
  // the group's value before its work-item loop, starts each item from it, and writes the last
  // item's value back after the loop.
  std::vector<AllocaInst *> priv;
  for (const UniformSlot &u : uniforms)
    priv.push_back(B.CreateAlloca(u.alloca->getAllocatedType()));
  B.CreateStore(ConstantInt::get(i32, kRegionExit), nextSlot);
  auto vals = unpackArgs(B, argv, wi, k);
  Value *ly = loadSlot(B, ctx, B.getInt64(SlotLocalSize + 1));
  Value *xEmpty = B.CreateICmpUGE(x0, x1);
  Value *x0_32 = B.CreateTrunc(x0, i32);
  Value *x1_32 = B.CreateTrunc(x1, i32);
  SwitchInst *sw = B.CreateSwitch(rid, done, static_cast<unsigned>(entries.size()));

  for (size_t r = 0; r < entries.size(); ++r) {
    BasicBlock *rhead = BasicBlock::Create(C, "r.head", rf);
    BasicBlock *rbody = BasicBlock::Create(C, "r.body", rf);
    BasicBlock *xhead = BasicBlock::Create(C, "x.head", rf);
    BasicBlock *xlatch = BasicBlock::Create(C, "x.latch", rf);
    BasicBlock *xexit = BasicBlock::Create(C, "x.exit", rf);
    BasicBlock *pre = BasicBlock::Create(C, "region", rf, rhead);
    sw->addCase(ConstantInt::get(cast<IntegerType>(i32), r), pre);
    IRBuilder<> P(pre);
    std::vector<Value *> groupValue;
    Value *area = nullptr, *writeCopy = nullptr; // the uniform area; the copy written (0 or 1)
    if (!uniforms.empty()) {
      Value *frame = P.CreateIntToPtr(loadSlot(P, ctx, P.getInt64(SlotFrame)), P.getPtrTy());
      area = P.CreateGEP(P.getInt8Ty(), frame, P.getInt64(-int64_t(uniformSize)));
      Value *readCopy = P.CreateAnd(loadSlot(P, ctx, P.getInt64(SlotParity)), P.getInt64(1));
      writeCopy = P.CreateXor(readCopy, P.getInt64(1));
      for (size_t i = 0; i < uniforms.size(); ++i) {
        const UniformSlot &u = uniforms[i];
        Value *at = P.CreateGEP(
            P.getInt8Ty(), area,
            P.CreateAdd(P.getInt64(u.offset), P.CreateMul(readCopy, P.getInt64(u.size))));
        Value *v = P.CreateAlignedLoad(u.alloca->getAllocatedType(), at, Align(8));
        P.CreateStore(v, priv[i]);
        groupValue.push_back(v);
      }
    }
    P.CreateBr(rhead);
    P.SetInsertPoint(rhead);
    PHINode *rv = P.CreatePHI(i64, 2, "r");
    rv->addIncoming(r0, pre);
    P.CreateCondBr(P.CreateICmpULT(rv, r1), rbody, done);
    P.SetInsertPoint(rbody);
    Value *y = P.CreateURem(rv, ly);
    Value *z = P.CreateUDiv(rv, ly);
    P.CreateCondBr(xEmpty, xexit, xhead);
    P.SetInsertPoint(xhead);
    PHINode *xv32 = P.CreatePHI(i32, 2, "x");
    xv32->addIncoming(x0_32, rbody);
    Value *xv = P.CreateZExt(xv32, i64);
    for (size_t i = 0; i < uniforms.size(); ++i)
      P.CreateStore(groupValue[i], priv[i]);

    ValueToValueMapTy vmap;
    for (unsigned i = 0; i < nargs; ++i)
      vmap[wi->getArg(i)] = vals[i];
    vmap[w.ctx] = ctx;
    vmap[w.x] = xv;
    vmap[w.y] = y;
    vmap[w.z] = z;
    SmallPtrSet<BasicBlock *, 32> inRegion(regions[r].begin(), regions[r].end());
    std::vector<BasicBlock *> clones;
    for (BasicBlock *bb : regions[r]) {
      BasicBlock *cb = CloneBasicBlock(bb, vmap, ".r" + std::to_string(r), rf);
      vmap[bb] = cb;
      clones.push_back(cb);
    }
    // Exits: barriers -> next region id; returns -> exit.
    std::map<BasicBlock *, BasicBlock *> stubs;
    std::vector<std::pair<BasicBlock *, int>> exitsTo; // (block, next region)
    auto stubFor = [&](BasicBlock *bar) {
      auto it = stubs.find(bar);
      if (it != stubs.end())
        return it->second;
      BasicBlock *s = BasicBlock::Create(C, "to.region", rf, xlatch);
      IRBuilder<> SB(s);
      SB.CreateBr(xlatch);
      exitsTo.push_back({s, barrierTarget[bar]});
      stubs[bar] = s;
      return s;
    };
    for (size_t bi = 0; bi < clones.size(); ++bi) {
      BasicBlock *cb = clones[bi];
      // phis: drop incoming edges from outside the region
      for (PHINode &phi : cb->phis()) {
        for (int i = static_cast<int>(phi.getNumIncomingValues()) - 1; i >= 0; --i)
          if (!inRegion.count(phi.getIncomingBlock(static_cast<unsigned>(i))))
            phi.removeIncomingValue(static_cast<unsigned>(i), false);
      }
      Instruction *term = cb->getTerminator();
      if (isa<ReturnInst>(term)) {
        IRBuilder<> TB(term);
        TB.CreateBr(xlatch);
        exitsTo.push_back({cb, kRegionExit});
        term->eraseFromParent();
        continue;
      }
      for (unsigned si = 0; si < term->getNumSuccessors(); ++si) {
        BasicBlock *succ = term->getSuccessor(si);
        if (isBarrier.count(succ))
          term->setSuccessor(si, stubFor(succ));
      }
    }
    // Uses of a uniform alloca go to the item's copy; the alloca itself, cloned with the entry
    // block into region 0, is dead there.
    std::vector<Instruction *> deadClones;
    for (size_t i = 0; i < uniforms.size(); ++i) {
      if (auto it = vmap.find(uniforms[i].alloca); it != vmap.end())
        deadClones.push_back(cast<Instruction>(it->second));
      vmap[uniforms[i].alloca] = priv[i];
    }
    for (BasicBlock *cb : clones)
      for (Instruction &I : *cb)
        RemapInstruction(&I, vmap, RF_NoModuleLevelChanges | RF_IgnoreMissingLocals);
    for (Instruction *dead : deadClones)
      dead->eraseFromParent();
    P.CreateBr(cast<BasicBlock>(vmap[entries[r]]));
    P.SetInsertPoint(xlatch);
    PHINode *nextPhi = P.CreatePHI(i32, static_cast<unsigned>(exitsTo.size()), "next.wi");
    for (auto &e : exitsTo)
      nextPhi->addIncoming(ConstantInt::get(i32, e.second), e.first);
    Value *xn = P.CreateAdd(xv32, P.getInt32(1), "x.next", true, true);
    xv32->addIncoming(xn, xlatch);
    BranchInst *latch = P.CreateCondBr(P.CreateICmpULT(xn, x1_32), xhead, xexit);
    P.SetInsertPoint(xexit);
    PHINode *nextOut = P.CreatePHI(i32, 2, "next.row");
    nextOut->addIncoming(nextPhi, xlatch);
    {
      IRBuilder<> RB(rbody->getTerminator());
      nextOut->addIncoming(RB.CreateLoad(i32, nextSlot), rbody);
    }
    P.CreateStore(nextOut, nextSlot);
    for (size_t i = 0; i < uniforms.size(); ++i) {
      const UniformSlot &u = uniforms[i];
      Value *at = P.CreateGEP(
          P.getInt8Ty(), area,
          P.CreateAdd(P.getInt64(u.offset), P.CreateMul(writeCopy, P.getInt64(u.size))));
      P.CreateAlignedStore(P.CreateLoad(u.alloca->getAllocatedType(), priv[i]), at, Align(8));
    }
    Value *rn = P.CreateAdd(rv, P.getInt64(1), "r.next", true, true);
    rv->addIncoming(rn, xexit);
    P.CreateBr(rhead);
    if (exitsTo.empty()) {
      why = "region without exit";
      rf->eraseFromParent();
      return false;
    }
    markParallel(C, xhead, xexit, latch);
  }
  B.SetInsertPoint(done);
  B.CreateRet(B.CreateLoad(i32, nextSlot));
  // Any region still containing a barrier or a value of another region
  // (should not happen) -> unsupported.
  for (Instruction &I : instructions(*rf)) {
    bool bad = isBarrierCall(I);
    for (Value *op : I.operands()) {
      if (auto *oi = dyn_cast<Instruction>(op); oi && oi->getFunction() != rf)
        bad = true;
      if (auto *oa = dyn_cast<Argument>(op); oa && oa->getParent() != rf)
        bad = true;
    }
    if (bad) {
      why = "unsupported barrier placement";
      rf->dropAllReferences();
      rf->eraseFromParent();
      return false;
    }
  }
  return true;
}

/// Private memory above this (per work-item, barrier-free kernels) moves
/// from the host stack to a per-PE heap scratch.
static constexpr uint64_t kMaxStackPrivate = 16 << 10;

// ------------------------------------------------------- loop barriers
// A work-item loop vectorizes only when the work-item body has no loop of its own: LLVM's loop
// vectorizer takes innermost loops, so `for (i = 0; i < 128; ++i) x = mad(y, x, x)` around
// the body keeps each work-item a scalar dependent chain. A loop whose trips are the same for
// every work-item (entered by all of them, left on uniform conditions) can take a barrier at
// the end of each trip without changing what the kernel computes (all items reach it, and
// nothing orders the items between two barriers anyway). The region builder then runs each
// trip as one work-item loop over the group: the loop-carried values live in per-item context
// arrays, the trip counter in one uniform slot, and the body vectorizes across work-items
// (the order of the two loops is exchanged). Loops that the optimizer will unroll completely
// (a small constant trip count) are left alone, as are loops in code that only some
// work-items run, loops that already hold a barrier, and kernels with printf (items' output
// would interleave by trip).

/// Loops of at most this many instructions times trips are expected to be fully unrolled.
static constexpr uint64_t kUnrolledLoopSize = 256;
/// Private memory per work-item above which a kernel keeps its loops (the region frame
/// would hold it once per work-item of the group).
static constexpr uint64_t kMaxLoopBarrierPrivate = 256;

// Default: on, with or without the cost instrumentation (MANYCL_LOOP_BARRIERS=0 turns them
// off). The instrumentation costs the code that runs, so an exchanged kernel's modeled cycles
// are close to its plain work-group function's, not equal: each item pays a trip's loop
// overhead (kLoopTripSlots in cost_instrument.cpp) where the plain function pays its latch,
// unrolled or not (KernelCost.LoopBarriersKeepModeledCyclesClose: within 25 %).
static bool loopBarriersEnabled() {
  const char *v = std::getenv("MANYCL_LOOP_BARRIERS");
  if (v && *v)
    return std::string(v) != "0";
  return true;
}

// Loop barriers in kernels with barriers of their own: only with MANYCL_LOOP_BARRIERS=2 and
// without the cost instrumentation (MANYCL_COST=0). On CLBlast's Xgemm (the case they were
// written for) they did not pay: its groups are 8 x 16 items, so each exchanged trip is a
// work-item loop of 8 items per row with the row's bookkeeping, and the accumulators go through
// the frame once per trip; no faster than the same kernel without them (docs/performance.md).
// Their modeled cycles are not right yet (a 4-tile kernel of 1000-trip loops came out at 1 %
// of its plain version's), hence not with the instrumentation.
static bool loopBarriersInBarrierKernels() {
  const char *v = std::getenv("MANYCL_LOOP_BARRIERS");
  return v && std::string(v) == "2" && !costInstrumentation();
}

/// Puts a barrier at the end of each trip of the uniform loops of `wi` (clean SSA, barrier
/// calls already lowered) that hold no barrier of their own. Returns how many loops got one.
/// In a kernel with barriers (`hasBarriers`) the private memory is per-item context arrays
/// already, so its size does not matter; such a kernel's loops between its barriers get loop
/// barriers too (CLBlast's Xgemm: the `k` loop between the two barriers of a tile, whose items
/// are two dependent multiply-add chains each: exchanged, the items' chains overlap).
static unsigned addLoopBarriers(Function &wi, unsigned nargs, FunctionCallee barrierFn,
                                bool hasBarriers) {
  if (!hasBarriers && allocaBytes(wi) > kMaxLoopBarrierPrivate)
    return 0;
  DominatorTree DT(wi);
  LoopInfo LI(DT);
  if (LI.empty())
    return 0;
  TargetLibraryInfoImpl tlii(Triple(wi.getParent()->getTargetTriple()));
  TargetLibraryInfo tli(tlii);
  AssumptionCache AC(wi);
  ScalarEvolution SE(wi, tli, AC, DT, LI);
  const ItemUniformity uni(wi, {wi.getArg(nargs + 1), wi.getArg(nargs + 2), wi.getArg(nargs + 3)});
  std::vector<BasicBlock *> latches;
  for (Loop *L : LI.getLoopsInPreorder()) {
    BasicBlock *latch = L->getLoopLatch();
    if (!latch || uni.divergent(L->getHeader()) || !isa<BranchInst>(latch->getTerminator()))
      continue;
    uint64_t size = 0;
    bool keep = false;
    for (BasicBlock *b : L->blocks())
      for (Instruction &I : *b) {
        ++size;
        if (isBarrierCall(I))
          keep = true;
      }
    // `#pragma unroll` loops: the optimizer unrolls them whatever their size.
    if (keep || findOptionMDForLoop(L, "llvm.loop.unroll.full"))
      continue;
    if (unsigned trips = SE.getSmallConstantTripCount(L);
        trips && trips * size <= kUnrolledLoopSize)
      continue;
    latches.push_back(latch);
  }
  for (BasicBlock *latch : latches)
    CallInst::Create(barrierFn, {wi.getArg(nargs)}, "", latch->getTerminator())
        ->setMetadata(kLoopBarrierMd, MDNode::get(wi.getContext(), {}));
  return static_cast<unsigned>(latches.size());
}

// narrowGuardedLoops on the kernels' entry points (work-group and region functions).
struct NarrowGuardedLoopsPass : PassInfoMixin<NarrowGuardedLoopsPass> {
  PreservedAnalyses run(Function &F, FunctionAnalysisManager &) {
    const StringRef name = F.getName();
    if (!name.startswith("__manycl_region_") && !name.startswith("__manycl_wg_"))
      return PreservedAnalyses::all();
    return narrowGuardedLoops(F) ? PreservedAnalyses::none() : PreservedAnalyses::all();
  }
};

static const std::set<std::string> &knownRuntimeSymbols() {
  static const std::set<std::string> s = {"__manycl_barrier"};
  return s;
}

// ---------------------------------------------------------------- finalize
Status finalizeModule(Module &M, const ParsedOptions &po, const DeviceDesc &dev,
                      std::vector<KernelInfo> &kernels, std::string &log) {
  (void)dev;
  initLLVM();
  LLVMContext &C = M.getContext();
  kernels = extractKernels(M);
  const bool timing = std::getenv("MANYCL_TIMING") != nullptr;
  auto t0 = std::chrono::steady_clock::now();
  auto phase = [&](const char *what) {
    if (!timing)
      return;
    auto t1 = std::chrono::steady_clock::now();
    fprintf(stderr, "manycl: %s %.1f ms\n", what,
            std::chrono::duration<double, std::milli>(t1 - t0).count());
    t0 = t1;
  };

  // 1. Builtin library: only what is used.
  {
    size_t n = static_cast<size_t>(manycl_builtins_bc_end - manycl_builtins_bc);
    auto buf =
        MemoryBuffer::getMemBuffer(StringRef(manycl_builtins_bc, n), "manycl-builtins", false);
    auto lib = getOwningLazyBitcodeModule(std::move(buf), C);
    if (!lib) {
      std::string e = toString(lib.takeError());
      return Status::error(ErrorCode::Internal, "cannot read builtin library: " + e);
    }
    (*lib)->setDataLayout(M.getDataLayout());
    (*lib)->setTargetTriple(M.getTargetTriple());
    if (Linker::linkModules(M, std::move(*lib), Linker::LinkOnlyNeeded))
      return Status::error(ErrorCode::Internal, "cannot link builtin library");
  }

  guardIntegerDivision(M);
  phase("link builtins");
  // The optimizer's target for all functions (code generation gets the host's, below).
  const OptimizationTarget target = optimizationTarget();
  for (Function &F : M)
    setTarget(F, target);

  Type *i64 = Type::getInt64Ty(C);
  PointerType *ptr = PointerType::get(C, 0);
  FunctionCallee barrierFn = M.getOrInsertFunction("__manycl_barrier", Type::getVoidTy(C), ptr);
  if (auto *bf = dyn_cast<Function>(barrierFn.getCallee())) {
    bf->addFnAttr(Attribute::NoUnwind);
    bf->addFnAttr(Attribute::Convergent);
    bf->addFnAttr(Attribute::NoDuplicate);
  }

  // printf -> __manycl_printf(fmt, types, args...): `types` describes the
  // actual type of every variadic argument so the host never guesses.
  if (Function *pf = M.getFunction("printf")) {
    std::vector<CallInst *> calls;
    for (User *U : pf->users())
      if (auto *ci = dyn_cast<CallInst>(U))
        calls.push_back(ci);
    FunctionCallee hp = M.getOrInsertFunction(
        "__manycl_printf",
        FunctionType::get(Type::getInt32Ty(C), {PointerType::get(C, 0), PointerType::get(C, 0)},
                          true));
    auto code = [](Type *t) -> char {
      if (t->isIntegerTy(8))
        return 'c';
      if (t->isIntegerTy(16))
        return 's';
      if (t->isIntegerTy(32))
        return 'i';
      if (t->isIntegerTy(64))
        return 'l';
      if (t->isHalfTy())
        return 'h';
      if (t->isFloatTy())
        return 'f';
      if (t->isDoubleTy())
        return 'd';
      if (t->isPointerTy())
        return 'p';
      return '?';
    };
    for (CallInst *ci : calls) {
      IRBuilder<> B(ci);
      std::vector<Value *> args{ci->getArgOperand(0), nullptr};
      std::string desc;
      for (unsigned i = 1; i < ci->arg_size(); ++i) {
        Value *a = ci->getArgOperand(i);
        Type *t = a->getType();
        // Clang's x86-64 lowering already passes vectors wider than 16 bytes in memory.
        if (Type *byval = ci->getParamByValType(i)) {
          a = B.CreateLoad(byval, a);
          t = byval;
        }
        if (t->isFloatTy() || t->isHalfTy()) {
          a = B.CreateFPExt(a, B.getDoubleTy());
          t = a->getType();
        } else if (t->isIntegerTy() && t->getIntegerBitWidth() < 32) {
          a = B.CreateSExt(a, B.getInt32Ty());
          t = a->getType();
        }
        if (auto *vt = dyn_cast<FixedVectorType>(t)) {
          // Vectors travel by address: how a 32- or 64-byte vector is passed through `...`
          // depends on the AVX level each side was compiled for (the JIT code: the host CPU;
          // the runtime: baseline x86-64), so by value the host would read garbage.
          if (vt->getElementType()->isHalfTy()) {
            a = B.CreateFPExt(a, FixedVectorType::get(B.getFloatTy(), vt->getNumElements()));
            vt = cast<FixedVectorType>(a->getType());
          }
          IRBuilder<> entry(&*ci->getFunction()->getEntryBlock().getFirstInsertionPt());
          AllocaInst *slot = entry.CreateAlloca(vt);
          B.CreateStore(a, slot);
          a = slot;
          desc += 'v';
          desc += std::to_string(vt->getNumElements());
          desc += code(vt->getElementType());
        } else {
          desc += code(t);
        }
        desc += ';';
        args.push_back(a);
      }
      args[1] = B.CreateGlobalStringPtr(desc, "printf.types");
      CallInst *nc = B.CreateCall(hp, args);
      ci->replaceAllUsesWith(nc);
      ci->eraseFromParent();
    }
  }

  // 2. Single work-item clones with (ctx, x, y, z) parameters.
  std::vector<Function *> wis;
  std::vector<Function *> origKernels;
  for (auto &k : kernels) {
    Function *K = M.getFunction(k.name);
    origKernels.push_back(K);
    std::vector<Type *> params;
    for (Argument &a : K->args())
      params.push_back(a.getType());
    params.push_back(ptr);
    params.push_back(i64);
    params.push_back(i64);
    params.push_back(i64);
    auto *ft = FunctionType::get(Type::getVoidTy(C), params, false);
    Function *wi = Function::Create(ft, GlobalValue::InternalLinkage, "__manycl_wi_" + k.name, &M);
    ValueToValueMapTy vmap;
    for (unsigned i = 0; i < K->arg_size(); ++i) {
      vmap[K->getArg(i)] = wi->getArg(i);
      wi->getArg(i)->setName(K->getArg(i)->getName());
    }
    SmallVector<ReturnInst *, 4> rets;
    CloneFunctionInto(wi, K, vmap, CloneFunctionChangeType::LocalChangesOnly, rets);
    wi->setCallingConv(CallingConv::C);
    wi->setLinkage(GlobalValue::InternalLinkage);
    // Drop the kernel metadata from the clone.
    for (const char *md : {"kernel_arg_addr_space", "kernel_arg_access_qual", "kernel_arg_type",
                           "kernel_arg_base_type", "kernel_arg_type_qual", "kernel_arg_name",
                           "reqd_work_group_size", "work_group_size_hint", "vec_type_hint"})
      wi->setMetadata(md, nullptr);
    wis.push_back(wi);
  }

  // 3. Everything else internal and inlinable.
  for (Function &F : M) {
    if (F.isDeclaration())
      continue;
    F.setLinkage(GlobalValue::InternalLinkage);
    F.removeFnAttr(Attribute::NoInline);
    F.removeFnAttr(Attribute::OptimizeNone);
    F.addFnAttr(Attribute::AlwaysInline);
  }
  for (GlobalVariable &G : M.globals())
    if (!G.isDeclaration())
      G.setLinkage(GlobalValue::InternalLinkage);

  // 4. Inline everything into the work-item functions.
  for (Function *wi : wis) {
    Status s = inlineAll(*wi);
    if (!s) {
      log += "error: " + s.message + "\n";
      return s;
    }
  }

  phase("inline");

  // 5. Kernel-scope __local variables -> offsets from the static local base.
  std::vector<GlobalVariable *> locals;
  for (GlobalVariable &G : M.globals())
    if (!G.isDeclaration() && G.hasLocalLinkage() && G.hasInitializer() &&
        isa<UndefValue>(G.getInitializer()))
      locals.push_back(&G);
  for (GlobalVariable *G : locals)
    expandConstantUsers(G);

  const DataLayout &DL = M.getDataLayout();
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    Function *wi = wis[ki];
    WiArgs w{wi->getArg(kernels[ki].args.size()), wi->getArg(kernels[ki].args.size() + 1),
             wi->getArg(kernels[ki].args.size() + 2), wi->getArg(kernels[ki].args.size() + 3)};
    // locals used by this work-item function
    std::vector<GlobalVariable *> used;
    for (GlobalVariable *G : locals) {
      for (User *U : G->users())
        if (auto *I = dyn_cast<Instruction>(U); I && I->getFunction() == wi) {
          used.push_back(G);
          break;
        }
    }
    uint64_t off = 0;
    if (!used.empty()) {
      IRBuilder<> B(&*wi->getEntryBlock().getFirstInsertionPt());
      Value *base = B.CreateIntToPtr(loadSlot(B, w.ctx, B.getInt64(SlotLocalStatic)), ptr);
      for (GlobalVariable *G : used) {
        uint64_t al = std::max<uint64_t>(16, G->getAlign() ? G->getAlign()->value() : 16);
        off = (off + al - 1) / al * al;
        Value *p = B.CreateInBoundsGEP(B.getInt8Ty(), base, B.getInt64(off));
        off += DL.getTypeAllocSize(G->getValueType());
        std::vector<Use *> uses;
        for (Use &u : G->uses())
          if (auto *I = dyn_cast<Instruction>(u.getUser()); I && I->getFunction() == wi)
            uses.push_back(&u);
        for (Use *u : uses)
          u->set(p);
      }
    }
    kernels[ki].static_local_size = (off + 63) / 64 * 64;
    kernels[ki].uses_barriers = lowerWorkItemCalls(*wi, w, barrierFn);
    kernels[ki].private_size = allocaBytes(*wi);
    for (Instruction &I : instructions(*wi))
      if (auto *ci = dyn_cast<CallInst>(&I))
        if (Function *cf = ci->getCalledFunction(); cf && cf->getName() == "__manycl_printf")
          kernels[ki].uses_printf = true;
  }

  phase("work-item calls");

  // 6. Entry points.
  const char *method = std::getenv("MANYCL_WG_METHOD"); // "fibers" forces fibers
  auto cleanSsa = [](Function &F) {
    FunctionAnalysisManager FAM;
    PassBuilder PB;
    PB.registerFunctionAnalyses(FAM);
    FunctionPassManager FPM;
    FPM.addPass(SROAPass(SROAOptions::ModifyCFG));
    FPM.addPass(PromotePass());
    FPM.addPass(SimplifyCFGPass());
    FPM.run(F, FAM);
  };
  // Kernels with barriers: loops the optimizer would unroll completely anyway (`#pragma unroll`,
  // small constant trip counts) are unrolled before the region builder, and SROA runs again.
  // Private arrays indexed by such loops' counters (CLBlast's Xgemm: its register tiles
  // `apm[]`, `bpm[]` and accumulators `cpm[]`) then become SSA values: only those live across
  // a barrier go to per-item context arrays, and the inner `k` loop keeps its accumulators in
  // registers instead of storing every tile element and accumulator to the frame each step.
  // Barriers are `noduplicate`: loops holding one are never unrolled.
  auto unrollSmallLoops = [](Function &F) {
    // The unroller asks for module-level analyses (profile summary) through the proxies.
    PassBuilder PB;
    AnalysisManagers am(PB);
    FunctionPassManager FPM;
    // Rotated loops (exit test at the latch), as the optimizer's unroller expects them.
    FPM.addPass(LoopSimplifyPass());
    FPM.addPass(createFunctionToLoopPassAdaptor(LoopRotatePass(), /*UseMemorySSA=*/false));
    FPM.addPass(LoopUnrollPass(
        LoopUnrollOptions(3).setPartial(false).setRuntime(false).setUpperBound(false)));
    FPM.addPass(SROAPass(SROAOptions::ModifyCFG));
    FPM.addPass(PromotePass());
    FPM.addPass(SimplifyCFGPass());
    FPM.run(F, am.function);
  };
  // Work-items that all take the same path cost the same: the executor then runs a group in
  // one call and splits its cost over the modeled PEs arithmetically (KernelInfo::Cost).
  // The kernel runs as the regions built with loop barriers (a barrier per uniform loop trip).
  auto adoptLoopBarrierRegions = [](KernelInfo &k, uint64_t frame, uint64_t uniformFrame,
                                    uint32_t sourceBarriers) {
    k.loop_barriers = true;
    k.source_barriers = sourceBarriers;
    k.region_based = true;
    k.uniform_frame_size = uniformFrame;
    k.frame_size = frame;
    k.private_size = frame;
  };
  auto uniformItems = [](Function &F, unsigned nargs) {
    return ItemUniformity(F, {F.getArg(nargs + 1), F.getArg(nargs + 2), F.getArg(nargs + 3)})
        .uniformControl();
  };
  for (size_t ki = 0; ki < kernels.size(); ++ki) {
    KernelInfo &k = kernels[ki];
    Function *wi = wis[ki];
    const unsigned nargs = static_cast<unsigned>(k.args.size());
    if (!k.uses_barriers) {
      ValueToValueMapTy vm;
      // Clean SSA once, before the copy: the loop-barrier copy and the plain function both
      // start from it (on hashcat's SHA2-256 kernels SROA of the inlined function took about
      // 50 ms each, twice, and the copy of the uncleaned function twice as long).
      cleanSsa(*wi);
      k.private_size = allocaBytes(*wi);
      Function *copy = CloneFunction(wi, vm);
      if (uniformItems(*copy, nargs))
        k.cost = KernelInfo::Cost::Uniform;
      // Uniform loops: a barrier per trip, so that the work-item loop goes inside them and
      // vectorizes (see addLoopBarriers). Any failure keeps the plain work-group function.
      if (!po.opt_disable && !k.uses_printf && loopBarriersEnabled() &&
          !(method && std::string(method) == "fibers") &&
          addLoopBarriers(*copy, nargs, barrierFn, /*hasBarriers=*/false) > 0) {
        std::string why;
        uint64_t frame = 0, uniformFrame = 0;
        uint32_t sourceBarriers = 0;
        if (buildRegions(M, copy, k, frame, uniformFrame, sourceBarriers, why,
                         /*loopBarriers=*/true)) {
          k.uses_barriers = true;
          adoptLoopBarrierRegions(k, frame, uniformFrame, sourceBarriers);
          copy->eraseFromParent();
          continue;
        }
      }
      copy->eraseFromParent();
    }
    if (k.uses_barriers && !(method && std::string(method) == "fibers")) {
      // Clean SSA first so that only real values cross barriers.
      cleanSsa(*wi);
      if (!po.opt_disable)
        unrollSmallLoops(*wi);
      if (uniformItems(*wi, nargs))
        k.cost = KernelInfo::Cost::Uniform;
      std::string why;
      uint64_t frame = 0, uniformFrame = 0;
      uint32_t sourceBarriers = 0;
      // Uniform loops between the barriers: a barrier per trip too (addLoopBarriers). If the
      // region builder fails on that, the kernel is built from its own barriers alone.
      if (!po.opt_disable && !k.uses_printf && loopBarriersInBarrierKernels()) {
        ValueToValueMapTy vm;
        Function *copy = CloneFunction(wi, vm);
        if (addLoopBarriers(*copy, nargs, barrierFn, /*hasBarriers=*/true) > 0 &&
            buildRegions(M, copy, k, frame, uniformFrame, sourceBarriers, why,
                         /*loopBarriers=*/true)) {
          adoptLoopBarrierRegions(k, frame, uniformFrame, sourceBarriers);
          copy->eraseFromParent();
          continue;
        }
        copy->eraseFromParent();
      }
      // Work on a copy so that the fiber fallback keeps the original.
      ValueToValueMapTy vm;
      Function *copy = CloneFunction(wi, vm);
      if (buildRegions(M, copy, k, frame, uniformFrame, sourceBarriers, why)) {
        k.source_barriers = sourceBarriers;
        k.uniform_frame_size = uniformFrame;
        k.region_based = true;
        k.frame_size = frame;
        k.private_size = frame;
        copy->eraseFromParent();
        continue;
      }
      copy->eraseFromParent();
      log += "note: kernel '" + k.name + "' uses fibers for barriers (" + why + ")\n";
    }
    if (k.uses_barriers) {
      auto *ft = FunctionType::get(Type::getVoidTy(C), {ptr, ptr, i64, i64, i64}, false);
      Function *f = Function::Create(ft, GlobalValue::ExternalLinkage, fiberName(k.name), &M);
      f->addFnAttr(Attribute::NoUnwind);
      setTarget(*f, target);
      BasicBlock *bb = BasicBlock::Create(C, "entry", f);
      IRBuilder<> B(bb);
      auto vals = unpackArgs(B, f->getArg(0), wi, k);
      vals.push_back(f->getArg(1));
      vals.push_back(f->getArg(2));
      vals.push_back(f->getArg(3));
      vals.push_back(f->getArg(4));
      B.CreateCall(wi, vals);
      B.CreateRetVoid();
    } else {
      // Large private arrays go to a per-PE heap scratch (SlotFrame), not to
      // the host thread's stack; the work-items of a group run one after the
      // other on a PE, so one copy per PE suffices. Only what SROA leaves in memory counts:
      // the locals of inlined helpers (hashcat's kernels, `uint16` arrays of 64 bytes per
      // element) add up to tens of KiB before it runs, and once moved to the scratch they
      // are no allocas for it any more (every value went through memory: 14x slower).
      // Barrier-free kernels reach this point with their SSA cleaned (above).
      if (allocaBytes(*wi) > kMaxStackPrivate) {
        const DataLayout &DLs = M.getDataLayout();
        std::vector<AllocaInst *> as;
        for (Instruction &I : instructions(*wi))
          if (auto *a = dyn_cast<AllocaInst>(&I))
            as.push_back(a);
        uint64_t soff = 0;
        Argument *wctx = wi->getArg(static_cast<unsigned>(k.args.size()));
        Instruction *ip = &*wi->getEntryBlock().getFirstInsertionPt();
        while (isa<AllocaInst>(ip))
          ip = ip->getNextNode();
        IRBuilder<> SB(ip);
        Value *scratch = SB.CreateIntToPtr(loadSlot(SB, wctx, SB.getInt64(SlotFrame)), ptr);
        for (AllocaInst *a : as) {
          auto bits = a->getAllocationSizeInBits(DLs);
          if (!bits || a->getParent() != &wi->getEntryBlock())
            continue;
          uint64_t al = std::max<uint64_t>(16, a->getAlign().value());
          soff = (soff + al - 1) / al * al;
          Value *p = SB.CreateInBoundsGEP(SB.getInt8Ty(), scratch, SB.getInt64(soff));
          soff += (*bits + 7) / 8;
          std::vector<IntrinsicInst *> lts;
          for (User *u : a->users())
            if (auto *ii = dyn_cast<IntrinsicInst>(u); ii && ii->isLifetimeStartOrEnd())
              lts.push_back(ii);
          for (IntrinsicInst *ii : lts)
            ii->eraseFromParent();
          a->replaceAllUsesWith(p);
          a->eraseFromParent();
        }
        k.frame_size = (soff + 63) / 64 * 64;
      }
      auto *ft = FunctionType::get(Type::getVoidTy(C), {ptr, ptr, i64, i64, i64, i64}, false);
      Function *f = Function::Create(ft, GlobalValue::ExternalLinkage, wgName(k.name), &M);
      f->addFnAttr(Attribute::NoUnwind);
      setTarget(*f, target);
      Argument *argv = f->getArg(0), *ctx = f->getArg(1), *x0 = f->getArg(2), *x1 = f->getArg(3),
               *r0 = f->getArg(4), *r1 = f->getArg(5);
      BasicBlock *entry = BasicBlock::Create(C, "entry", f);
      BasicBlock *rhead = BasicBlock::Create(C, "r.head", f);
      BasicBlock *rbody = BasicBlock::Create(C, "r.body", f);
      BasicBlock *xbody = BasicBlock::Create(C, "x.body", f);
      BasicBlock *xexit = BasicBlock::Create(C, "x.exit", f);
      BasicBlock *exit = BasicBlock::Create(C, "exit", f);
      IRBuilder<> B(entry);
      auto vals = unpackArgs(B, argv, wi, k);
      Value *ly = loadSlot(B, ctx, B.getInt64(SlotLocalSize + 1));
      Value *xEmpty = B.CreateICmpUGE(x0, x1);
      Value *x0_32 = B.CreateTrunc(x0, B.getInt32Ty());
      Value *x1_32 = B.CreateTrunc(x1, B.getInt32Ty());
      B.CreateBr(rhead);
      B.SetInsertPoint(rhead);
      PHINode *r = B.CreatePHI(i64, 2, "r");
      r->addIncoming(r0, entry);
      B.CreateCondBr(B.CreateICmpULT(r, r1), rbody, exit);
      B.SetInsertPoint(rbody);
      Value *y = B.CreateURem(r, ly);
      Value *z = B.CreateUDiv(r, ly);
      B.CreateCondBr(xEmpty, xexit, xbody);
      B.SetInsertPoint(xbody);
      // 32-bit induction variable (local sizes fit): keeps int-typed ids affine.
      PHINode *x = B.CreatePHI(B.getInt32Ty(), 2, "x");
      x->addIncoming(x0_32, rbody);
      auto callVals = vals;
      callVals.push_back(ctx);
      callVals.push_back(B.CreateZExt(x, i64));
      callVals.push_back(y);
      callVals.push_back(z);
      CallInst *call = B.CreateCall(wi, callVals);
      Value *xn = B.CreateAdd(x, B.getInt32(1), "x.next", true, true);
      x->addIncoming(xn, xbody);
      BranchInst *latch = B.CreateCondBr(B.CreateICmpULT(xn, x1_32), xbody, xexit);
      // Work-items of a barrier-free kernel are independent: inline the body
      // and mark the work-item loop parallel for memory that is not private.
      InlineFunctionInfo ifi;
      if (InlineFunction(*call, ifi).isSuccess() && !po.opt_disable)
        markParallel(C, xbody, xexit, latch);
      B.SetInsertPoint(xexit);
      Value *rn = B.CreateAdd(r, B.getInt64(1), "r.next", true, true);
      r->addIncoming(rn, xexit);
      B.CreateBr(rhead);
      B.SetInsertPoint(exit);
      B.CreateRetVoid();
    }
  }

  // 7. Remove the original kernels and anything now unused.
  for (Function *K : origKernels) {
    K->setLinkage(GlobalValue::InternalLinkage);
    if (K->use_empty())
      K->eraseFromParent();
    else
      K->deleteBody(); // only calls remained from other (inlined) kernels
  }
  bool changed = true;
  while (changed) {
    changed = false;
    for (auto it = M.begin(); it != M.end();) {
      Function &F = *it++;
      if (F.hasLocalLinkage() && F.use_empty()) {
        F.eraseFromParent();
        changed = true;
      }
    }
    for (auto it = M.global_begin(); it != M.global_end();) {
      GlobalVariable &G = *it++;
      if (G.hasLocalLinkage() && G.use_empty()) {
        G.eraseFromParent();
        changed = true;
      }
    }
  }

  {
    std::string err;
    raw_string_ostream es(err);
    if (verifyModule(M, &es)) {
      es.flush();
      log += "internal error: invalid module after work-group generation:\n" + err;
      return Status::error(ErrorCode::Internal, "invalid module after work-group generation");
    }
  }

  phase("work-group functions");
  if (const char *d = std::getenv("MANYCL_DUMP_IR_PRE"); d && *d) {
    std::error_code ec;
    raw_fd_ostream os(d, ec);
    if (!ec)
      M.print(os, nullptr);
  }
  // 8. Optimize (for the optimization target: see optimizationTarget()).
  {
    auto TM = makeTargetMachine(target.cpu, target.features,
                     po.opt_disable ? CodeGenOpt::Less : CodeGenOpt::Aggressive);
    PipelineTuningOptions pto;
    pto.LoopVectorization = !po.opt_disable;
    pto.SLPVectorization = !po.opt_disable;
    PassBuilder PB(TM.get(), pto);
    // Guarded work-item loops stop where their guard fails for good (narrow_loops.cpp): after
    // unswitching has taken the uniform conditions out of them, before the vectorizer.
    if (!po.opt_disable)
      PB.registerVectorizerStartEPCallback([](FunctionPassManager &FPM, OptimizationLevel) {
        FPM.addPass(NarrowGuardedLoopsPass());
      });
    AnalysisManagers am(PB);
    ModulePassManager MPM = PB.buildPerModuleDefaultPipeline(
        po.opt_disable ? OptimizationLevel::O1 : OptimizationLevel::O3);
    MPM.run(M, am.module);
  }

  phase("optimize");
  if (costInstrumentation()) {
    instrumentCost(M, kernels);
    retargetToHost(M);
  } else
    for (KernelInfo &k : kernels)
      k.cost = KernelInfo::Cost::None;
  // 9. Every remaining external must be known (host symbol or native).
  std::string unresolved;
  for (Function &F : M) {
    if (!F.isDeclaration() || F.isIntrinsic() || F.use_empty())
      continue;
    std::string n = F.getName().str();
    if (knownRuntimeSymbols().count(n) || lookupHostSymbol(n))
      continue;
    if (resolveNative(n))
      continue;
    unresolved += "error: unresolved external function '" + n +
                  "' (not a builtin, and no registered native library provides this "
                  "__attribute__((mppa_native)) function)\n";
  }
  for (GlobalVariable &G : M.globals()) {
    if (!G.isDeclaration() || G.use_empty())
      continue;
    unresolved += "error: unresolved external variable '" + G.getName().str() + "'\n";
  }
  if (!unresolved.empty()) {
    log += unresolved;
    return Status::error(ErrorCode::BuildFailure, "unresolved symbols");
  }
  return Status::success();
}

} // namespace manycl::compiler::detail
