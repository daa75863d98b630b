#include "manycl/runtime/kernel.h"

#include <algorithm>
#include <array>
#include <atomic>
#include <cstdlib>
#include <cstring>
#include <optional>

#include "manycl/device/host_pool.h"
#include "manycl/env.h"

#include "manycl/runtime/device.h"
#include "manycl/runtime/info.h"
#include "manycl/runtime/kbin.h"
#include "manycl/runtime/queue.h"

namespace manycl::rt {

namespace {
constexpr size_t kMaxWorkGroupSize = 1024;
constexpr size_t kArenaAlignment = 128; // the largest OpenCL C alignment (long16)

std::byte *align_up(std::byte *p, size_t alignment) {
  auto v = reinterpret_cast<uintptr_t>(p);
  return reinterpret_cast<std::byte *>((v + alignment - 1) & ~(alignment - 1));
}

// The PEs of a cluster running one SPMD work-group, as a team of host-pool fibers: a member
// waiting at a work-group barrier yields its host thread to another member or to another
// cluster's work, so a team larger than the host's cores needs no thread per PE. Each member
// has its own scratch: while it waits, its host thread may run other members' work.
class PoolPeTeam final : public compiler::PeTeam {
public:
  PoolPeTeam(unsigned cluster, unsigned size)
      : cluster_(cluster), size_(size), scratch_(std::make_unique<compiler::GroupScratch[]>(size)) {
  }
  unsigned size() const override { return size_; }
  void run(const std::function<void(unsigned)> &fn) override {
    device::CoopBarrier barrier(size_);
    barrier_ = &barrier;
    device::HostPool::shared().run_team(size_, cluster_, fn);
    barrier_ = nullptr;
  }
  void arriveAndWait() override { barrier_->arrive_and_wait(); }
  void arriveAndDrop() override { barrier_->arrive_and_drop(); }
  compiler::GroupScratch *scratch(unsigned pe) override { return &scratch_[pe]; }

private:
  unsigned cluster_; // members start on the pool's workers from this one on
  unsigned size_;
  std::unique_ptr<compiler::GroupScratch[]> scratch_;
  device::CoopBarrier *barrier_ = nullptr; // the current run's
};

// How many host lanes a cluster of `device` runs a launch's work-groups on (tasks of the host
// pool taking groups, or the fibers of an SPMD team): MANYCL_PE_THREADS if set (tests use it
// to force more concurrency than the host has cores), else the pool's workers; at most the
// PEs the device has on `cluster`.
unsigned lanes_per_cluster(const Device &device, unsigned cluster) {
  // Read once: every launch asks.
  static const long forced = env::number("MANYCL_PE_THREADS", 0);
  const unsigned lanes =
      forced > 0 ? static_cast<unsigned>(forced) : device::HostPool::shared().threads();
  return std::clamp(lanes, 1u, std::max(1u, device.pes_on(cluster)));
}

// A single-work-group launch may run on the enqueuing thread (see LaunchState::try_run_here)
// only when the kernel is known to be short: its last single-group launch ran for less than
// kInlineBudgetNs of host time. Enqueueing thus stays asynchronous for new kernels and long
// ones, so an application still overlaps its own work, or several devices, with them. One
// long run does not revoke it (a short kernel whose thread was preempted looks long), two in
// a row do.
constexpr uint64_t kInlineBudgetNs = 50'000;
constexpr int kShortRunCredit = 2;

// Everything one NDRange launch shares between the clusters that run it; it is also the
// command's device work (Event::Work), started when the command is ready.
struct LaunchState final : Event::Work, std::enable_shared_from_this<LaunchState> {
  compiler::Launch launch;
  std::vector<Ref<Memory>> buffers; // kept alive until the launch completes
  uint64_t groups[3] = {1, 1, 1};
  uint64_t total_groups = 0;
  std::atomic<uint64_t> next_group{0};
  std::atomic<unsigned> clusters_left{0};
  std::atomic<cl_int> error{CL_SUCCESS};
  std::shared_ptr<device::CommandRecorder> recorder;
  // kann programs: group g runs on the g-th cluster of the launch, with the kbin launch state.
  bool pinned = false;
  std::shared_ptr<KbinLaunch> kbin;
  ~LaunchState() override {
    if (kbin && kbin->scratch.size)
      kbin->executable->give_back_scratch(kbin->scratch.base);
  }
  device::ExecutionMode mode = device::ExecutionMode::SPMD;
  bool pe_team = true; // run_on_cluster: a team of PEs per work-group

