#pragma once

#include <condition_variable>
#include <mutex>
#include <vector>

#include <CL/cl.h>

#include "manycl/result.h"
#include "manycl/runtime/context.h"
#include "manycl/runtime/device.h"
#include "manycl/runtime/event.h"

namespace manycl::rt {

class Queue : public Object<Queue, _cl_command_queue, Kind::Queue> {
public:
  // `properties` are supported ones (the entry points check them).
  static Queue *create(Context *context, Device *device, cl_command_queue_properties properties,
                       std::vector<cl_queue_properties> property_list);
  ~Queue();

  Context *context() const { return context_.get(); }
  Device *device() const { return device_; }
  bool profiling() const { return properties_ & CL_QUEUE_PROFILING_ENABLE; }
  bool in_order() const { return !(properties_ & CL_QUEUE_OUT_OF_ORDER_EXEC_MODE_ENABLE); }

  // Creates the command's event, makes it depend on `wait_list` and on what the queue's
  // ordering requires, and submits it. Returns the event with one reference for the caller.
  Event *enqueue(cl_command_type type, Event::Action action, const std::vector<Event *> &wait_list);
  Event *enqueue(cl_command_type type, std::shared_ptr<Event::Work> work,
                 const std::vector<Event *> &wait_list);
  // A barrier: waits for `wait_list`, or for every earlier command when it is empty, and
  // every later command waits for it.
  Event *enqueue_barrier(cl_command_type type, const std::vector<Event *> &wait_list);
  // A marker: waits for `wait_list`, or for every earlier command when it is empty.
  Event *enqueue_marker(cl_command_type type, const std::vector<Event *> &wait_list);

  void finish();
  // Called when the application releases its last reference.
  void api_released();
  void command_finished(Event *event);

  cl_int info(cl_command_queue_info param, size_t size, void *value, size_t *size_ret);

private:
  Queue() = default;
  Event *enqueue_ordered(Event *event, const std::vector<Event *> &wait_list, bool wait_for_all,
                         bool is_barrier);

  Ref<Context> context_;
  Device *device_ = nullptr;
  cl_command_queue_properties properties_ = 0;
  std::vector<cl_queue_properties> property_list_;

  std::mutex mutex_;
  std::condition_variable idle_;
  // Commands not yet complete, oldest first: a list threaded through the events
  // (Event::queue_prev_/queue_next_), each holding one reference to its event.
  Event *incomplete_head_ = nullptr;
  Event *incomplete_tail_ = nullptr;
  Ref<Event> last_;         // in-order: the previous command
  Ref<Event> last_barrier_; // out-of-order: the latest barrier
};

} // namespace manycl::rt
