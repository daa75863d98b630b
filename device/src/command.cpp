#include "manycl/device/command.h"

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "dma_rows.h"
#include "fiber_locals.h"
#include "manycl/device/device.h"
#include "manycl/device/host_pool.h"
#include "manycl/device/report.h"
#include "manycl/env.h"

namespace manycl::device {

namespace {

thread_local ClusterContext *t_context = nullptr;

// Set on a PE thread while it runs its slice of a parallel_for: cycles accounted there are
// the PE's own; the cluster advances by the slowest PE afterwards.
struct PeScope {
  ClusterContext *context = nullptr;
  uint64_t *cycles = nullptr;
  unsigned pe = 0;
};
thread_local PeScope *t_pe = nullptr;

std::atomic<uint64_t> next_command_id{1};
std::atomic<int> checked_mode_state{-1}; // -1: not read yet

// Waiting hosts: spin a little (a partner cluster is often just behind), then block on the
// condition variable so a long wait costs no core. The simulator usually has far more
// threads than host cores, so the spin is short and yields.
template <class Pred> bool spin_briefly(Pred ready) {
  if (HostPool::inside_fiber())
    return ready(); // a cooperative wait yields to the other clusters at once
  for (int i = 0; i < 200; ++i) {
    if (ready())
      return true;
    if (i >= 16)
      std::this_thread::yield();
  }
  return ready();
}

std::chrono::milliseconds sync_timeout() {
  static const std::chrono::milliseconds timeout = [] {
    long seconds = env::number("MANYCL_SYNC_TIMEOUT_S", 0);
    return std::chrono::milliseconds(seconds > 0 ? seconds * 1000 : 120 * 1000);
  }();
  return timeout;
}

bool checked_add(uint64_t a, uint64_t b, uint64_t &out) {
  return !__builtin_add_overflow(a, b, &out);
}
bool checked_mul(uint64_t a, uint64_t b, uint64_t &out) {
  return !__builtin_mul_overflow(a, b, &out);
}

Result<uint64_t> extent(const DmaShape &s, uint64_t row_stride, uint64_t plane_stride) {
  if (s.row_bytes == 0 || s.rows == 0 || s.planes == 0)
    return uint64_t{0};
  uint64_t a, b, sum;
  if (!checked_mul(s.planes - 1, plane_stride, a) || !checked_mul(s.rows - 1, row_stride, b) ||
      !checked_add(a, b, sum) || !checked_add(sum, s.row_bytes, sum))
    return make_error("DMA shape overflows 64 bits");
  return sum;
}

const char *space_name(DmaSpace s) {
  return s == DmaSpace::Ddr ? "DDR" : "SPM";
}

std::string describe(const DmaEndpoint &e) {
  std::ostringstream out;
  if (e.space == DmaSpace::Ddr)
    out << "DDR window base " << e.window.base << " + offset " << e.offset;
  else
    out << "SPM of cluster " << e.cluster << " + offset " << e.offset;
  return out.str();
}

} // namespace

// ---------------------------------------------------------------------------------------
// DmaShape

Result<uint64_t> DmaShape::bytes() const {
  uint64_t a, b;
  if (!checked_mul(row_bytes, rows, a) || !checked_mul(a, planes, b))
    return make_error("DMA shape overflows 64 bits");
  return b;
}
Result<uint64_t> DmaShape::src_extent() const {
  return extent(*this, src_row_stride, src_plane_stride);
}
Result<uint64_t> DmaShape::dst_extent() const {
  return extent(*this, dst_row_stride, dst_plane_stride);
}

// ---------------------------------------------------------------------------------------
// Context plumbing

void swap_command_locals(FiberLocals &saved) {
  std::swap(t_context, saved.context);
  void *pe = t_pe;
  t_pe = static_cast<PeScope *>(saved.pe_scope);
  saved.pe_scope = pe;
}

ClusterContext *current_cluster_context() {
  if (t_pe)
    return t_pe->context;
  return t_context;
}

unsigned current_pe_index() {
  return t_pe ? t_pe->pe : 0;
}

ScopedClusterContext::ScopedClusterContext(ClusterContext *context)
    : previous_(t_context), context_(context) {
  t_context = context;
  if (context)
    context->enter_scope();
}
ScopedClusterContext::~ScopedClusterContext() {
  if (context_)
    context_->exit_scope();
  t_context = previous_;
}

bool checked_mode() {
  int state = checked_mode_state.load(std::memory_order_relaxed);
  if (state < 0) {
    state = env::flag("MANYCL_CHECK") ? 1 : 0;
    checked_mode_state.store(state, std::memory_order_relaxed);
  }
  return state == 1;
}
void set_checked_mode(bool on) {
  checked_mode_state.store(on ? 1 : 0);
}

// ---------------------------------------------------------------------------------------
// ClusterContext

ClusterContext::ClusterContext(CommandRecorder &command, unsigned group_index,
                               unsigned device_cluster)
    : command_(command), group_index_(group_index), device_cluster_(device_cluster) {
  now_ = engine_free_ = command.start_cycle();
  stats_.cluster = device_cluster;
  arbiter().join(slot_, device_cluster, command.id(), command.start_cycle());
}

ClusterContext::~ClusterContext() {
  arbiter().leave(slot_);
  delete[] signals_.load();
}

Arbiter &ClusterContext::arbiter() {
  return command_.arbiter_;
}

void ClusterContext::enter_scope() {
  if (scope_depth_.fetch_add(1) == 0)
    arbiter().start(slot_, now());
}

void ClusterContext::exit_scope() {
  if (scope_depth_.fetch_sub(1) == 1)
    arbiter().finish(slot_);
}

Result<uint64_t> ClusterContext::reserve_ddr(uint64_t issue, uint64_t not_before, uint64_t bytes) {
  Arbiter &a = arbiter();
  auto done =
      a.reserve_ddr(slot_, issue, not_before, transfer_cycles(bytes, a.ddr_bytes_per_cycle()),
                    command_.failed_, sync_timeout().count());
  if (!done) {
    // Another cluster failed the command while this one waited: say what happened there.
    if (command_.failed())
      return make_error("command already failed: " + command_.error().message);
    return fail(done.error().message);
  }
  return done;
}

ClusterContext::Signal *ClusterContext::signals() {
  Signal *existing = signals_.load(std::memory_order_acquire);
  if (existing)
    return existing;
  auto *fresh = new Signal[kSignalsPerCluster];
  if (signals_.compare_exchange_strong(existing, fresh, std::memory_order_acq_rel))
    return fresh;
  delete[] fresh; // another thread allocated them first
  return existing;
}

Device &ClusterContext::device() {
  return command_.device();
}
Cluster &ClusterContext::cluster() {
  return command_.device().cluster(device_cluster_);
}
unsigned ClusterContext::group_size() const {
  return command_.group_size();
}
std::byte *ClusterContext::spm_base() {
  return cluster().spm();
}
uint64_t ClusterContext::spm_size() const {
  return command_.device_.config().spm_bytes;
}
unsigned ClusterContext::pe_count() const {
  return command_.device_.config().pes_per_cluster;
}

uint64_t ClusterContext::now() const {
  std::lock_guard lock(mutex_);
  return now_;
}

uint64_t ClusterContext::finish_cycle() const {
  std::lock_guard lock(mutex_);
  return std::max(now_, engine_free_);
}

Error ClusterContext::fail(std::string message) {
  std::string full = "cluster " + std::to_string(device_cluster_) + ": " + message;
  command_.fail(full);
  return make_error(full);
}

void ClusterContext::account_cycles(uint64_t cycles, const char *label) {
  if (t_pe && t_pe->context == this) {
    *t_pe->cycles += cycles;
    return;
  }
  if (cycles == 0)
    return;
  uint64_t start;
  {
    std::lock_guard lock(mutex_);
    start = now_;
    now_ += cycles;
    stats_.compute_cycles += cycles;
  }
  arbiter().publish(slot_, start + cycles);
  if (Reports::instance().tracing())
    Reports::instance().modeled_span(device().index(), device_cluster_, TraceTrack::Compute,
                                     label ? label : "compute", start, start + cycles);
}

uint64_t ClusterContext::mac_cycles(ElementType type, uint64_t macs, unsigned pes) const {
  const DeviceConfig &c = command_.device_.config();
  uint64_t rate = 1;
  switch (type) {
  case ElementType::Int8:
    rate = c.int8_macs_per_cycle;
    break;
  case ElementType::Int16:
    rate = c.int16_macs_per_cycle;
    break;
  case ElementType::Fp16:
    rate = c.fp16_fmas_per_cycle;
    break;
  case ElementType::Fp32:
    rate = c.fp32_fmas_per_cycle;
    break;
  }
  pes = std::clamp(pes, 1u, c.pes_per_cluster);
  uint64_t per_cycle = rate * pes;
  return macs / per_cycle + (macs % per_cycle != 0);
}

void ClusterContext::advance_to(uint64_t cycle, const char *what, const std::string &detail) {
  uint64_t from;
  {
    std::lock_guard lock(mutex_);
    if (cycle <= now_)
      return;
    from = now_;
    stats_.wait_cycles += cycle - now_;
    now_ = cycle;
  }
  arbiter().publish(slot_, cycle);
  Reports::instance().modeled_span(device().index(), device_cluster_, TraceTrack::Sync, what, from,
                                   cycle, detail);
}

void ClusterContext::defer(uint64_t offset, uint64_t bytes, const std::byte *source) {
  std::lock_guard lock(deferred_mutex_);
  // The bytes this transfer replaces are not needed any more; the rest of an older deferred
  // copy it overlaps stays deferred.
  cut_deferred_locked(offset, bytes, false);
  Deferred d{offset, bytes, source};
  // Pieces of one parameter block arrive as adjacent transfers of adjacent source bytes:
  // merged, a native function finds its whole block in one range.
  for (bool merged = true; merged;) {
    merged = false;
    for (size_t i = 0; i < deferred_.size(); ++i) {
      const Deferred &e = deferred_[i];
      if (e.offset + e.bytes == d.offset && e.source + e.bytes == d.source) {
        d = {e.offset, e.bytes + d.bytes, e.source};
      } else if (d.offset + d.bytes == e.offset && d.source + d.bytes == e.source) {
        d.bytes += e.bytes;
      } else {
        continue;
      }
      deferred_[i] = deferred_.back();
      deferred_.pop_back();
      merged = true;
      break;
    }
  }
  deferred_.push_back(d);
  deferred_count_.store(deferred_.size(), std::memory_order_release);
}

void ClusterContext::cut_deferred_locked(uint64_t offset, uint64_t bytes, bool copy) {
  std::byte *spm = spm_base();
  const uint64_t end = offset + bytes;
  for (size_t i = 0; i < deferred_.size();) {
    const Deferred e = deferred_[i];
    const uint64_t e_end = e.offset + e.bytes;
    if (e_end <= offset || end <= e.offset) {
      ++i;
      continue;
    }
    const uint64_t lo = std::max(offset, e.offset), hi = std::min(end, e_end);
    if (copy)
      std::memcpy(spm + lo, e.source + (lo - e.offset), hi - lo);
    deferred_[i] = deferred_.back();
    deferred_.pop_back();
    // What lies outside [offset, end) stays deferred (appended: they overlap nothing here).
    if (e.offset < lo)
      deferred_.push_back({e.offset, lo - e.offset, e.source});
    if (hi < e_end)
      deferred_.push_back({hi, e_end - hi, e.source + (hi - e.offset)});
  }
  deferred_count_.store(deferred_.size(), std::memory_order_release);
}

void ClusterContext::cut_deferred(uint64_t offset, uint64_t bytes, bool copy) {
  if (!has_deferred())
    return;
  std::lock_guard lock(deferred_mutex_);
  cut_deferred_locked(offset, bytes, copy);
}

const std::byte *ClusterContext::deferred_view(uint64_t offset, uint64_t bytes) {
  if (!has_deferred())
    return nullptr;
  std::lock_guard lock(deferred_mutex_);
  for (const Deferred &e : deferred_)
    if (offset >= e.offset && bytes <= e.bytes && offset - e.offset <= e.bytes - bytes)
      return e.source + (offset - e.offset);
  cut_deferred_locked(offset, bytes, true);
  return nullptr;
}

void ClusterContext::note_spm_used(uint64_t end_offset) {
  std::lock_guard lock(mutex_);
  stats_.spm_high_water = std::max(stats_.spm_high_water, std::min(end_offset, spm_size()));
}

Result<void> ClusterContext::check_spm_range(const void *ptr, uint64_t size) {
  auto base = reinterpret_cast<uintptr_t>(spm_base());
  auto p = reinterpret_cast<uintptr_t>(ptr);
  uint64_t spm = spm_size();
  if (p < base || p - base > spm || size > spm - (p - base)) {
    std::ostringstream msg;
    msg << "operand [" << ptr << ", +" << size << ") lies outside the cluster's SPM ["
        << static_cast<const void *>(spm_base()) << ", +" << spm << ")";
    return fail(msg.str());
  }
  note_spm_used(p - base + size);
  return {};
}

Result<DmaHandle> ClusterContext::dma(const DmaRequest &r) {
  if (command_.failed())
    return make_error("command already failed: " + command_.error().message);
  const DeviceConfig &config = command_.device_.config();
  const unsigned n = group_size();
  auto reject = [&](std::string message) -> Error {
    if (r.fail_command_on_error)
      return fail(std::move(message));
    return make_error("cluster " + std::to_string(device_cluster_) + ": " + message);
  };

  // ---- validation: nothing is touched before every range is known to be inside ----
  auto bytes = r.shape.bytes();
  auto src_extent = r.shape.src_extent();
  auto dst_extent = r.shape.dst_extent();
  if (!bytes || !src_extent || !dst_extent)
    return reject("DMA: shape overflows 64 bits");
  if (r.src.space == DmaSpace::Ddr && r.dst.space == DmaSpace::Ddr)
    return reject("DMA: DDR to DDR transfers are not supported by the RDMA engine");

  std::vector<unsigned> targets;
  if (!r.multicast.empty()) {
    if (r.dst.space != DmaSpace::Spm)
      return reject("DMA: multicast goes to SPMs");
    targets = r.multicast;
    auto sorted = targets;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
      return reject("DMA: multicast lists a cluster twice");
  } else if (r.dst.space == DmaSpace::Spm) {
    targets.push_back(r.dst.cluster);
  }
  if (r.notify_signal != kNoSignal &&
      (r.notify_signal < 0 || static_cast<unsigned>(r.notify_signal) >= kSignalsPerCluster))
    return reject("DMA: notify signal " + std::to_string(r.notify_signal) + " out of range");
  if (r.notify_signal != kNoSignal && targets.empty())
    return reject("DMA: a notify signal needs an SPM destination");
  if (r.notify_signal != kNoSignal &&
      static_cast<unsigned>(r.notify_signal) >= kFirstPrivateSignal &&
      (targets.size() != 1 || targets[0] != group_index_))
    return reject("DMA: private signal " + std::to_string(r.notify_signal) +
                  " counts the issuing cluster's transfers into its own SPM only");

  const uint64_t spm = config.spm_bytes;
  Ddr &ddr = command_.device_.ddr();
  auto check = [&](const DmaEndpoint &e, uint64_t ext, unsigned cluster,
                   const char *side) -> Result<std::byte *> {
    // The message is formatted only for a transfer that fails: checks run on every DMA.
    auto fail = [&](auto &&...why) -> Result<std::byte *> {
      std::ostringstream msg;
      msg << "DMA " << side << " (" << describe(e) << ", extent " << ext << " bytes) ";
      (msg << ... << why);
      return make_error(msg.str());
    };
    if (e.space == DmaSpace::Spm) {
      if (cluster >= n)
        return fail("names cluster ", cluster, " outside the command's ", n, " clusters");
      if (e.offset > spm || ext > spm - e.offset)
        return fail("lies outside the SPM of ", spm, " bytes");
      return command_.context(cluster).spm_base() + e.offset;
    }
    uint64_t absolute;
    if (e.offset > e.window.size || ext > e.window.size - e.offset)
      return fail("lies outside its DDR window of ", e.window.size, " bytes");
    if (!checked_add(e.window.base, e.offset, absolute) ||
        (ext > 0 && !ddr.is_allocated(absolute, ext)))
      return fail("lies outside the allocated DDR blocks");
    return ddr.at(absolute);
  };
  auto src = check(r.src, src_extent.value(), r.src.cluster, "source");
  if (!src)
    return reject(src.error().message);
  std::vector<std::byte *> dsts;
  if (r.dst.space == DmaSpace::Ddr) {
    auto d = check(r.dst, dst_extent.value(), 0, "destination");
    if (!d)
      return reject(d.error().message);
    dsts.push_back(d.value());
  } else {
    for (unsigned t : targets) {
      auto d = check(r.dst, dst_extent.value(), t, "destination");
      if (!d)
        return reject(d.error().message);
      dsts.push_back(d.value());
    }
  }

  // ---- the copy itself (eager: the host performs it at issue; the modeled completion
  // time is what wait() and signals use; a contiguous transfer from an immutable source
  // may be deferred, see deferred_view) ----
  // Rows that follow each other on both sides are one longer row (and planes likewise): the
  // same bytes move with fewer, longer copies.
  DmaShape s = r.shape;
  if (s.rows > 1 && s.src_row_stride == s.row_bytes && s.dst_row_stride == s.row_bytes) {
    s.row_bytes *= s.rows;
    s.src_row_stride = s.dst_row_stride = s.row_bytes;
    s.rows = 1;
  }
  if (s.rows == 1 && s.planes > 1 && s.src_plane_stride == s.row_bytes &&
      s.dst_plane_stride == s.row_bytes) {
    s.row_bytes *= s.planes;
    s.src_plane_stride = s.dst_plane_stride = s.row_bytes;
    s.planes = 1;
  }
  // Rows are counted over all planes; a single-row transfer may be cut by bytes instead.
  const uint64_t total_rows = s.planes * s.rows;
  // The copy goes in blocks of about kBlockBytes, each block to every destination before the
  // next block: a multicast reads its source block from memory once and from the cache for
  // the other destinations. A large transfer (a multicast of weights above all) is copied by
  // the host pool, a task per block and destination, so that the copies run on all host
  // cores. Overlapping source and destination (SPM to the same SPM) stay one sequential copy.
  constexpr uint64_t kBlockBytes = 32 << 10;
  const uint64_t copied = bytes.value() * dsts.size();
  const bool overlapping = r.src.space == DmaSpace::Spm && r.dst.space == DmaSpace::Spm;
  const bool by_bytes = total_rows == 1;
  const uint64_t blocks = std::max<uint64_t>(1, bytes.value() / kBlockBytes);
  const uint64_t cuts = overlapping ? 1 : by_bytes ? blocks : std::min(blocks, total_rows);
  const size_t ndst = dsts.size();
  // Deferred copies the transfer reads or overwrites become SPM bytes first.
  const bool defers = r.immutable_source && r.src.space == DmaSpace::Ddr &&
                      r.dst.space == DmaSpace::Spm && total_rows == 1 && !targets.empty();
  if (r.src.space == DmaSpace::Spm)
    command_.context(r.src.cluster).materialize(r.src.offset, src_extent.value());
  if (!defers) {
    for (unsigned t : targets) { // a strided destination keeps the bytes between its rows
      if (total_rows == 1)
        command_.context(t).overwrite(r.dst.offset, dst_extent.value());
      else
        command_.context(t).materialize(r.dst.offset, dst_extent.value());
    }
  }
  auto copy_block = [&](std::byte *dst, uint64_t block) {
    if (by_bytes) {
      const uint64_t begin = s.row_bytes * block / cuts, end = s.row_bytes * (block + 1) / cuts;
      std::memmove(dst + begin, src.value() + begin, end - begin);
    } else {
      copy_dma_rows(dst, src.value(), s, total_rows * block / cuts,
                    total_rows * (block + 1) / cuts);
    }
  };
  if (defers) {
    if (bytes.value() > 0)
      for (unsigned t : targets)
        command_.context(t).defer(r.dst.offset, bytes.value(), src.value());
  } else if (copied >= 2 * kBlockBytes && !overlapping && HostPool::shared().threads() > 1) {
    HostPool::shared().run(static_cast<unsigned>(ndst * cuts),
                           [&](unsigned i) { copy_block(dsts[i % ndst], i / ndst); });
  } else if (bytes.value() > 0) {
    for (uint64_t block = 0; block < cuts; ++block)
      for (std::byte *dst : dsts)
        copy_block(dst, block);
  }

  // ---- modeled time ----
  const bool ddr_side = r.src.space == DmaSpace::Ddr || r.dst.space == DmaSpace::Ddr;
  const uint64_t b = bytes.value();
  uint64_t issue, start, done;
  {
    // Only this cluster's threads move its clock and its engine.
    std::lock_guard lock(mutex_);
    issue = now_;
    start = std::max(now_, engine_free_);
  }
  done = start;
  if (b > 0) {
    uint64_t data_start = start + config.dma_latency_cycles;
    done = data_start + transfer_cycles(b, config.noc_bytes_per_cycle);
    if (ddr_side && r.private_ddr_share) {
      const double share = arbiter().ddr_bytes_per_cycle() / std::max(1u, command_.group_size());
      std::lock_guard lock(mutex_);
      done = std::max(done, own_ddr_.reserve(data_start, transfer_cycles(b, share)));
    } else if (ddr_side) {
      // The DDR is shared: the arbiter serves the request in the modeled-time order of its
      // issue among all clusters of the domain (this may wait for slower host threads).
      auto ddr_done = reserve_ddr(issue, data_start, b);
      if (!ddr_done)
        return ddr_done.error();
      done = std::max(done, ddr_done.value());
    }
  }
  DmaHandle handle;
  {
    std::lock_guard lock(mutex_);
    engine_free_ = done;
    completion_.push_back(done);
    handle = completion_.size();
    stats_.dma_transfers++;
    stats_.dma_busy_cycles += done - start;
    if (r.src.space == DmaSpace::Ddr)
      stats_.ddr_bytes_read += b;
    if (r.dst.space == DmaSpace::Ddr)
      stats_.ddr_bytes_written += b;
    stats_.noc_bytes += b * std::max<size_t>(dsts.size(), 1);
    if (targets.size() > 1 && r.src.space == DmaSpace::Ddr) // DDR reads, not SPM ones
      stats_.multicast_saved_bytes += b * (targets.size() - 1);
  }
  if (b > 0) {
    if (r.src.space == DmaSpace::Spm)
      command_.context(r.src.cluster).note_spm_used(r.src.offset + src_extent.value());
    for (unsigned t : targets)
      command_.context(t).note_spm_used(r.dst.offset + dst_extent.value());
  }
  if (r.notify_signal != kNoSignal)
    for (unsigned t : targets)
      command_.context(t).receive_signal(static_cast<unsigned>(r.notify_signal), 1, done);

  Reports &reports = Reports::instance();
  if (reports.tracing()) {
    std::string kind = std::string(space_name(r.src.space)) + "->" + space_name(r.dst.space);
    if (targets.size() > 1)
      kind += " multicast x" + std::to_string(targets.size());
    nlohmann::json args = {{"bytes", b},
                           {"handle", handle},
                           {"rows", r.shape.rows},
                           {"planes", r.shape.planes},
                           {"src", describe(r.src)},
                           {"dst", describe(r.dst)}};
    reports.modeled_span(device().index(), device_cluster_, TraceTrack::Dma,
                         r.label.empty() ? kind : r.label + " (" + kind + ")", start, done,
                         args.dump());
  }
  return handle;
}

Result<void> ClusterContext::dma_wait(DmaHandle handle) {
  uint64_t done;
  {
    std::lock_guard lock(mutex_);
    if (handle == 0 || handle > completion_.size())
      return make_error("DMA wait: unknown handle " + std::to_string(handle));
    done = completion_[handle - 1];
  }
  advance_to(done, "dma wait", "{\"handle\":" + std::to_string(handle) + "}");
  return {};
}

Result<void> ClusterContext::dma_wait_all() {
  uint64_t done;
  {
    std::lock_guard lock(mutex_);
    done = engine_free_;
  }
  advance_to(done, "dma wait all", {});
  return {};
}

bool ClusterContext::dma_done(DmaHandle handle) const {
  std::lock_guard lock(mutex_);
  return handle != 0 && handle <= completion_.size() && completion_[handle - 1] <= now_;
}

DmaHandle ClusterContext::last_handle() const {
  std::lock_guard lock(mutex_);
  return completion_.size();
}

Result<void> ClusterContext::barrier() {
  CommandRecorder &c = command_;
  Arbiter &a = arbiter();
  const uint64_t arrival = now();
  uint64_t release;
  {
    std::unique_lock lock(a.mutex());
    if (c.failed())
      return make_error("barrier: command failed: " + c.error().message);
    c.barrier_max_arrival_ = std::max(c.barrier_max_arrival_, arrival);
    if (++c.barrier_arrived_ == c.group_size()) {
      c.barrier_release_ = c.barrier_max_arrival_ + c.device_.config().barrier_latency_cycles;
      c.barrier_arrived_ = 0;
      c.barrier_max_arrival_ = 0;
      c.barrier_generation_.fetch_add(1);
      release = c.barrier_release_;
      // Every other cluster of the command waits here: they leave at the release, and the
      // arbiter learns it together with the release itself.
      for (unsigned g = 0; g < c.group_size(); ++g)
        if (&c.context(g) != this)
          a.set_locked(c.context(g).slot_, ArbiterSlot::State::Running, release);
      lock.unlock();
    } else {
      const uint64_t generation = c.barrier_generation_.load();
      auto released = [&] { return c.barrier_generation_.load() != generation || c.failed(); };
      // Waiting for the others: this cluster issues nothing until one of them releases it.
      a.set_locked(slot_, ArbiterSlot::State::Blocked, arrival);
      lock.unlock();
      spin_briefly(released);
      lock.lock();
      if (!a.cv().wait_until(lock, std::chrono::steady_clock::now() + sync_timeout(), released)) {
        lock.unlock();
        return fail("barrier timed out (MANYCL_SYNC_TIMEOUT_S): a cluster of the command "
                    "never arrived");
      }
      if (c.barrier_generation_.load() == generation)
        return make_error("barrier: command failed: " + c.error().message);
      // Stable: the next generation cannot complete before this cluster arrives again.
      release = c.barrier_release_;
    }
  }
  {
    std::lock_guard lock(mutex_);
    stats_.barriers++;
  }
  advance_to(release, "barrier", {});
  return {};
}

uint64_t ClusterContext::signal_release_locked(unsigned signal, uint64_t value) const {
  const Signal &s = signals_.load()[signal];
  uint64_t seen = 0;
  for (size_t i = 0; i < s.stamps.size(); i += 2) {
    seen += s.stamps[i + 1];
    if (seen >= value)
      return s.stamps[i];
  }
  return 0;
}

void ClusterContext::receive_signal(unsigned signal, uint64_t count, uint64_t stamp) {
  Arbiter &a = arbiter();
  {
    std::lock_guard lock(a.mutex());
    Signal &s = signals()[signal];
    auto &stamps = s.stamps;
    // Stamps are kept as (cycle, count) pairs sorted by cycle, flattened into the vector.
    size_t i = 0;
    while (i < stamps.size() && stamps[i] <= stamp)
      i += 2;
    if (i >= 2 && stamps[i - 2] == stamp)
      stamps[i - 1] += count;
    else
      stamps.insert(stamps.begin() + static_cast<ptrdiff_t>(i), {stamp, count});
    s.value.fetch_add(count);
    // A waiter on this signal that is now satisfied may issue again from its release on;
    // an earlier-stamped increment moves an already satisfied waiter's release earlier.
    if (wait_signal_ == static_cast<int>(signal) && s.value.load() >= wait_value_)
      a.set_locked(slot_, ArbiterSlot::State::Running,
                   std::max(wait_from_, signal_release_locked(signal, wait_value_)));
  }
  a.cv().notify_all();
}

Result<void> ClusterContext::signal_post(unsigned target, unsigned signal, uint64_t count) {
  if (target >= group_size())
    return fail("signal post: cluster " + std::to_string(target) + " is not in the command");
  if (signal >= kSignalsPerCluster)
    return fail("signal post: signal " + std::to_string(signal) + " out of range");
  if (signal >= kFirstPrivateSignal)
    return fail("signal post: signal " + std::to_string(signal) +
                " is private (notified by the cluster's own transfers only)");
  if (count == 0)
    return {};
  command_.context(target).receive_signal(signal, count,
                                          now() + command_.device_.config().signal_latency_cycles);
  return {};
}

uint64_t ClusterContext::signal_value(unsigned signal) const {
  if (signal >= kSignalsPerCluster)
    return 0;
  Signal *all = signals_.load(std::memory_order_acquire);
  return all ? all[signal].value.load() : 0; // never signalled: no counters yet
}

Result<void> ClusterContext::signal_wait(unsigned signal, uint64_t value) {
  if (signal >= kSignalsPerCluster)
    return fail("signal wait: signal " + std::to_string(signal) + " out of range");
  if (value == 0)
    return {};
  CommandRecorder &c = command_;
  Arbiter &a = arbiter();
  Signal &s = signals()[signal];
  const uint64_t from = now();
  if (signal >= kFirstPrivateSignal) {
    // Private: every increment came from this cluster's own earlier transfers, posted when
    // they were issued, in the engine's order; the value-th one is final as it is.
    if (s.value.load() < value)
      return fail("signal wait: private signal " + std::to_string(signal) + " is at " +
                  std::to_string(s.value.load()) + ", below " + std::to_string(value) +
                  ", and only this cluster's own transfers could raise it");
    uint64_t stamp;
    {
      std::lock_guard lock(a.mutex());
      stamp = std::max(from, signal_release_locked(signal, value));
    }
    advance_to(stamp, "signal wait",
               "{\"signal\":" + std::to_string(signal) + ",\"value\":" + std::to_string(value) +
                   "}");
    return {};
  }
  auto reached = [&] { return s.value.load() >= value || c.failed(); };
  spin_briefly(reached);
  uint64_t stamp = 0;
  {
    // The release is the modeled time of the value-th increment of all that will ever be
    // posted, not only of those the host has seen: it is final once no other cluster of the
    // command can still post one stamped earlier (their clocks passed it, or they wait).
    std::unique_lock lock(a.mutex());
    wait_signal_ = static_cast<int>(signal);
    wait_value_ = value;
    wait_from_ = from;
    const auto deadline = std::chrono::steady_clock::now() + sync_timeout();
    bool counted = false;
    bool in_time = true;
    for (;;) {
      if (s.value.load() >= value) {
        stamp = std::max(from, signal_release_locked(signal, value));
        if (slot_.state != ArbiterSlot::State::Running || slot_.time.load() != stamp)
          a.set_locked(slot_, ArbiterSlot::State::Running, stamp);
        // A failed command stops its clusters: the value is reached, the time is moot.
        if (c.failed() || a.signal_final_locked(slot_, stamp))
          break;
        if (!counted) {
          // Register, then look at the clocks again before sleeping: a clock published
          // between the look above and this registration saw no waiter and woke nobody
          // (Arbiter::publish), and its cluster may next wait without publishing again.
          a.clock_waiters().fetch_add(1);
          counted = true;
          continue;
        }
      } else if (c.failed()) {
        break;
      } else if (slot_.state != ArbiterSlot::State::Blocked) {
        a.set_locked(slot_, ArbiterSlot::State::Blocked, from);
      }
      if (!a.cv().wait_once(lock, deadline)) {
        in_time = false;
        break;
      }
    }
    if (counted)
      a.clock_waiters().fetch_sub(1);
    wait_signal_ = -1;
    if (slot_.state == ArbiterSlot::State::Blocked)
      a.set_locked(slot_, ArbiterSlot::State::Running, from);
    if (!in_time) {
      lock.unlock();
      return fail(s.value.load() < value
                      ? "signal wait timed out (MANYCL_SYNC_TIMEOUT_S): signal " +
                            std::to_string(signal) + " stayed below " + std::to_string(value)
                      : "signal wait timed out (MANYCL_SYNC_TIMEOUT_S): another cluster of "
                        "the command never advanced past cycle " +
                            std::to_string(stamp));
    }
    if (s.value.load() < value)
      return make_error("signal wait: command failed: " + c.error().message);
  }
  advance_to(stamp, "signal wait",
             "{\"signal\":" + std::to_string(signal) + ",\"value\":" + std::to_string(value) + "}");
  return {};
}

Result<void> ClusterContext::parallel_for(uint64_t count,
                                          const std::function<void(uint64_t, unsigned)> &body) {
  if (count == 0)
    return {};
  if (t_pe || HostPool::inside_task()) {
    // Nested (inside our own parallel_for, or inside an OpenCL C work-group, which runs as a
    // task or team member of the pool): the PE already running us does the whole range.
    const unsigned pe = t_pe ? t_pe->pe : 0;
    for (uint64_t i = 0; i < count; ++i)
      body(i, pe);
    return {};
  }
  // Each modeled PE's share is one task of the host pool: the PE's cycles are its own
  // whichever host thread runs it, so the host's core count never reaches modeled time.
  const unsigned pes = static_cast<unsigned>(std::min<uint64_t>(pe_count(), count));
  std::vector<uint64_t> cycles(pes, 0);
  HostPool::shared().run(pes, [&](unsigned pe) {
    ScopedClusterContext context_scope(this);
    PeScope scope{this, &cycles[pe], pe};
    PeScope *saved = t_pe;
    t_pe = &scope;
    const uint64_t begin = count * pe / pes;
    const uint64_t end = count * (pe + 1) / pes;
    for (uint64_t i = begin; i < end; ++i)
      body(i, pe);
    t_pe = saved;
  });
  account_cycles(*std::max_element(cycles.begin(), cycles.end()), "parallel_for");
  return {};
}

ClusterStats ClusterContext::stats() const {
  std::lock_guard lock(mutex_);
  ClusterStats s = stats_;
  s.end_cycle = std::max(now_, engine_free_);
  return s;
}

// ---------------------------------------------------------------------------------------
// CommandRecorder

CommandRecorder::CommandRecorder(Token, Device &device, Arbiter &domain, std::string name,
                                 const unsigned *clusters, size_t count, uint64_t start_cycle)
    : device_(device), arbiter_(domain), name_(std::move(name)), id_(next_command_id.fetch_add(1)),
      start_cycle_(start_cycle), host_begin_(std::chrono::steady_clock::now()) {
  if (count == 1) {
    solo_.emplace(*this, 0, clusters[0]);
    return;
  }
  contexts_.reserve(count);
  for (unsigned g = 0; g < count; ++g)
    contexts_.push_back(std::make_unique<ClusterContext>(*this, g, clusters[g]));
}

CommandRecorder::~CommandRecorder() = default;

Result<std::shared_ptr<CommandRecorder>> CommandRecorder::begin(Device &device, std::string name,
                                                                std::vector<unsigned> clusters,
                                                                uint64_t not_before_cycle,
                                                                Arbiter *domain) {
  if (clusters.empty())
    return make_error("command '" + name + "' runs on no cluster");
  if (clusters.size() == 1)
    return begin_on_cluster(device, std::move(name), clusters[0], not_before_cycle, domain);
  auto sorted = clusters;
  std::sort(sorted.begin(), sorted.end());
  if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end())
    return make_error("command '" + name + "' lists a cluster twice");
  if (sorted.back() >= device.cluster_count())
    return make_error("command '" + name + "' names cluster " + std::to_string(sorted.back()) +
                      " of a device with " + std::to_string(device.cluster_count()));
  uint64_t start = not_before_cycle;
  for (unsigned c : clusters)
    start = std::max(start, device.time_model().cluster_time(c));
  return std::make_shared<CommandRecorder>(Token{}, device, domain ? *domain : device.ddr_domain(),
                                           std::move(name), clusters.data(), clusters.size(),
                                           start);
}

