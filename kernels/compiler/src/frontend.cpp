// Clang in process: OpenCL C source -> LLVM module, and preprocessing for
// the cache key.
#include "frontend.h"

#include <clang/Basic/Diagnostic.h>
#include <clang/Basic/DiagnosticOptions.h>
#include <clang/CodeGen/CodeGenAction.h>
#include <clang/Frontend/CompilerInstance.h>
#include <clang/Frontend/CompilerInvocation.h>
#include <clang/Frontend/FrontendActions.h>
#include <clang/Frontend/TextDiagnosticPrinter.h>
#include <clang/Lex/Preprocessor.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>
#include <llvm/Support/VirtualFileSystem.h>
#include <llvm/Support/raw_ostream.h>

#include <cstdlib>

#ifndef MANYCL_CLANG_RESOURCE_DIR
#define MANYCL_CLANG_RESOURCE_DIR "/usr/lib/llvm-16/lib/clang/16"
#endif

namespace manycl::compiler::detail {

static const char *kInputDir = "/manycl-src";
static const char *kInputFile = "/manycl-src/input.cl";

static std::string resourceDir() {
  if (const char *e = std::getenv("MANYCL_CLANG_RESOURCE_DIR"); e && *e)
    return e;
  return MANYCL_CLANG_RESOURCE_DIR;
}

std::string extensionsFor(const DeviceDesc &dev, const std::string &std) {
  std::string e = "-cl-ext=-all,+cl_khr_global_int32_base_atomics,"
                  "+cl_khr_global_int32_extended_atomics,"
                  "+cl_khr_local_int32_base_atomics,"
                  "+cl_khr_local_int32_extended_atomics,"
                  "+cl_khr_byte_addressable_store";
  if (dev.fp64)
    e += ",+cl_khr_fp64";
  if (dev.fp16)
    e += ",+cl_khr_fp16";
  if (std == "CL3.0") {
    if (dev.fp64)
      e += ",+__opencl_c_fp64";
    e += ",+__opencl_c_int64";
  }
  return e;
}

namespace {
/// Lexes the whole translation unit and feeds every token to a hash.
class HashTokensAction : public clang::PreprocessorFrontendAction {
public:
  explicit HashTokensAction(std::string &out) : out_(out) {}

protected:
  void ExecuteAction() override {
    clang::Preprocessor &PP = getCompilerInstance().getPreprocessor();
    PP.EnterMainSourceFile();
    clang::Token tok;
    do {
      PP.Lex(tok);
      if (tok.hasLeadingSpace())
        out_ += ' ';
      if (tok.isAtStartOfLine())
        out_ += '\n';
      out_ += PP.getSpelling(tok);
    } while (tok.isNot(clang::tok::eof));
  }

private:
  std::string &out_;
};
} // namespace

static void replaceAll(std::string &s, const std::string &from, const std::string &to) {
  for (size_t p = 0; (p = s.find(from, p)) != std::string::npos; p += to.size())
    s.replace(p, from.size(), to);
}

FrontendOutput runFrontend(llvm::LLVMContext &ctx, std::string_view source, const ParsedOptions &po,
                           const DeviceDesc &dev, std::span<const HeaderSource> headers,
                           bool preprocessOnly) {
  FrontendOutput out;
  std::vector<std::string> args = {
      "-triple",
      "x86_64-unknown-linux-gnu",
      "-emit-llvm",
      "-O2",
      "-disable-llvm-passes",
      "-discard-value-names",
      "-fno-rounding-math",
      "-ffp-contract=on",
      "-mrelocation-model",
      "pic",
      "-pic-level",
      "2",
      "-resource-dir",
      resourceDir(),
      "-internal-isystem",
      resourceDir() + "/include",
      "-finclude-default-header",
      "-fdeclare-opencl-builtins",
      "-cl-std=" + po.cl_std,
      extensionsFor(dev, po.cl_std),
      "-D__MANYCL__=1",
      // The OpenCL version of the device (CL_DEVICE_VERSION), which clang leaves to the
      // implementation; __OPENCL_C_VERSION__ (the language version) clang defines itself.
      "-D__OPENCL_VERSION__=120",
      // Kalray's attribute for host-native functions: accepted everywhere.
      "-Dmppa_native=annotate(\"mppa_native\")",
      "-ferror-limit",
      "50",
      // The x86-64 calling convention of 256/512-bit vectors (long4, double8...) is ours, not the
      // program's: the builtin library is lowered the same way, so calls agree. Left on, clang
      // warns on every such call, and under -Werror fails valid programs.
      "-Wno-psabi",
  };
  if (po.cl_std == "CL3.0")
    args.push_back("-D__OPENCL_C_VERSION_SELECTED__=300");
  for (auto &a : po.clang_args)
    args.push_back(a);
  args.push_back("-x");
  args.push_back("cl");
  args.push_back(kInputFile);

  std::vector<const char *> argv;
  for (auto &a : args)
    argv.push_back(a.c_str());

  std::string log;
  llvm::raw_string_ostream os(log);
  auto diagOpts = llvm::makeIntrusiveRefCnt<clang::DiagnosticOptions>();
  diagOpts->ShowColors = false;
  auto *printer = new clang::TextDiagnosticPrinter(os, diagOpts.get());
  {
    auto invDiags = llvm::makeIntrusiveRefCnt<clang::DiagnosticsEngine>(
        llvm::makeIntrusiveRefCnt<clang::DiagnosticIDs>(), diagOpts.get(), printer,
        /*ShouldOwnClient=*/false);
    auto inv = std::make_shared<clang::CompilerInvocation>();
    bool okArgs = clang::CompilerInvocation::CreateFromArgs(*inv, argv, *invDiags);
    if (!okArgs || invDiags->hasErrorOccurred()) {
      os.flush();
      out.log = log;
      out.invalidOptions = true;
      delete printer;
      return out;
    }
    inv->getDiagnosticOpts().ShowColors = false;
    inv->getFrontendOpts().DisableFree = false;

    clang::CompilerInstance ci;
    ci.setInvocation(inv);
    auto mem = llvm::makeIntrusiveRefCnt<llvm::vfs::InMemoryFileSystem>();
    mem->addFile(kInputFile, 0,
                 llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(source.data(), source.size()),
                                                      kInputFile));
    for (auto &h : headers) {
      std::string p = h.name;
      if (p.empty() || p[0] != '/')
        p = std::string(kInputDir) + "/" + p;
      mem->addFile(p, 0, llvm::MemoryBuffer::getMemBufferCopy(h.source, p));
    }
    auto overlay =
        llvm::makeIntrusiveRefCnt<llvm::vfs::OverlayFileSystem>(llvm::vfs::getRealFileSystem());
    overlay->pushOverlay(mem);
    ci.createDiagnostics(printer, /*ShouldOwnClient=*/false);
    ci.createFileManager(overlay);
    ci.setVerboseOutputStream(os); // "N errors generated." goes to the log

    if (preprocessOnly) {
      HashTokensAction act(out.preprocessed);
      out.ok = ci.ExecuteAction(act) && !ci.getDiagnostics().hasErrorOccurred();
    } else {
      clang::EmitLLVMOnlyAction act(&ctx);
      bool ok = ci.ExecuteAction(act);
      if (ok)
        out.module = act.takeModule();
      out.ok = ok && out.module && !ci.getDiagnostics().hasErrorOccurred();
    }
  }
  delete printer;
  os.flush();
  replaceAll(log, kInputFile, "input.cl");
  replaceAll(log, std::string(kInputDir) + "/", "");
  out.log = log;
  return out;
}

} // namespace manycl::compiler::detail
