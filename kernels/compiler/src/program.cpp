// Loading (validation + ORC LLJIT) and work-group execution (LWI / SPMD).
#include "frontend.h"
#include "manycl/compiler/cost_model.h"
#include "manycl/fiber_switch.h"
#include "perf_map.h"

#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/ExecutionEngine/Orc/CompileUtils.h>
#include <llvm/ExecutionEngine/Orc/LLJIT.h>
#include <llvm/ExecutionEngine/Orc/RTDyldObjectLinkingLayer.h>
#include <llvm/ExecutionEngine/Orc/ThreadSafeModule.h>
#include <llvm/ExecutionEngine/SectionMemoryManager.h>
#include <llvm/IR/Verifier.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/SHA256.h>

#include <algorithm>
#include <barrier>
#include <bit>
#include <condition_variable>
#include <cstdlib>
#include <cstring>
#include <emmintrin.h>
#include <mutex>
#include <optional>
#include <sys/mman.h>
#include <thread>
#include <unistd.h>

#if defined(__has_feature)
#if __has_feature(address_sanitizer)
#define MANYCL_ASAN 1
#endif
#endif
#if defined(__SANITIZE_ADDRESS__)
#define MANYCL_ASAN 1
#endif
#ifdef MANYCL_ASAN
#include <sanitizer/common_interface_defs.h>
#endif
#if defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define MANYCL_TSAN 1
#endif
#endif
#if defined(__SANITIZE_THREAD__)
#define MANYCL_TSAN 1
#endif
#ifdef MANYCL_TSAN
#include <sanitizer/tsan_interface.h>
#endif