Result<std::shared_ptr<CommandRecorder>>
CommandRecorder::begin_on_cluster(Device &device, std::string name, unsigned cluster,
                                  uint64_t not_before_cycle, Arbiter *domain) {
  if (cluster >= device.cluster_count())
    return make_error("command '" + name + "' names cluster " + std::to_string(cluster) +
                      " of a device with " + std::to_string(device.cluster_count()));
  uint64_t start = std::max(not_before_cycle, device.time_model().cluster_time(cluster));
  return std::make_shared<CommandRecorder>(Token{}, device, domain ? *domain : device.ddr_domain(),
                                           std::move(name), &cluster, 1, start);
}

void CommandRecorder::fail(std::string message) {
  {
    std::lock_guard lock(error_mutex_);
    if (error_.empty())
      error_ = std::move(message);
  }
  {
    std::lock_guard lock(arbiter_.mutex());
    failed_.store(true);
  }
  arbiter_.cv().notify_all();
}

Error CommandRecorder::error() const {
  std::lock_guard lock(error_mutex_);
  return make_error(error_);
}

Result<void> CommandRecorder::run(const std::function<void(ClusterContext &)> &body,
                                  bool cooperative) {
  std::mutex mutex;
  std::condition_variable done_cv;
  unsigned done = 0;
  for (unsigned g = 0; g < group_size(); ++g) {
    ClusterContext &ctx = context(g);
    device_.cluster(ctx.device_cluster()).submit([&, g] {
      {
        ScopedClusterContext scope(context(g));
        if (cooperative)
          HostPool::shared().run_cooperative(context(g).device_cluster(),
                                             [&] { body(context(g)); });
        else
          body(context(g));
      }
      std::lock_guard lock(mutex);
      ++done;
      done_cv.notify_all();
    });
  }
  std::unique_lock lock(mutex);
  done_cv.wait(lock, [&] { return done == group_size(); });
  if (failed())
    return error();
  return {};
}

