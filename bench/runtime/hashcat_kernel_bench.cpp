// One of hashcat's optimized brute-force kernels (MD5 `m00000_s04` or SHA2-256 `m01400_s04`,
// from the installed hashcat's OpenCL sources) run directly, with the launch shape given on the
// command line instead of the one hashcat's autotuner picks: the kernel's own cost per hash,
// apart from hashcat's tuning (docs/performance.md, issue 15 section). Runs on the first
// platform the loader shows; prints one line:
//
//   hashcat_kernel platform=<name> kernel=<name> local=<L> groups=<G> loops=<N>
//     wall_mhs=<median MH/s by wall time> cpu_mhs=<median MH/s per CPU-second> build_s=<s>
//
// Every platform gets the same source and the same options (hashcat's generic vendor, the
// device's native int vector width as VECT_SIZE), so the code compared is the same OpenCL C.
// The buffers are zero, so no candidate matches: each work-item runs the kernel's set-up once
// and its candidate loop loops/VECT_SIZE times, as in hashcat's benchmark. The first
// `--warmup` launches (specialization for the local size, first touch of the buffers) are not
// timed.
//
//   hashcat_kernel_bench [--mode 0|1400] [--local L] [--groups G] [--loops N] [--repeats R]
//                        [--warmup W] [--hashcat-dir DIR]
#include <CL/cl.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <sys/resource.h>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

bool check_cl(cl_int err, const char *what) {
  if (err == CL_SUCCESS)
    return true;
  std::fprintf(stderr, "hashcat_kernel_bench: %s failed: %d\n", what, err);
  return false;
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double process_cpu_seconds() {
  rusage r{};
  getrusage(RUSAGE_SELF, &r);
  return double(r.ru_utime.tv_sec + r.ru_stime.tv_sec) +
         1e-6 * double(r.ru_utime.tv_usec + r.ru_stime.tv_usec);
}

// hashcat's kernel_param_t (inc_types.h).
struct KernelParam {
  uint32_t bitmap_mask, bitmap_shift1, bitmap_shift2, salt_pos_host, loop_pos, loop_cnt, il_cnt,
      digests_cnt, digests_offset_host, combs_mode, salt_repeat;
  uint64_t pws_pos, gid_max;
};

// What hashcat defines for a hash mode's kernels (its module's digest layout).
struct HashMode {
  const char *file;
  const char *kernel;
  const char *defines;
};

HashMode hash_mode(int mode) {
  if (mode == 1400)
    return {"m01400_a3-optimized.cl", "m01400_s04",
            "-D DGST_R0=3 -D DGST_R1=7 -D DGST_R2=2 -D DGST_R3=6 -D DGST_ELEM=8 -D KERN_TYPE=1400"};
  return {"m00000_a3-optimized.cl", "m00000_s04",
          "-D DGST_R0=0 -D DGST_R1=3 -D DGST_R2=2 -D DGST_R3=1 -D DGST_ELEM=4 -D KERN_TYPE=0"};
}

} // namespace

