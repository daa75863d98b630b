// Build options and logs, metadata, binaries, compile/link, cache, natives.
#include "helpers.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sys/wait.h>
#include <unistd.h>

using namespace mct;
namespace fs = std::filesystem;

static const char *kSimple = R"(
  __kernel void k(__global float* a, float s) { a[get_global_id(0)] *= s; })";

TEST(Build, SyntaxErrorHasClangLog) {
  BuildResult b = build("__kernel void k(__global int* a) { a[0] = undefined_var; }", "", dev());
  EXPECT_FALSE(b.ok());
  EXPECT_EQ(b.status.code, ErrorCode::BuildFailure);
  EXPECT_NE(b.log.find("use of undeclared identifier 'undefined_var'"), std::string::npos) << b.log;
  EXPECT_NE(b.log.find("input.cl:1:"), std::string::npos) << b.log;
}

TEST(Build, WarningsWAndWerror) {
  const char *src = "__kernel void k(__global int* a) { int unused_x = 1; a[0] = 1; }";
  const char *src2 = "__kernel void k(__global int* a) { int x; a[0] = (long)a; }";
  BuildResult b = build(src2, "", dev());
  EXPECT_TRUE(b.ok()) << b.log;
  BuildResult w = build("__kernel void k(__global int* a) { a[0] = 1.5e300f; }", "", dev());
  EXPECT_TRUE(w.ok());
  EXPECT_NE(w.log.find("warning"), std::string::npos) << w.log;
  BuildResult e = build("__kernel void k(__global int* a) { a[0] = 1.5e300f; }", "-Werror", dev());
  EXPECT_FALSE(e.ok());
  EXPECT_NE(e.log.find("error"), std::string::npos) << e.log;
  BuildResult q = build("__kernel void k(__global int* a) { a[0] = 1.5e300f; }", "-w", dev());
  EXPECT_TRUE(q.ok());
  EXPECT_EQ(q.log.find("warning"), std::string::npos) << q.log;
  (void)src;
}

TEST(Build, OptionsDefinesIncludesStd) {
  char dir[] = "/tmp/manycl-inc-XXXXXX";
  ASSERT_TRUE(mkdtemp(dir));
  { std::ofstream(std::string(dir) + "/myinc.h") << "#define FROM_HEADER 5\n"; }
  auto p = buildLoad(
      "#include \"myinc.h\"\n__kernel void k(__global int* a) { a[0] = VAL + FROM_HEADER + TWO; }",
      std::string("-D VAL=10 -DTWO=2 -I ") + dir +
          " -cl-std=CL2.0 -cl-mad-enable -cl-fast-relaxed-math");
  ASSERT_TRUE(p);
  int a = 0;
  ASSERT_TRUE(runND(*p, "k", {ArgValue::pointer(&a)}, NDRange{}, ExecMode::LWI));
  EXPECT_EQ(a, 17);
  fs::remove_all(dir);
  for (const char *o :
       {"-cl-std=CL1.2", "-cl-std=CL3.0", "-cl-opt-disable", "-cl-kernel-arg-info", "-w -Werror"}) {
    BuildResult b = build(kSimple, o, dev());
    EXPECT_TRUE(b.ok()) << o << "\n" << b.log;
  }
}

TEST(Build, InvalidOptions) {
  for (const char *o : {"-foo", "-cl-std=CL9.9", "--bogus", "-D", "-create-library"}) {
    BuildResult b = build(kSimple, o, dev());
    EXPECT_EQ(b.status.code, ErrorCode::InvalidOptions) << o;
  }
  EXPECT_EQ(link({}, "-cl-opt-disable", dev()).status.code, ErrorCode::InvalidOptions);
}