  // Modeled compute of OpenCL C work-groups. Work-groups run wherever a host thread takes
  // them, but are accounted by group index, so modeled time does not depend on host timing:
  // group L belongs to cluster L % C of the command; in SPMD the cluster runs its groups one
  // after the other on all its PEs, in LWI group L runs on PE (L / C) % P of that cluster.
  // Each cluster advances by its busiest PE when the command ends.
  std::vector<unsigned> cost_pes;                     // per cluster of the command: PEs
  std::vector<unsigned> cost_base;                    // per cluster: first counter
  std::unique_ptr<std::atomic<uint64_t>[]> pe_cycles; // per cluster and PE
  void init_cost(const std::vector<unsigned> &clusters) {
    unsigned n = 0;
    for (unsigned c : clusters) {
      unsigned pes = std::max(1u, device->pes_on(c));
      cost_base.push_back(n);
      cost_pes.push_back(pes);
      n += mode == device::ExecutionMode::SPMD ? 1 : pes;
    }
    pe_cycles = std::make_unique<std::atomic<uint64_t>[]>(n);
  }
  uint64_t linear_group(const uint64_t id[3]) const {
    return id[0] + groups[0] * (id[1] + groups[1] * id[2]);
  }
  compiler::GroupCost group_cost(unsigned group_cluster) const {
    compiler::GroupCost c;
    c.pes = mode == device::ExecutionMode::SPMD ? cost_pes[group_cluster] : 1;
    return c;
  }
  unsigned cost_cluster(const uint64_t id[3]) const {
    return static_cast<unsigned>(linear_group(id) % cost_pes.size());
  }
  // A host thread sums its groups' cycles per modeled PE and adds them to the shared counters
  // once, when it runs out of groups: an atomic add per group on counters that all threads
  // write costs more than a small group's work. Sums do not depend on the order.
  struct CostSums {
    static constexpr unsigned kSlots = 256; // PEs of a command held locally; more go direct
    std::array<uint64_t, kSlots> cycles{};
    unsigned used = 0; // slots [0, used) may be non-zero
  };
  void account_group(const uint64_t id[3], unsigned cluster, const compiler::GroupCost &c,
                     CostSums &sums) {
    uint64_t linear = linear_group(id);
    unsigned pe = mode == device::ExecutionMode::SPMD
                      ? 0
                      : static_cast<unsigned>(linear / cost_pes.size() % cost_pes[cluster]);
    unsigned slot = cost_base[cluster] + pe;
    if (slot < CostSums::kSlots) {
      sums.cycles[slot] += c.cycles;
      sums.used = std::max(sums.used, slot + 1);
    } else {
      pe_cycles[slot].fetch_add(c.cycles, std::memory_order_relaxed);
    }
  }
  void flush_costs(CostSums &sums) {
    for (unsigned slot = 0; slot < sums.used; ++slot)
      if (sums.cycles[slot])
        pe_cycles[slot].fetch_add(sums.cycles[slot], std::memory_order_relaxed);
    sums.used = 0;
  }
  void account_compute() {
    if (pinned || !pe_cycles)
      return;
    for (unsigned g = 0; g < cost_pes.size(); ++g) {
      unsigned n = mode == device::ExecutionMode::SPMD ? 1 : cost_pes[g];
      uint64_t busiest = 0;
      for (unsigned p = 0; p < n; ++p)
        busiest = std::max(busiest, pe_cycles[cost_base[g] + p].load(std::memory_order_relaxed));
      recorder->context(g).account_cycles(busiest, "opencl c");
    }
  }

  Device *device = nullptr;
  Ref<Program> program;                   // the program object, alive during the launch
  std::shared_ptr<compiler::Program> jit; // the JIT code the launch runs
  // The kernel's short-run credit: kShortRunCredit after a short single-group launch, one
  // less after each long one; above zero, launches may run on the enqueuing thread.
  std::shared_ptr<std::atomic<int>> short_run_credit;
  std::string command_name;
  Ref<Event> event; // from start() to completion