int main(int argc, char **argv) {
  int mode = 0, repeats = 7, warmup = 4;
  size_t local = 1024, groups = 16;
  uint32_t loops = 1024;
  std::string dir = "/usr/share/hashcat/OpenCL";
  for (int i = 1; i + 1 < argc; i += 2) {
    const std::string opt = argv[i];
    const char *v = argv[i + 1];
    if (opt == "--mode")
      mode = std::atoi(v);
    else if (opt == "--local")
      local = std::strtoull(v, nullptr, 10);
    else if (opt == "--groups")
      groups = std::strtoull(v, nullptr, 10);
    else if (opt == "--loops")
      loops = uint32_t(std::strtoul(v, nullptr, 10));
    else if (opt == "--repeats")
      repeats = std::atoi(v);
    else if (opt == "--warmup")
      warmup = std::atoi(v);
    else if (opt == "--hashcat-dir")
      dir = v;
    else {
      std::fprintf(stderr, "hashcat_kernel_bench: unknown option %s\n", opt.c_str());
      return 2;
    }
  }
  if (mode != 0 && mode != 1400) {
    std::fprintf(stderr, "hashcat_kernel_bench: --mode is 0 (MD5) or 1400 (SHA2-256)\n");
    return 2;
  }
  if (local == 0 || groups == 0 || loops == 0 || repeats < 1 || warmup < 0) {
    std::fprintf(stderr, "hashcat_kernel_bench: sizes and repeats must be positive\n");
    return 2;
  }
  const HashMode hm = hash_mode(mode);
  std::ifstream in(dir + "/" + hm.file);
  if (!in) {
    std::fprintf(stderr, "hashcat_kernel_bench: cannot read %s/%s (hashcat installed?)\n",
                 dir.c_str(), hm.file);
    return 1;
  }
  std::stringstream text;
  text << in.rdbuf();
  const std::string source = text.str();

  cl_platform_id platform;
  cl_device_id device;
  cl_int err;
  if (!check_cl(clGetPlatformIDs(1, &platform, nullptr), "clGetPlatformIDs") ||
      !check_cl(clGetDeviceIDs(platform, CL_DEVICE_TYPE_ALL, 1, &device, nullptr),
                "clGetDeviceIDs"))
    return 1;
  char platform_name[256] = "";
  clGetPlatformInfo(platform, CL_PLATFORM_NAME, sizeof platform_name, platform_name, nullptr);
  cl_uint vector_width = 1;
  clGetDeviceInfo(device, CL_DEVICE_NATIVE_VECTOR_WIDTH_INT, sizeof vector_width, &vector_width,
                  nullptr);
  cl_device_type type = CL_DEVICE_TYPE_DEFAULT;
  clGetDeviceInfo(device, CL_DEVICE_TYPE, sizeof type, &type, nullptr);
  const unsigned vect = std::clamp(vector_width, 1u, 16u);

  cl_context context = clCreateContext(nullptr, 1, &device, nullptr, nullptr, &err);
  if (!check_cl(err, "clCreateContext"))
    return 1;
  cl_command_queue queue = clCreateCommandQueue(context, device, 0, &err);
  if (!check_cl(err, "clCreateCommandQueue"))
    return 1;
  const char *src = source.c_str();
  cl_program program = clCreateProgramWithSource(context, 1, &src, nullptr, &err);
  if (!check_cl(err, "clCreateProgramWithSource"))
    return 1;
  // hashcat's own options for this mode, with its generic vendor id on every platform.
  const std::string options =
      "-D KERNEL_STATIC -D INCLUDE_PATH=" + dir +
      " -D XM2S(x)=#x -D M2S(x)=XM2S(x) -D LOCAL_MEM_TYPE=1 -D VENDOR_ID=2147483648"
      " -D CUDA_ARCH=0 -D VECT_SIZE=" +
      std::to_string(vect) + " -D DEVICE_TYPE=" + std::to_string(unsigned(type)) + " " +
      hm.defines + " -D ATTACK_EXEC=11 -D ATTACK_KERN=3 -D ATTACK_MODE=3 -w";
  const auto build_start = Clock::now();
  if (clBuildProgram(program, 1, &device, options.c_str(), nullptr, nullptr) != CL_SUCCESS) {
    std::vector<char> log(1 << 20);
    clGetProgramBuildInfo(program, device, CL_PROGRAM_BUILD_LOG, log.size(), log.data(), nullptr);
    std::fprintf(stderr, "hashcat_kernel_bench: build failed:\n%s\n", log.data());
    return 1;
  }
  const double build_s = std::chrono::duration<double>(Clock::now() - build_start).count();
  cl_kernel kernel = clCreateKernel(program, hm.kernel, &err);
  if (!check_cl(err, "clCreateKernel"))
    return 1;

  // The kernel's 24 buffers (KERN_ATTR in inc_common.h), zeroed: passwords (pw_t, 260 bytes
  // each), the candidate words (one u32 per loop), bitmaps, digests, salts, results.
  const size_t items = local * groups;
  const size_t pw_bytes = 260;
  std::vector<size_t> sizes(24, 64 * 1024);
  sizes[0] = items * pw_bytes;
  sizes[3] = (size_t(loops) + 16) * sizeof(uint32_t);
  std::vector<cl_mem> buffers;
  for (size_t i = 0; i < sizes.size(); ++i) {
    std::vector<char> zeros(sizes[i], 0);
    cl_mem m = clCreateBuffer(context, CL_MEM_READ_WRITE | CL_MEM_COPY_HOST_PTR, sizes[i],
                              zeros.data(), &err);
    if (!check_cl(err, "clCreateBuffer") ||
        !check_cl(clSetKernelArg(kernel, cl_uint(i), sizeof m, &m), "clSetKernelArg"))
      return 1;
    buffers.push_back(m);
  }
  KernelParam param{};
  param.bitmap_mask = 0xffff;
  param.loop_cnt = loops;
  param.il_cnt = loops;
  param.digests_cnt = 1;
  param.gid_max = items;
  cl_mem param_buffer =
      clCreateBuffer(context, CL_MEM_READ_ONLY | CL_MEM_COPY_HOST_PTR, sizeof param, &param, &err);
  if (!check_cl(err, "clCreateBuffer") ||
      !check_cl(clSetKernelArg(kernel, 24, sizeof param_buffer, &param_buffer), "clSetKernelArg"))
    return 1;

  std::vector<double> wall, cpu;
  for (int r = 0; r < warmup + repeats; ++r) {
    const double cpu_start = process_cpu_seconds();
    const auto start = Clock::now();
    if (!check_cl(
            clEnqueueNDRangeKernel(queue, kernel, 1, nullptr, &items, &local, 0, nullptr, nullptr),
            "clEnqueueNDRangeKernel") ||
        !check_cl(clFinish(queue), "clFinish"))
      return 1;
    if (r < warmup)
      continue;
    wall.push_back(std::chrono::duration<double>(Clock::now() - start).count());
    cpu.push_back(process_cpu_seconds() - cpu_start);
  }
  const double hashes = double(items) * loops;
  std::printf("hashcat_kernel platform=%s kernel=%s local=%zu groups=%zu loops=%u "
              "wall_mhs=%.1f cpu_mhs=%.1f build_s=%.2f\n",
              platform_name, hm.kernel, local, groups, loops, hashes / median(wall) / 1e6,
              hashes / median(cpu) / 1e6, build_s);
  for (cl_mem m : buffers)
    clReleaseMemObject(m);
  clReleaseMemObject(param_buffer);
  clReleaseKernel(kernel);
  clReleaseProgram(program);
  clReleaseCommandQueue(queue);
  clReleaseContext(context);
  return 0;
}