void CommandRecorder::account_host_transfer(uint64_t ddr_bytes_read, uint64_t ddr_bytes_written) {
  ClusterContext &ctx = context(0);
  const DeviceConfig &config = device_.config();
  uint64_t bytes = ddr_bytes_read + ddr_bytes_written;
  uint64_t issue, start, done;
  {
    std::lock_guard lock(ctx.mutex_);
    issue = ctx.now_;
    start = std::max(ctx.now_, ctx.engine_free_);
  }
  done = start;
  if (bytes > 0) {
    auto ddr_done = ctx.reserve_ddr(issue, start + config.dma_latency_cycles, bytes);
    if (!ddr_done)
      return; // the command failed (recorded); its statistics show it
    done = ddr_done.value();
  }
  {
    std::lock_guard lock(ctx.mutex_);
    ctx.engine_free_ = done;
    ctx.stats_.dma_busy_cycles += done - start;
    ctx.stats_.ddr_bytes_read += ddr_bytes_read;
    ctx.stats_.ddr_bytes_written += ddr_bytes_written;
  }
  Reports::instance().modeled_span(device_.index(), ctx.device_cluster_, TraceTrack::Dma,
                                   "host transfer", start, done,
                                   "{\"bytes\":" + std::to_string(bytes) + "}");
}