TEST(Build, KernelMetadata) {
  BuildResult b = build(R"(
    typedef struct { float a; int b; char c; } S;
    __kernel __attribute__((reqd_work_group_size(8, 2, 1))) __attribute__((vec_type_hint(float4)))
    void meta(__global const float* restrict in, __local int* scratch, __constant float* c,
              float4 v, S s, uchar3 u, volatile __global int* vo) {
      __local float tile[32];
      float priv[16];
      for (int i = 0; i < 16; ++i) priv[i] = in[i] * v.x;
      tile[get_local_id(0)] = priv[get_local_id(0) % 16] + s.a + c[0] + u.x;
      barrier(CLK_LOCAL_MEM_FENCE);
      scratch[0] = (int)tile[0];
      *vo = 1;
    }
    __kernel __attribute__((work_group_size_hint(64, 1, 1))) void other(void) {})",
                        "-cl-kernel-arg-info", dev());
  ASSERT_TRUE(b.ok()) << b.log;
  ASSERT_EQ(b.kernels.size(), 2u);
  const KernelInfo *k = b.kernels[0].name == "meta" ? &b.kernels[0] : &b.kernels[1];
  const KernelInfo *o = b.kernels[0].name == "meta" ? &b.kernels[1] : &b.kernels[0];
  ASSERT_EQ(k->args.size(), 7u);
  EXPECT_EQ(k->args[0].address, AddressQual::Global);
  EXPECT_EQ(k->args[0].type_name, "float*");
  EXPECT_EQ(k->args[0].type_qual, uint32_t(TypeQualConst | TypeQualRestrict));
  EXPECT_EQ(k->args[0].name, "in");
  EXPECT_TRUE(k->args[0].is_pointer);
  EXPECT_EQ(k->args[1].address, AddressQual::Local);
  EXPECT_EQ(k->args[2].address, AddressQual::Constant);
  EXPECT_EQ(k->args[3].address, AddressQual::Private);
  EXPECT_EQ(k->args[3].type_name, "float4");
  EXPECT_EQ(k->args[3].size, 16u);
  EXPECT_EQ(k->args[4].size, 12u);
  EXPECT_EQ(k->args[4].name, "s");
  EXPECT_EQ(k->args[5].size, 4u);
  EXPECT_EQ(k->args[6].type_qual, uint32_t(TypeQualVolatile));
  EXPECT_EQ(k->reqd_work_group_size[0], 8u);
  EXPECT_EQ(k->reqd_work_group_size[1], 2u);
  EXPECT_EQ(k->reqd_work_group_size[2], 1u);
  EXPECT_EQ(k->vec_type_hint, "float4");
  EXPECT_NE(k->attributes.find("reqd_work_group_size(8,2,1)"), std::string::npos);
  EXPECT_EQ(k->static_local_size, 128u);
  EXPECT_TRUE(k->uses_barriers);
  EXPECT_GE(k->private_size, 0u);
  EXPECT_EQ(o->work_group_size_hint[0], 64u);
  EXPECT_FALSE(o->uses_barriers);
  // Without -cl-kernel-arg-info there are no names.
  BuildResult b2 = build(kSimple, "", dev());
  ASSERT_TRUE(b2.ok());
  EXPECT_EQ(b2.kernels[0].args[0].name, "");
}

