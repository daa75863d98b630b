#include "manycl/runtime/device.h"

#include <algorithm>
#include <limits>
#include <string>

#include "manycl/compiler/compiler.h"
#include "manycl/runtime/info.h"
#include "manycl/runtime/platform.h"

namespace manycl::rt {

namespace {
constexpr size_t kMaxWorkGroupSize = 1024;
// Only what the compiler and builtin library really implement (cl_khr_fp64: the double
// builtins pass the CTS math_brute_force; compiler::DeviceDesc::fp64 defines it in kernels).
constexpr const char *kDeviceExtensions =
    "cl_khr_fp64 cl_khr_global_int32_base_atomics cl_khr_global_int32_extended_atomics "
    "cl_khr_local_int32_base_atomics cl_khr_local_int32_extended_atomics cl_khr_byte_addressable_store";
// Doubles are the host's IEEE-754 binary64: fused multiply-add (fma() is one fused operation),
// infinities and NaNs, subnormals kept (never flushed), and all four IEEE rounding modes in the
// hardware (the conversions with explicit rounding, convert_*_rtz/_rtp/_rtn, are exact). This
// is also the minimum OpenCL 1.2 requires of a device reporting cl_khr_fp64.
constexpr cl_device_fp_config kDoubleFpConfig = CL_FP_FMA | CL_FP_ROUND_TO_NEAREST |
                                                CL_FP_ROUND_TO_ZERO | CL_FP_ROUND_TO_INF |
                                                CL_FP_INF_NAN | CL_FP_DENORM;
constexpr cl_uint kMemBaseAlignBits = device::Ddr::kAlignment * 8;

std::vector<unsigned> all_clusters(unsigned n) {
  std::vector<unsigned> v(n);
  for (unsigned i = 0; i < n; ++i)
    v[i] = i;
  return v;
}
} // namespace

Device::Device(device::Device &hardware)
    : hardware_(hardware), clusters_(all_clusters(hardware.cluster_count())),
      pes_(clusters_.size(), hardware.config().pes_per_cluster),
      ddr_domain_(&hardware.ddr_domain()) {}

Device::Device(Device *parent, std::vector<unsigned> clusters, std::vector<unsigned> pes,
               std::vector<cl_device_partition_property> partition_type)
    : hardware_(parent->hardware_), parent_(parent), clusters_(std::move(clusters)),
      pes_(std::move(pes)), partition_type_(std::move(partition_type)),
      ddr_domain_(&hardware_.ddr_domain(clusters_, static_cast<double>(clusters_.size()) /
                                                       hardware_.cluster_count())) {
  parent_->retain();
}

Device::~Device() {
  if (parent_)
    parent_->release();
}

Device *checked_device(cl_device_id device) { return Device::from(device); }

void Device::retain_device() {
  if (!is_root())
    retain_api();
}

bool Device::release_device() { return is_root() ? true : release_api(); }

unsigned Device::compute_units() const {
  if (config().mode == device::ExecutionMode::SPMD)
    return static_cast<unsigned>(clusters_.size());
  unsigned n = 0;
  for (unsigned p : pes_)
    n += p;
  return n;
}

unsigned Device::pes_on(unsigned cluster) const {
  for (size_t i = 0; i < clusters_.size(); ++i)
    if (clusters_[i] == cluster)
      return pes_[i];
  return 0;
}

bool Device::owns_whole_clusters() const {
  return std::all_of(pes_.begin(), pes_.end(),
                     [&](unsigned p) { return p == config().pes_per_cluster; });
}

device::Cluster &Device::pick_cluster() {
  unsigned start = next_cluster_.fetch_add(1, std::memory_order_relaxed);
  size_t best = start % clusters_.size();
  size_t best_load = std::numeric_limits<size_t>::max();
  for (size_t i = 0; i < clusters_.size(); ++i) {
    size_t index = (start + i) % clusters_.size();
    size_t load = hardware_.cluster(clusters_[index]).pending();
    if (load < best_load) {
      best = index;
      best_load = load;
    }
  }
  return hardware_.cluster(clusters_[best]);
}

cl_int Device::info(cl_device_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  const auto &c = config();
  const bool spmd = c.mode == device::ExecutionMode::SPMD;
  const cl_uint units = compute_units();
  switch (param) {
  case CL_DEVICE_TYPE:
    return out.scalar<cl_device_type>(CL_DEVICE_TYPE_ACCELERATOR);
  case CL_DEVICE_VENDOR_ID:
    return out.scalar<cl_uint>(0);
  case CL_DEVICE_MAX_COMPUTE_UNITS:
    return out.scalar<cl_uint>(units);
  case CL_DEVICE_MAX_WORK_ITEM_DIMENSIONS:
    return out.scalar<cl_uint>(3);
  case CL_DEVICE_MAX_WORK_ITEM_SIZES: {
    size_t sizes[3] = {kMaxWorkGroupSize, kMaxWorkGroupSize, kMaxWorkGroupSize};
    return out.array(sizes, 3);
  }
  case CL_DEVICE_MAX_WORK_GROUP_SIZE:
    return out.scalar<size_t>(kMaxWorkGroupSize);
  // Vector widths: one host vector register (the kernels are JIT-compiled for the host; the
  // modeled cost is per element, so the width a program picks changes no modeled time).
  // Programs that size their vectors by these (hashcat's u32x) then run one register per
  // operation: with 4-wide `uint4` on an AVX-512 host hashcat's MD5 ran 3 to 4x slower.
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_CHAR:
  case CL_DEVICE_NATIVE_VECTOR_WIDTH_CHAR:
    return out.scalar<cl_uint>(16);
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_SHORT:
  case CL_DEVICE_NATIVE_VECTOR_WIDTH_SHORT:
    return out.scalar<cl_uint>(std::min(16u, compiler::hostVectorBytes() / 2));
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_INT:
  case CL_DEVICE_NATIVE_VECTOR_WIDTH_INT:
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_FLOAT:
  case CL_DEVICE_NATIVE_VECTOR_WIDTH_FLOAT:
    return out.scalar<cl_uint>(compiler::hostVectorBytes() / 4);
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_LONG:
  case CL_DEVICE_NATIVE_VECTOR_WIDTH_LONG:
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_DOUBLE:
  case CL_DEVICE_NATIVE_VECTOR_WIDTH_DOUBLE:
    return out.scalar<cl_uint>(compiler::hostVectorBytes() / 8);
  case CL_DEVICE_PREFERRED_VECTOR_WIDTH_HALF:
  case CL_DEVICE_NATIVE_VECTOR_WIDTH_HALF:
    return out.scalar<cl_uint>(0);
  case CL_DEVICE_MAX_CLOCK_FREQUENCY:
    return out.scalar<cl_uint>(static_cast<cl_uint>(c.clock_hz / 1e6));
  case CL_DEVICE_ADDRESS_BITS:
    return out.scalar<cl_uint>(64);
  case CL_DEVICE_MAX_MEM_ALLOC_SIZE:
    return out.scalar<cl_ulong>(c.max_alloc());
  case CL_DEVICE_IMAGE_SUPPORT:
    return out.scalar<cl_bool>(CL_FALSE);
  case CL_DEVICE_MAX_READ_IMAGE_ARGS:
  case CL_DEVICE_MAX_WRITE_IMAGE_ARGS:
  case CL_DEVICE_MAX_SAMPLERS:
    return out.scalar<cl_uint>(0);
  case CL_DEVICE_IMAGE2D_MAX_WIDTH:
  case CL_DEVICE_IMAGE2D_MAX_HEIGHT:
  case CL_DEVICE_IMAGE3D_MAX_WIDTH:
  case CL_DEVICE_IMAGE3D_MAX_HEIGHT:
  case CL_DEVICE_IMAGE3D_MAX_DEPTH:
  case CL_DEVICE_IMAGE_MAX_BUFFER_SIZE:
  case CL_DEVICE_IMAGE_MAX_ARRAY_SIZE:
    return out.scalar<size_t>(0);
  case CL_DEVICE_MAX_PARAMETER_SIZE:
    return out.scalar<size_t>(1024);
  case CL_DEVICE_MEM_BASE_ADDR_ALIGN:
    return out.scalar<cl_uint>(kMemBaseAlignBits);
  case CL_DEVICE_MIN_DATA_TYPE_ALIGN_SIZE:
    return out.scalar<cl_uint>(128);
  case CL_DEVICE_SINGLE_FP_CONFIG:
    return out.scalar<cl_device_fp_config>(CL_FP_DENORM | CL_FP_INF_NAN | CL_FP_ROUND_TO_NEAREST |
                                           CL_FP_FMA);
  case CL_DEVICE_DOUBLE_FP_CONFIG:
    return out.scalar<cl_device_fp_config>(kDoubleFpConfig);
  case CL_DEVICE_HALF_FP_CONFIG:
    return out.scalar<cl_device_fp_config>(0);
  case CL_DEVICE_GLOBAL_MEM_CACHE_TYPE:
    return out.scalar<cl_device_mem_cache_type>(CL_NONE);
  case CL_DEVICE_GLOBAL_MEM_CACHELINE_SIZE:
    return out.scalar<cl_uint>(0);
  case CL_DEVICE_GLOBAL_MEM_CACHE_SIZE:
    return out.scalar<cl_ulong>(0);
  case CL_DEVICE_GLOBAL_MEM_SIZE:
    return out.scalar<cl_ulong>(c.ddr_bytes);
  case CL_DEVICE_MAX_CONSTANT_BUFFER_SIZE:
    return out.scalar<cl_ulong>(std::min<cl_ulong>(c.max_alloc(), 1u << 20));
  case CL_DEVICE_MAX_CONSTANT_ARGS:
    return out.scalar<cl_uint>(8);
  case CL_DEVICE_LOCAL_MEM_TYPE:
    return out.scalar<cl_device_local_mem_type>(CL_LOCAL);
  case CL_DEVICE_LOCAL_MEM_SIZE:
    return out.scalar<cl_ulong>(c.local_mem_bytes());
  case CL_DEVICE_ERROR_CORRECTION_SUPPORT:
  case CL_DEVICE_HOST_UNIFIED_MEMORY:
    return out.scalar<cl_bool>(CL_FALSE);
  case CL_DEVICE_PROFILING_TIMER_RESOLUTION:
    return out.scalar<size_t>(1);
  case CL_DEVICE_ENDIAN_LITTLE:
  case CL_DEVICE_AVAILABLE:
  case CL_DEVICE_PREFERRED_INTEROP_USER_SYNC:
    return out.scalar<cl_bool>(CL_TRUE);
  case CL_DEVICE_COMPILER_AVAILABLE:
  case CL_DEVICE_LINKER_AVAILABLE:
    return out.scalar<cl_bool>(CL_TRUE);
  case CL_DEVICE_EXECUTION_CAPABILITIES:
    return out.scalar<cl_device_exec_capabilities>(CL_EXEC_KERNEL | CL_EXEC_NATIVE_KERNEL);
  case CL_DEVICE_QUEUE_PROPERTIES:
    return out.scalar<cl_command_queue_properties>(CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE |
                                                   CL_QUEUE_PROFILING_ENABLE);
  case CL_DEVICE_PLATFORM:
    return out.scalar<cl_platform_id>(Platform::get().handle());
  case CL_DEVICE_NAME: {
    std::string name = std::string("ManyCL ") + c.name + " (" + std::to_string(clusters_.size()) +
                       " cluster(s) x " + std::to_string(c.pes_per_cluster) + " PEs, " +
                       (spmd ? "SPMD" : "LWI") + ")";
    return out.string(name);
  }
  case CL_DEVICE_VENDOR:
    return out.string(kPlatformVendor);
  case CL_DRIVER_VERSION:
    return out.string(kDriverVersion);
  case CL_DEVICE_PROFILE:
    return out.string("FULL_PROFILE");
  case CL_DEVICE_VERSION:
    return out.string(std::string("OpenCL 1.2 ManyCL ") + kDriverVersion);
  case CL_DEVICE_OPENCL_C_VERSION:
    return out.string("OpenCL C 1.2 ");
  case CL_DEVICE_EXTENSIONS:
    return out.string(kDeviceExtensions);
  case CL_DEVICE_PRINTF_BUFFER_SIZE:
    return out.scalar<size_t>(1u << 20);
  case CL_DEVICE_BUILT_IN_KERNELS:
    return out.string("");
  case CL_DEVICE_PARENT_DEVICE:
    return out.scalar<cl_device_id>(parent_ ? parent_->handle() : nullptr);
  case CL_DEVICE_PARTITION_MAX_SUB_DEVICES:
    return out.scalar<cl_uint>(units > 1 ? units : 0);
  case CL_DEVICE_PARTITION_PROPERTIES: {
    if (units > 1) {
      cl_device_partition_property kinds[] = {CL_DEVICE_PARTITION_EQUALLY, CL_DEVICE_PARTITION_BY_COUNTS,
                                              CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN};
      return out.array(kinds, 3);
    }
    cl_device_partition_property none = 0;
    return out.scalar(none);
  }
  case CL_DEVICE_PARTITION_AFFINITY_DOMAIN:
    return out.scalar<cl_device_affinity_domain>(
        clusters_.size() > 1 ? CL_DEVICE_AFFINITY_DOMAIN_NUMA | CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE
                             : 0);
  case CL_DEVICE_PARTITION_TYPE:
    if (partition_type_.empty())
      return out.bytes(nullptr, 0);
    return out.array(partition_type_);
  case CL_DEVICE_REFERENCE_COUNT:
    return out.scalar<cl_uint>(is_root() ? 1 : api_ref_count());
  default:
    return CL_INVALID_VALUE;
  }
}

// Partitioning works in the unit the application sees, compute units. In SPMD mode that is a
// cluster; in LWI mode a PE, and a sub-device may own some PEs of a cluster: the work-groups of
// sub-devices that share a cluster then run on that cluster one command after the other (they
// share its SPM), each command using only its sub-device's PEs.
Result<std::vector<Device::Share>>
Device::plan_partition(const cl_device_partition_property *properties,
                       std::vector<cl_device_partition_property> &type) {
  if (!properties || properties[0] == 0)
    return make_error("no partition scheme", CL_INVALID_VALUE);
  const bool spmd = config().mode == device::ExecutionMode::SPMD;
  const unsigned units = compute_units();
  // The cluster of each compute unit, in order.
  std::vector<unsigned> unit_cluster;
  for (size_t i = 0; i < clusters_.size(); ++i)
    unit_cluster.insert(unit_cluster.end(), spmd ? 1 : pes_[i], clusters_[i]);
  std::vector<unsigned> unit_counts;

  switch (properties[0]) {
  case CL_DEVICE_PARTITION_EQUALLY: {
    if (properties[2] != 0)
      return make_error("EQUALLY takes one value", CL_INVALID_VALUE);
    cl_device_partition_property n = properties[1];
    if (n <= 0)
      return make_error("EQUALLY needs a positive count", CL_INVALID_VALUE);
    if (static_cast<uint64_t>(n) > units)
      return make_error("more compute units per sub-device than the device has",
                        CL_INVALID_DEVICE_PARTITION_COUNT);
    if (static_cast<uint64_t>(n) == units)
      return make_error("the partition would equal the device", CL_DEVICE_PARTITION_FAILED);
    unit_counts.assign(units / static_cast<unsigned>(n), static_cast<unsigned>(n));
    type = {CL_DEVICE_PARTITION_EQUALLY, n, 0};
    break;
  }
  case CL_DEVICE_PARTITION_BY_COUNTS: {
    type = {CL_DEVICE_PARTITION_BY_COUNTS};
    uint64_t total = 0;
    size_t i = 1;
    for (; properties[i] != CL_DEVICE_PARTITION_BY_COUNTS_LIST_END; ++i) {
      cl_device_partition_property n = properties[i];
      if (n <= 0)
        return make_error("BY_COUNTS entries must be positive", CL_INVALID_DEVICE_PARTITION_COUNT);
      if (static_cast<uint64_t>(n) > units)
        return make_error("a count exceeds the compute units", CL_INVALID_DEVICE_PARTITION_COUNT);
      total += static_cast<uint64_t>(n);
      if (total > units || i > units)
        return make_error("more compute units or sub-devices than the device has",
                          CL_INVALID_DEVICE_PARTITION_COUNT);
      unit_counts.push_back(static_cast<unsigned>(n));
      type.push_back(n);
    }
    if (unit_counts.empty())
      return make_error("BY_COUNTS with no count", CL_INVALID_DEVICE_PARTITION_COUNT);
    type.push_back(CL_DEVICE_PARTITION_BY_COUNTS_LIST_END);
    type.push_back(0);
    break;
  }
  case CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN: {
    if (properties[2] != 0)
      return make_error("BY_AFFINITY_DOMAIN takes one value", CL_INVALID_VALUE);
    cl_device_partition_property domain = properties[1];
    if (domain != CL_DEVICE_AFFINITY_DOMAIN_NUMA && domain != CL_DEVICE_AFFINITY_DOMAIN_NEXT_PARTITIONABLE)
      return make_error("unsupported affinity domain", CL_INVALID_VALUE);
    if (clusters_.size() < 2)
      return make_error("one cluster cannot be partitioned further", CL_DEVICE_PARTITION_FAILED);
    for (size_t i = 0; i < clusters_.size(); ++i)
      unit_counts.push_back(spmd ? 1 : pes_[i]); // one sub-device per cluster (NUMA node)
    type = {CL_DEVICE_PARTITION_BY_AFFINITY_DOMAIN, domain, 0};
    break;
  }
  default:
    return make_error("unknown partition scheme", CL_INVALID_VALUE);
  }

  std::vector<Share> plan;
  size_t next = 0;
  for (unsigned count : unit_counts) {
    Share share;
    for (size_t u = next; u < next + count; ++u) {
      if (share.clusters.empty() || share.clusters.back() != unit_cluster[u]) {
        share.clusters.push_back(unit_cluster[u]);
        share.pes.push_back(0);
      }
      share.pes.back() += spmd ? pes_on(unit_cluster[u]) : 1;
    }
    next += count;
    plan.push_back(std::move(share));
  }
  return plan;
}

Result<std::vector<Device *>> Device::partition(const cl_device_partition_property *properties) {
  std::vector<cl_device_partition_property> type;
  auto plan = plan_partition(properties, type);
  if (!plan)
    return plan.error();
  std::vector<Device *> devices;
  for (auto &share : plan.value())
    devices.push_back(new Device(this, std::move(share.clusters), std::move(share.pes), type));
  return devices;
}

} // namespace manycl::rt