namespace manycl::compiler {
using namespace detail;

namespace {

class ProgramImpl;

// The entry point a group runs (the kernel's kind decides which one is set).
struct EntryPoints {
  WgFn wg = nullptr;
  RegionFn region = nullptr;
};

// A kernel's entry points for full groups of one local size (specialize.cpp), and how often
// that size was launched before they were made.
struct Specialization {
  uint64_t local[3] = {0, 0, 0};
  EntryPoints entries;               // both null until made, or when making them failed
  uint64_t launches = 0, groups = 0; // counted until it is made
  bool made = false;
  bool compiling = false; // in the background (made once it is done)
};

// Local sizes tracked per kernel: a kernel launched with more sizes than this (tests that sweep
// them, tuners) runs the generic entry point for the others.
constexpr size_t kMaxSpecializationsPerKernel = 4;
// A specialization costs a second optimization and code generation of the kernel (tens to
// hundreds of milliseconds): it is made once a local size has run enough groups to be worth it,
// at once when the kernel requires its local size.
constexpr uint64_t kSpecializeAfterGroups = 64;
constexpr uint64_t kSpecializeAfterLaunches = 4;

class KernelImpl final : public Kernel {
public:
  KernelInfo info_;
  std::string entry; // the entry point's symbol
  WgFn wg = nullptr;
  FiberFn fiber = nullptr;
  RegionFn region = nullptr;
  ProgramImpl *program = nullptr;
  // Guarded by ProgramImpl::specializationMutex.
  mutable std::vector<Specialization> specializations;
  const KernelInfo &info() const override { return info_; }
  // The entry points for the `groups` full groups of `local` work-items of a launch: specialized
  // ones when they are made (now, if `policy` and MANYCL_SPECIALIZE say so), else the generic
  // ones.
  EntryPoints forLocalSize(const uint64_t local[3], uint64_t groups,
                           Launch::Specialize policy) const;

private:
  // Compiles (or takes from the object cache) the entry points for full groups of `local`;
  // both null when that fails. Needs no lock: JIT sessions are thread-safe.
  EntryPoints specialize(const uint64_t local[3]) const;
  // Makes `s` in the background; the launches meanwhile run the generic code.
  void specializeInBackground(Specialization &s) const;
};

class ProgramImpl final : public Program {
public:
  std::unique_ptr<llvm::ObjectCache> objCache; // outlives the JIT
  std::unique_ptr<llvm::orc::LLJIT> jit;
  std::vector<KernelInfo> infos;
  std::vector<std::unique_ptr<KernelImpl>> kernels_;
  std::string bitcode;    // the final module, read again for each specialization
  std::string moduleName; // the JIT module's identifier (its object cache file)
  mutable std::mutex specializationMutex;
  // One specialization compiles at a time: the JIT's compiler owns one TargetMachine, which is
  // not safe to use from two threads (background compiles, and Now on a launching thread).
  mutable std::mutex compileMutex;
  // Specializations compiling in the background (guarded by specializationMutex), waited for
  // before the JIT and the kernels go away.
  mutable unsigned compilesRunning = 0;
  mutable std::condition_variable compilesDone;
  ~ProgramImpl() override { waitForSpecializations(); }
  void waitForSpecializations() const override {
    std::unique_lock<std::mutex> lock(specializationMutex);
    compilesDone.wait(lock, [&] { return compilesRunning == 0; });
  }
  const std::vector<KernelInfo> &kernels() const override { return infos; }
  const Kernel *kernel(std::string_view name) const override {
    for (auto &k : kernels_)
      if (k->info_.name == name)
        return k.get();
    return nullptr;
  }
};

// MANYCL_SPECIALIZE: 0 never, `always` at every first launch of a local size (checking the
// specialized code with every test), else when it pays.
enum class SpecializationMode { Never, WhenItPays, Always };
SpecializationMode specializationMode() {
  static const SpecializationMode mode = [] {
    const char *env = std::getenv("MANYCL_SPECIALIZE");
    const std::string_view v = env ? env : "";
    return v == "0"        ? SpecializationMode::Never
           : v == "always" ? SpecializationMode::Always
                           : SpecializationMode::WhenItPays;
  }();
  return mode;
}

std::string hexDigest(std::initializer_list<llvm::StringRef> parts) {
  llvm::SHA256 h;
  for (llvm::StringRef p : parts)
    h.update(p);
  static const char hex[] = "0123456789abcdef";
  std::string name;
  for (uint8_t b : h.final()) {
    name += hex[b >> 4];
    name += hex[b & 15];
  }
  return name;
}

EntryPoints KernelImpl::forLocalSize(const uint64_t local[3], uint64_t groups,
                                     Launch::Specialize policy) const {
  const EntryPoints generic{wg, region};
  if (specializationMode() == SpecializationMode::Never)
    policy = Launch::Specialize::Never;
  else if (specializationMode() == SpecializationMode::Always &&
           policy == Launch::Specialize::IfUseful)
    policy = Launch::Specialize::Now;
  // A group of one work-item has no work-item loop to specialize.
  const bool oneItem = local[0] * local[1] * local[2] == 1;
  if (policy == Launch::Specialize::Never || fiber || !program || program->bitcode.empty() ||
      oneItem)
    return generic;
  std::lock_guard<std::mutex> lock(program->specializationMutex);
  auto it = std::find_if(specializations.begin(), specializations.end(),
                         [&](const auto &s) { return std::equal(local, local + 3, s.local); });
  if (it == specializations.end()) {
    if (specializations.size() >= kMaxSpecializationsPerKernel)
      return generic;
    // Never reallocated: background compiles hold references to the elements.
    specializations.reserve(kMaxSpecializationsPerKernel);
    Specialization fresh;
    std::copy(local, local + 3, fresh.local);
    it = specializations.insert(specializations.end(), fresh);
  }
  Specialization &s = *it;
  if (!s.made && !s.compiling) {
    ++s.launches;
    s.groups += groups;
    const bool required = info_.reqd_work_group_size[0] != 0;
    if (policy == Launch::Specialize::Now || required) {
      s.entries = specialize(s.local);
      s.made = true;
    } else if (s.groups >= kSpecializeAfterGroups || s.launches >= kSpecializeAfterLaunches) {
      // A tuner timing its launches (hashcat, CLBlast) must not see a launch that waited for
      // the compiler: that local size would look slow and lose.
      specializeInBackground(s);
    }
  }
  return s.entries.wg || s.entries.region ? s.entries : generic;
}

// Background compiles still running in the process. A program an application never
// releases keeps its compile going while the process exits: exit() waits for them (an atexit
// handler registered after these statics exist, so it runs before they and LLVM's go away).
struct InFlightCompiles {
  std::mutex mutex;
  std::condition_variable done;
  unsigned count = 0;
};
InFlightCompiles &inFlightCompiles() {
  static InFlightCompiles compiles;
  static const bool waitsAtExit = [] {
    std::atexit([] {
      InFlightCompiles &c = inFlightCompiles();
      std::unique_lock<std::mutex> lock(c.mutex);
      c.done.wait(lock, [&] { return c.count == 0; });
    });
    return true;
  }();
  (void)waitsAtExit;
  return compiles;
}

void KernelImpl::specializeInBackground(Specialization &s) const {
  InFlightCompiles &inFlight = inFlightCompiles();
  {
    std::lock_guard<std::mutex> lock(inFlight.mutex);
    ++inFlight.count;
  }
  s.compiling = true;
  ++program->compilesRunning;
  try {
    // Detached: a program never released must not leave a thread to join at exit.
    std::thread([this, &s, &inFlight] {
      const EntryPoints made = specialize(s.local);
      {
        std::lock_guard<std::mutex> lock(program->specializationMutex);
        s.entries = made;
        s.made = true;
        s.compiling = false;
        --program->compilesRunning;
        // Under the mutex: once it is released the program may go away.
        program->compilesDone.notify_all();
      }
      std::lock_guard<std::mutex> lock(inFlight.mutex);
      --inFlight.count;
      inFlight.done.notify_all();
    }).detach();
  } catch (const std::system_error &) { // no thread: compiled now
    --program->compilesRunning;
    {
      std::lock_guard<std::mutex> lock(inFlight.mutex);
      --inFlight.count;
    }
    s.entries = specialize(s.local);
    s.made = true;
    s.compiling = false;
  }
}

EntryPoints KernelImpl::specialize(const uint64_t local[3]) const {
  std::lock_guard<std::mutex> compiling(program->compileMutex);
  const std::string name = entry + ".local." + std::to_string(local[0]) + "x" +
                           std::to_string(local[1]) + "x" + std::to_string(local[2]);
  auto &jit = *program->jit;
  // Compiled before (this process or, through the object cache, an earlier one): the object
  // code serves without the optimizer.
  const std::string moduleName = hexDigest({program->moduleName, name});
  if (std::unique_ptr<llvm::MemoryBuffer> object = readCachedObject(moduleName)) {
    if (llvm::Error e = jit.addObjectFile(std::move(object)))
      llvm::consumeError(std::move(e));
  } else {
    auto context = std::make_unique<llvm::LLVMContext>();
    auto module =
        specializeEntry(*context, program->bitcode, entry, region != nullptr, local, name);
    if (!module)
      return {};
    (*module)->setModuleIdentifier(moduleName);
    if (llvm::Error e =
            jit.addIRModule(llvm::orc::ThreadSafeModule(std::move(*module), std::move(context)))) {
      llvm::consumeError(std::move(e));
      return {};
    }
  }
  auto sym = jit.lookup(name);
  if (!sym) {
    llvm::consumeError(sym.takeError());
    return {};
  }
  EntryPoints made;
  if (region)
    made.region = sym->toPtr<RegionFn>();
  else
    made.wg = sym->toPtr<WgFn>();
  return made;
}

} // namespace

Result<std::shared_ptr<Program>> load(std::span<const uint8_t> binary) {
  using namespace llvm;
  Container c;
  if (Status s = readContainer(binary, c); !s)
    return s;
  if (c.kind != BinaryKind::Executable)
    return Status::error(ErrorCode::InvalidBinary,
                         "binary is not an executable (compiled object or library)");
  initLLVM();

  auto tsc = std::make_unique<LLVMContext>();
  auto buf =
      MemoryBuffer::getMemBuffer(StringRef(c.bitcode.data(), c.bitcode.size()), "program", false);
  auto mod = parseBitcodeFile(buf->getMemBufferRef(), *tsc);
  if (!mod) {
    std::string e = toString(mod.takeError());
    return Status::error(ErrorCode::InvalidBinary, "invalid bitcode in binary: " + e);
  }
  Module &M = **mod;
  {
    std::string err;
    raw_string_ostream es(err);
    if (verifyModule(M, &es)) {
      es.flush();
      return Status::error(ErrorCode::InvalidBinary, "invalid module in binary: " + err);
    }
  }
  // Every kernel in the metadata must have its entry point, with the
  // expected signature.
  for (const KernelInfo &k : c.kernels) {
    std::string entry = !k.uses_barriers ? wgName(k.name)
                        : k.region_based ? regionName(k.name)
                                         : fiberName(k.name);
    Function *f = M.getFunction(entry);
    unsigned want = !k.uses_barriers ? 6 : k.region_based ? 7 : 5;
    if (!f || f->isDeclaration() || f->arg_size() != want ||
        f->getReturnType()->isVoidTy() != !k.region_based)
      return Status::error(ErrorCode::InvalidBinary,
                           "binary lacks the entry point of kernel '" + k.name + "'");
  }
  // The fixed symbol set: host builtins + registered natives.
  orc::SymbolMap syms;
  std::string unresolved;
  auto jtmb = orc::JITTargetMachineBuilder::detectHost();
  if (!jtmb)
    return Status::error(ErrorCode::Internal, toString(jtmb.takeError()));
  jtmb->setCodeGenOptLevel(CodeGenOpt::Aggressive);
  // Always (whether this process specializes or not): the object cache keeps one object code.
  exposeProgramVariables(M);
  std::unique_ptr<llvm::ObjectCache> objCache;
  if (!cacheDirectory().empty()) {
    // What load() does to the module before code generation is part of the key: objects made
    // before program variables were exposed cannot serve specializations.
    M.setModuleIdentifier(hexDigest({compilerVersion(), "jit-2", StringRef(c.bitcode)}));
    objCache = makeObjectCache();
  }
  const std::string moduleName = M.getModuleIdentifier();
  llvm::ObjectCache *oc = objCache.get();
  orc::LLJITBuilder builder;
  // MANYCL_PERF_MAP: the object layer LLJIT uses on x86-64 ELF (RuntimeDyld), with the
  // listener that names the JIT'ed functions for perf.
  if (JITEventListener *perfMap = perfMapListener())
    builder.setObjectLinkingLayerCreator([perfMap](orc::ExecutionSession &ES, const Triple &) {
      auto layer = std::make_unique<orc::RTDyldObjectLinkingLayer>(
          ES, [] { return std::make_unique<SectionMemoryManager>(); });
      layer->registerJITEventListener(*perfMap);
      return std::unique_ptr<orc::ObjectLayer>(std::move(layer));
    });
  auto jit = builder.setJITTargetMachineBuilder(std::move(*jtmb))
                 .setCompileFunctionCreator(
                     [oc](orc::JITTargetMachineBuilder JTMB)
                         -> Expected<std::unique_ptr<orc::IRCompileLayer::IRCompiler>> {
                       auto TM = JTMB.createTargetMachine();
                       if (!TM)
                         return TM.takeError();
                       return std::make_unique<orc::TMOwningSimpleCompiler>(std::move(*TM), oc);
                     })
                 .create();
  if (!jit)
    return Status::error(ErrorCode::Internal, "cannot create JIT: " + toString(jit.takeError()));
  for (Function &F : M) {
    if (!F.isDeclaration() || F.isIntrinsic())
      continue;
    std::string n = F.getName().str();
    void *p = lookupHostSymbol(n);
    if (!p)
      p = resolveNative(n);
    if (!p) {
      if (F.use_empty())
        continue;
      unresolved += "error: unresolved native function '" + n + "'\n";
      continue;
    }
    syms[(*jit)->mangleAndIntern(n)] = JITEvaluatedSymbol(
        pointerToJITTargetAddress(p), JITSymbolFlags::Exported | JITSymbolFlags::Callable);
  }
  // Helpers that LLVM code generation may introduce.
  for (const char *n : {"memcpy", "memset", "memmove", "sincosf", "sincos", "exp10f", "exp10",
                        "__truncdfhf2", "__truncsfhf2", "__extendhfsf2"}) {
    auto name = (*jit)->mangleAndIntern(n);
    if (syms.count(name))
      continue;
    if (void *p = lookupHostSymbol(n))
      syms[name] = JITEvaluatedSymbol(pointerToJITTargetAddress(p),
                                      JITSymbolFlags::Exported | JITSymbolFlags::Callable);
  }
  if (!unresolved.empty())
    return Status::error(ErrorCode::BuildFailure, unresolved);
  if (auto err = (*jit)->getMainJITDylib().define(orc::absoluteSymbols(std::move(syms))))
    return Status::error(ErrorCode::Internal, toString(std::move(err)));
  if (auto err = (*jit)->addIRModule(orc::ThreadSafeModule(std::move(*mod), std::move(tsc))))
    return Status::error(ErrorCode::Internal, "JIT: " + toString(std::move(err)));

  auto prog = std::make_shared<ProgramImpl>();
  prog->infos = c.kernels;
  prog->moduleName = moduleName;
  for (const KernelInfo &k : c.kernels) {
    auto ki = std::make_unique<KernelImpl>();
    ki->info_ = k;
    ki->program = prog.get();
    std::string entry = !k.uses_barriers ? wgName(k.name)
                        : k.region_based ? regionName(k.name)
                                         : fiberName(k.name);
    ki->entry = entry;
    auto sym = (*jit)->lookup(entry);
    if (!sym)
      return Status::error(ErrorCode::Internal, "JIT lookup failed: " + toString(sym.takeError()));
    if (!k.uses_barriers)
      ki->wg = sym->toPtr<WgFn>();
    else if (k.region_based)
      ki->region = sym->toPtr<RegionFn>();
    else
      ki->fiber = sym->toPtr<FiberFn>();
    prog->kernels_.push_back(std::move(ki));
  }
  prog->jit = std::move(*jit);
  prog->objCache = std::move(objCache);
  if (specializationMode() != SpecializationMode::Never)
    prog->bitcode = std::move(c.bitcode);
  return std::shared_ptr<Program>(std::move(prog));
}

// ====================================================================== run

struct Launch::Impl {
  const KernelImpl *k = nullptr;
  // The entry points of the groups of the enqueued local size, run whole on one thread.
  EntryPoints full;
  NDRange range;
  std::vector<void *> slots;        // pointer args / pointers to by-value bytes
  std::vector<int64_t> localOffset; // per arg, -1 if not a __local arg
  std::vector<uint64_t> bytes;      // 8-byte aligned storage for by-value args
  uint64_t staticOffset = 0;
  uint64_t total = 0;
  // The context slots that are the same for every group of the NDRange (the async copy hook
  // included), set by prepare() and setAsyncCopyHook() instead of for every group: short groups
  // (barrier intervals of a few vector iterations) spent a good part of their host time
  // clearing the context and dividing for the group counts.
  WiCtx ctx{};
};

Launch::Launch() = default;
Launch::~Launch() = default;
Launch::Launch(Launch &&) noexcept = default;
Launch &Launch::operator=(Launch &&) noexcept = default;

bool Launch::specialized() const {
  return impl_ && ((impl_->full.wg && impl_->full.wg != impl_->k->wg) ||
                   (impl_->full.region && impl_->full.region != impl_->k->region));
}

uint64_t Launch::localMemSize() const {
  return impl_ ? impl_->total : 0;
}

void Launch::setAsyncCopyHook(AsyncCopyHook hook, void *user) {
  if (!impl_)
    return;
  impl_->ctx.slot[SlotAsyncHook] = reinterpret_cast<uint64_t>(hook);
  impl_->ctx.slot[SlotAsyncUser] = reinterpret_cast<uint64_t>(user);
}

// Every __local block starts where any OpenCL C type may live: long16 and double16 are
// 128-byte aligned (the arena itself is 128-aligned by the runtime).
constexpr uint64_t kLocalAlignment = 128;

static uint64_t alignUp(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

Result<Launch> Launch::prepare(const Kernel &kernel, std::span<const ArgValue> args,
                               const NDRange &range, Specialize specialize) {
  auto &k = static_cast<const KernelImpl &>(kernel);
  const KernelInfo &info = k.info_;
  if (args.size() != info.args.size())
    return Status::error(ErrorCode::InvalidArgs,
                         "kernel '" + info.name + "' takes " + std::to_string(info.args.size()) +
                             " arguments, " + std::to_string(args.size()) + " given");
  if (range.work_dim < 1 || range.work_dim > 3)
    return Status::error(ErrorCode::InvalidWorkGroup, "work_dim must be 1..3");
  for (int d = 0; d < 3; ++d) {
    if (range.local[d] == 0 || range.global[d] == 0)
      return Status::error(ErrorCode::InvalidWorkGroup, "zero global or local size");
    // The kernels add local ids to the group's first global id without wrapping (SlotGroupBase).
    if (d < int(range.work_dim) && range.offset[d] + range.global[d] < range.global[d])
      return Status::error(ErrorCode::InvalidWorkGroup, "global offset + global size exceeds 2^64");
  }
  auto impl = std::make_unique<Impl>();
  impl->k = &k;
  impl->range = range;
  for (unsigned d = range.work_dim; d < 3; ++d) {
    impl->range.global[d] = 1;
    impl->range.local[d] = 1;
    impl->range.offset[d] = 0;
  }
  size_t byteWords = 0;
  for (size_t i = 0; i < args.size(); ++i)
    if (args[i].kind == ArgValue::Kind::Bytes)
      byteWords += (args[i].bytes.size() + 16) / 8 + 2;
  impl->bytes.assign(byteWords, 0);
  impl->slots.assign(args.size(), nullptr);
  impl->localOffset.assign(args.size(), -1);
  size_t w = 0;
  uint64_t off = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const KernelArgInfo &ai = info.args[i];
    const ArgValue &a = args[i];
    std::string which = "argument " + std::to_string(i) + " of kernel '" + info.name + "'";
    if (ai.address == AddressQual::Local) {
      if (a.kind != ArgValue::Kind::Local || a.local_size == 0)
        return Status::error(ErrorCode::InvalidArgs, which + " must be a non-zero __local size");
      off = alignUp(off, kLocalAlignment);
      impl->localOffset[i] = static_cast<int64_t>(off);
      off += a.local_size;
    } else if (ai.is_pointer) {
      if (a.kind != ArgValue::Kind::Pointer)
        return Status::error(ErrorCode::InvalidArgs, which + " must be a buffer (pointer)");
      impl->slots[i] = a.ptr;
    } else {
      if (a.kind != ArgValue::Kind::Bytes)
        return Status::error(ErrorCode::InvalidArgs, which + " must be a value");
      if (a.bytes.size() != ai.size)
        return Status::error(ErrorCode::InvalidArgs, which + " has size " +
                                                         std::to_string(ai.size) + ", " +
                                                         std::to_string(a.bytes.size()) + " given");
      w = alignUp(w, 2); // 16-byte alignment
      std::memcpy(&impl->bytes[w], a.bytes.data(), a.bytes.size());
      impl->slots[i] = &impl->bytes[w];
      w += (a.bytes.size() + 16) / 8;
    }
  }
  off = alignUp(off, kLocalAlignment);
  impl->staticOffset = off;
  impl->total = off + info.static_local_size;
  WiCtx &ctx = impl->ctx;
  const NDRange &R = impl->range;
  ctx.slot[SlotWorkDim] = R.work_dim;
  for (int d = 0; d < 3; ++d) {
    ctx.slot[SlotGlobalOffset + d] = R.offset[d];
    ctx.slot[SlotGlobalSize + d] = R.global[d];
    ctx.slot[SlotNumGroups + d] = R.numGroups(d);
    ctx.slot[SlotEnqLocalSize + d] = R.local[d];
  }
  ctx.slot[SlotGlobalOffset + 3] = 0;
  ctx.slot[SlotGlobalSize + 3] = 1;
  ctx.slot[SlotLocalSize + 3] = 1;
  ctx.slot[SlotGroupId + 3] = 0;
  ctx.slot[SlotGroupBase + 3] = 0;
  ctx.slot[SlotNumGroups + 3] = 1;
  ctx.slot[SlotEnqLocalSize + 3] = 1;
  uint64_t fullGroups = 1;
  for (int d = 0; d < 3; ++d)
    fullGroups *= R.global[d] / R.local[d];
  impl->full = k.forLocalSize(R.local, fullGroups, specialize);
  Launch l;
  l.impl_ = std::move(impl);
  return l;
}

// ------------------------------------------------------------------ fibers
namespace {

enum : uint8_t { FiberReady = 0, FiberAtBarrier = 1, FiberDone = 2 };

struct Sched;
struct FiberRec {
  fiber::Context context;
  uint64_t x = 0, y = 0, z = 0;
  uint8_t state = FiberReady;
  Sched *s = nullptr;
  void *stackBase = nullptr;
#ifdef MANYCL_TSAN
  void *tsan = nullptr;
#endif
};

struct Sched {
  fiber::Context main;
  FiberRec *cur = nullptr;
  FiberFn fn = nullptr;
  void **args = nullptr;
  WiCtx *ctx = nullptr;
  size_t stackSize = 0;
#ifdef MANYCL_TSAN
  void *mainTsan = nullptr;
#endif
#ifdef MANYCL_ASAN
  const void *mainBottom = nullptr;
  size_t mainSize = 0;
#endif
};

/// Fiber stacks of one executor (mmap'ed, with a guard page): private state never lives on
/// the host thread's own stack.
struct StackPool {
  size_t size = 0;
  std::vector<void *> stacks;
#ifdef MANYCL_TSAN
  // A TSan fiber per stack, kept with it: one created per work-item of every group made
  // TSan runs of fiber kernels hundreds of times slower (each is a TSan thread state).
  std::vector<void *> tsan;
#endif
  ~StackPool() {
    release();
  }
  void release() {
    for (void *s : stacks)
      munmap(static_cast<char *>(s) - pageSize(), size + pageSize());
    stacks.clear();
#ifdef MANYCL_TSAN
    for (void *t : tsan)
      __tsan_destroy_fiber(t);
    tsan.clear();
#endif
  }
  static size_t pageSize() {
    static size_t p = static_cast<size_t>(sysconf(_SC_PAGESIZE));
    return p;
  }
  bool reserve(size_t n, size_t sz) {
    if (sz > size) {
      release();
      size = sz;
    }
    while (stacks.size() < n) {
      void *m = mmap(nullptr, size + pageSize(), PROT_READ | PROT_WRITE,
                     MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
      if (m == MAP_FAILED)
        return false;
      mprotect(m, pageSize(), PROT_NONE); // guard page below the stack
      stacks.push_back(static_cast<char *>(m) + pageSize());
#ifdef MANYCL_TSAN
      tsan.push_back(__tsan_create_fiber(0));
#endif
    }
    return true;
  }
};

// Not instrumented for TSan: its frame never returns, and a TSan fiber reused for the next
// work-item (StackPool) would keep it on its shadow call stack.
#ifdef MANYCL_TSAN
__attribute__((no_sanitize("thread")))
#endif
void fiberEntry(void *p) {
  auto *f = static_cast<FiberRec *>(p);
  Sched *s = f->s;
#ifdef MANYCL_ASAN
  __sanitizer_finish_switch_fiber(nullptr, &s->mainBottom, &s->mainSize);
#endif
  s->fn(s->args, s->ctx, f->x, f->y, f->z);
  f->state = FiberDone;
#ifdef MANYCL_TSAN
  __tsan_switch_to_fiber(s->mainTsan, 0);
#endif
#ifdef MANYCL_ASAN
  __sanitizer_start_switch_fiber(nullptr, s->mainBottom, s->mainSize);
#endif
  fiber::switch_to(f->context, s->main);
  __builtin_trap();
}

inline void switchToFiber(Sched &s, FiberRec &f) {
  s.cur = &f;
#ifdef MANYCL_TSAN
  __tsan_switch_to_fiber(f.tsan, 0);
#endif
#ifdef MANYCL_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, f.stackBase, s.stackSize);
  fiber::switch_to(s.main, f.context);
  __sanitizer_finish_switch_fiber(fake, nullptr, nullptr);
#else
  fiber::switch_to(s.main, f.context);
#endif
}

// Runs work-items [first, last) of a group as fibers on stacks from `pool`; with a team, the
// calling member meets the others at each barrier.
Status runFibers(const KernelImpl &k, void **args, WiCtx &ctx, uint64_t first, uint64_t last,
                 PeTeam *team, StackPool &pool) {
  const uint64_t l0 = ctx.slot[SlotLocalSize], l1 = ctx.slot[SlotLocalSize + 1];
  const uint64_t n = last > first ? last - first : 0;
  Sched s;
  s.fn = k.fiber;
  s.args = args;
  s.ctx = &ctx;
  s.stackSize = std::max<size_t>(64 << 10, alignUp(k.info_.private_size * 2 + (32 << 10), 4096));
  ctx.slot[SlotSched] = reinterpret_cast<uint64_t>(&s);
  if (!pool.reserve(n, s.stackSize)) {
    if (team)
      team->arriveAndDrop();
    return Status::error(ErrorCode::OutOfResources, "cannot allocate fiber stacks");
  }
  s.stackSize = pool.size;
  std::vector<FiberRec> fibers(n);
  for (uint64_t i = 0; i < n; ++i) {
    uint64_t lin = first + i;
    FiberRec &f = fibers[i];
    f.x = lin % l0;
    f.y = (lin / l0) % l1;
    f.z = lin / (l0 * l1);
    f.s = &s;
    f.stackBase = pool.stacks[i];
    fiber::prepare(f.context, pool.stacks[i], pool.size, fiberEntry, &f);
#ifdef MANYCL_TSAN
    f.tsan = pool.tsan[i];
#endif
  }
#ifdef MANYCL_TSAN
  s.mainTsan = __tsan_get_current_fiber();
#endif
  for (;;) {
    bool atBarrier = false;
    for (FiberRec &f : fibers) {
      if (f.state == FiberDone)
        continue;
      f.state = FiberReady;
      switchToFiber(s, f);
      if (f.state == FiberAtBarrier)
        atBarrier = true;
    }
    if (!atBarrier)
      break;
    if (team)
      team->arriveAndWait();
  }
  if (team)
    team->arriveAndDrop();
  return Status::success();
}

} // namespace
} // namespace manycl::compiler

extern "C" void manycl::compiler::detail::__manycl_barrier(WiCtx *ctx) {
  using namespace manycl::compiler;
  auto *s = reinterpret_cast<Sched *>(ctx->slot[SlotSched]);
  FiberRec *f = s->cur;
  f->state = FiberAtBarrier;
#ifdef MANYCL_TSAN
  __tsan_switch_to_fiber(s->mainTsan, 0);
#endif
#ifdef MANYCL_ASAN
  void *fake = nullptr;
  __sanitizer_start_switch_fiber(&fake, s->mainBottom, s->mainSize);
  fiber::switch_to(f->context, s->main);
  __sanitizer_finish_switch_fiber(fake, &s->mainBottom, &s->mainSize);
#else
  fiber::switch_to(f->context, s->main);
#endif
}

namespace manycl::compiler {

namespace {
// A group's context from the launch's: GCC copies a 288-byte struct with `rep movsq`, whose
// start-up (tens of cycles on AMD cores) was a third of the executor's time per group of the
// reduction (a group is a few short calls); 16-byte moves cost a few cycles.
inline void copyContext(WiCtx &to, const WiCtx &from) {
  static_assert(sizeof(WiCtx) % 16 == 0);
  auto *d = reinterpret_cast<__m128i *>(&to);
  auto *s = reinterpret_cast<const __m128i *>(&from);
#pragma GCC unroll 32
  for (size_t i = 0; i < sizeof(WiCtx) / 16; ++i)
    _mm_storeu_si128(d + i, _mm_loadu_si128(s + i));
}

// The slowest modeled PE's share of a group of lx x rows work-items split over P PEs. SPMD
// splits a group by rows when there are at least as many rows as PEs, else by x, into
// contiguous slices that differ by at most one row or x: the slowest PE has ceil(rows / P) rows
// of lx items, or all rows of ceil(lx / P) items. Computed once per group (divisions).
struct PeShare {
  PeShare(unsigned P, uint64_t lx, uint64_t rows)
      : r(rows >= P ? ceilDiv(rows, P) : rows), x(rows >= P ? lx : ceilDiv(lx, P)),
        rowWeight(r * lx), itemWeight(x * r), total(lx * rows),
        shift(pow2(total) ? std::countr_zero(total) : -1) {}
  // std::has_single_bit is a popcount, a libgcc call per group for a host compiler that may
  // not assume POPCNT.
  static bool pow2(uint64_t v) { return v && !(v & (v - 1)); }
  // PE counts are powers of two on the presets: a shift, not a division, on the launch path.
  static uint64_t ceilDiv(uint64_t a, unsigned b) {
    return pow2(b) ? (a + b - 1) >> std::countr_zero(b) : (a + b - 1) / b;
  }
  uint64_t r, x;                  // the slowest PE's rows and items per row
  uint64_t rowWeight, itemWeight; // its shares of the row and item ticks, times total
  uint64_t total;                 // items of the group
  int shift; // log2(total) when a power of two: a shift instead of a division per call

