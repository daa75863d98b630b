// The record interpreter: one loop over a cluster's records. Control records map one-to-one
// to device_api.h calls; compute records go to mcl_native_run with an exec context bound to
// the current cluster (its SPM, its PEs, its modeled time).
#include "manycl/interpreter.h"

#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "kann/kbin.h"
#include "kann/steps.h"
#include "manycl/device/command.h"
#include "manycl/device/device.h"
#include "manycl/device/report.h"
#include "manycl/native/native.h"

namespace {

int fail(char *msg, size_t cap, int status, const std::string &text) {
  if (cap > 0) {
    std::snprintf(msg, cap, "%s", text.c_str());
  }
  mcl_fail(text.c_str());
  return status;
}

const mcl_ddr_window *window_for(const mcl_kbin_cluster_run *run, const kbin_ddr_ref &ref) {
  switch (ref.space) {
  case KBIN_DDR_PARAMS:
    return &run->params;
  case KBIN_DDR_SCRATCH:
    return &run->scratch;
  case KBIN_DDR_ARG:
    return ref.arg_index < run->arg_count ? &run->args[ref.arg_index] : nullptr;
  default:
    return nullptr;
  }
}

int run_dma(const mcl_kbin_cluster_run *run, const kbin_dma_args &d, std::string &error) {
  mcl_dma_desc desc{};
  desc.shape = {d.shape.row_bytes,        d.shape.rows,
                d.shape.planes,           d.shape.src_row_stride,
                d.shape.src_plane_stride, d.shape.dst_row_stride,
                d.shape.dst_plane_stride};
  desc.notify_signal = d.notify_signal;
  uint32_t targets[KBIN_MAX_CLUSTERS];
  uint32_t target_count = 0;
  const uint32_t self = mcl_cluster_id();
  auto multicast = [&] { // the destinations of a MULTICAST or an EXCHANGE_MULTICAST
    for (uint32_t i = 0; i < KBIN_MAX_CLUSTERS; ++i)
      if (d.cluster_mask & (1u << i))
        targets[target_count++] = i;
    desc.multicast = targets;
    desc.multicast_count = target_count;
  };
  switch (d.kind) {
  case KBIN_DMA_LOAD:
  case KBIN_DMA_MULTICAST: {
    desc.src.space = MCL_DMA_DDR;
    desc.src.offset = d.ddr.offset;
    desc.src.window = window_for(run, d.ddr);
    desc.dst.space = MCL_DMA_SPM;
    desc.dst.cluster = self;
    desc.dst.offset = d.spm_offset;
    if (d.kind == KBIN_DMA_MULTICAST)
      multicast();
    desc.label = d.kind == KBIN_DMA_LOAD ? "kbin load" : "kbin multicast";
    break;
  }
  case KBIN_DMA_STORE:
    desc.src.space = MCL_DMA_SPM;
    desc.src.cluster = self;
    desc.src.offset = d.spm_offset;
    desc.dst.space = MCL_DMA_DDR;
    desc.dst.offset = d.ddr.offset;
    desc.dst.window = window_for(run, d.ddr);
    desc.label = "kbin store";
    break;
  case KBIN_DMA_EXCHANGE:
  case KBIN_DMA_EXCHANGE_MULTICAST:
    desc.src.space = MCL_DMA_SPM;
    desc.src.cluster = self;
    desc.src.offset = d.spm_offset;
    desc.dst.space = MCL_DMA_SPM;
    desc.dst.cluster = d.dst_cluster;
    desc.dst.offset = d.spm_dst_offset;
    if (d.kind == KBIN_DMA_EXCHANGE_MULTICAST)
      multicast();
    desc.label = d.kind == KBIN_DMA_EXCHANGE ? "kbin exchange" : "kbin exchange multicast";
    break;
  default:
    error = "unknown DMA kind " + std::to_string(d.kind);
    return MCL_ERR_ARGUMENT;
  }
  if ((desc.src.space == MCL_DMA_DDR && !desc.src.window) ||
      (desc.dst.space == MCL_DMA_DDR && !desc.dst.window)) {
    error = "DMA names a DDR buffer the runtime did not pass";
    return MCL_ERR_ARGUMENT;
  }
  // A {0,0} window (no scratch) must not turn into "whole DDR": reject it explicitly.
  const mcl_ddr_window *w = desc.src.space == MCL_DMA_DDR ? desc.src.window : desc.dst.window;
  if ((desc.src.space == MCL_DMA_DDR || desc.dst.space == MCL_DMA_DDR) && w->size == 0) {
    error = "DMA into an empty DDR buffer";
    return MCL_ERR_RANGE;
  }
  // Parameter loads may be deferred copies (the loader refuses streams that write PARAMS, so
  // they are immutable during the command): a multicast of weights is then one set of host
  // bytes, not one per cluster (docs/device-model.md).
  const bool immutable = desc.src.space == MCL_DMA_DDR && d.ddr.space == KBIN_DDR_PARAMS;
  if ((immutable ? mcl_dma_start_immutable(&desc) : mcl_dma_start(&desc)) == 0) {
    error = std::string("DMA failed: ") + mcl_last_error();
    return MCL_ERR_RANGE;
  }
  return MCL_OK;
}

// The native functions' operand hook: SPM bytes a call reads or writes are made current
// (deferred copies materialized), and its parameter block is read from the source of the
// deferred copy holding it.
const uint8_t *spm_operand(void *, uint64_t offset, uint64_t bytes, uint32_t kind) {
  if (!mcl_spm_has_deferred())
    return nullptr;
  if (kind == MCL_NATIVE_OPERAND_PARAMS)
    return static_cast<const uint8_t *>(mcl_spm_view(offset, bytes));
  if (kind == MCL_NATIVE_OPERAND_WRITTEN)
    mcl_spm_overwrite(offset, bytes);
  else
    mcl_spm_materialize(offset, bytes);
  return nullptr;
}

} // namespace