  void start(Ref<Event> started, bool on_enqueuing_thread) override;
  bool try_run_here();
  void run_share(device::Cluster &cluster, unsigned group_index);
  // A one-work-group launch on `cluster`, from a job of it (or while it is claimed):
  // recorder, the group, end_command(). Failures go to `error`.
  void run_alone(device::Cluster &cluster);
  void end_command(); // after the last cluster's share: statistics and modeled time
  void complete();    // completes the event (callbacks, dependents)
  // Host threads claim runs of consecutive work-groups, not one group at a time: a claim is
  // one atomic operation on a counter every thread writes, and consecutive groups of a
  // streaming kernel are consecutive memory, which one core's prefetchers follow (groups
  // dealt out one by one interleave the cores' streams at every group). A claim stays small
  // against the groups per host thread so that the last claims still balance the threads.
  // Which thread runs a group does not change modeled time (groups are accounted by index).
  struct GroupClaim {
    uint64_t next = 0, end = 0;
  };
  uint64_t claim_size = 1;
  // Lanes that may run this launch's groups at the same time, over all its clusters: the
  // lanes of one cluster (the host's threads). Every cluster of a command runs its share on
  // its own thread, and a share's lanes are that thread and the pool's workers: unbounded, a
  // launch on the 5 clusters of mppa3 ran its groups on 7 threads of a 2-core host, each
  // core switching between streams and working sets. A lane takes a slot before its first
  // group and gives it back after its last; a lane that finds none leaves the groups to the
  // others (whichever threads come first run the launch; modeled time counts groups by index).
  std::atomic<int> lane_slots{0};
  bool take_lane_slot() {
    int free = lane_slots.load(std::memory_order_relaxed);
    while (free > 0 &&
           !lane_slots.compare_exchange_weak(free, free - 1, std::memory_order_relaxed)) {
    }
    return free > 0;
  }
  void size_claims(unsigned host_lanes) {
    constexpr uint64_t kClaimsPerLane = 16, kMaxClaim = 64;
    claim_size = std::clamp<uint64_t>(total_groups / (kClaimsPerLane * std::max(1u, host_lanes)), 1,
                                      kMaxClaim);
  }
  bool take_group(GroupClaim &claim, uint64_t id[3]) {
    if (claim.next == claim.end) {
      uint64_t first = next_group.fetch_add(claim_size, std::memory_order_relaxed);
      if (first >= total_groups)
        return false;
      claim.next = first;
      claim.end = std::min(total_groups, first + claim_size);
    }
    uint64_t linear = claim.next++;
    id[0] = linear % groups[0];
    id[1] = (linear / groups[0]) % groups[1];
    id[2] = linear / (groups[0] * groups[1]);
    return true;
  }
  void fail(const compiler::Status &status) {
    cl_int expected = CL_SUCCESS;
    error.compare_exchange_strong(expected, CL_OUT_OF_RESOURCES);
    (void)status;
  }

  // One cluster's share: work-groups are taken from a common counter, so clusters that
  // start late or run faster simply take more.
  //
  // Host threads are the simulator's real resource, PEs the simulated one: a cluster runs its
  // groups on up to `lanes` lanes of the host pool (see lanes_per_cluster()). Kernels without
  // barriers run whole work-groups per lane in both modes (the work-items of a group are
  // independent, so how they are spread over PEs cannot change the result), and so do costed
  // kernels with barriers (the executor runs each barrier interval of a costed group over
  // the whole group on one thread); the lanes are tasks of a pool batch, so the cluster's
  // thread and whichever workers are free take the groups. Uncosted kernels with barriers in
  // SPMD mode (MANYCL_COST=0) spread each group's work-items over a team of `lanes` pool
  // fibers that meet at every barrier, each wait yielding its worker.
  void run_on_cluster(device::Cluster &cluster, unsigned group_index, unsigned lanes,
                      bool pe_team) {
    if (pinned) {
      // The interpreter kernel only hands its group id to the record interpreter: run that
      // directly, as a cooperative task of the host pool, so that the cluster's waits for the
      // other clusters yield the host thread instead of blocking it.
      device::HostPool::shared().run_cooperative(
          cluster.id(), [&] { run_kbin_cluster(kbin.get(), static_cast<uint32_t>(group_index)); });
      return;
    }
    std::byte *spm = align_up(cluster.spm(), kArenaAlignment);
    size_t spm_size = cluster.spm_bytes() - static_cast<size_t>(spm - cluster.spm());
    if (mode == device::ExecutionMode::SPMD && pe_team) {
      PoolPeTeam team(cluster.id(), lanes);
      uint64_t id[3];
      GroupClaim claim;
      CostSums sums;
      while (error.load(std::memory_order_relaxed) == CL_SUCCESS && take_group(claim, id)) {
        unsigned cost_at = cost_cluster(id);
        compiler::GroupCost cost = group_cost(cost_at);
        auto status = launch.runGroup(id, spm, spm_size, compiler::ExecMode::SPMD, &team, &cost);
        if (!status.ok())
          fail(status);
        account_group(id, cost_at, cost, sums);
      }
      flush_costs(sums);
      return;
    }
    // Whole groups per lane; the SPM is split between the lanes.
    size_t need =
        (std::max<size_t>(launch.localMemSize(), 1) + kArenaAlignment - 1) & ~(kArenaAlignment - 1);
    uint64_t groups_left =
        total_groups - std::min(total_groups, next_group.load(std::memory_order_relaxed));
    unsigned count =
        static_cast<unsigned>(std::min<uint64_t>({lanes, spm_size / need, groups_left}));
    count = std::max(count, 1u);
    const Lanes shared{spm, count == 1 ? spm_size : (spm_size / count) & ~(kArenaAlignment - 1),
                       device::current_cluster_context()};
    // Two pointers: the task fits std::function's own storage (no allocation per launch).
    device::HostPool::shared().run(count,
                                   [this, &shared](unsigned lane) { run_lane(shared, lane); });
  }

