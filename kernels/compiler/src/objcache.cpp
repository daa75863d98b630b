// JIT object-code cache (compiled without RTTI: subclasses an LLVM class).
#include "internal.h"

#include <llvm/ExecutionEngine/ObjectCache.h>
#include <llvm/Support/MemoryBuffer.h>

#include <cstring>
#include <memory>

namespace manycl::compiler::detail {
namespace {
/// JIT object code cache: <dir>/<sha256(version, bitcode)>.obj, with a
/// small validated header; a corrupt file is removed and recompiled.
class ObjCache final : public llvm::ObjectCache {
public:
  explicit ObjCache(std::string file) : file_(std::move(file)) {}
  void notifyObjectCompiled(const llvm::Module *, llvm::MemoryBufferRef obj) override {
    std::string out = "MCLOBJ1";
    out.push_back('\0');
    uint64_t n = obj.getBufferSize(), h = fnv1a64(obj.getBufferStart(), n);
    out.append(reinterpret_cast<const char *>(&n), 8);
    out.append(reinterpret_cast<const char *>(&h), 8);
    out.append(obj.getBufferStart(), n);
    cacheWriteRaw(file_, out);
  }
  std::unique_ptr<llvm::MemoryBuffer> getObject(const llvm::Module *) override {
    std::string in;
    if (!cacheReadRaw(file_, in))
      return nullptr;
    uint64_t n = 0, h = 0;
    if (in.size() < 24 || in.compare(0, 8, std::string("MCLOBJ1\0", 8)) != 0) {
      cacheRemoveRaw(file_);
      return nullptr;
    }
    std::memcpy(&n, in.data() + 8, 8);
    std::memcpy(&h, in.data() + 16, 8);
    if (n != in.size() - 24 || fnv1a64(in.data() + 24, n) != h) {
      cacheRemoveRaw(file_);
      return nullptr;
    }
    return llvm::MemoryBuffer::getMemBufferCopy(llvm::StringRef(in.data() + 24, n), "manycl-obj");
  }

private:
  std::string file_;
};

} // namespace

std::unique_ptr<llvm::ObjectCache> makeObjectCache(const std::string &file) {
  return std::make_unique<ObjCache>(file);
}

} // namespace manycl::compiler::detail