TEST(Binary, RoundTripAndStructArgs) {
  const char *src = R"(
    typedef struct { float a; int b; double d; } P;
    __kernel void k(__global double* out, P p, float2 f2, char c) {
      out[get_global_id(0)] = p.a + p.b + p.d + f2.y + c + get_global_id(0);
    })";
  BuildResult b = build(src, "", dev());
  ASSERT_TRUE(b.ok()) << b.log;
  auto info = inspectBinary(b.binary);
  ASSERT_TRUE(info.ok());
  EXPECT_EQ(info->kind, BinaryKind::Executable);
  ASSERT_EQ(info->kernels.size(), 1u);
  auto p = load(b.binary);
  ASSERT_TRUE(p.ok()) << p.status().message;
  struct P {
    float a;
    int b;
    double d;
  } pv{1.5f, 2, 0.25};
  float f2[2] = {0, 10};
  char c = 3;
  std::vector<double> out(8);
  NDRange r;
  r.global[0] = 8;
  r.local[0] = 4;
  ASSERT_TRUE(runND(
      **p, "k",
      {ArgValue::pointer(out.data()), ArgValue::of(pv), ArgValue::value(f2, 8), ArgValue::of(c)}, r,
      ExecMode::LWI));
  for (int i = 0; i < 8; ++i)
    EXPECT_EQ(out[i], 1.5 + 2 + 0.25 + 10 + 3 + i);
  // Wrong argument size / kind.
  auto l = Launch::prepare(*(*p)->kernel("k"),
                           std::vector<ArgValue>{ArgValue::pointer(out.data()), ArgValue::of(1),
                                                 ArgValue::value(f2, 8), ArgValue::of(c)},
                           r);
  EXPECT_EQ(l.status().code, ErrorCode::InvalidArgs);
  EXPECT_EQ((*p)->kernel("nope"), nullptr);
}

TEST(Binary, CorruptRejectedNeverCrashes) {
  BuildResult b = build(kSimple, "", dev());
  ASSERT_TRUE(b.ok());
  EXPECT_FALSE(load({}).ok());
  std::vector<uint8_t> junk(100, 0xab);
  EXPECT_EQ(load(junk).status().code, ErrorCode::InvalidBinary);
  // Truncations and bit flips everywhere.
  for (size_t cut :
       {size_t(0), size_t(8), size_t(31), size_t(40), b.binary.size() / 2, b.binary.size() - 1}) {
    std::vector<uint8_t> t(b.binary.begin(), b.binary.begin() + cut);
    EXPECT_EQ(load(t).status().code, ErrorCode::InvalidBinary) << cut;
  }
  for (size_t pos = 0; pos < b.binary.size(); pos += std::max<size_t>(1, b.binary.size() / 97)) {
    auto t = b.binary;
    t[pos] ^= 0x5a;
    auto r = load(t);
    EXPECT_FALSE(r.ok()) << pos;
  }
  // Objects are not executables.
  BuildResult o = compile(kSimple, "", dev());
  ASSERT_TRUE(o.ok());
  EXPECT_EQ(load(o.binary).status().code, ErrorCode::InvalidBinary);
}

TEST(Link, CompileAndLinkWithLibrary) {
  HeaderSource h{"helper.h", "float helper(float x);\n#define FACTOR 3.0f\n"};
  BuildResult a = compile("#include \"helper.h\"\n__kernel void k(__global float* v) { "
                          "v[get_global_id(0)] = helper(v[get_global_id(0)]) * FACTOR; }",
                          "", dev(), std::span<const HeaderSource>(&h, 1));
  ASSERT_TRUE(a.ok()) << a.log;
  EXPECT_EQ(a.kind, BinaryKind::Object);
  BuildResult b = compile("float helper(float x) { return x + 1.0f; }", "", dev());
  ASSERT_TRUE(b.ok()) << b.log;
  std::span<const uint8_t> libIn[] = {b.binary};
  BuildResult lib = link(libIn, "-create-library", dev());
  ASSERT_TRUE(lib.ok()) << lib.log;
  EXPECT_EQ(lib.kind, BinaryKind::Library);
  std::span<const uint8_t> in[] = {a.binary, lib.binary};
  BuildResult exe = link(in, "", dev());
  ASSERT_TRUE(exe.ok()) << exe.log;
  auto p = load(exe.binary);
  ASSERT_TRUE(p.ok()) << p.status().message;
  std::vector<float> v = {1, 2, 3, 4};
  NDRange r;
  r.global[0] = 4;
  r.local[0] = 2;
  ASSERT_TRUE(runND(**p, "k", {ArgValue::pointer(v.data())}, r, ExecMode::LWI));
  EXPECT_EQ(v, (std::vector<float>{6, 9, 12, 15}));
  // Missing symbol at link time.
  std::span<const uint8_t> only[] = {a.binary};
  BuildResult bad = link(only, "", dev());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.log.find("helper"), std::string::npos) << bad.log;
  // Duplicate definitions.
  std::span<const uint8_t> dup[] = {a.binary, b.binary, b.binary};
  EXPECT_EQ(link(dup, "", dev()).status.code, ErrorCode::LinkFailure);
}