const CommandStats &CommandRecorder::end() {
  std::lock_guard lock(end_mutex_);
  if (ended_)
    return stats_;
  auto host_end = std::chrono::steady_clock::now();
  CommandStats &s = stats_;
  s.id = id_;
  s.name = name_;
  s.device_index = device_.index();
  s.device_name = device_.config().name;
  s.clock_hz = device_.config().clock_hz;
  s.start_cycle = start_cycle_;
  s.end_cycle = start_cycle_;
  s.host_seconds = std::chrono::duration<double>(host_end - host_begin_).count();
  const unsigned clusters = group_size();
  s.clusters.reserve(clusters);
  for (unsigned g = 0; g < clusters; ++g) {
    ClusterStats c = context(g).stats();
    s.end_cycle = std::max(s.end_cycle, c.end_cycle);
    s.ddr_bytes_read += c.ddr_bytes_read;
    s.ddr_bytes_written += c.ddr_bytes_written;
    s.noc_bytes += c.noc_bytes;
    s.multicast_saved_bytes += c.multicast_saved_bytes;
    s.spm_high_water = std::max(s.spm_high_water, c.spm_high_water);
    s.dma_transfers += c.dma_transfers;
    s.clusters.push_back(c);
  }
  s.ok = !failed();
  if (!s.ok)
    s.error = error().message;
  // The command completes as a whole: its clusters are free again at its end, and hold
  // nobody back in the arbiter any more.
  for (unsigned g = 0; g < clusters; ++g) {
    device_.time_model().set_cluster_time(context(g).device_cluster(), s.end_cycle);
    arbiter_.leave(context(g).slot_);
  }
  Reports::instance().command_finished(s, host_begin_, host_end);
  ended_ = true;
  return stats_;
}

