// Descriptions of RDMA transfers: where data comes from and goes to, and the 1-D to 3-D
// strided shape it has on either side. Pure data plus range arithmetic; the engine that
// performs transfers and models their time lives in command.h (ClusterContext::dma).
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "manycl/result.h"

namespace manycl::device {

// A checked window of the device DDR: a DDR address in a transfer is `window.base + offset`
// and [offset, offset + extent) must lie inside [0, window.size). A buffer passed to a kernel
// becomes one window, so a transfer cannot reach a neighbouring buffer. The default window
// is the whole DDR address space (absolute offsets); the range must still lie in one
// allocated DDR block.
struct DdrWindow {
  uint64_t base = 0;
  uint64_t size = std::numeric_limits<uint64_t>::max();
};

// A box of planes × rows × row_bytes. Source and destination have independent strides (in
// bytes), so a tile with its halo can be gathered from a larger image and a channel slice
// scattered into one. Strides are explicit: a source stride of 0 re-reads the same row
// (broadcast), which is legal. A 1-D transfer is rows = planes = 1.
struct DmaShape {
  uint64_t row_bytes = 0;
  uint64_t rows = 1;
  uint64_t planes = 1;
  uint64_t src_row_stride = 0;
  uint64_t src_plane_stride = 0;
  uint64_t dst_row_stride = 0;
  uint64_t dst_plane_stride = 0;

  static DmaShape linear(uint64_t bytes) { return {bytes, 1, 1, bytes, bytes, bytes, bytes}; }
  // rows of row_bytes each, read with src_stride and written with dst_stride.
  static DmaShape strided_2d(uint64_t row_bytes, uint64_t rows, uint64_t src_stride,
                             uint64_t dst_stride) {
    return {row_bytes, rows, 1, src_stride, src_stride * rows, dst_stride, dst_stride * rows};
  }

  // Bytes moved (row_bytes × rows × planes), or an error on overflow.
  Result<uint64_t> bytes() const;
  // Bytes from the first to one past the last byte touched on the source / destination side
  // (0 for an empty shape), or an error on overflow.
  Result<uint64_t> src_extent() const;
  Result<uint64_t> dst_extent() const;
};

enum class DmaSpace { Ddr, Spm };

// One side of a transfer. For Ddr: `offset` is relative to `window`. For Spm: `offset` is a
// byte offset in the SPM of cluster `cluster` (an index in the command's cluster group).
struct DmaEndpoint {
  DmaSpace space = DmaSpace::Spm;
  uint64_t offset = 0;
  DdrWindow window;
  unsigned cluster = 0;

  static DmaEndpoint ddr(uint64_t offset, DdrWindow window = {}) {
    return {DmaSpace::Ddr, offset, window, 0};
  }
  static DmaEndpoint spm(unsigned cluster, uint64_t offset) {
    return {DmaSpace::Spm, offset, {}, cluster};
  }
};

// No signal is raised on completion.
inline constexpr int kNoSignal = -1;

struct DmaRequest {
  DmaRequest() = default;
  DmaRequest(DmaEndpoint from, DmaEndpoint to, DmaShape box) : src(from), dst(to), shape(box) {}

  DmaEndpoint src;
  DmaEndpoint dst;
  DmaShape shape;
  // Multicast: when non-empty, the source (DDR, or an SPM: an exchange to several clusters) is
  // read once and delivered to dst.offset in the SPM of every cluster listed (group indices,
  // no duplicates); dst.cluster is ignored.
  std::vector<unsigned> multicast;
  // When >= 0, completion adds 1 to this signal counter of every destination cluster, at the
  // modeled completion time (see ClusterContext::signal_wait).
  int notify_signal = kNoSignal;
  // Shown in traces.
  std::string label;
  // A rejected transfer (range or argument error) marks the command failed unless this is
  // false (for callers that handle the error themselves, e.g. by a fallback).
  bool fail_command_on_error = true;
  // Reserve the DDR on the cluster's own calendar, a fixed 1/n share of its domain's bandwidth
  // for the n clusters of the command, instead of the domain's arbitrated calendar: modeled
  // time stays deterministic without the clusters taking turns on the host at every transfer.
  // For the many small copies OpenCL C work-groups issue (async_work_group_copy).
  bool private_ddr_share = false;
  // The DDR source stays unchanged until the command ends (a program's parameters): a DDR ->
  // SPM transfer of contiguous bytes may then leave its destination as a deferred copy (see
  // ClusterContext::deferred_view). Modeled time is the same either way.
  bool immutable_source = false;
};

// Identifies a transfer of one cluster's engine within a command: 1, 2, 3... in issue order.
// 0 is never a valid handle.
using DmaHandle = uint64_t;

} // namespace manycl::device
