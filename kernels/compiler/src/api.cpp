// build / compile / link entry points.
#include "frontend.h"

#include <llvm/ADT/StringMap.h>
#include <llvm/Bitcode/BitcodeReader.h>
#include <llvm/Bitcode/BitcodeWriter.h>
#include <llvm/IR/DiagnosticInfo.h>
#include <llvm/IR/DiagnosticPrinter.h>
#include <llvm/IR/LLVMContext.h>
#include <llvm/IR/Module.h>
#include <llvm/Linker/Linker.h>
#include <llvm/Support/FileSystem.h>
#include <llvm/Support/Host.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/raw_ostream.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>

#include <unistd.h>

extern "C" const char manycl_builtins_bc[];
extern "C" const char manycl_builtins_bc_end[];

#ifndef MANYCL_COMPILER_VERSION
#define MANYCL_COMPILER_VERSION "0.1.0"
#endif

namespace manycl::compiler {
using namespace detail;

std::string DeviceDesc::key() const {
  return "ab=" + std::to_string(address_bits) + ";lm=" + std::to_string(local_mem_size) +
         ";mode=" + std::to_string(static_cast<int>(mode)) +
         ";pes=" + std::to_string(pes_per_cluster) + ";fp64=" + std::to_string(fp64) +
         ";fp16=" + std::to_string(fp16);
}

bool detail::costInstrumentation() {
  static const bool on = [] {
    const char *v = std::getenv("MANYCL_COST");
    return !(v && std::string_view(v) == "0");
  }();
  return on;
}

bool detail::costPerTrip() {
  static const bool on = [] {
    const char *v = std::getenv("MANYCL_COST");
    return v && std::string_view(v) == "per-trip";
  }();
  return on;
}

std::string compilerVersion() {
  static const std::string v = [] {
    uint64_t h = fnv1a64(manycl_builtins_bc,
                         static_cast<size_t>(manycl_builtins_bc_end - manycl_builtins_bc));
    char buf[32];
    std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(h));
    return std::string("manycl-compiler " MANYCL_COMPILER_VERSION " llvm-16 builtins-") + buf +
           " cpu-" + hostCpu() +
           (!costInstrumentation() ? " cost-off"
            : costPerTrip()        ? " cost-per-trip"
                                   : " cost-5") +
           (costInstrumentation() ? std::string(" costed-ir-") + kCostedIrCpu : std::string());
  }();
  return v;
}

unsigned hostVectorBytes() {
  static const unsigned bytes = [] {
    llvm::StringMap<bool> f;
    if (!llvm::sys::getHostCPUFeatures(f))
      return 16u;
    if (f.lookup("avx512f"))
      return 64u;
    return f.lookup("avx") ? 32u : 16u;
  }();
  return bytes;
}

// MANYCL_DUMP_IR=file writes the module of the last build/compile/link to `file`;
// MANYCL_DUMP_IR=dir/ (a trailing slash) keeps every one, as dir/<pid>-<n>.ll, with the
// source (.cl) and options (.opts) of builds, so that a program that builds many (hashcat,
// CLBlast) can be looked at kernel by kernel and rebuilt alone.
void detail::dumpModule(llvm::Module &M, std::string_view source, std::string_view options,
                        std::string_view fileSuffix) {
  const char *d = std::getenv("MANYCL_DUMP_IR");
  if (!d || !*d)
    return;
  std::string path = d;
  if (path.back() != '/' && !fileSuffix.empty()) {
    path += '.';
    path += fileSuffix;
  } else if (path.back() == '/') {
    static std::atomic<unsigned> counter{0};
    path += std::to_string(::getpid()) + "-" + std::to_string(counter++);
    std::error_code ec;
    if (!source.empty()) {
      llvm::raw_fd_ostream(path + ".cl", ec) << source;
      llvm::raw_fd_ostream(path + ".opts", ec) << options;
    }
    path += ".ll";
  }
  std::error_code ec;
  llvm::raw_fd_ostream os(path, ec);
  if (!ec)
    M.print(os, nullptr);
}