extern "C" int mcl_kbin_run_cluster(const mcl_kbin_cluster_run *run, char *msg, size_t cap) {
  if (cap > 0)
    msg[0] = 0;
  if (!run || (!run->records && run->records_size) || (run->arg_count && !run->args))
    return fail(msg, cap, MCL_ERR_ARGUMENT, "mcl_kbin_run_cluster: bad arguments");
  if (!mcl_has_context())
    return fail(msg, cap, MCL_ERR_NO_CONTEXT, "mcl_kbin_run_cluster: no cluster context");

  mcl_native_exec exec{};
  exec.spm_base = static_cast<uint8_t *>(mcl_spm_base());
  exec.spm_size = mcl_spm_size();
  exec.pe_count = mcl_pe_count() ? mcl_pe_count() : 1;
  // Always checked: conv address tables are data loaded from the (untrusted) parameter blob,
  // so the loader cannot prove their entries in range; checked mode verifies each entry
  // before use, at a cost far below the convolution's own.
  exec.flags = MCL_NATIVE_EXEC_CHECKED;
  (void)MCL_KBIN_RUN_CHECKED;
  exec.parallel_for = mcl_exec_parallel_for;
  exec.account_cycles = mcl_exec_account_cycles;
  exec.resolve = run->resolve;
  exec.resolve_user = run->resolve_user;
  exec.operand = spm_operand;
  // Parameter blocks read from the blob's own bytes (deferred copies, spm_operand) may be
  // cached by what they are; ones copied into the SPM are outside these bytes.
  if (run->params_host && run->params_generation) {
    exec.stable_base = run->params_host;
    exec.stable_size = run->params.size;
    exec.stable_generation = run->params_generation;
  }

  // Argument blocks are copied to aligned storage: the stream only guarantees 8-byte
  // alignment of record starts, and a block must never be modified in place.
  alignas(16) uint8_t block[1024];
  uint64_t at = 0;
  uint64_t index = 0;
  // Operator steps on the trace (only while tracing: otherwise nothing is read or kept).
  manycl::device::ClusterContext *traced = nullptr;
  if (manycl::device::Reports::instance().tracing())
    traced = manycl::device::current_cluster_context();
  const bool multi_cluster = traced && traced->group_size() > 1;
  uint64_t step_start = traced ? traced->now() : 0;
  uint32_t step = 0, previous_fn = 0;
  char native_msg[256];
  while (at < run->records_size) {
    kbin_record_header h;
    if (run->records_size - at < sizeof h)
      return fail(msg, cap, MCL_ERR_ARGUMENT, "record stream truncated");
    std::memcpy(&h, run->records + at, sizeof h);
    if (h.length < sizeof h || h.length > run->records_size - at ||
        h.length - sizeof h > sizeof block)
      return fail(msg, cap, MCL_ERR_ARGUMENT,
                  "record " + std::to_string(index) + ": bad length " + std::to_string(h.length));
    const size_t body = h.length - sizeof h;
    std::memcpy(block, run->records + at + sizeof h, body);
    // Built only for an error message: every inference walks hundreds of records.
    auto where = [index] { return "record " + std::to_string(index) + ": "; };
    int status = MCL_OK;
    std::string error;
    switch (h.function_id) {
    case KBIN_FN_DMA: {
      kbin_dma_args d;
      if (body < sizeof d)
        return fail(msg, cap, MCL_ERR_ARGUMENT, where() + "short DMA record");
      std::memcpy(&d, block, sizeof d);
      status = run_dma(run, d, error);
      break;
    }
    case KBIN_FN_WAIT_DMA:
      status = mcl_dma_wait_all();
      if (status != MCL_OK)
        error = std::string("DMA wait failed: ") + mcl_last_error();
      break;
    case KBIN_FN_BARRIER:
      status = mcl_barrier();
      if (status != MCL_OK)
        error = std::string("barrier failed: ") + mcl_last_error();
      break;
    case KBIN_FN_SIGNAL: {
      kbin_signal_args s;
      if (body < sizeof s)
        return fail(msg, cap, MCL_ERR_ARGUMENT, where() + "short signal record");
      std::memcpy(&s, block, sizeof s);
      status = mcl_signal_post(s.cluster, s.signal, s.count);
      if (status != MCL_OK)
        error = std::string("signal failed: ") + mcl_last_error();
      break;
    }
    case KBIN_FN_WAIT_SIGNAL: {
      kbin_wait_signal_args w;
      if (body < sizeof w)
        return fail(msg, cap, MCL_ERR_ARGUMENT, where() + "short wait_signal record");
      std::memcpy(&w, block, sizeof w);
      status = mcl_signal_wait(w.signal, w.value);
      if (status != MCL_OK)
        error = std::string("signal wait failed: ") + mcl_last_error();
      break;
    }
    default: {
      size_t size = mcl_native_args_size(h.function_id);
      if (size == 0 || size > body)
        return fail(msg, cap, MCL_ERR_ARGUMENT,
                    where() + "unknown function id " + std::to_string(h.function_id));
      native_msg[0] = 0;
      int s = mcl_native_run(&exec, h.function_id, block, size, native_msg, sizeof native_msg);
      if (s != MCL_NATIVE_OK) {
        status = MCL_ERR_ARGUMENT;
        error = std::string(mcl_native_fn_name(h.function_id)) + ": " + native_msg;
      }
      break;
    }
    }
    if (status != MCL_OK)
      return fail(msg, cap, status, where() + error);
    if (traced && kann::format::ends_step(previous_fn, h.function_id, multi_cluster)) {
      const uint64_t now = traced->now();
      std::string name = step < run->step_name_count && run->step_names && run->step_names[step]
                             ? run->step_names[step]
                             : "step " + std::to_string(step);
      manycl::device::Reports::instance().modeled_span(
          traced->device().index(), traced->device_cluster(), manycl::device::TraceTrack::Compute,
          std::move(name), step_start, now, "{\"step\":" + std::to_string(step) + "}");
      step_start = now;
      ++step;
    }
    previous_fn = h.function_id;
    at += h.length;
    ++index;
  }
  // Leave nothing in flight: the command ends when every cluster returns.
  if (mcl_dma_wait_all() != MCL_OK)
    return fail(msg, cap, MCL_ERR_SYNC, std::string("final DMA wait: ") + mcl_last_error());
  return MCL_OK;
}
