#include "manycl/device/cluster.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "manycl/device/command.h"
#include "manycl/device/host_placement.h"
#include "fiber_locals.h"

namespace manycl::device {

namespace {
thread_local const Cluster *current_cluster = nullptr;
// True while the thread runs a body of run_on_pes: a nested fan-out must not re-enter the
// PE threads (they are busy running the outer one).
thread_local bool in_pe_body = false;
} // namespace

void swap_cluster_locals(FiberLocals &saved) {
  std::swap(current_cluster, saved.cluster);
  std::swap(in_pe_body, saved.in_pe_body);
}

bool Cluster::inside_run_on_pes() {
  return in_pe_body;
}

Cluster::Cluster(unsigned id, unsigned cluster_count, unsigned pes, uint64_t spm_bytes)
    : id_(id), cluster_count_(cluster_count), pes_(pes), spm_bytes_(spm_bytes),
      spm_(static_cast<std::byte *>(::operator new[](spm_bytes, kSpmAlignment))) {
  std::memset(spm_.get(), 0, spm_bytes);
  control_ = std::thread([this] { control_loop(); });
}

Cluster::~Cluster() {
  {
    std::lock_guard lock(mutex_);
    stopping_ = true;
  }
  job_ready_.notify_all();
  control_.join();
  {
    std::lock_guard lock(pe_mutex_);
    pe_stopping_ = true;
  }
  pe_start_.notify_all();
  for (auto &t : pe_threads_)
    t.join();
}

void Cluster::submit(Job job) {
  {
    std::lock_guard lock(mutex_);
    jobs_.push_back(std::move(job));
  }
  job_ready_.notify_one();
}

size_t Cluster::pending() const {
  std::lock_guard lock(mutex_);
  return jobs_.size() + running_;
}

bool Cluster::claim_if_idle() {
  if (current_cluster)
    return false; // a cluster thread must not take over (or wait for) another cluster
  std::lock_guard lock(mutex_);
  if (claimed_ || running_ != 0 || !jobs_.empty() || stopping_)
    return false;
  claimed_ = true;
  ++running_;
  return true;
}

const Cluster *Cluster::enter_claim() {
  return std::exchange(current_cluster, this);
}

void Cluster::release_claim(const Cluster *previous) {
  current_cluster = previous;
  bool wake;
  {
    std::lock_guard lock(mutex_);
    claimed_ = false;
    --running_;
    wake = !jobs_.empty() || stopping_;
  }
  if (wake)
    job_ready_.notify_one();
}

bool Cluster::on_cluster_thread() const {
  return current_cluster == this;
}

void Cluster::control_loop() {
  current_cluster = this;
  HostPlacement::host().bind_current_thread(id_, cluster_count_);
  std::unique_lock lock(mutex_);
  for (;;) {
    // A claimed cluster runs its caller's job: queued jobs wait for it (the SPM is shared).
    job_ready_.wait(lock, [this] { return (stopping_ || !jobs_.empty()) && !claimed_; });
    if (jobs_.empty())
      return; // stopping with nothing left
    Job job = std::move(jobs_.front());
    jobs_.pop_front();
    ++running_;
    lock.unlock();
    job();
    job = nullptr; // drop captured state outside the lock
    lock.lock();
    --running_;
  }
}

void Cluster::start_pe_threads() {
  // PE 0 is the control thread itself; the others start on first use.
  for (unsigned pe = 1; pe < pes_; ++pe)
    pe_threads_.emplace_back([this, pe] { pe_loop(pe); });
}

void Cluster::pe_loop(unsigned pe) {
  current_cluster = this;
  HostPlacement::host().bind_current_thread(id_, cluster_count_);
  uint64_t seen = 0;
  std::unique_lock lock(pe_mutex_);
  for (;;) {
    pe_start_.wait(lock, [&] { return pe_stopping_ || pe_generation_ != seen; });
    if (pe_stopping_)
      return;
    seen = pe_generation_;
    if (pe >= pe_active_count_)
      continue;
    const auto *body = pe_body_;
    lock.unlock();
    (*body)(pe);
    lock.lock();
    if (--pe_remaining_ == 0)
      pe_done_.notify_all();
  }
}

void Cluster::run_on_pes(unsigned count, const std::function<void(unsigned pe)> &user_body) {
  if (count == 0)
    return;
  // The PE threads act for the same command as the caller: device_api.h calls made by the
  // body must find the caller's cluster context.
  if (in_pe_body) {
    // Nested fan-out from a PE: the caller runs every body itself, in order.
    for (unsigned pe = 0; pe < std::min(count, pes_); ++pe)
      user_body(pe);
    return;
  }
  ClusterContext *context = current_cluster_context();
  const std::function<void(unsigned)> body = [&user_body, context](unsigned pe) {
    ScopedClusterContext scope(context);
    in_pe_body = true;
    user_body(pe);
    in_pe_body = false;
  };
  if (count > pes_)
    count = pes_;
  if (count == 1) {
    body(0);
    return;
  }
  {
    std::lock_guard lock(pe_mutex_);
    if (pe_threads_.empty())
      start_pe_threads();
    pe_body_ = &body;
    pe_active_count_ = count;
    pe_remaining_ = count - 1;
    ++pe_generation_;
  }
  pe_start_.notify_all();
  body(0);
  std::unique_lock lock(pe_mutex_);
  pe_done_.wait(lock, [this] { return pe_remaining_ == 0; });
  pe_body_ = nullptr;
}

} // namespace manycl::device
