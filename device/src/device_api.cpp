// The C device API over the current ClusterContext. Every entry point catches everything:
// no exception may cross into native (C) code.
#include "manycl/device_api.h"

#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>

#include "manycl/device/command.h"
#include "manycl/device/device.h"
#include "manycl/device/report.h"
#include "manycl/log.h"

#include "fiber_locals.h"

using namespace manycl::device;

static_assert(MCL_SIGNALS_PER_CLUSTER == kSignalsPerCluster);
static_assert(MCL_FIRST_PRIVATE_SIGNAL == kFirstPrivateSignal);

namespace {

thread_local std::string t_last_error;

int set_error(int status, std::string message) {
  t_last_error = std::move(message);
  return status;
}

int no_context(const char *what) {
  return set_error(MCL_ERR_NO_CONTEXT, std::string(what) + ": no current cluster context");
}

int status_of(const manycl::Result<void> &r) {
  if (r.ok())
    return MCL_OK;
  return set_error(MCL_ERR_SYNC, r.error().message);
}

DmaEndpoint endpoint(const mcl_dma_endpoint &e) {
  DmaEndpoint out;
  out.space = e.space == MCL_DMA_DDR ? DmaSpace::Ddr : DmaSpace::Spm;
  out.offset = e.offset;
  out.cluster = e.cluster;
  if (e.window)
    out.window = DdrWindow{e.window->base, e.window->size};
  return out;
}

mcl_dma_handle start(const DmaRequest &request) {
  ClusterContext *ctx = current_cluster_context();
  if (!ctx) {
    no_context("mcl_dma");
    return 0;
  }
  auto handle = ctx->dma(request);
  if (!handle) {
    set_error(MCL_ERR_RANGE, handle.error().message);
    return 0;
  }
  return handle.value();
}

DmaShape shape_of(const mcl_dma_shape *s) {
  return DmaShape{s->row_bytes,        s->rows,           s->planes,          s->src_row_stride,
                  s->src_plane_stride, s->dst_row_stride, s->dst_plane_stride};
}

bool log_to_stderr() { return manycl::log::enabled(manycl::log::kDevice); }

} // namespace

namespace manycl::device {
void swap_api_locals(FiberLocals &saved) {
  t_last_error.swap(saved.last_error);
}
} // namespace manycl::device