static std::string toBitcode(llvm::Module &M, std::string_view source = {},
                             std::string_view options = {}) {
  dumpModule(M, source, options);
  std::string s;
  llvm::raw_string_ostream os(s);
  llvm::WriteBitcodeToFile(M, os);
  os.flush();
  return s;
}

// MANYCL_TIMING=1: the front end's time, next to finalizeModule's phases.
static void timing(const char *what, std::chrono::steady_clock::time_point since) {
  static const bool on = std::getenv("MANYCL_TIMING") != nullptr;
  if (on)
    std::fprintf(stderr, "manycl: %s %.1f ms\n", what,
                 std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - since)
                     .count());
}

static BuildResult fail(ErrorCode c, std::string log, std::string msg) {
  BuildResult r;
  r.status = Status::error(c, std::move(msg));
  r.log = std::move(log);
  return r;
}

static BuildResult fromContainer(Container &&c, bool cached) {
  BuildResult r;
  r.kind = c.kind;
  r.log = c.log;
  r.kernels = c.kernels;
  r.binary = writeContainer(c);
  r.from_cache = cached;
  return r;
}

BuildResult build(std::string_view source, std::string_view options, const DeviceDesc &dev) {
  try {
    ParsedOptions po = parseOptions(options, OptionsKind::Build);
    if (!po.error.empty())
      return fail(ErrorCode::InvalidOptions, "error: " + po.error + "\n", po.error);
    initLLVM();
    llvm::LLVMContext ctx;
    std::string key;
    if (!cacheDirectory().empty()) {
      auto pp = runFrontend(ctx, source, po, dev, {}, /*preprocessOnly=*/true);
      if (pp.invalidOptions)
        return fail(ErrorCode::InvalidOptions, pp.log, "invalid build options");
      if (pp.ok) {
        std::string text = pp.preprocessed;
        text += "\n// source\n";
        text.append(source.data(), source.size());
        std::string opts(options);
        if (const char *m = std::getenv("MANYCL_WG_METHOD"))
          opts += std::string("\n#wg-method=") + m;
        if (const char *m = std::getenv("MANYCL_LOOP_BARRIERS"))
          opts += std::string("\n#loop-barriers=") + m;
        key = cacheKey(text, opts, dev);
        Container c;
        // Whether an mppa_native function resolves depends on the libraries registered in
        // this process, not on the source: such programs are not served from the cache, so
        // an unresolved function still fails the build.
        bool uses_natives = text.find("mppa_native") != std::string::npos;
        if (!uses_natives && cacheLoad(key, c))
          return fromContainer(std::move(c), true);
      }
    }
    auto t0 = std::chrono::steady_clock::now();
    auto fe = runFrontend(ctx, source, po, dev, {}, false);
    timing("front end", t0);
    if (fe.invalidOptions)
      return fail(ErrorCode::InvalidOptions, fe.log, "invalid build options");
    if (!fe.ok)
      return fail(ErrorCode::BuildFailure, fe.log, "compilation failed");
    Container c;
    c.kind = BinaryKind::Executable;
    c.options = std::string(options);
    c.device_key = dev.key();
    std::string log = fe.log;
    Status s = finalizeModule(*fe.module, po, dev, c.kernels, log);
    if (!s)
      return fail(s.code, log, s.message);
    c.log = log;
    c.bitcode = toBitcode(*fe.module, source, options);
    BuildResult r = fromContainer(std::move(c), false);
    if (!key.empty())
      cacheStore(key, r.binary);
    return r;
  } catch (const std::exception &e) {
    return fail(ErrorCode::Internal, std::string("internal error: ") + e.what() + "\n", e.what());
  }
}