  // What the lanes of one cluster's share have in common.
  struct Lanes {
    std::byte *spm;
    size_t arena_size;
    device::ClusterContext *context; // the cluster's: async copies use its RDMA engine
  };
  // One lane: groups from the common counter until none is left, in the lane's SPM arena.
  void run_lane(const Lanes &lanes, unsigned lane) {
    // A lane on another host thread than the share's acts for the same cluster.
    std::optional<device::ScopedClusterContext> scope;
    if (device::current_cluster_context() != lanes.context)
      scope.emplace(lanes.context);
    if (!take_lane_slot())
      return;
    std::byte *arena = lanes.spm + lane * lanes.arena_size;
    uint64_t id[3];
    GroupClaim claim;
    CostSums sums;
    while (error.load(std::memory_order_relaxed) == CL_SUCCESS && take_group(claim, id)) {
      unsigned cost_at = cost_cluster(id);
      compiler::GroupCost cost = group_cost(cost_at);
      auto status =
          launch.runGroup(id, arena, lanes.arena_size, compiler::ExecMode::LWI, nullptr, &cost);
      if (!status.ok())
        fail(status);
      account_group(id, cost_at, cost, sums);
    }
    flush_costs(sums);
    lane_slots.fetch_add(1, std::memory_order_relaxed);
  }
};

// async_work_group_copy and async_work_group_strided_copy: a transfer of the cluster's RDMA
// engine when one side is the cluster's SPM (__local) and the other the device DDR
// (__global), so its cost appears in modeled time and DDR traffic; a plain copy otherwise.
void async_copy_on_rdma(void *, void *dst, const void *src, size_t elem_size, size_t num,
                        size_t src_stride, size_t dst_stride) {
  device::ClusterContext *context = device::current_cluster_context();
  if (context && num > 0) {
    auto *spm = context->spm_base();
    auto *ddr = context->device().ddr().base();
    uint64_t ddr_size = context->device().ddr().capacity();
    auto in_spm = [&](const void *p) {
      auto *b = static_cast<const std::byte *>(p);
      return b >= spm && b < spm + context->spm_size();
    };
    auto in_ddr = [&](const void *p) {
      auto *b = static_cast<const std::byte *>(p);
      return b >= ddr && b < ddr + ddr_size;
    };
    auto endpoint = [&](const void *p) {
      auto *b = static_cast<const std::byte *>(p);
      return in_spm(p)
                 ? device::DmaEndpoint::spm(context->group_index(), static_cast<uint64_t>(b - spm))
                 : device::DmaEndpoint::ddr(static_cast<uint64_t>(b - ddr));
    };
    bool spm_ddr = (in_spm(dst) && in_ddr(src)) || (in_ddr(dst) && in_spm(src));
    if (spm_ddr) {
      device::DmaShape shape = device::DmaShape::strided_2d(elem_size, num, src_stride * elem_size,
                                                            dst_stride * elem_size);
      if (src_stride == 1 && dst_stride == 1)
        shape = device::DmaShape::linear(elem_size * num);
      device::DmaRequest request(endpoint(src), endpoint(dst), shape);
      request.label = "async_work_group_copy";
      // Work-groups of one cluster copy from several host threads at once: arbitrating each
      // small copy among the clusters would make them take turns on the host at every copy.
      request.private_ddr_share = true;
      request.fail_command_on_error = false; // the plain copy below handles a rejection
      auto handle = context->dma(request);
      if (handle && context->dma_wait(handle.value()))
        return;
      // A rejected transfer (e.g. a range outside the buffer) falls back to the plain copy,
      // which behaves as an ordinary out-of-bounds access would.
    }
  }
  auto *d = static_cast<std::byte *>(dst);
  auto *s = static_cast<const std::byte *>(src);
  for (size_t i = 0; i < num; ++i)
    std::memmove(d + i * dst_stride * elem_size, s + i * src_stride * elem_size, elem_size);
}

// The largest divisor of n that is at most limit.
size_t largest_divisor(size_t n, size_t limit) {
  for (size_t d = std::min(n, limit); d > 1; --d)
    if (n % d == 0)
      return d;
  return 1;
}

} // namespace

Result<Kernel *> Kernel::create(Program *program, const std::string &name) {
  if (!program->has_executable())
    return make_error("no executable", CL_INVALID_PROGRAM_EXECUTABLE);
  auto *kernel = new Kernel();
  bool found = false;
  for (Device *device : program->devices()) {
    auto build = program->build_for(device);
    if (!build.loaded)
      continue;
    const compiler::Kernel *k = build.loaded->kernel(name);
    if (!k)
      continue;
    if (!found)
      kernel->info_ = k->info();
    found = true;
    kernel->per_device_[device] = {build.loaded, k, build.kbin};
  }
  if (!found) {
    delete kernel;
    return make_error("no kernel named " + name, CL_INVALID_KERNEL_NAME);
  }
  kernel->program_ = Ref<Program>(program);
  kernel->command_name_ = "ndrange " + kernel->info_.name;
  kernel->args_.resize(kernel->info_.args.size());
  program->kernel_created();
  return kernel;
}

Kernel::~Kernel() {
  if (program_)
    program_->kernel_destroyed();
}

Kernel *Kernel::clone() const {
  auto *copy = new Kernel();
  copy->program_ = program_;
  copy->info_ = info_;
  copy->per_device_ = per_device_;
  copy->command_name_ = command_name_;
  {
    std::lock_guard lock(mutex_);
    copy->args_ = args_;
  }
  program_->kernel_created();
  return copy;
}

cl_int Kernel::set_arg(cl_uint index, size_t size, const void *value) {
  if (index >= info_.args.size())
    return CL_INVALID_ARG_INDEX;
  const auto &arg = info_.args[index];
  Arg next;
  switch (arg.address) {
  case compiler::AddressQual::Local:
    if (value)
      return CL_INVALID_ARG_VALUE;
    if (size == 0)
      return CL_INVALID_ARG_SIZE;
    next.value = compiler::ArgValue::local(size);
    break;
  case compiler::AddressQual::Global:
  case compiler::AddressQual::Constant: {
    if (size != sizeof(cl_mem))
      return CL_INVALID_ARG_SIZE;
    cl_mem handle = value ? *static_cast<const cl_mem *>(value) : nullptr;
    if (!handle) {
      next.value = compiler::ArgValue::pointer(nullptr);
      break;
    }
    Memory *memory = Memory::from(handle);
    if (!memory || memory->context() != context())
      return CL_INVALID_MEM_OBJECT;
    next.memory = WeakMemory(memory);
    next.value = compiler::ArgValue::pointer(memory->data());
    break;
  }
  default:
    if (!value)
      return CL_INVALID_ARG_VALUE;
    if (size != arg.size)
      return CL_INVALID_ARG_SIZE;
    next.value = compiler::ArgValue::value(value, size);
    break;
  }
  next.set = true;
  std::lock_guard lock(mutex_);
  args_[index] = std::move(next);
  return CL_SUCCESS;
}

cl_int Kernel::kernel_info(cl_kernel_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_KERNEL_FUNCTION_NAME:
    return out.string(info_.name);
  case CL_KERNEL_NUM_ARGS:
    return out.scalar<cl_uint>(static_cast<cl_uint>(info_.args.size()));
  case CL_KERNEL_REFERENCE_COUNT:
    return out.scalar<cl_uint>(api_ref_count());
  case CL_KERNEL_CONTEXT:
    return out.scalar<cl_context>(context()->handle());
  case CL_KERNEL_PROGRAM:
    return out.scalar<cl_program>(program_->handle());
  case CL_KERNEL_ATTRIBUTES:
    return out.string(info_.attributes);
  default:
    return CL_INVALID_VALUE;
  }
}