// ---------------------------------------------------------------------------------------
// CommandStats

std::string CommandStats::to_json() const {
  nlohmann::json j = {{"id", id},
                      {"name", name},
                      {"device", device_index},
                      {"device_name", device_name},
                      {"start_cycle", start_cycle},
                      {"end_cycle", end_cycle},
                      {"modeled_cycles", cycles()},
                      {"modeled_seconds", modeled_seconds()},
                      {"host_seconds", host_seconds},
                      {"ddr_bytes_read", ddr_bytes_read},
                      {"ddr_bytes_written", ddr_bytes_written},
                      {"noc_bytes", noc_bytes},
                      {"multicast_saved_bytes", multicast_saved_bytes},
                      {"spm_high_water", spm_high_water},
                      {"dma_transfers", dma_transfers},
                      {"ok", ok}};
  if (!ok)
    j["error"] = error;
  nlohmann::json cl = nlohmann::json::array();
  for (const auto &c : clusters)
    cl.push_back({{"cluster", c.cluster},
                  {"end_cycle", c.end_cycle},
                  {"compute_cycles", c.compute_cycles},
                  {"dma_busy_cycles", c.dma_busy_cycles},
                  {"wait_cycles", c.wait_cycles},
                  {"dma_transfers", c.dma_transfers},
                  {"barriers", c.barriers},
                  {"ddr_bytes_read", c.ddr_bytes_read},
                  {"ddr_bytes_written", c.ddr_bytes_written},
                  {"noc_bytes", c.noc_bytes},
                  {"multicast_saved_bytes", c.multicast_saved_bytes},
                  {"spm_high_water", c.spm_high_water}});
  j["clusters"] = std::move(cl);
  return j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::string CommandStats::to_text() const {
  std::ostringstream out;
  out << "manycl stats: command " << id << " '" << name << "' on " << device_name << " #"
      << device_index << ": " << cycles() << " modeled cycles (" << modeled_seconds() * 1e6
      << " us modeled), host " << host_seconds * 1e6 << " us, DDR read " << ddr_bytes_read
      << " B, written " << ddr_bytes_written << " B, NoC " << noc_bytes << " B, multicast saved "
      << multicast_saved_bytes << " B, SPM high water " << spm_high_water << " B"
      << (ok ? "" : ", FAILED: " + error) << "\n";
  for (const auto &c : clusters)
    out << "  cluster " << c.cluster << ": end " << c.end_cycle << ", compute " << c.compute_cycles
        << ", dma busy " << c.dma_busy_cycles << ", wait " << c.wait_cycles << ", "
        << c.dma_transfers << " transfers, " << c.barriers << " barriers, DDR r/w "
        << c.ddr_bytes_read << "/" << c.ddr_bytes_written << " B, NoC " << c.noc_bytes
        << " B, SPM high water " << c.spm_high_water << " B\n";
  return out.str();
}

} // namespace manycl::device