  // The ticks of the slowest PE after one call over the whole group: each PE pays the
  // per-call cost, its share of the rows' cost and its share of the items' cost, as if it had
  // run its slice in a call of its own (an x slice runs every row). Work-items cost the same
  // (KernelInfo::Cost::Uniform), or differ only by the divergent blocks they ran, whose cost
  // is charged to the slowest PE whole (an upper bound, exact when one PE runs them all, as
  // for `if (get_local_id(0) == 0)`).
  uint64_t slowest(const WiCtx &c) const {
    const uint64_t row = c.slot[SlotCyclesRow], item = c.slot[SlotCyclesItem];
    const uint64_t divergent = c.slot[SlotCyclesDivergent];
    const uint64_t perCall = c.slot[SlotCycles] - row - item;
    // (row x r x lx + (item - divergent) x x x r) / total, rounded up: in 64 bits unless a
    // product overflows (billions of ticks per call).
    uint64_t a, b, num;
    uint64_t share;
    if (!__builtin_mul_overflow(row, rowWeight, &a) &&
        !__builtin_mul_overflow(item - divergent, itemWeight, &b) &&
        !__builtin_add_overflow(a, b, &num) && !__builtin_add_overflow(num, total - 1, &num)) {
      share = shift >= 0 ? num >> shift : num / total;
    } else {
      const unsigned __int128 wide = static_cast<unsigned __int128>(row) * rowWeight +
                                     static_cast<unsigned __int128>(item - divergent) * itemWeight +
                                     total - 1;
      share = static_cast<uint64_t>(wide / total);
    }
    return perCall + share + divergent;
  }
};

// A region kernel's group with its modeled cost: each region runs over the whole group in one
// call on the calling thread (its work-item loop vectorizes; the split over the modeled PEs is
// arithmetic, and the same whatever the host threads). The group takes the slowest PE of every
// barrier interval plus the PE barrier.
Status runRegionsCosted(const KernelImpl &k, RegionFn region, void **slots, WiCtx &ctx, uint64_t lx,
                        uint64_t rows, GroupCost &cost) {
  const unsigned P = std::max(1u, cost.pes);
  const PeShare share(P, lx, rows);
  // Power-of-two groups (all those of the benchmarks): each region call adds its interval's
  // cycles itself (cost_instrument.cpp), from the shares set here, in registers as it returns;
  // other groups sum them here.
  const bool inCall = share.shift >= 0 && share.rowWeight < (uint64_t(1) << 62) &&
                      share.itemWeight < (uint64_t(1) << 62);
  // A row share of 0 (never one of a non-empty group) tells the region function to report its
  // sums by class instead.
  ctx.slot[SlotShareRow] = inCall ? share.rowWeight : 0;
  ctx.slot[SlotShareItem] = inCall ? share.itemWeight : 0;
  ctx.slot[SlotShareShift] = inCall ? static_cast<uint64_t>(share.shift) : 0;
  ctx.slot[SlotShareRound] = share.total - 1;
  ctx.slot[SlotIntervalCycles] = 0;
  // Loop-barrier kernels' intervals are trips of a loop (a fraction of a cycle per PE each):
  // their ticks are summed and rounded once (the region functions add ticks, not cycles).
  // Only the source's barriers (region ids up to source_barriers) are PE barriers.
  const bool trips = k.info_.loop_barriers;
  const int32_t lastSourceRegion = static_cast<int32_t>(k.info_.source_barriers);
  uint64_t cycles = 0, intervals = 0, peBarriers = 0;
  for (int32_t next = 0; next != kRegionExit; ++intervals) {
    ctx.slot[SlotParity] = intervals;
    next = region(slots, &ctx, next, 0, lx, 0, rows); // sets the cost slots
    if (!inCall)
      cycles += trips ? share.slowest(ctx) : cost::ticksToCycles(share.slowest(ctx));
    if (next != kRegionExit && next <= lastSourceRegion)
      ++peBarriers;
  }
  if (inCall)
    cycles = ctx.slot[SlotIntervalCycles];
  if (trips)
    cycles = cost::ticksToCycles(cycles);
  if (P > 1)
    cycles += peBarriers * cost::kPeBarrierCycles;
  cost.cycles = cycles;
  return Status::success();
}

// The heap frame of barrier-free kernels whose private arrays are too large for a host
// stack. Every live block is also listed in a process-wide registry: the host pool's workers
// live until the process ends, and leak checkers do not always see a live thread's static TLS
// (LSan of GCC 12 with glibc >= 2.34 reports such blocks as leaks).
class HeapFrame {
public:
  HeapFrame() = default;
  HeapFrame(const HeapFrame &) = delete;
  HeapFrame &operator=(const HeapFrame &) = delete;
  ~HeapFrame() { resize(0); }
  uint64_t *get(size_t words) {
    if (words_ < words)
      resize(words);
    return block_;
  }

private:
  struct Registry {
    std::mutex mu;
    std::vector<uint64_t *> blocks;
  };
  static Registry &registry() {
    static auto *r = new Registry; // never destroyed: threads may exit after static dtors
    return *r;
  }
  void resize(size_t words) {
    Registry &r = registry();
    std::lock_guard<std::mutex> l(r.mu);
    if (block_) {
      std::erase(r.blocks, block_);
      delete[] block_;
      block_ = nullptr;
      words_ = 0;
    }
    if (words) {
      block_ = new uint64_t[words]();
      words_ = words;
      r.blocks.push_back(block_);
    }
  }
  uint64_t *block_ = nullptr;
  size_t words_ = 0;
};
} // namespace

struct GroupScratch::Impl {
  std::vector<uint64_t> frame; // region kernels' context arrays (a group run on one thread)
  HeapFrame heap;              // barrier-free kernels' private arrays
  StackPool stacks;            // work-item fibers
};

GroupScratch::GroupScratch() : impl_(std::make_unique<Impl>()) {}
GroupScratch::~GroupScratch() = default;

namespace {
// The scratch of a thread that runs its groups to completion one after the other.
GroupScratch::Impl &threadScratch() {
  static thread_local GroupScratch::Impl mine;
  return mine;
}

// A team member's scratch: its own when the team gives it one.
GroupScratch::Impl &memberScratch(PeTeam &team, unsigned pe) {
  GroupScratch *own = team.scratch(pe);
  return own ? own->impl() : threadScratch();
}
} // namespace

Status Launch::runGroup(const uint64_t group_id[3], void *arena, size_t arena_size, ExecMode mode,
                        PeTeam *team, GroupCost *cost) const {
  if (!impl_)
    return Status::error(ErrorCode::Internal, "empty launch");
  const Impl &L = *impl_;
  if (arena_size < L.total || (L.total && !arena))
    return Status::error(ErrorCode::OutOfResources,
                         "__local memory: kernel needs " + std::to_string(L.total) +
                             " bytes, arena has " + std::to_string(arena_size));
  const NDRange &R = L.range;
  WiCtx ctx;
  copyContext(ctx, L.ctx);
  uint64_t ls[3];
  for (int d = 0; d < 3; ++d) {
    if (group_id[d] >= ctx.slot[SlotNumGroups + d])
      return Status::error(ErrorCode::InvalidWorkGroup, "group id out of range");
    ls[d] = std::min<uint64_t>(R.local[d], R.global[d] - group_id[d] * R.local[d]);
    ctx.slot[SlotLocalSize + d] = ls[d];
    ctx.slot[SlotGroupId + d] = group_id[d];
    ctx.slot[SlotGroupBase + d] = group_id[d] * R.local[d] + R.offset[d];
  }
  auto *base = static_cast<char *>(arena);
  ctx.slot[SlotLocalStatic] = reinterpret_cast<uint64_t>(base + L.staticOffset);

  void *slotsBuf[64];
  std::vector<void *> slotsVec;
  void **slots = slotsBuf;
  if (L.slots.size() > 64) {
    slotsVec.resize(L.slots.size());
    slots = slotsVec.data();
  }
  for (size_t i = 0; i < L.slots.size(); ++i)
    slots[i] = L.localOffset[i] >= 0 ? base + L.localOffset[i] : L.slots[i];

  const KernelImpl &k = *L.k;
  // A whole group on one thread runs the code of its local size when it has the enqueued one.
  const bool enqueuedSize = ls[0] == R.local[0] && ls[1] == R.local[1] && ls[2] == R.local[2];
  const WgFn wholeWg = enqueuedSize ? L.full.wg : k.wg;
  const RegionFn wholeRegion = enqueuedSize ? L.full.region : k.region;
  const uint64_t rows = ls[1] * ls[2];
  const uint64_t total = ls[0] * rows;
  const bool single = mode == ExecMode::LWI || !team || team->size() <= 1;
  if (k.region) {
    // Per-work-item context arrays from SlotFrame on; the work-group uniform slots (a multiple
    // of 64 bytes) right below it. A team shares one frame, allocated for the group: its
    // members may yield their host threads mid-group.
    std::vector<uint64_t> ownFrame;
    std::vector<uint64_t> &frameBuf = single ? threadScratch().frame : ownFrame;
    const uint64_t uniformBytes = k.info_.uniform_frame_size;
    size_t words = static_cast<size_t>((uniformBytes + total * k.info_.frame_size + 7) / 8) + 8;
    if (frameBuf.size() < words)
      frameBuf.assign(words, 0);
    auto frameAddr = (reinterpret_cast<uintptr_t>(frameBuf.data()) + 63) & ~uintptr_t(63);
    ctx.slot[SlotFrame] = frameAddr + uniformBytes;
    if (cost && k.info_.cost != KernelInfo::Cost::None)
      return runRegionsCosted(k, wholeRegion, slots, ctx, ls[0], rows, *cost);
    if (single) {
      int32_t next = 0;
      for (uint64_t interval = 0; next != kRegionExit; ++interval) {
        ctx.slot[SlotParity] = interval;
        next = wholeRegion(slots, &ctx, next, 0, ls[0], 0, rows);
      }
      return Status::success();
    }
    const unsigned P = team->size();
    // Work-item slices; PEs without work leave the barrier at once.
    team->run([&](unsigned pe) {
      WiCtx my = ctx;
      uint64_t xa = 0, xb = ls[0], ra = 0, rb = rows;
      if (rows >= P) {
        ra = rows * pe / P;
        rb = rows * (pe + 1) / P;
      } else {
        xa = ls[0] * pe / P;
        xb = ls[0] * (pe + 1) / P;
      }
      if (xa >= xb || ra >= rb) {
        team->arriveAndDrop();
        return;
      }
      int32_t next = 0;
      for (uint64_t interval = 0;; ++interval) {
        my.slot[SlotParity] = interval;
        next = k.region(slots, &my, next, xa, xb, ra, rb);
        if (next == kRegionExit)
          break;
        team->arriveAndWait();
      }
      team->arriveAndDrop();
    });
    return Status::success();
  }
  // Barrier-free kernels with large private arrays: a heap frame per executor.
  auto heapFrameFor = [&](WiCtx &c, GroupScratch::Impl *member) {
    if (!k.wg || k.info_.frame_size == 0)
      return;
    size_t words = static_cast<size_t>(k.info_.frame_size / 8) + 8;
    HeapFrame &heap = member ? member->heap : threadScratch().heap;
    c.slot[SlotFrame] = (reinterpret_cast<uintptr_t>(heap.get(words)) + 63) & ~uintptr_t(63);
  };
  if (cost && k.wg && k.info_.cost != KernelInfo::Cost::None) {
    // The whole group in one call (a vectorized work-item loop), the split over the modeled
    // PEs arithmetic.
    heapFrameFor(ctx, nullptr);
    wholeWg(slots, &ctx, 0, ls[0], 0, rows);
    cost->cycles = cost::ticksToCycles(PeShare(std::max(1u, cost->pes), ls[0], rows).slowest(ctx));
    return Status::success();
  }
  if (single) {
    if (k.wg) {
      heapFrameFor(ctx, nullptr);
      wholeWg(slots, &ctx, 0, ls[0], 0, rows);
      return Status::success();
    }
    Status st = runFibers(k, slots, ctx, 0, total, nullptr, threadScratch().stacks);
    if (cost) // fibers (a fallback): the group's ticks shared evenly by the PEs
      cost->cycles =
          cost::ticksToCycles((ctx.slot[SlotCycles] + cost->pes - 1) / std::max(1u, cost->pes));
    return st;
  }
  const unsigned P = team->size();
  if (k.wg) {
    team->run([&](unsigned pe) {
      WiCtx my = ctx;
      heapFrameFor(my, &memberScratch(*team, pe));
      if (rows >= P) {
        k.wg(slots, &my, 0, ls[0], rows * pe / P, rows * (pe + 1) / P);
      } else {
        uint64_t a = ls[0] * pe / P, b = ls[0] * (pe + 1) / P;
        if (a < b)
          k.wg(slots, &my, a, b, 0, rows);
      }
    });
    return Status::success();
  }
  std::mutex mu;
  Status result;
  uint64_t ticks = 0;
  team->run([&](unsigned pe) {
    WiCtx my = ctx;
    Status s = runFibers(k, slots, my, total * pe / P, total * (pe + 1) / P, team,
                         memberScratch(*team, pe).stacks);
    std::lock_guard<std::mutex> g(mu);
    ticks += my.slot[SlotCycles];
    if (!s)
      result = s;
  });
  if (cost)
    cost->cycles = cost::ticksToCycles((ticks + cost->pes - 1) / std::max(1u, cost->pes));
  return result;
}

// ------------------------------------------------------------ thread team
namespace {
class ThreadPeTeam final : public PeTeam {
public:
  explicit ThreadPeTeam(unsigned n) : n_(n ? n : 1) {
    for (unsigned i = 1; i < n_; ++i)
      threads_.emplace_back([this, i] { loop(i); });
  }
  ~ThreadPeTeam() override {
    {
      std::lock_guard<std::mutex> l(mu_);
      stop_ = true;
      ++gen_;
    }
    cv_.notify_all();
    for (auto &t : threads_)
      t.join();
  }
  unsigned size() const override { return n_; }
  void run(const std::function<void(unsigned)> &fn) override {
    std::lock_guard<std::mutex> runLock(runMu_);
    barrier_.emplace(static_cast<std::ptrdiff_t>(n_));
    {
      std::lock_guard<std::mutex> l(mu_);
      fn_ = &fn;
      pending_ = n_ - 1;
      ++gen_;
    }
    cv_.notify_all();
    fn(0);
    std::unique_lock<std::mutex> l(mu_);
    doneCv_.wait(l, [&] { return pending_ == 0; });
    fn_ = nullptr;
  }
  void arriveAndWait() override { barrier_->arrive_and_wait(); }
  void arriveAndDrop() override { barrier_->arrive_and_drop(); }

private:
  void loop(unsigned idx) {
    uint64_t seen = 0;
    for (;;) {
      const std::function<void(unsigned)> *fn;
      {
        std::unique_lock<std::mutex> l(mu_);
        cv_.wait(l, [&] { return gen_ != seen; });
        seen = gen_;
        if (stop_)
          return;
        fn = fn_;
      }
      (*fn)(idx);
      {
        std::lock_guard<std::mutex> l(mu_);
        if (--pending_ == 0)
          doneCv_.notify_all();
      }
    }
  }
  unsigned n_;
  std::optional<std::barrier<>> barrier_; // the current run's
  std::vector<std::thread> threads_;
  std::mutex mu_, runMu_;
  std::condition_variable cv_, doneCv_;
  const std::function<void(unsigned)> *fn_ = nullptr;
  unsigned pending_ = 0;
  uint64_t gen_ = 0;
  bool stop_ = false;
};
} // namespace

std::unique_ptr<PeTeam> makeThreadPeTeam(unsigned n) {
  return std::make_unique<ThreadPeTeam>(n);
}

} // namespace manycl::compiler