extern "C" {

uint32_t mcl_api_version(void) {
  return MCL_DEVICE_API_VERSION;
}

int mcl_has_context(void) {
  return current_cluster_context() != nullptr;
}

uint32_t mcl_cluster_id(void) {
  auto *c = current_cluster_context();
  return c ? c->group_index() : 0;
}
uint32_t mcl_cluster_count(void) {
  auto *c = current_cluster_context();
  return c ? c->group_size() : 0;
}
uint32_t mcl_device_cluster_id(void) {
  auto *c = current_cluster_context();
  return c ? c->device_cluster() : 0;
}
uint32_t mcl_pe_count(void) {
  auto *c = current_cluster_context();
  return c ? c->pe_count() : 0;
}
void *mcl_spm_base(void) {
  auto *c = current_cluster_context();
  return c ? static_cast<void *>(c->spm_base()) : nullptr;
}
uint64_t mcl_spm_size(void) {
  auto *c = current_cluster_context();
  return c ? c->spm_size() : 0;
}

static mcl_dma_handle dma_start(const mcl_dma_desc *desc, bool immutable_source) {
  try {
    if (!desc) {
      set_error(MCL_ERR_ARGUMENT, "mcl_dma_start: NULL descriptor");
      return 0;
    }
    if (desc->multicast_count > 0 && !desc->multicast) {
      set_error(MCL_ERR_ARGUMENT, "mcl_dma_start: multicast_count without a cluster list");
      return 0;
    }
    DmaRequest r;
    r.src = endpoint(desc->src);
    r.dst = endpoint(desc->dst);
    r.shape = shape_of(&desc->shape);
    r.multicast.assign(desc->multicast, desc->multicast + desc->multicast_count);
    r.notify_signal = desc->notify_signal;
    if (desc->label)
      r.label = desc->label;
    r.immutable_source = immutable_source;
    return start(r);
  } catch (...) {
    set_error(MCL_ERR_ARGUMENT, "mcl_dma_start: out of host memory");
    return 0;
  }
}

mcl_dma_handle mcl_dma_start(const mcl_dma_desc *desc) {
  return dma_start(desc, false);
}
mcl_dma_handle mcl_dma_start_immutable(const mcl_dma_desc *desc) {
  return dma_start(desc, true);
}

const void *mcl_spm_view(uint64_t offset, uint64_t bytes) {
  auto *c = current_cluster_context();
  return c ? static_cast<const void *>(c->deferred_view(offset, bytes)) : nullptr;
}
void mcl_spm_materialize(uint64_t offset, uint64_t bytes) {
  if (auto *c = current_cluster_context())
    c->materialize(offset, bytes);
}
void mcl_spm_overwrite(uint64_t offset, uint64_t bytes) {
  if (auto *c = current_cluster_context())
    c->overwrite(offset, bytes);
}
int mcl_spm_has_deferred(void) {
  auto *c = current_cluster_context();
  return c && c->has_deferred() ? 1 : 0;
}

mcl_dma_handle mcl_dma_get(const mcl_ddr_window *window, uint64_t ddr_offset, uint64_t spm_offset,
                           const mcl_dma_shape *shape) {
  if (!shape) {
    set_error(MCL_ERR_ARGUMENT, "mcl_dma_get: NULL shape");
    return 0;
  }
  mcl_dma_desc d{};
  d.src = {MCL_DMA_DDR, 0, ddr_offset, window};
  d.dst = {MCL_DMA_SPM, mcl_cluster_id(), spm_offset, nullptr};
  d.shape = *shape;
  d.notify_signal = MCL_NO_SIGNAL;
  return mcl_dma_start(&d);
}

mcl_dma_handle mcl_dma_put(uint64_t spm_offset, const mcl_ddr_window *window, uint64_t ddr_offset,
                           const mcl_dma_shape *shape) {
  if (!shape) {
    set_error(MCL_ERR_ARGUMENT, "mcl_dma_put: NULL shape");
    return 0;
  }
  mcl_dma_desc d{};
  d.src = {MCL_DMA_SPM, mcl_cluster_id(), spm_offset, nullptr};
  d.dst = {MCL_DMA_DDR, 0, ddr_offset, window};
  d.shape = *shape;
  d.notify_signal = MCL_NO_SIGNAL;
  return mcl_dma_start(&d);
}

mcl_dma_handle mcl_dma_spm_copy(uint64_t src_spm_offset, uint32_t dst_cluster,
                                uint64_t dst_spm_offset, const mcl_dma_shape *shape) {
  if (!shape) {
    set_error(MCL_ERR_ARGUMENT, "mcl_dma_spm_copy: NULL shape");
    return 0;
  }
  mcl_dma_desc d{};
  d.src = {MCL_DMA_SPM, mcl_cluster_id(), src_spm_offset, nullptr};
  d.dst = {MCL_DMA_SPM, dst_cluster, dst_spm_offset, nullptr};
  d.shape = *shape;
  d.notify_signal = MCL_NO_SIGNAL;
  return mcl_dma_start(&d);
}

mcl_dma_handle mcl_dma_multicast(const mcl_ddr_window *window, uint64_t ddr_offset,
                                 const uint32_t *clusters, uint32_t cluster_count,
                                 uint64_t spm_offset, const mcl_dma_shape *shape) {
  if (!shape || !clusters || cluster_count == 0) {
    set_error(MCL_ERR_ARGUMENT, "mcl_dma_multicast: NULL shape or empty cluster list");
    return 0;
  }
  mcl_dma_desc d{};
  d.src = {MCL_DMA_DDR, 0, ddr_offset, window};
  d.dst = {MCL_DMA_SPM, 0, spm_offset, nullptr};
  d.shape = *shape;
  d.multicast = clusters;
  d.multicast_count = cluster_count;
  d.notify_signal = MCL_NO_SIGNAL;
  return mcl_dma_start(&d);
}

int mcl_dma_wait(mcl_dma_handle handle) {
  auto *c = current_cluster_context();
  if (!c)
    return no_context("mcl_dma_wait");
  auto r = c->dma_wait(handle);
  return r ? MCL_OK : set_error(MCL_ERR_ARGUMENT, r.error().message);
}

int mcl_dma_wait_all(void) {
  auto *c = current_cluster_context();
  if (!c)
    return no_context("mcl_dma_wait_all");
  return status_of(c->dma_wait_all());
}

int mcl_dma_done(mcl_dma_handle handle) {
  auto *c = current_cluster_context();
  return c && c->dma_done(handle) ? 1 : 0;
}

int mcl_barrier(void) {
  auto *c = current_cluster_context();
  if (!c)
    return no_context("mcl_barrier");
  try {
    return status_of(c->barrier());
  } catch (...) {
    return set_error(MCL_ERR_SYNC, "mcl_barrier: host failure");
  }
}

int mcl_signal_post(uint32_t cluster, uint32_t signal, uint64_t count) {
  auto *c = current_cluster_context();
  if (!c)
    return no_context("mcl_signal_post");
  try {
    auto r = c->signal_post(cluster, signal, count);
    return r ? MCL_OK : set_error(MCL_ERR_ARGUMENT, r.error().message);
  } catch (...) {
    return set_error(MCL_ERR_SYNC, "mcl_signal_post: host failure");
  }
}

int mcl_signal_wait(uint32_t signal, uint64_t value) {
  auto *c = current_cluster_context();
  if (!c)
    return no_context("mcl_signal_wait");
  try {
    return status_of(c->signal_wait(signal, value));
  } catch (...) {
    return set_error(MCL_ERR_SYNC, "mcl_signal_wait: host failure");
  }
}

uint64_t mcl_signal_value(uint32_t signal) {
  auto *c = current_cluster_context();
  return c ? c->signal_value(signal) : 0;
}

uint32_t mcl_pe_id(void) {
  return current_pe_index();
}

int mcl_parallel_for(uint32_t count, mcl_task_fn body, void *arg) {
  if (!body)
    return set_error(MCL_ERR_ARGUMENT, "mcl_parallel_for: NULL body");
  auto *c = current_cluster_context();
  if (!c) {
    for (uint32_t i = 0; i < count; ++i)
      body(arg, i, 0);
    return MCL_OK;
  }
  try {
    return status_of(c->parallel_for(
        count, [body, arg](uint64_t i, unsigned pe) { body(arg, static_cast<uint32_t>(i), pe); }));
  } catch (...) {
    return set_error(MCL_ERR_SYNC, "mcl_parallel_for: host failure");
  }
}

void mcl_exec_parallel_for(void *, uint32_t count, mcl_task_fn body, void *arg) {
  mcl_parallel_for(count, body, arg);
}

void mcl_exec_account_cycles(void *, uint64_t cycles) {
  mcl_account_cycles(cycles);
}

uint64_t mcl_now_cycles(void) {
  auto *c = current_cluster_context();
  return c ? c->now() : 0;
}

void mcl_account_cycles(uint64_t cycles) {
  if (auto *c = current_cluster_context())
    c->account_cycles(cycles);
}

uint64_t mcl_mac_cycles(uint32_t type, uint64_t macs, uint32_t pes) {
  auto *c = current_cluster_context();
  if (!c || type > MCL_ELEM_FP32)
    return 0;
  return c->mac_cycles(static_cast<ElementType>(type), macs, pes);
}

void mcl_account_macs(uint32_t type, uint64_t macs, uint32_t pes) {
  mcl_account_cycles(mcl_mac_cycles(type, macs, pes));
}

void mcl_account_elements(uint64_t elements, uint32_t ops_per_element, uint32_t pes) {
  uint64_t ops;
  if (__builtin_mul_overflow(elements, static_cast<uint64_t>(ops_per_element), &ops))
    ops = UINT64_MAX;
  mcl_account_macs(MCL_ELEM_FP32, ops, pes);
}

int mcl_checked_mode(void) {
  return checked_mode() ? 1 : 0;
}

int mcl_check_spm_range(const void *ptr, uint64_t size) {
  if (!checked_mode())
    return MCL_OK;
  auto *c = current_cluster_context();
  if (!c)
    return no_context("mcl_check_spm_range");
  try {
    auto r = c->check_spm_range(ptr, size);
    return r ? MCL_OK : set_error(MCL_ERR_RANGE, r.error().message);
  } catch (...) {
    return set_error(MCL_ERR_RANGE, "mcl_check_spm_range: host failure");
  }
}

void mcl_note_spm_used(uint64_t end_offset) {
  if (auto *c = current_cluster_context())
    c->note_spm_used(end_offset);
}

void mcl_fail(const char *message) {
  auto *c = current_cluster_context();
  if (!c)
    return;
  try {
    c->command().fail("cluster " + std::to_string(c->device_cluster()) + ": " +
                      (message ? message : "native code failed"));
  } catch (...) {
  }
}

void mcl_log(const char *format, ...) {
  if (!format)
    return;
  char buffer[1024];
  va_list args;
  va_start(args, format);
  std::vsnprintf(buffer, sizeof buffer, format, args);
  va_end(args);
  auto *c = current_cluster_context();
  try {
    if (c) {
      uint64_t now = c->now();
      Reports::instance().modeled_instant(c->device().index(), c->device_cluster(), buffer, now);
      if (log_to_stderr())
        std::fprintf(stderr, "[manycl device #%u cluster %u @%llu] %s\n", c->device().index(),
                     c->device_cluster(), static_cast<unsigned long long>(now), buffer);
    } else if (log_to_stderr()) {
      std::fprintf(stderr, "[manycl device] %s\n", buffer);
    }
  } catch (...) {
  }
}

const char *mcl_last_error(void) {
  return t_last_error.c_str();
}

} // extern "C"