BuildResult compile(std::string_view source, std::string_view options, const DeviceDesc &dev,
                    std::span<const HeaderSource> headers) {
  try {
    ParsedOptions po = parseOptions(options, OptionsKind::Compile);
    if (!po.error.empty())
      return fail(ErrorCode::InvalidOptions, "error: " + po.error + "\n", po.error);
    initLLVM();
    llvm::LLVMContext ctx;
    auto t0 = std::chrono::steady_clock::now();
    auto fe = runFrontend(ctx, source, po, dev, headers, false);
    timing("front end (compile)", t0);
    if (fe.invalidOptions)
      return fail(ErrorCode::InvalidOptions, fe.log, "invalid compile options");
    if (!fe.ok)
      return fail(ErrorCode::BuildFailure, fe.log, "compilation failed");
    Container c;
    c.kind = BinaryKind::Object;
    c.options = std::string(options);
    c.device_key = dev.key();
    c.log = fe.log;
    c.kernels = extractKernels(*fe.module);
    c.bitcode = toBitcode(*fe.module, source, options);
    return fromContainer(std::move(c), false);
  } catch (const std::exception &e) {
    return fail(ErrorCode::Internal, std::string("internal error: ") + e.what() + "\n", e.what());
  }
}

BuildResult link(std::span<const std::span<const uint8_t>> inputs, std::string_view options,
                 const DeviceDesc &dev) {
  try {
    ParsedOptions po = parseOptions(options, OptionsKind::Link);
    if (!po.error.empty())
      return fail(ErrorCode::InvalidOptions, "error: " + po.error + "\n", po.error);
    if (inputs.empty())
      return fail(ErrorCode::LinkFailure, "error: nothing to link\n", "no inputs");
    initLLVM();
    llvm::LLVMContext ctx;
    std::unique_ptr<llvm::Module> dst;
    std::string log;
    for (size_t i = 0; i < inputs.size(); ++i) {
      Container c;
      if (Status s = readContainer(inputs[i], c); !s)
        return fail(ErrorCode::InvalidBinary,
                    "error: input " + std::to_string(i) + ": " + s.message + "\n", s.message);
      if (c.kind != BinaryKind::Object && c.kind != BinaryKind::Library)
        return fail(ErrorCode::InvalidBinary,
                    "error: input " + std::to_string(i) + " is not a compiled object or library\n",
                    "not an object");
      auto buf = llvm::MemoryBuffer::getMemBuffer(llvm::StringRef(c.bitcode), "input", false);
      auto m = llvm::parseBitcodeFile(buf->getMemBufferRef(), ctx);
      if (!m) {
        std::string e = llvm::toString(m.takeError());
        return fail(ErrorCode::InvalidBinary, "error: input " + std::to_string(i) + ": " + e + "\n",
                    e);
      }
      if (!dst) {
        dst = std::move(*m);
        continue;
      }
      std::string diag;
      ctx.setDiagnosticHandlerCallBack(
          [](const llvm::DiagnosticInfo &DI, void *p) {
            llvm::raw_string_ostream os(*static_cast<std::string *>(p));
            llvm::DiagnosticPrinterRawOStream dp(os);
            DI.print(dp);
            os << "\n";
          },
          &diag);
      if (llvm::Linker::linkModules(*dst, std::move(*m)))
        return fail(ErrorCode::LinkFailure,
                    "error: " + (diag.empty() ? std::string("link failed\n") : diag),
                    "link failed");
      log += diag;
    }
    Container c;
    c.options = std::string(options);
    c.device_key = dev.key();
    if (po.create_library) {
      c.kind = BinaryKind::Library;
      c.kernels = extractKernels(*dst);
      c.bitcode = toBitcode(*dst);
      c.log = log;
      return fromContainer(std::move(c), false);
    }
    c.kind = BinaryKind::Executable;
    Status s = finalizeModule(*dst, po, dev, c.kernels, log);
    if (!s)
      return fail(ErrorCode::LinkFailure, log, s.message);
    c.log = log;
    c.bitcode = toBitcode(*dst);
    return fromContainer(std::move(c), false);
  } catch (const std::exception &e) {
    return fail(ErrorCode::Internal, std::string("internal error: ") + e.what() + "\n", e.what());
  }
}

Result<BinaryInfo> inspectBinary(std::span<const uint8_t> binary) {
  Container c;
  if (Status s = readContainer(binary, c); !s)
    return s;
  BinaryInfo bi;
  bi.kind = c.kind;
  bi.options = c.options;
  bi.log = c.log;
  bi.device_key = c.device_key;
  bi.kernels = c.kernels;
  return bi;
}

} // namespace manycl::compiler