cl_int Kernel::arg_info(cl_uint index, cl_kernel_arg_info param, size_t size, void *value,
                        size_t *size_ret) {
  if (index >= info_.args.size())
    return CL_INVALID_ARG_INDEX;
  const auto &arg = info_.args[index];
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_KERNEL_ARG_ADDRESS_QUALIFIER: {
    cl_kernel_arg_address_qualifier q = CL_KERNEL_ARG_ADDRESS_PRIVATE;
    if (arg.address == compiler::AddressQual::Global)
      q = CL_KERNEL_ARG_ADDRESS_GLOBAL;
    else if (arg.address == compiler::AddressQual::Constant)
      q = CL_KERNEL_ARG_ADDRESS_CONSTANT;
    else if (arg.address == compiler::AddressQual::Local)
      q = CL_KERNEL_ARG_ADDRESS_LOCAL;
    return out.scalar(q);
  }
  case CL_KERNEL_ARG_ACCESS_QUALIFIER: {
    cl_kernel_arg_access_qualifier q = CL_KERNEL_ARG_ACCESS_NONE;
    if (arg.access == compiler::AccessQual::ReadOnly)
      q = CL_KERNEL_ARG_ACCESS_READ_ONLY;
    else if (arg.access == compiler::AccessQual::WriteOnly)
      q = CL_KERNEL_ARG_ACCESS_WRITE_ONLY;
    else if (arg.access == compiler::AccessQual::ReadWrite)
      q = CL_KERNEL_ARG_ACCESS_READ_WRITE;
    return out.scalar(q);
  }
  case CL_KERNEL_ARG_TYPE_NAME:
    return out.string(arg.type_name);
  case CL_KERNEL_ARG_TYPE_QUALIFIER: {
    cl_kernel_arg_type_qualifier q = CL_KERNEL_ARG_TYPE_NONE;
    if (arg.type_qual & compiler::TypeQualConst)
      q |= CL_KERNEL_ARG_TYPE_CONST;
    if (arg.type_qual & compiler::TypeQualRestrict)
      q |= CL_KERNEL_ARG_TYPE_RESTRICT;
    if (arg.type_qual & compiler::TypeQualVolatile)
      q |= CL_KERNEL_ARG_TYPE_VOLATILE;
    if (arg.type_qual & compiler::TypeQualPipe)
      q |= CL_KERNEL_ARG_TYPE_PIPE;
    return out.scalar(q);
  }
  case CL_KERNEL_ARG_NAME:
    if (arg.name.empty())
      return CL_KERNEL_ARG_INFO_NOT_AVAILABLE; // built without -cl-kernel-arg-info
    return out.string(arg.name);
  default:
    return CL_INVALID_VALUE;
  }
}

