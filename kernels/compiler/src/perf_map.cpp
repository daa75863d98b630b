// perf's map of JIT code (/tmp/perf-<pid>.map: "start size name" per line, hexadecimal), written
// as the JIT loads each program's object. perf reads the file when it reports, so entries only
// need to be there by the end of the process; a program freed early leaves its lines, which
// only matters if another one is later loaded at the same addresses (the last line wins).
#include "perf_map.h"

#include <llvm/Object/SymbolSize.h>

#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <string>
#include <unistd.h>

namespace manycl::compiler::detail {
namespace {

class PerfMapListener final : public llvm::JITEventListener {
public:
  void notifyObjectLoaded(ObjectKey, const llvm::object::ObjectFile &obj,
                          const llvm::RuntimeDyld::LoadedObjectInfo &loaded) override {
    // The debug object has every section at its load address, so symbol addresses are final.
    llvm::object::OwningBinary<llvm::object::ObjectFile> debug = loaded.getObjectForDebug(obj);
    const llvm::object::ObjectFile *o = debug.getBinary();
    if (!o)
      return;
    std::string lines;
    for (const auto &[sym, size] : llvm::object::computeSymbolSizes(*o)) {
      auto type = sym.getType();
      if (!type) {
        llvm::consumeError(type.takeError());
        continue;
      }
      if (*type != llvm::object::SymbolRef::ST_Function || size == 0)
        continue;
      auto name = sym.getName();
      auto addr = sym.getAddress();
      if (!name || !addr) {
        if (!name)
          llvm::consumeError(name.takeError());
        if (!addr)
          llvm::consumeError(addr.takeError());
        continue;
      }
      char head[48];
      std::snprintf(head, sizeof head, "%llx %llx ", static_cast<unsigned long long>(*addr),
                    static_cast<unsigned long long>(size));
      lines += head;
      lines += name->str();
      lines += '\n';
    }
    std::lock_guard<std::mutex> lock(mu_);
    if (!file_) {
      const std::string path = "/tmp/perf-" + std::to_string(getpid()) + ".map";
      file_ = std::fopen(path.c_str(), "a");
      if (!file_)
        return;
    }
    std::fputs(lines.c_str(), file_);
    std::fflush(file_);
  }

private:
  std::mutex mu_;
  std::FILE *file_ = nullptr; // open until the process ends
};

} // namespace

llvm::JITEventListener *perfMapListener() {
  static PerfMapListener *listener = [] {
    const char *v = std::getenv("MANYCL_PERF_MAP");
    return v && *v && std::string(v) != "0" ? new PerfMapListener : nullptr;
  }();
  return listener;
}

} // namespace manycl::compiler::detail
