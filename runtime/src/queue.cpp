#include "manycl/runtime/queue.h"

#include <algorithm>

#include "manycl/runtime/info.h"

namespace manycl::rt {

Queue *Queue::create(Context *context, Device *device, cl_command_queue_properties properties,
                     std::vector<cl_queue_properties> property_list) {
  auto *queue = new Queue();
  queue->context_ = Ref<Context>(context);
  queue->device_ = device;
  device->retain();
  queue->properties_ = properties;
  queue->property_list_ = std::move(property_list);
  return queue;
}

Queue::~Queue() {
  device_->release();
}

void Queue::api_released() {
  // The last command keeps the queue alive through its event; once the application has let
  // go of the queue, ordering state is no longer needed and the cycle must be broken.
  Ref<Event> last, barrier;
  std::lock_guard lock(mutex_);
  last = std::move(last_);
  barrier = std::move(last_barrier_);
  last_ = Ref<Event>();
  last_barrier_ = Ref<Event>();
}

Event *Queue::enqueue_ordered(Event *event, const std::vector<Event *> &wait_list,
                              bool wait_for_all, bool is_barrier) {
  {
    std::lock_guard lock(mutex_);
    for (Event *dependency : wait_list)
      event->add_dependency(dependency);
    if (in_order()) {
      if (last_)
        event->add_dependency(last_.get());
    } else {
      if (last_barrier_)
        event->add_dependency(last_barrier_.get());
      if (wait_for_all)
        for (Event *pending = incomplete_head_; pending; pending = pending->queue_next_)
          event->add_dependency(pending);
      if (is_barrier)
        last_barrier_ = Ref<Event>(event);
    }
    last_ = Ref<Event>(event);
    event->retain(); // the list's reference, dropped by command_finished()
    event->queue_prev_ = incomplete_tail_;
    event->queue_next_ = nullptr;
    (incomplete_tail_ ? incomplete_tail_->queue_next_ : incomplete_head_) = event;
    incomplete_tail_ = event;
  }
  // Outside the queue lock: submitting may complete the command inline, which calls back
  // into command_finished().
  event->submit();
  return event;
}

Event *Queue::enqueue(cl_command_type type, Event::Action action,
                      const std::vector<Event *> &wait_list) {
  return enqueue_ordered(new Event(context_.get(), this, type, std::move(action)), wait_list, false,
                         false);
}

Event *Queue::enqueue(cl_command_type type, std::shared_ptr<Event::Work> work,
                      const std::vector<Event *> &wait_list) {
  return enqueue_ordered(new Event(context_.get(), this, type, std::move(work)), wait_list, false,
                         false);
}

Event *Queue::enqueue_barrier(cl_command_type type, const std::vector<Event *> &wait_list) {
  return enqueue_ordered(new Event(context_.get(), this, type, Event::Action()), wait_list,
                         wait_list.empty(), true);
}

Event *Queue::enqueue_marker(cl_command_type type, const std::vector<Event *> &wait_list) {
  return enqueue_ordered(new Event(context_.get(), this, type, Event::Action()), wait_list,
                         wait_list.empty(), false);
}

void Queue::command_finished(Event *event) {
  Ref<Event> dropped; // released after the lock: it may be the event's last reference
  {
    std::lock_guard lock(mutex_);
    if (event->queue_prev_ || incomplete_head_ == event) {
      (event->queue_prev_ ? event->queue_prev_->queue_next_ : incomplete_head_) =
          event->queue_next_;
      (event->queue_next_ ? event->queue_next_->queue_prev_ : incomplete_tail_) =
          event->queue_prev_;
      event->queue_prev_ = event->queue_next_ = nullptr;
      dropped = Ref<Event>::adopt(event);
    }
    if (!incomplete_head_)
      idle_.notify_all();
  }
}

void Queue::finish() {
  std::unique_lock lock(mutex_);
  idle_.wait(lock, [this] { return incomplete_head_ == nullptr; });
}

cl_int Queue::info(cl_command_queue_info param, size_t size, void *value, size_t *size_ret) {
  InfoWriter out(size, value, size_ret);
  switch (param) {
  case CL_QUEUE_CONTEXT:
    return out.scalar<cl_context>(context_->handle());
  case CL_QUEUE_DEVICE:
    return out.scalar<cl_device_id>(device_->handle());
  case CL_QUEUE_REFERENCE_COUNT:
    return out.scalar<cl_uint>(api_ref_count());
  case CL_QUEUE_PROPERTIES:
    return out.scalar<cl_command_queue_properties>(properties_);
  case CL_QUEUE_PROPERTIES_ARRAY:
    return out.array(property_list_);
  case CL_QUEUE_SIZE:
    return CL_INVALID_COMMAND_QUEUE; // not an on-device queue
  default:
    return CL_INVALID_VALUE;
  }
}

} // namespace manycl::rt
