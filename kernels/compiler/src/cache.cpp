// On-disk kernel cache: ~/.cache/manycl (MANYCL_CACHE_DIR), off with
// MANYCL_CACHE=0. Entries are complete program binaries, validated on read.
#include "internal.h"

#include <llvm/ADT/ArrayRef.h>
#include <llvm/ADT/StringRef.h>
#include <llvm/Support/SHA256.h>

#include <atomic>
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <dlfcn.h>
#include <fcntl.h>
#include <random>
#include <string>
#include <sys/stat.h>
#include <unistd.h>

namespace manycl::compiler {

std::string cacheDirectory() {
  const char *en = std::getenv("MANYCL_CACHE");
  if (en && (std::string(en) == "0" || std::string(en) == "off" || std::string(en) == "false"))
    return {};
  if (const char *d = std::getenv("MANYCL_CACHE_DIR"); d && *d)
    return d;
  if (const char *x = std::getenv("XDG_CACHE_HOME"); x && *x)
    return std::string(x) + "/manycl";
  if (const char *h = std::getenv("HOME"); h && *h)
    return std::string(h) + "/.cache/manycl";
  return {};
}

namespace detail {

/// Identity of the binary that contains this compiler (path, size, mtime):
/// any rebuild of ManyCL invalidates the cache.
static const std::string &buildIdentity() {
  static const std::string id = [] {
    Dl_info info{};
    std::string s = "unknown";
    if (dladdr(reinterpret_cast<void *>(&buildIdentity), &info) && info.dli_fname) {
      s = info.dli_fname;
      struct stat st {};
      if (stat(info.dli_fname, &st) == 0)
        s += ":" + std::to_string(st.st_size) + ":" + std::to_string(st.st_mtim.tv_sec) + "." +
             std::to_string(st.st_mtim.tv_nsec);
    }
    return s;
  }();
  return id;
}

std::string cacheKey(std::string_view preprocessed, std::string_view options,
                     const DeviceDesc &dev) {
  llvm::SHA256 h;
  auto add = [&](std::string_view s) {
    uint64_t n = s.size();
    h.update(llvm::ArrayRef<uint8_t>(reinterpret_cast<const uint8_t *>(&n), 8));
    h.update(llvm::StringRef(s.data(), s.size()));
  };
  add(compilerVersion());
  add(buildIdentity());
  add(preprocessed);
  add(options);
  add(dev.key());
  auto r = h.final();
  static const char hex[] = "0123456789abcdef";
  std::string out;
  for (uint8_t b : r) {
    out += hex[b >> 4];
    out += hex[b & 15];
  }
  return out;
}

static bool mkdirs(const std::string &dir) {
  std::string cur;
  for (size_t i = 0; i <= dir.size(); ++i) {
    if (i == dir.size() || dir[i] == '/') {
      if (!cur.empty() && mkdir(cur.c_str(), 0755) != 0 && errno != EEXIST)
        return false;
    }
    if (i < dir.size())
      cur += dir[i];
  }
  return true;
}

bool cacheLoad(const std::string &key, Container &out) {
  std::string dir = cacheDirectory();
  if (dir.empty())
    return false;
  std::string path = dir + "/" + key + ".mclbin";
  FILE *f = std::fopen(path.c_str(), "rb");
  if (!f)
    return false;
  std::vector<uint8_t> bytes;
  uint8_t buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    bytes.insert(bytes.end(), buf, buf + n);
  std::fclose(f);
  Container c;
  if (!readContainer(bytes, c) || c.kind != BinaryKind::Executable) {
    // Corrupt entry: never trusted, removed and rebuilt by the caller.
    unlink(path.c_str());
    return false;
  }
  out = std::move(c);
  return true;
}

void cacheStore(const std::string &key, const std::vector<uint8_t> &bytes) {
  cacheWriteRaw(key + ".mclbin",
                std::string_view(reinterpret_cast<const char *>(bytes.data()), bytes.size()));
}

bool cacheReadRaw(const std::string &file, std::string &out) {
  std::string dir = cacheDirectory();
  if (dir.empty())
    return false;
  FILE *f = std::fopen((dir + "/" + file).c_str(), "rb");
  if (!f)
    return false;
  out.clear();
  char buf[65536];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof buf, f)) > 0)
    out.append(buf, n);
  std::fclose(f);
  return true;
}

void cacheRemoveRaw(const std::string &file) {
  std::string dir = cacheDirectory();
  if (!dir.empty())
    unlink((dir + "/" + file).c_str());
}

void cacheWriteRaw(const std::string &file, std::string_view bytes) {
  std::string dir = cacheDirectory();
  if (dir.empty() || !mkdirs(dir))
    return;
  const std::string key = file;
  static std::atomic<uint64_t> counter{0};
  std::random_device rd;
  std::string tmp = dir + "/." + key + ".tmp." + std::to_string(getpid()) + "." +
                    std::to_string(counter++) + "." + std::to_string(rd());
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
  if (fd < 0)
    return;
  size_t off = 0;
  bool ok = true;
  while (off < bytes.size()) {
    ssize_t w = write(fd, bytes.data() + off, bytes.size() - off);
    if (w <= 0) {
      if (w < 0 && errno == EINTR)
        continue;
      ok = false;
      break;
    }
    off += static_cast<size_t>(w);
  }
  if (close(fd) != 0)
    ok = false;
  std::string path = dir + "/" + file;
  if (!ok || rename(tmp.c_str(), path.c_str()) != 0)
    unlink(tmp.c_str());
}

} // namespace detail
} // namespace manycl::compiler