// ------------------------------------------------------------------ natives
extern "C" float test_native_square(float x) {
  return x * x + 0.5f;
}

TEST(Native, ResolvedAndUnresolved) {
  const char *src = R"(
    __attribute__((mppa_native)) float test_native_square(float x);
    __kernel void k(__global float* a) { a[get_global_id(0)] = test_native_square(a[get_global_id(0)]); })";
  BuildResult bad = build(src, "", dev());
  EXPECT_FALSE(bad.ok());
  EXPECT_NE(bad.log.find("unresolved"), std::string::npos) << bad.log;
  EXPECT_NE(bad.log.find("test_native_square"), std::string::npos) << bad.log;
  int id = addNativeResolver([](std::string_view n) -> void * {
    return n == "test_native_square" ? reinterpret_cast<void *>(&test_native_square) : nullptr;
  });
  auto p = buildLoad(src);
  ASSERT_TRUE(p);
  std::vector<float> a = {1, 2, 3};
  NDRange r;
  r.global[0] = 3;
  r.local[0] = 3;
  ASSERT_TRUE(runND(*p, "k", {ArgValue::pointer(a.data())}, r, ExecMode::SPMD));
  EXPECT_EQ(a, (std::vector<float>{1.5f, 4.5f, 9.5f}));
  removeNativeResolver(id);
}

// -------------------------------------------------------------------- cache
class CacheTest : public testing::Test {
protected:
  void SetUp() override {
    char d[] = "/tmp/manycl-cache-XXXXXX";
    ASSERT_TRUE(mkdtemp(d));
    dir_ = d;
    const char *old = getenv("MANYCL_CACHE_DIR");
    oldDir_ = old ? old : "";
    hadOld_ = old != nullptr;
    setenv("MANYCL_CACHE_DIR", (dir_ + "/c").c_str(), 1);
    unsetenv("MANYCL_CACHE");
  }
  void TearDown() override {
    if (hadOld_)
      setenv("MANYCL_CACHE_DIR", oldDir_.c_str(), 1);
    else
      unsetenv("MANYCL_CACHE_DIR");
    unsetenv("MANYCL_CACHE");
    fs::remove_all(dir_);
  }
  std::vector<fs::path> entries() {
    std::vector<fs::path> v;
    if (fs::exists(dir_ + "/c"))
      for (auto &e : fs::directory_iterator(dir_ + "/c"))
        v.push_back(e.path());
    return v;
  }
  std::string dir_, oldDir_;
  bool hadOld_ = false;
};

