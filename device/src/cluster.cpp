#include "manycl/device/cluster.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "fiber_locals.h"
#include "manycl/device/host_placement.h"

namespace manycl::device {

namespace {
thread_local const Cluster *current_cluster = nullptr;
} // namespace

void swap_cluster_locals(FiberLocals &saved) {
  std::swap(current_cluster, saved.cluster);
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

} // namespace manycl::device
