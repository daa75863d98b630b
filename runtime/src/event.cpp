#include "manycl/runtime/event.h"

#include <algorithm>
#include <chrono>

#include "CL/cl_ext_manycl.h"
#include "manycl/runtime/info.h"
#include "manycl/runtime/queue.h"

namespace manycl::rt {

uint64_t host_time_ns() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

Event::Event(Context *context, Queue *queue, cl_command_type type, Action action)
    : context_(context), queue_(queue), type_(type), action_(std::move(action)), status_(CL_QUEUED),
      profiled_(queue->profiling()), queued_ns_(profiled_ ? host_time_ns() : 0) {}

Event::Event(Context *context, Queue *queue, cl_command_type type, std::shared_ptr<Work> work)
    : context_(context), queue_(queue), type_(type), work_(std::move(work)), status_(CL_QUEUED),
      profiled_(queue->profiling()), queued_ns_(profiled_ ? host_time_ns() : 0) {}

Event::Event(Context *context) : context_(context), type_(CL_COMMAND_USER), status_(CL_SUBMITTED) {}

Event::~Event() = default;

cl_int Event::status() const {
  std::lock_guard lock(mutex_);
  return status_;
}

void Event::add_dependency(Event *dependency) {
  std::lock_guard lock(dependency->mutex_);
  if (dependency->status_ > CL_COMPLETE || !dependency->finished_) {
    dependency->dependents_.emplace_back(this);
    std::lock_guard own(mutex_);
    ++pending_dependencies_;
  } else if (dependency->status_ < 0) {
    std::lock_guard own(mutex_);
    dependency_failed_ = true;
  } else {
    std::lock_guard own(mutex_);
    inherit_modeled_end_locked(*dependency);
  }
}

const device::Device *Event::hardware() const {
  return queue_ ? &queue_->device()->hardware() : nullptr;
}

void Event::inherit_modeled_end_locked(const Event &dependency) {
  // Modeled clocks are per simulated device: a command of another device (or a user event)
  // orders the host, not this device's time.
  if (dependency.hardware() && dependency.hardware() == hardware())
    modeled_not_before_ = std::max(modeled_not_before_, dependency.modeled_end_);
}

uint64_t Event::modeled_not_before() const {
  std::lock_guard lock(mutex_);
  return modeled_not_before_;
}

void Event::submit() {
  bool ready, failed;
  {
    std::lock_guard lock(mutex_);
    status_ = CL_SUBMITTED;
    if (profiled_)
      submit_ns_ = host_time_ns();
    ready = --pending_dependencies_ == 0; // drops the registration guard
    failed = dependency_failed_;
  }
  if (ready)
    start(/*on_enqueuing_thread=*/true, failed);
}

void Event::start(bool on_enqueuing_thread, bool dependency_failed) {
  if (dependency_failed) {
    finish_chain(this, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
    return;
  }
  if (work_) {
    transition(CL_RUNNING);
    // The work no longer belongs to the event once started (it holds the event until it
    // completes; the event holding it too would be a cycle).
    std::shared_ptr<Work> work = std::move(work_);
    work->start(Ref<Event>(this), on_enqueuing_thread);
    return;
  }
  if (!action_) {
    finish_chain(this, CL_COMPLETE);
    return;
  }
  Ref<Event> self(this);
  device::Cluster &cluster = queue_->device()->pick_cluster();
  cluster.submit([self, &cluster] { self->run_on_device(cluster); });
}

const char *command_name(cl_command_type type) {
  switch (type) {
  case CL_COMMAND_NDRANGE_KERNEL:
    return "ndrange kernel";
  case CL_COMMAND_NATIVE_KERNEL:
    return "native kernel";
  case CL_COMMAND_READ_BUFFER:
    return "read buffer";
  case CL_COMMAND_WRITE_BUFFER:
    return "write buffer";
  case CL_COMMAND_COPY_BUFFER:
    return "copy buffer";
  case CL_COMMAND_READ_BUFFER_RECT:
    return "read buffer rect";
  case CL_COMMAND_WRITE_BUFFER_RECT:
    return "write buffer rect";
  case CL_COMMAND_COPY_BUFFER_RECT:
    return "copy buffer rect";
  case CL_COMMAND_FILL_BUFFER:
    return "fill buffer";
  case CL_COMMAND_MAP_BUFFER:
    return "map buffer";
  case CL_COMMAND_UNMAP_MEM_OBJECT:
    return "unmap";
  default:
    return "command";
  }
}

void Event::complete(cl_int result) {
  finish_chain(this,
               result == CL_SUCCESS ? CL_COMPLETE : (result < 0 ? result : CL_OUT_OF_RESOURCES));
}

void Event::run_on_device(device::Cluster &cluster) {
  transition(CL_RUNNING);
  // Every command is a device command on the cluster that runs it: it gets modeled time,
  // traffic statistics and a place in MANYCL_TRACE / MANYCL_STATS.
  auto recorder = device::CommandRecorder::begin_on_cluster(
      queue_->device()->hardware(), command_name(type_), cluster.id(), modeled_not_before(),
      &queue_->device()->ddr_domain());
  cl_int result;
  if (recorder) {
    {
      device::ScopedClusterContext scope(recorder.value()->context(0));
      result = action_();
    }
    recorder.value()->end();
    set_recorder(recorder.value());
  } else {
    result = action_();
  }
  action_ = nullptr; // drop captured buffers now, not when the event dies
  finish_chain(this,
               result == CL_SUCCESS ? CL_COMPLETE : (result < 0 ? result : CL_OUT_OF_RESOURCES));
}

void Event::transition(cl_int status) {
  std::vector<PendingCallback> fire;
  {
    std::lock_guard lock(mutex_);
    status_ = status;
    if (profiled_) { // the clock is read only for profiling queues (clGetEventProfilingInfo)
      uint64_t now = host_time_ns();
      if (status == CL_RUNNING) {
        start_ns_ = now;
      } else {
        if (start_ns_ == 0)
          start_ns_ = now;
        end_ns_ = now;
        if (submit_ns_ == 0)
          submit_ns_ = start_ns_;
      }
    }
    for (auto it = callbacks_.begin(); it != callbacks_.end();) {
      if (status <= it->trigger) {
        fire.push_back(*it);
        it = callbacks_.erase(it);
      } else {
        ++it;
      }
    }
  }
  for (auto &cb : fire)
    cb.fn(handle(), status, cb.user_data);
}

void Event::finish_chain(Event *first, cl_int status) {
  // Completing an event can make dependents ready that complete inline too (markers, failed
  // commands); a work list instead of recursion keeps long chains off the stack. It stays
  // empty (no allocation) in the common case of a command with no such dependent.
  std::vector<std::pair<Ref<Event>, cl_int>> more;
  Ref<Event> event(first);
  cl_int final_status = status;
  for (;;) {
    event->transition(final_status);
    std::vector<Ref<Event>> dependents;
    {
      std::lock_guard lock(event->mutex_);
      event->finished_ = true;
      dependents.swap(event->dependents_);
      // A command ends where its device command ended; a marker or barrier where what it
      // waited for ended.
      event->modeled_end_ = event->modeled_not_before_;
      if (event->recorder_ && event->recorder_->ended())
        event->modeled_end_ = std::max(event->modeled_end_, event->recorder_->stats().end_cycle);
    }
    event->done_.notify_all();
    if (event->queue_)
      event->queue_->command_finished(event.get());
    for (auto &dependent : dependents) {
      bool ready, failed, inline_completion;
      {
        std::lock_guard lock(dependent->mutex_);
        if (final_status < 0)
          dependent->dependency_failed_ = true;
        dependent->inherit_modeled_end_locked(*event);
        ready = --dependent->pending_dependencies_ == 0;
        failed = dependent->dependency_failed_;
        inline_completion = !dependent->has_work();
      }
      if (!ready)
        continue;
      if (failed)
        more.emplace_back(dependent, CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST);
      else if (inline_completion)
        more.emplace_back(dependent, CL_COMPLETE);
      else
        dependent->start(/*on_enqueuing_thread=*/false, /*dependency_failed=*/false);
    }
    if (more.empty())
      break;
    event = std::move(more.back().first);
    final_status = more.back().second;
    more.pop_back();
  }
}

bool Event::set_user_status(cl_int status) {
  {
    // Check and claim in one critical section: of several threads racing here, exactly one
    // completes the event (finish_chain must not run twice).
    std::lock_guard lock(mutex_);
    if (user_status_set_ || status_ != CL_SUBMITTED || finished_)
      return false;
    user_status_set_ = true;
  }
  finish_chain(this, status);
  return true;
}

void Event::set_recorder(std::shared_ptr<device::CommandRecorder> recorder) {
  std::lock_guard lock(mutex_);
  recorder_ = std::move(recorder);
}

std::shared_ptr<device::CommandRecorder> Event::recorder() const {
  std::lock_guard lock(mutex_);
  return recorder_;
}

cl_int Event::wait() {
  std::unique_lock lock(mutex_);
  done_.wait(lock, [this] { return finished_; });
  return status_;
}

cl_int Event::add_callback(cl_int trigger, Callback fn, void *user_data) {
  cl_int status;
  {
    std::lock_guard lock(mutex_);
    if (!(status_ <= trigger)) {
      callbacks_.push_back({trigger, fn, user_data});
      return CL_SUCCESS;
    }
    status = status_;
  }
  fn(handle(), status, user_data);
  return CL_SUCCESS;
}

cl_int Event::info(cl_event_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_EVENT_COMMAND_QUEUE:
    return out.scalar<cl_command_queue>(queue_ ? queue_->handle() : nullptr);
  case CL_EVENT_CONTEXT:
    return out.scalar<cl_context>(context_->handle());
  case CL_EVENT_COMMAND_TYPE:
    return out.scalar<cl_command_type>(type_);
  case CL_EVENT_COMMAND_EXECUTION_STATUS:
    return out.scalar<cl_int>(status());
  case CL_EVENT_REFERENCE_COUNT:
    return out.scalar<cl_uint>(api_ref_count());
  case CL_EVENT_COMMAND_STATS_MCL: {
    auto rec = recorder();
    bool complete;
    {
      std::lock_guard lock(mutex_);
      complete = finished_;
    }
    if (!complete || !rec || !rec->ended())
      return CL_PROFILING_INFO_NOT_AVAILABLE;
    return out.string(rec->stats().to_json());
  }
  default:
    return CL_INVALID_VALUE;
  }
}

cl_int Event::profiling_info(cl_profiling_info param, size_t size, void *value, size_t *size_ret) {
  if (!queue_ || !queue_->profiling())
    return CL_PROFILING_INFO_NOT_AVAILABLE;
  std::lock_guard lock(mutex_);
  if (!finished_ || status_ != CL_COMPLETE)
    return CL_PROFILING_INFO_NOT_AVAILABLE;
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_PROFILING_COMMAND_QUEUED:
    return out.scalar<cl_ulong>(queued_ns_);
  case CL_PROFILING_COMMAND_SUBMIT:
    return out.scalar<cl_ulong>(submit_ns_);
  case CL_PROFILING_COMMAND_START:
    return out.scalar<cl_ulong>(start_ns_);
  case CL_PROFILING_COMMAND_END:
  case CL_PROFILING_COMMAND_COMPLETE:
    return out.scalar<cl_ulong>(end_ns_);
  case CL_PROFILING_MODELED_START_MCL:
  case CL_PROFILING_MODELED_END_MCL: {
    // Modeled device time in nanoseconds since the device started, not host time.
    if (!recorder_ || !recorder_->ended())
      return CL_PROFILING_INFO_NOT_AVAILABLE;
    const auto &stats = recorder_->stats();
    uint64_t cycle = param == CL_PROFILING_MODELED_START_MCL ? stats.start_cycle : stats.end_cycle;
    return out.scalar<cl_ulong>(
        static_cast<cl_ulong>(static_cast<double>(cycle) / stats.clock_hz * 1e9));
  }
  default:
    return CL_INVALID_VALUE;
  }
}

} // namespace manycl::rt