TEST_F(CacheTest, HitCorruptionAndDisable) {
  const char *src = "__kernel void cached(__global int* a) { a[get_global_id(0)] = 41 + 1; }";
  BuildResult b1 = build(src, "", dev());
  ASSERT_TRUE(b1.ok());
  EXPECT_FALSE(b1.from_cache);
  ASSERT_EQ(entries().size(), 1u);
  BuildResult b2 = build(src, "", dev());
  ASSERT_TRUE(b2.ok());
  EXPECT_TRUE(b2.from_cache);
  EXPECT_EQ(b2.binary, b1.binary);
  // Different options / macro values / device: different entries.
  EXPECT_FALSE(build(src, "-DX=1", dev()).from_cache);
  DeviceDesc d2 = dev();
  d2.local_mem_size = 1234;
  EXPECT_FALSE(build(src, "", d2).from_cache);
  EXPECT_EQ(entries().size(), 3u);
  // Header content changes are seen (preprocessed source is hashed).
  { std::ofstream(dir_ + "/h.h") << "#define V 1\n"; }
  std::string inc = "-I " + dir_;
  const char *hs = "#include \"h.h\"\n__kernel void k(__global int* a) { a[0] = V; }";
  EXPECT_FALSE(build(hs, inc, dev()).from_cache);
  EXPECT_TRUE(build(hs, inc, dev()).from_cache);
  { std::ofstream(dir_ + "/h.h") << "#define V 2\n"; }
  BuildResult hb = build(hs, inc, dev());
  EXPECT_FALSE(hb.from_cache);
  auto hp = load(hb.binary);
  ASSERT_TRUE(hp.ok());
  int a = 0;
  ASSERT_TRUE(runND(**hp, "k", {ArgValue::pointer(&a)}, NDRange{}, ExecMode::LWI));
  EXPECT_EQ(a, 2);
  // Corrupt every entry: rebuilt, never trusted.
  for (auto &e : entries()) {
    std::fstream f(e, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(fs::file_size(e) / 2));
    f.put('\x7f');
  }
  BuildResult b3 = build(src, "", dev());
  ASSERT_TRUE(b3.ok());
  EXPECT_FALSE(b3.from_cache);
  auto p = load(b3.binary);
  ASSERT_TRUE(p.ok());
  EXPECT_TRUE(build(src, "", dev()).from_cache);
  // Truncated entry.
  for (auto &e : entries())
    fs::resize_file(e, 10);
  EXPECT_FALSE(build(src, "", dev()).from_cache);
  // Disabled: nothing touches the disk.
  fs::remove_all(dir_ + "/c");
  setenv("MANYCL_CACHE", "0", 1);
  BuildResult b4 = build(src, "", dev());
  ASSERT_TRUE(b4.ok());
  EXPECT_FALSE(b4.from_cache);
  EXPECT_FALSE(fs::exists(dir_ + "/c"));
  EXPECT_EQ(cacheDirectory(), "");
}

TEST_F(CacheTest, JitObjectCache) {
  const char *src = "__kernel void objc(__global int* a) { a[get_global_id(0)] = 5; }";
  BuildResult b = build(src, "", dev());
  ASSERT_TRUE(b.ok());
  {
    auto p = load(b.binary);
    ASSERT_TRUE(p.ok());
  }
  int objs = 0;
  for (auto &e : entries())
    objs += e.extension() == ".obj";
  EXPECT_EQ(objs, 1);
  for (int round = 0; round < 2; ++round) {
    auto p = load(b.binary); // from the object cache, then after corruption
    ASSERT_TRUE(p.ok());
    int a[4] = {0, 0, 0, 0};
    NDRange r;
    r.global[0] = 4;
    r.local[0] = 4;
    ASSERT_TRUE(runND(**p, "objc", {ArgValue::pointer(a)}, r, ExecMode::LWI));
    EXPECT_EQ(a[3], 5);
    for (auto &e : entries())
      if (e.extension() == ".obj") {
        std::fstream f(e, std::ios::in | std::ios::out | std::ios::binary);
        f.seekp(static_cast<std::streamoff>(fs::file_size(e) - 3));
        f.put('\x13');
      }
  }
}

TEST_F(CacheTest, ConcurrentProcesses) {
  const char *src = "__kernel void par(__global int* a) { a[get_global_id(0)] = 7; }";
  std::vector<pid_t> kids;
  for (int i = 0; i < 3; ++i) {
    pid_t pid = fork();
    if (pid == 0) {
      BuildResult b = build(src, "", dev());
      _exit(b.ok() ? 0 : 1);
    }
    kids.push_back(pid);
  }
  for (pid_t k : kids) {
    int st = 0;
    waitpid(k, &st, 0);
    EXPECT_TRUE(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  }
  BuildResult b = build(src, "", dev());
  EXPECT_TRUE(b.ok());
  EXPECT_TRUE(b.from_cache);
  for (auto &e : entries())
    EXPECT_EQ(e.filename().string().find(".tmp"), std::string::npos) << e;
}
