// JIT object-code cache (compiled without RTTI: subclasses an LLVM class).
#include "internal.h"

#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/IR/Module.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstring>
#include <memory>

namespace manycl::compiler::detail {
namespace {
/// JIT object code cache: <dir>/<module identifier>.obj (the loader names each module it JITs
/// by a hash of what determines its code), with a small validated header; a corrupt file is
/// removed and recompiled.
class ObjCache final : public llvm::ObjectCache {
public:
  void notifyObjectCompiled(const llvm::Module *M, llvm::MemoryBufferRef obj) override {
    std::string out = "MCLOBJ1";
    out.push_back('\0');
    uint64_t n = obj.getBufferSize(), h = fnv1a64(obj.getBufferStart(), n);
    out.append(reinterpret_cast<const char *>(&n), 8);
    out.append(reinterpret_cast<const char *>(&h), 8);
    out.append(obj.getBufferStart(), n);
    cacheWriteRaw(M->getModuleIdentifier() + ".obj", out);
  }
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module *M) override {
    return readCachedObject(M->getModuleIdentifier());
  }
};

} // namespace

std::unique_ptr<llvm::MemoryBuffer> readCachedObject(const std::string &moduleName) {
  std::string in;
  const std::string file = moduleName + ".obj";
  if (!cacheReadRaw(file, in))
    return nullptr;
  uint64_t n = 0, h = 0;
  if (in.size() < 24 || in.compare(0, 8, std::string("MCLOBJ1\0", 8)) != 0) {
    cacheRemoveRaw(file);
    return nullptr;
  }
  std::memcpy(&n, in.data() + 8, 8);
  std::memcpy(&h, in.data() + 16, 8);
  if (n != in.size() - 24 || fnv1a64(in.data() + 24, n) != h) {
    cacheRemoveRaw(file);
    return nullptr;
  }
  return llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(in.data() + 24, n), "manycl-obj");
}

std::unique_ptr<llvm::ObjectCache> makeObjectCache() {
  return std::make_unique<ObjCache>();
}

} // namespace manycl::compiler::detail