cl_int Kernel::work_group_info(Device *device, cl_kernel_work_group_info param, size_t size,
                               void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  const bool has_reqd = info_.reqd_work_group_size[0] != 0;
  switch (param) {
  case CL_KERNEL_WORK_GROUP_SIZE: {
    size_t n = kMaxWorkGroupSize;
    if (has_reqd)
      n = size_t(info_.reqd_work_group_size[0]) * info_.reqd_work_group_size[1] *
          info_.reqd_work_group_size[2];
    return out.scalar<size_t>(n);
  }
  case CL_KERNEL_COMPILE_WORK_GROUP_SIZE: {
    size_t sizes[3] = {info_.reqd_work_group_size[0], info_.reqd_work_group_size[1],
                       info_.reqd_work_group_size[2]};
    return out.array(sizes, 3);
  }
  case CL_KERNEL_LOCAL_MEM_SIZE: {
    uint64_t total = info_.static_local_size;
    std::lock_guard lock(mutex_);
    for (auto &arg : args_)
      if (arg.set && arg.value.kind == compiler::ArgValue::Kind::Local)
        total += arg.value.local_size;
    return out.scalar<cl_ulong>(total);
  }
  case CL_KERNEL_PREFERRED_WORK_GROUP_SIZE_MULTIPLE:
    return out.scalar<size_t>(device->config().mode == device::ExecutionMode::SPMD
                                  ? device->config().pes_per_cluster
                                  : 8);
  case CL_KERNEL_PRIVATE_MEM_SIZE:
    return out.scalar<cl_ulong>(info_.private_size);
  case CL_KERNEL_GLOBAL_WORK_SIZE:
    return CL_INVALID_VALUE; // only for custom devices and built-in kernels
  default:
    return CL_INVALID_VALUE;
  }
}

