// Events and the command scheduler.
//
// Every enqueued command owns an Event. A command is *submitted* when enqueued (ManyCL issues
// commands immediately; clFlush has nothing left to do), becomes *ready* when its last
// dependency completes, then runs on a cluster of its queue's device (or completes inline
// when it has no work, e.g. a marker), and finally *completes* with CL_COMPLETE or a negative
// error. A command whose dependency failed does not run and fails with
// CL_EXEC_STATUS_ERROR_FOR_EVENTS_IN_WAIT_LIST.
//
// Lock order (no other order is allowed):
//   Queue::mutex_  ->  Event::mutex_
// An event's mutex is never held while calling callbacks, notifying dependents or taking a
// queue's mutex; completion therefore takes the event lock, copies out what it must notify,
// drops the lock, then notifies.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include <CL/cl.h>

#include "manycl/device/command.h"
#include "manycl/runtime/context.h"
#include "manycl/runtime/object.h"

namespace manycl::rt {

class Queue;
class Device;

uint64_t host_time_ns();

class Event : public Object<Event, _cl_event, Kind::Event> {
public:
  using Action = std::function<cl_int()>;
  using Callback = void(CL_CALLBACK *)(cl_event, cl_int, void *);

  // The device work of a command that decides itself where it runs (NDRange kernels, spread
  // over several clusters or run by the enqueuing thread). start() is called once, when the
  // command is ready; the work then calls complete() on the event exactly once, from
  // whichever thread finishes last, and keeps the event alive until then.
  class Work {
  public:
    virtual ~Work() = default;
    // `on_enqueuing_thread`: start() runs inside the application's enqueue call (the command
    // was ready at once), so a short command may run right there instead of being handed to
    // a cluster thread.
    virtual void start(Ref<Event> event, bool on_enqueuing_thread) = 0;
  };

  // A command event. `action` runs on a cluster of `device`; an empty action completes inline.
  Event(Context *context, Queue *queue, cl_command_type type, Action action);
  // A command event whose work is a Work (NDRange kernels).
  Event(Context *context, Queue *queue, cl_command_type type, std::shared_ptr<Work> work);
  // A user event (clCreateUserEvent): CL_SUBMITTED until clSetUserEventStatus.
  explicit Event(Context *context);
  ~Event();

  Context *context() const { return context_.get(); }
  Queue *queue() const { return queue_.get(); }
  cl_command_type command_type() const { return type_; }
  bool is_user_event() const { return type_ == CL_COMMAND_USER; }
  cl_int status() const;

  // Makes this event wait for `dependency` (before submit()).
  void add_dependency(Event *dependency);
  // Ends dependency registration: the command becomes ready once its dependencies complete.
  void submit();

  // User events only. Returns false when the status was already set.
  bool set_user_status(cl_int status);

  // Blocks until the event is complete or failed; returns its final status.
  cl_int wait();

  cl_int add_callback(cl_int trigger, Callback fn, void *user_data);

  // For Work: the command's result (CL_SUCCESS or an error); completes the event.
  void complete(cl_int result);

  // The device command that ran this event (modeled time, DDR/NoC traffic), set before the
  // event completes; null for markers, barriers and user events.
  void set_recorder(std::shared_ptr<device::CommandRecorder> recorder);
  std::shared_ptr<device::CommandRecorder> recorder() const;
  // The modeled cycle before which the command may not start: the latest modeled end of the
  // commands it waited for (queue order and wait list) on the same simulated device. Final
  // once the command is ready.
  uint64_t modeled_not_before() const;
  cl_int info(cl_event_info param, size_t size, void *value, size_t *size_ret);
  cl_int profiling_info(cl_profiling_info param, size_t size, void *value, size_t *size_ret);

private:
  struct PendingCallback {
    cl_int trigger;
    Callback fn;
    void *user_data;
  };

  void start(bool on_enqueuing_thread, bool dependency_failed);
  void run_on_device(device::Cluster &cluster);
  // Moves the event to `status` (CL_RUNNING, CL_COMPLETE or an error) and fires what that
  // transition triggers; completion also releases dependents.
  void transition(cl_int status);
  static void finish_chain(Event *first, cl_int status);
  // The simulated device its command runs on (null for user events).
  const device::Device *hardware() const;
  // Takes `dependency`'s modeled end as a lower bound of this command's start (with mutex_).
  void inherit_modeled_end_locked(const Event &dependency);

  Ref<Context> context_;
  Ref<Queue> queue_;
  cl_command_type type_;
  Action action_;
  std::shared_ptr<Work> work_;
  bool has_work() const { return action_ || work_; }

  mutable std::mutex mutex_;
  std::condition_variable done_;
  cl_int status_;
  int pending_dependencies_ = 1; // 1 = the registration guard released by submit()
  bool dependency_failed_ = false;
  bool finished_ = false;        // completed and callbacks fired
  bool user_status_set_ = false; // clSetUserEventStatus claimed the one allowed change
  std::vector<Ref<Event>> dependents_;
  std::vector<PendingCallback> callbacks_;
  bool profiled_ = false; // a command of a profiling queue: host timestamps are taken
  uint64_t queued_ns_ = 0, submit_ns_ = 0, start_ns_ = 0, end_ns_ = 0;
  std::shared_ptr<device::CommandRecorder> recorder_;
  // Modeled time (cycles of hardware()): the lower bound of the start that the completed
  // dependencies set, and this command's own end once it completed (markers: the bound).
  uint64_t modeled_not_before_ = 0;
  uint64_t modeled_end_ = 0;

  // The queue's list of its incomplete commands (intrusive: no allocation per command),
  // guarded by the queue's mutex.
  friend class Queue;
  Event *queue_prev_ = nullptr;
  Event *queue_next_ = nullptr;
};

} // namespace manycl::rt