cl_int Kernel::enqueue(Queue *queue, cl_uint work_dim, const size_t *offset, const size_t *global,
                       const size_t *local, const std::vector<Event *> &waits, Event *&out) {
  Device *device = queue->device();
  auto target = per_device_.find(device);
  if (target == per_device_.end()) {
    // A sub-device runs what its root device's build produced (same configuration).
    for (auto &[d, entry] : per_device_)
      if (const_cast<Device *>(d)->root() == device->root()) {
        target = per_device_.find(d);
        break;
      }
  }
  if (target == per_device_.end())
    return CL_INVALID_PROGRAM_EXECUTABLE;
  if (work_dim < 1 || work_dim > 3)
    return CL_INVALID_WORK_DIMENSION;
  if (!global)
    return CL_INVALID_GLOBAL_WORK_SIZE;

  compiler::NDRange range;
  range.work_dim = work_dim;
  const bool has_reqd = info_.reqd_work_group_size[0] != 0;
  for (cl_uint d = 0; d < work_dim; ++d) {
    if (global[d] == 0)
      return CL_INVALID_GLOBAL_WORK_SIZE;
    range.global[d] = global[d];
    range.offset[d] = offset ? offset[d] : 0;
    if (range.offset[d] + range.global[d] < range.global[d])
      return CL_INVALID_GLOBAL_OFFSET;
  }
  size_t product = 1;
  if (local) {
    for (cl_uint d = 0; d < work_dim; ++d) {
      if (local[d] == 0 || global[d] % local[d] != 0)
        return CL_INVALID_WORK_GROUP_SIZE;
      if (local[d] > kMaxWorkGroupSize)
        return CL_INVALID_WORK_ITEM_SIZE;
      if (has_reqd && local[d] != info_.reqd_work_group_size[d])
        return CL_INVALID_WORK_GROUP_SIZE;
      range.local[d] = local[d];
      product *= local[d];
    }
    if (has_reqd)
      for (cl_uint d = work_dim; d < 3; ++d)
        if (info_.reqd_work_group_size[d] != 1)
          return CL_INVALID_WORK_GROUP_SIZE;
    if (product > kMaxWorkGroupSize)
      return CL_INVALID_WORK_GROUP_SIZE;
  } else if (has_reqd) {
    for (cl_uint d = 0; d < work_dim; ++d) {
      if (global[d] % info_.reqd_work_group_size[d] != 0)
        return CL_INVALID_WORK_GROUP_SIZE;
      range.local[d] = info_.reqd_work_group_size[d];
    }
  } else {
    // Enough work-groups to occupy every cluster, each large enough to amortise the group
    // overhead, dimension 0 first: up to 256 work-items for kernels with barriers (whose
    // private values live in per-item context slots between barriers), up to the largest
    // group for barrier-free kernels, whose items run as one vectorized loop (a group of 256
    // floats is 1 KiB per buffer: the claim, set-up and cost accounting of a group cost more
    // than its loop; vector add ran at half PoCL's GB/s).
    size_t budget = info_.uses_barriers ? 256 : kMaxWorkGroupSize;
    for (cl_uint d = 0; d < work_dim; ++d) {
      size_t l = largest_divisor(global[d], budget);
      range.local[d] = l;
      budget = std::max<size_t>(1, budget / l);
    }
  }

  std::vector<compiler::ArgValue> values;
  values.reserve(args_.size());
  auto state = std::make_shared<LaunchState>();
  // kann programs address their tensors by argument index.
  const bool kbin_launch = target->second.kbin != nullptr;
  std::vector<Memory *> arg_memory(kbin_launch ? args_.size() : 0);
  {
    std::lock_guard lock(mutex_);
    for (size_t i = 0; i < args_.size(); ++i) {
      const Arg &arg = args_[i];
      if (!arg.set)
        return CL_INVALID_KERNEL_ARGS;
      values.push_back(arg.value);
      if (arg.memory) {
        // Kernel arguments do not keep buffers alive; the launch does, until it completes.
        Ref<Memory> memory = arg.memory.lock();
        if (!memory)
          return CL_INVALID_MEM_OBJECT;
        if (memory->context() != queue->context())
          return CL_INVALID_CONTEXT;
        if (kbin_launch)
          arg_memory[i] = memory.get();
        state->buffers.push_back(std::move(memory));
      }
    }
  }
  const auto &kbin = target->second.kbin;
  if (kbin) {
    // A kann program: one work-group per cluster of the (sub-)device, each on its own
    // cluster, all at once (they exchange data and meet at barriers).
    const auto &program = kbin->program();
    if (work_dim != 1 || global[0] != program.cluster_count || (offset && offset[0] != 0))
      return CL_INVALID_GLOBAL_WORK_SIZE;
    if (program.cluster_count != device->clusters().size() || !device->owns_whole_clusters())
      return CL_INVALID_PROGRAM_EXECUTABLE;
    auto launch = std::make_shared<KbinLaunch>();
    launch->executable = kbin;
    launch->args.resize(program.arg_count);
    device::Ddr &ddr = device->hardware().ddr();
    for (const auto &tensor : program.tensors) {
      Memory *memory =
          tensor.arg_index < arg_memory.size() ? arg_memory[tensor.arg_index] : nullptr;
      if (!memory || memory->size() < tensor.byte_size)
        return CL_INVALID_KERNEL_ARGS;
      // The buffer must live in this device's DDR for the RDMA engine to reach it.
      const std::byte *data = memory->data();
      if (data < ddr.base() || data >= ddr.base() + ddr.capacity())
        return CL_INVALID_KERNEL_ARGS;
      launch->args[tensor.arg_index] = {static_cast<uint64_t>(data - ddr.base()), memory->size()};
    }
    if (program.scratch_size) {
      auto block = kbin->take_scratch();
      if (!block)
        return CL_MEM_OBJECT_ALLOCATION_FAILURE;
      launch->scratch = {block.value(), program.scratch_size};
    }
    state->kbin = std::move(launch);
    state->pinned = true;
  }
  auto launch = compiler::Launch::prepare(*target->second.kernel, values, range);
  if (!launch)
    return compiler_error_to_cl(launch.status().code, CL_OUT_OF_RESOURCES);
  state->launch = std::move(launch.value());
  if (state->launch.localMemSize() > device->config().local_mem_bytes())
    return CL_OUT_OF_RESOURCES;
  state->mode = device->config().mode;
  state->pe_team =
      info_.uses_barriers && !info_.loop_barriers && info_.cost == compiler::KernelInfo::Cost::None;
  state->total_groups = 1;
  for (int d = 0; d < 3; ++d) {
    state->groups[d] = range.numGroups(d);
    state->total_groups *= state->groups[d];
  }

  state->launch.setAsyncCopyHook(&async_copy_on_rdma, nullptr);
  state->device = device;
  state->program = program_;
  state->jit = target->second.program;
  state->short_run_credit = short_run_credit_;
  state->command_name = command_name_;
  out = queue->enqueue(CL_COMMAND_NDRANGE_KERNEL, std::move(state), waits);
  return CL_SUCCESS;
}

void LaunchState::start(Ref<Event> started, bool on_enqueuing_thread) {
  event = std::move(started);
  const auto &all = device->clusters();
  if (total_groups == 1 && !pinned) {
    if (on_enqueuing_thread && try_run_here())
      return;
    // One work-group: the whole command runs in one job of the cluster, recorder included,
    // so that its modeled start follows what the cluster ran before and its host time is
    // the launch's own (see end_command()).
    device::Cluster &cluster = device->hardware().cluster(all[0]);
    cluster.submit([self = shared_from_this(), &cluster] {
      self->run_alone(cluster);
      self->complete();
    });
    return;
  }
  unsigned helpers = static_cast<unsigned>(std::min<uint64_t>(all.size(), total_groups));
  std::vector<unsigned> clusters(all.begin(), all.begin() + helpers);
  auto begun = device::CommandRecorder::begin(device->hardware(), command_name, clusters,
                                              event->modeled_not_before(), &device->ddr_domain());
  if (!begun) {
    Ref<Event> finished = std::move(event);
    finished->complete(CL_OUT_OF_RESOURCES);
    return;
  }
  recorder = std::move(begun.value());
  event->set_recorder(recorder);
  init_cost(clusters);
  // Claims are sized for the threads that take them: every cluster's team when the groups
  // run on PE teams (each cluster's team runs its groups), else the launch's lanes.
  unsigned host_lanes = 0, team_lanes = 0;
  for (unsigned c : clusters) {
    const unsigned lanes = pinned ? 1u : lanes_per_cluster(*device, c);
    host_lanes = std::max(host_lanes, lanes);
    team_lanes += lanes;
  }
  lane_slots.store(static_cast<int>(host_lanes), std::memory_order_relaxed);
  size_claims(mode == device::ExecutionMode::SPMD && pe_team ? team_lanes : host_lanes);
  clusters_left.store(helpers);
  // Commands whose clusters wait for each other are submitted to all of them at once.
  std::unique_lock gang(device->gang_submit_mutex(), std::defer_lock);
  if (pinned)
    gang.lock();
  auto self = shared_from_this();
  for (unsigned g = 0; g < helpers; ++g) {
    device::Cluster &cluster = device->hardware().cluster(clusters[g]);
    cluster.submit([self, &cluster, g] {
      self->run_share(cluster, g);
      if (self->clusters_left.fetch_sub(1) == 1) {
        self->end_command();
        self->complete();
      }
    });
  }
}

// A launch of one work-group whose command is ready inside the application's enqueue call
// runs right there when one of the device's clusters is idle: no hand-off to a cluster
// thread and back, which is most of the cost of short commands. The cluster is claimed for
// the time of the launch, so nothing else runs on it (and its SPM) meanwhile; modeled time,
// statistics and the event's states are those of a launch on the cluster's thread.
bool LaunchState::try_run_here() {
  if (short_run_credit->load(std::memory_order_relaxed) <= 0)
    return false;
  for (unsigned c : device->clusters()) {
    device::Cluster &cluster = device->hardware().cluster(c);
    if (cluster.run_here_if_idle([&] { run_alone(cluster); })) {
      complete();
      return true;
    }
  }
  return false;
}

void LaunchState::run_alone(device::Cluster &cluster) {
  auto begun =
      device::CommandRecorder::begin_on_cluster(device->hardware(), command_name, cluster.id(),
                                                event->modeled_not_before(), &device->ddr_domain());
  if (!begun) {
    error.store(CL_OUT_OF_RESOURCES);
    return;
  }
  recorder = std::move(begun.value());
  event->set_recorder(recorder);
  init_cost({cluster.id()});
  lane_slots.store(static_cast<int>(lanes_per_cluster(*device, cluster.id())),
                   std::memory_order_relaxed);
  run_share(cluster, 0);
  end_command();
}

void LaunchState::run_share(device::Cluster &cluster, unsigned group_index) {
  device::ScopedClusterContext scope(recorder->context(group_index));
  // An LWI sub-device may own only some PEs of a cluster.
  run_on_cluster(cluster, group_index, pinned ? 1 : lanes_per_cluster(*device, cluster.id()),
                 pe_team);
}

void LaunchState::end_command() {
  account_compute();
  const device::CommandStats &stats = recorder->end();
  if (total_groups == 1) {
    // The command's host time (begin to end) tells whether the kernel is short.
    if (stats.host_seconds * 1e9 <= kInlineBudgetNs) {
      short_run_credit->store(kShortRunCredit, std::memory_order_relaxed);
    } else {
      int credit = short_run_credit->load(std::memory_order_relaxed);
      while (credit > 0 && !short_run_credit->compare_exchange_weak(credit, credit - 1,
                                                                    std::memory_order_relaxed)) {
      }
    }
  }
  if (recorder->failed()) {
    cl_int expected = CL_SUCCESS;
    error.compare_exchange_strong(expected, CL_OUT_OF_RESOURCES);
  }
}

void LaunchState::complete() {
  Ref<Event> finished = std::move(event);
  finished->complete(error.load());
}

} // namespace manycl::rt
