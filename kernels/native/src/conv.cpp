// Convolution, transposed convolution and GEMM: compile-time planning (address tables),
// parameter packing, and the run-time drivers that split work over the PEs.
#include "cost_model.h"
#include "int8_conv.h"
#include "internal.h"
#include "winograd.h"

#include <atomic>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif
#include <array>
#include <cstdlib>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

namespace manycl::native {

namespace {

constexpr uint64_t kAlign = 64;
uint64_t align_up(uint64_t v, uint64_t a) {
  return (v + a - 1) / a * a;
}

// Byte layout of a packed parameter block (see docs/native.md).
struct ParamLayout {
  bool depthwise = false, int8 = false;
  uint32_t groups = 1, cin_g = 0, cout_g = 0, taps = 0, nblocks = 0, channels_padded = 0;
  uint64_t group_stride = 0; // bytes of weights per group
  uint64_t bias_offset = 0, mult_offset = 0, total = 0;
  uint64_t weight_zp_offset = 0; // INT8 with MCL_CONV_WEIGHT_ZERO_POINTS, else 0
};

ParamLayout param_layout(uint32_t fn, const mcl_conv_args &a) {
  (void)fn;
  ParamLayout l;
  l.int8 = is_int8(a.input.dtype);
  l.groups = a.groups;
  l.cin_g = a.input.c / a.groups;
  l.cout_g = a.output.c / a.groups;
  l.taps = (uint32_t)a.kernel_h * a.kernel_w;
  l.depthwise = conv_is_depthwise(a);
  const uint64_t wsize = dtype_size(a.input.dtype); // INT8 weights are bytes
  uint64_t bias_count;
  if (l.depthwise) {
    l.channels_padded = (uint32_t)align_up(a.output.c, kPanelWidth);
    l.group_stride = 0;
    bias_count = l.channels_padded;
    l.bias_offset = align_up((uint64_t)l.taps * l.channels_padded * wsize, kAlign);
  } else {
    l.nblocks = (l.cout_g + kPanelWidth - 1) / kPanelWidth;
    const uint64_t k = l.int8 ? int8_padded_k(l.taps, l.cin_g) : (uint64_t)l.taps * l.cin_g;
    l.group_stride = align_up((uint64_t)l.nblocks * k * kPanelWidth * wsize, kAlign);
    bias_count = (uint64_t)l.groups * l.nblocks * kPanelWidth;
    l.bias_offset = l.group_stride * l.groups;
  }
  l.mult_offset = align_up(l.bias_offset + bias_count * 4, kAlign);
  l.total = l.int8 ? align_up(l.mult_offset + bias_count * 4, kAlign) : l.mult_offset;
  if (l.int8 && (a.flags & MCL_CONV_WEIGHT_ZERO_POINTS)) {
    l.weight_zp_offset = l.total;
    l.total = align_up(l.total + bias_count * 4, kAlign);
  }
  return l;
}

// Index of ONNX weight element for (group-local output co, group-local input ci, tap).
uint64_t onnx_weight_index(uint32_t fn, const ParamLayout &l, uint32_t g, uint32_t co, uint32_t ci,
                           uint32_t t) {
  if (fn == MCL_NATIVE_FN_CONV_TRANSPOSE2D) // [cin][cout/groups][kh][kw]
    return (((uint64_t)g * l.cin_g + ci) * l.cout_g + co) * l.taps + t;
  return (((uint64_t)g * l.cout_g + co) * l.cin_g + ci) * l.taps + t; // [cout][cin/g][kh][kw]
}

IsaKernels const *g_selected = nullptr;

// CPU and OS support (cpuid + xgetbv: the OS must save the wide registers).
bool cpu_has(const char *isa) {
#if defined(__x86_64__) || defined(__i386__)
  unsigned a, b, c, d;
  if (!__get_cpuid(1, &a, &b, &c, &d))
    return false;
  const bool fma = c & (1u << 12), osxsave = c & (1u << 27), f16c = c & (1u << 29);
  if (!osxsave)
    return false;
  unsigned xcr0_lo, xcr0_hi;
  __asm__ volatile("xgetbv" : "=a"(xcr0_lo), "=d"(xcr0_hi) : "c"(0));
  const bool os_avx = (xcr0_lo & 0x6u) == 0x6u, os_avx512 = (xcr0_lo & 0xe6u) == 0xe6u;
  if (__get_cpuid_max(0, nullptr) < 7)
    return false;
  __cpuid_count(7, 0, a, b, c, d);
  const bool avx2 = b & (1u << 5), avx512f = b & (1u << 16), avx512bw = b & (1u << 30);
  if (std::strcmp(isa, "avx2") == 0)
    return os_avx && avx2 && fma && f16c;
  if (std::strcmp(isa, "avx512") == 0)
    return os_avx512 && avx512f && avx512bw && fma && f16c;
#else
  (void)isa;
#endif
  return false;
}

const IsaKernels *kernels_by_name(const char *name) {
  if (!name)
    return nullptr;
  if (std::strcmp(name, "generic") == 0)
    return &generic_kernels();
  if (std::strcmp(name, "avx2") == 0 && avx2_kernels() && cpu_has("avx2"))
    return avx2_kernels();
  if (std::strcmp(name, "avx512") == 0 && avx512_kernels() && cpu_has("avx512"))
    return avx512_kernels();
  return nullptr;
}

const IsaKernels *best_kernels() {
  const char *order[] = {"avx512", "avx2", "generic"};
  const char *env = std::getenv("MANYCL_NATIVE_ISA");
  bool allowed = env == nullptr;
  for (const char *name : order) {
    if (env && std::strcmp(env, name) == 0)
      allowed = true;
    if (!allowed)
      continue;
    if (const IsaKernels *k = kernels_by_name(name))
      return k;
  }
  return &generic_kernels();
}

// PE-private scratch (host threads stand in for PEs).
std::vector<int32_t> &scratch_for_this_thread(size_t words) {
  static thread_local std::vector<int32_t> buffer;
  if (buffer.size() < words)
    buffer.resize(words);
  return buffer;
}
// Rows per task at most: bounds the K-chunk accumulators (x 64 bytes).
constexpr uint32_t kMaxTaskRows = 384;

} // namespace

const IsaKernels &active_kernels() {
  static const IsaKernels *initial = best_kernels();
  return g_selected ? *g_selected : *initial;
}

bool conv_is_depthwise(const mcl_conv_args &a) {
  return a.groups > 1 && a.groups == a.input.c && a.groups == a.output.c;
}

uint64_t conv_params_size(uint32_t fn, const mcl_conv_args &a) {
  return param_layout(fn, a).total;
}

mcl_conv_args gemm_as_conv(const mcl_gemm_args &g) {
  mcl_conv_args c{};
  c.input = g.input;
  c.output = g.output;
  c.params_offset = g.params_offset;
  c.groups = 1;
  c.kernel_h = c.kernel_w = c.stride_h = c.stride_w = c.dilation_h = c.dilation_w = 1;
  c.flags = (uint16_t)(MCL_CONV_NO_TABLE | (g.flags & MCL_CONV_WEIGHT_ZERO_POINTS));
  c.act = g.act;
  c.input_zero_point = g.input_zero_point;
  c.output_zero_point = g.output_zero_point;
  c.output_min = g.output_min;
  c.output_max = g.output_max;
  return c;
}

// Address of input pixel for output m and tap t, as an element offset relative to the input
// tile, or `pad` when the tap reads padding. Shared by the planner and the no-table path.
static void fill_table(uint32_t fn, const mcl_conv_args &a, int64_t pad, uint32_t m_begin,
                       uint32_t m_end, int32_t *table) {
  const uint32_t taps = (uint32_t)a.kernel_h * a.kernel_w;
  if (fn == MCL_NATIVE_FN_CONV_TRANSPOSE2D) {
    for (uint32_t m = m_begin; m < m_end; ++m) {
      const int64_t oy = m / a.output.w, ox = m % a.output.w;
      for (uint32_t t = 0; t < taps; ++t) {
        const int64_t ky = t / a.kernel_w, kx = t % a.kernel_w;
        const int64_t ny = a.origin_y + oy - ky * a.dilation_h;
        const int64_t nx = a.origin_x + ox - kx * a.dilation_w;
        bool inside = ny >= 0 && nx >= 0 && ny % a.stride_h == 0 && nx % a.stride_w == 0;
        const int64_t iy = ny / a.stride_h, ix = nx / a.stride_w;
        inside = inside && iy < a.input.h && ix < a.input.w;
        table[(size_t)(m - m_begin) * taps + t] =
            (int32_t)(inside ? iy * a.input.row_stride + ix * a.input.pixel_stride : pad);
      }
    }
    return;
  }
  // Convolution: walk the output pixels row by row and the taps row by row, so that every
  // coordinate is an addition (this runs for every call of a conv without a stored table).
  int32_t *out = table;
  int64_t oy = m_begin / a.output.w, ox = m_begin % a.output.w;
  for (uint32_t m = m_begin; m < m_end; ++m) {
    const int64_t y0 = a.origin_y + oy * a.stride_h, x0 = a.origin_x + ox * a.stride_w;
    for (uint32_t ky = 0; ky < a.kernel_h; ++ky) {
      const int64_t iy = y0 + (int64_t)ky * a.dilation_h;
      const bool row_inside = iy >= 0 && iy < a.input.h;
      const int64_t row = iy * a.input.row_stride;
      for (uint32_t kx = 0; kx < a.kernel_w; ++kx) {
        const int64_t ix = x0 + (int64_t)kx * a.dilation_w;
        *out++ = (int32_t)(row_inside && ix >= 0 && ix < a.input.w ? row + ix * a.input.pixel_stride
                                                                   : pad);
      }
    }
    if (++ox == a.output.w) {
      ox = 0;
      ++oy;
    }
  }
}

namespace {
// Address tables derived from the geometry (no table stored with the parameters) depend on
// nothing else, and a network calls the same convolutions at every inference: they are built
// once per geometry and shared. Bounded: past kMaxBytes the cache starts over.
class TableCache {
public:
  using Table = std::shared_ptr<const std::vector<int32_t>>;

  Table get(uint32_t fn, const mcl_conv_args &a, int64_t pad) {
    const Key key{fn,
                  a.kernel_h,
                  a.kernel_w,
                  a.stride_h,
                  a.stride_w,
                  a.dilation_h,
                  a.dilation_w,
                  (int64_t)a.origin_y,
                  (int64_t)a.origin_x,
                  a.output.h,
                  a.output.w,
                  a.input.h,
                  a.input.w,
                  (int64_t)a.input.row_stride,
                  (int64_t)a.input.pixel_stride,
                  pad};
    {
      std::lock_guard lock(mutex_);
      if (auto it = tables_.find(key); it != tables_.end())
        return it->second;
    }
    const uint32_t m_total = a.output.h * a.output.w;
    auto table = std::make_shared<std::vector<int32_t>>((size_t)m_total * a.kernel_h * a.kernel_w);
    fill_table(fn, a, pad, 0, m_total, table->data());
    const size_t bytes = table->size() * sizeof(int32_t);
    std::lock_guard lock(mutex_);
    if (bytes_ + bytes > kMaxBytes) {
      tables_.clear();
      bytes_ = 0;
    }
    if (tables_.emplace(key, table).second)
      bytes_ += bytes;
    return table;
  }

private:
  static constexpr size_t kMaxBytes = size_t{64} << 20;
  using Key = std::array<int64_t, 16>;
  std::mutex mutex_;
  std::map<Key, Table> tables_;
  size_t bytes_ = 0;
};
TableCache table_cache;

// Float copies of binary16 input tiles. Taken for one call (which may park its fiber while
// the tasks run, so not thread-local) and given back for the next: no allocation or page
// faults per call once the largest tile has been seen.
class WideBuffers {
public:
  std::vector<float> take(size_t floats) {
    std::vector<float> b;
    {
      std::lock_guard lock(mutex_);
      if (!free_.empty()) {
        b = std::move(free_.back());
        free_.pop_back();
      }
    }
    if (b.size() < floats)
      b.resize(floats);
    return b;
  }
  void give_back(std::vector<float> b) {
    std::lock_guard lock(mutex_);
    if (free_.size() < kMaxFree)
      free_.push_back(std::move(b));
  }

private:
  static constexpr size_t kMaxFree = 16;
  std::mutex mutex_;
  std::vector<std::vector<float>> free_;
};
WideBuffers wide_buffers;

struct WideInput {
  std::vector<float> buffer;
  ~WideInput() {
    if (!buffer.empty())
      wide_buffers.give_back(std::move(buffer));
  }
};
} // namespace

static int64_t pad_row_delta(const mcl_conv_args &a) {
  return ((int64_t)a.pad_row_offset - (int64_t)a.input.offset) / (int64_t)dtype_size(a.input.dtype);
}

Status run_conv(const mcl_native_exec &exec, uint32_t fn, const mcl_conv_args &a) {
  const IsaKernels &isa = active_kernels();
  const ParamLayout l = param_layout(fn, a);
  uint8_t *spm = exec.spm_base;
  const uint32_t esize = dtype_size(a.input.dtype);
  const uint32_t m_total = a.output.h * a.output.w;

  ConvJob j;
  j.in_dtype = a.input.dtype;
  j.out_dtype = a.output.dtype;
  j.in = spm + a.input.offset;
  j.out = spm + a.output.offset;
  j.out_row_stride = a.output.row_stride;
  j.out_pixel_stride = a.output.pixel_stride;
  j.out_w = a.output.w;
  j.m = m_total;
  j.taps = l.taps;
  j.cin_g = l.cin_g;
  j.cout_g = l.cout_g;
  j.groups = l.groups;
  j.depthwise = l.depthwise;
  const uint8_t *params = params_at(exec, a.params_offset, conv_params_size(fn, a));
  j.weights = params;
  j.weights_group_stride = l.group_stride;
  j.bias = params + l.bias_offset;
  j.multipliers = reinterpret_cast<const float *>(params + l.mult_offset);
  if (l.weight_zp_offset)
    j.weight_zero_points = reinterpret_cast<const int32_t *>(params + l.weight_zp_offset);
  j.act = a.act;
  if (a.flags & MCL_CONV_RESIDUAL) {
    j.residual = spm + a.residual.offset;
    j.res_row_stride = a.residual.row_stride;
    j.res_pixel_stride = a.residual.pixel_stride;
  }
  j.in_zp = a.input_zero_point;
  j.out_zp = a.output_zero_point;
  j.out_min = a.output_min;
  j.out_max = a.output_max;
  j.nblocks = l.nblocks;
  j.channels_padded = l.channels_padded;
  if (a.flags & MCL_CONV_WINOGRAD) // reads the tile by its geometry: no table, no pad row
    return run_winograd(exec, a, j);
  // INT8 3x3 calls the host computes exactly and faster as integer Winograd: the same bytes
  // as the direct kernels (int8_winograd.h), so a host-side choice the record does not name.
  if (l.int8 && int8_kernels_for(isa).winograd &&
      int8_winograd_exact(fn, a, j.weight_zero_points != nullptr) && int8_winograd_pays(a))
    return run_int8_winograd(exec, a, j, int8_kernels_for(isa).winograd);

  const ConvGeometry geometry{a.kernel_h,   a.kernel_w,   a.stride_h,         a.stride_w,
                              a.dilation_h, a.dilation_w, a.origin_y,         a.origin_x,
                              a.input.h,    a.input.w,    a.input.row_stride, a.input.pixel_stride};
  TableCache::Table derived_table; // kept alive until the tasks are done
  WideInput wide;                  // likewise
  // Binary16 input with a table derived from the geometry: widened once here to float (the
  // tile, then a zero pad row after it), so the kernels run the FP32 loops on it with the
  // binary16 weights converted at load. The kernels otherwise convert every input element
  // once per tap and panel that reads it. Same float values, same sums: same results.
  // A stored table may address anything in the SPM: that case keeps converting in place.
  // Depthwise too: it reads each input element only taps times, and the float copy of its
  // large tiles cost more memory traffic than the conversions it saved (MobileNetV2: +11 %).
  const mcl_tile &t = a.input;
  const uint64_t span =
      (uint64_t)(t.h - 1) * t.row_stride + (uint64_t)(t.w - 1) * t.pixel_stride + t.c; // elements
  const uint64_t pad_at = align_up(span, kPanelWidth);
  if (a.input.dtype == MCL_DTYPE_F16 && (a.flags & (MCL_CONV_NO_TABLE | MCL_CONV_IMPLICIT_TABLE)) &&
      !l.depthwise && pad_at + t.c <= (uint64_t)INT32_MAX) {
    wide.buffer = wide_buffers.take(pad_at + t.c);
    float *dst = wide.buffer.data();
    const uint16_t *src = reinterpret_cast<const uint16_t *>(spm + t.offset);
    // Only the pixels the taps can address: a call often computes a band of output rows of a
    // larger input tile, and strided 1x1 kernels skip rows and columns.
    const bool transposed = fn == MCL_NATIVE_FN_CONV_TRANSPOSE2D;
    const int64_t y_first = transposed ? 0 : std::max<int64_t>(0, a.origin_y);
    const int64_t y_last =
        transposed ? t.h - 1
                   : std::min<int64_t>(t.h - 1, (int64_t)a.origin_y +
                                                    (int64_t)(a.output.h - 1) * a.stride_h +
                                                    (int64_t)(a.kernel_h - 1) * a.dilation_h);
    const int64_t x_first = transposed ? 0 : std::max<int64_t>(0, a.origin_x);
    const int64_t x_last =
        transposed ? t.w - 1
                   : std::min<int64_t>(t.w - 1, (int64_t)a.origin_x +
                                                    (int64_t)(a.output.w - 1) * a.stride_w +
                                                    (int64_t)(a.kernel_w - 1) * a.dilation_w);
    const bool skip_rows = !transposed && a.kernel_h == 1 && a.stride_h > 1;
    const bool skip_cols = !transposed && a.kernel_w == 1 && a.stride_w > 1;
    for (int64_t y = y_first; y <= y_last; ++y) {
      if (skip_rows && (y - a.origin_y) % a.stride_h != 0)
        continue;
      const uint64_t row = (uint64_t)y * t.row_stride;
      if (skip_cols) {
        for (int64_t x = x_first; x <= x_last; ++x)
          if ((x - a.origin_x) % a.stride_w == 0)
            isa.widen_halves(src + row + (uint64_t)x * t.pixel_stride, t.c,
                             dst + row + (uint64_t)x * t.pixel_stride);
      } else if (x_first <= x_last) {
        const uint64_t x0 = row + (uint64_t)x_first * t.pixel_stride;
        isa.widen_halves(src + x0, (uint32_t)((x_last - x_first) * t.pixel_stride + t.c), dst + x0);
      }
    }
    std::fill_n(dst + pad_at, t.c, 0.0f);
    j.in = reinterpret_cast<const uint8_t *>(dst);
    j.in_widened = true;
    if (!(a.flags & MCL_CONV_NO_TABLE)) {
      std::memset(spm + a.pad_row_offset, 0, (size_t)a.input.c * esize); // as the other paths
      derived_table = table_cache.get(fn, a, (int64_t)pad_at);
    } else {
      derived_table = table_cache.get(fn, a, 0);
    }
    j.table = derived_table->data();
  } else if (a.flags & MCL_CONV_NO_TABLE) {
    // Validation guaranteed every tap is inside the tile: the table follows the geometry.
    derived_table = table_cache.get(fn, a, 0);
    j.table = derived_table->data();
    if (fn != MCL_NATIVE_FN_CONV_TRANSPOSE2D)
      j.geometry = &geometry;
  } else {
    // The pad row: the value every padding tap reads (0, or the input zero point).
    uint8_t *pad = spm + a.pad_row_offset;
    if (is_int8(a.input.dtype))
      std::memset(pad, (uint8_t)a.input_zero_point, a.input.c);
    else
      std::memset(pad, 0, (size_t)a.input.c * esize);
    if (a.flags & MCL_CONV_IMPLICIT_TABLE) {
      // Derived from the validated geometry: every entry is inside the tile or the pad row.
      derived_table = table_cache.get(fn, a, pad_row_delta(a));
      j.table = derived_table->data();
      if (fn != MCL_NATIVE_FN_CONV_TRANSPOSE2D)
        j.geometry = &geometry;
    } else {
      j.table = reinterpret_cast<const int32_t *>(spm + a.table_offset);
    }
    if (!(a.flags & MCL_CONV_IMPLICIT_TABLE) && (exec.flags & MCL_NATIVE_EXEC_CHECKED)) {
      // Every entry must address input.c elements inside the SPM.
      const int64_t lo = -(int64_t)(a.input.offset / esize);
      const int64_t hi = (int64_t)((exec.spm_size - a.input.offset) / esize) - a.input.c;
      const size_t n = (size_t)m_total * l.taps;
      for (size_t i = 0; i < n; ++i)
        if (j.table[i] < lo || j.table[i] > hi)
          return Status::Error(MCL_NATIVE_ERR_BAD_TABLE,
                               "conv address table entry " + std::to_string(i) + " (" +
                                   std::to_string(j.table[i]) + ") is outside the SPM");
    }
  }

  const uint32_t pes = std::max<uint32_t>(1, exec.pe_count);
  if (l.depthwise) {
    // Whole blocks of 8 pixels per task (the widest pixel block of the kernels).
    const uint32_t chunk = ((m_total + 4 * pes - 1) / (4 * pes) + 7) / 8 * 8;
    const uint32_t tasks = (m_total + chunk - 1) / chunk;
    const Int8Kernels &int8_isa = int8_kernels_for(isa);
    parallel_for(exec, tasks, [&](uint32_t task) {
      ConvRange r{0,       task * chunk, std::min(m_total, (task + 1) * chunk), 0, 0, nullptr,
                  nullptr, nullptr};
      if (l.int8)
        int8_isa.depthwise(j, r);
      else
        isa.depthwise(j, r);
    });
    return Status::Ok();
  }

  // Panels per task such that a task's weights stay in the host L2 cache; with a large K
  // (A packed per K-chunk, see conv_float_impl) at least kPackedPanels, which reuse the packed
  // rows.
  const uint64_t panel_bytes = l.group_stride / std::max<uint32_t>(1, l.nblocks);
  const bool packs_rows = !l.int8 && conv_float_packs_rows(l.taps, l.cin_g);
  const uint32_t min_panels = packs_rows ? std::min(kPackedPanels, l.nblocks) : 1;
  // Packed rows: what stays in L2 is one K-chunk of each panel (the chunks stream through),
  // and every packed row block serves all the task's panels.
  const uint64_t resident_panel_bytes =
      packs_rows ? std::min<uint64_t>(panel_bytes, (uint64_t)kPackK * kPanelWidth * esize)
                 : panel_bytes;
  const uint32_t nb_chunk = (uint32_t)std::clamp<uint64_t>(
      (256u << 10) / std::max<uint64_t>(1, resident_panel_bytes), min_panels, l.nblocks);
  const uint32_t n_chunks = (l.nblocks + nb_chunk - 1) / nb_chunk;
  const uint32_t mr = (uint32_t)isa.rows;
  const uint32_t want_m_chunks =
      std::max<uint32_t>(1, 4 * pes / std::max<uint32_t>(1, l.groups * n_chunks));
  uint32_t m_chunk = (m_total + want_m_chunks - 1) / want_m_chunks;
  m_chunk = std::min<uint32_t>(m_chunk, kMaxTaskRows);
  m_chunk = std::max<uint32_t>(mr, (m_chunk + mr - 1) / mr * mr);
  const uint32_t m_chunks = (m_total + m_chunk - 1) / m_chunk;
  const uint32_t tasks = l.groups * n_chunks * m_chunks;
  const size_t scratch_words = (size_t)kMaxRows * int8_row_scratch_words(l.taps, l.cin_g);
  const bool int8 = l.int8;
  const Int8Kernels &int8_isa = int8_kernels_for(isa);
  parallel_for(exec, tasks, [&](uint32_t task) {
    const uint32_t mc = task % m_chunks, rest = task / m_chunks;
    const uint32_t nc = rest % n_chunks, g = rest / n_chunks;
    ConvRange r{g,
                mc * m_chunk,
                std::min(m_total, (mc + 1) * m_chunk),
                nc * nb_chunk,
                std::min(l.nblocks, (nc + 1) * nb_chunk),
                nullptr,
                nullptr,
                nullptr};
    if (int8) {
      r.scratch = scratch_for_this_thread(scratch_words).data();
      int8_isa.conv(j, r);
    } else if (packs_rows) {
      // The last row block writes a full MR rows: round_up(rows, MR) < rows + kMaxRows.
      const size_t rows = (size_t)(r.m_end - r.m_begin) + kMaxRows;
      std::vector<float> &buffer = float_scratch_for_this_thread(
          rows * kPanelWidth * (r.nb_end - r.nb_begin) + (size_t)kMaxRows * kPackK);
      r.acc = buffer.data();
      r.apack = buffer.data() + rows * kPanelWidth * (r.nb_end - r.nb_begin);
      isa.conv_float(j, r);
    } else {
      isa.conv_float(j, r); // no partial sums or packed rows: the direct path
    }
  });
  return Status::Ok();
}

Status run_gemm(const mcl_native_exec &exec, const mcl_gemm_args &g) {
  return run_conv(exec, MCL_NATIVE_FN_CONV2D, gemm_as_conv(g));
}

} // namespace manycl::native

using namespace manycl::native;

extern "C" {

size_t mcl_native_conv_table_size(const mcl_conv_args *a) {
  if (!a)
    return 0;
  return (size_t)a->output.h * a->output.w * a->kernel_h * a->kernel_w;
}

int mcl_native_plan_conv(uint32_t fn, const mcl_conv_args *a, int32_t *table, size_t entries) {
  if (!a || !table || (fn != MCL_NATIVE_FN_CONV2D && fn != MCL_NATIVE_FN_CONV_TRANSPOSE2D))
    return MCL_NATIVE_ERR_BAD_ARGS;
  if (a->stride_h == 0 || a->stride_w == 0 || a->kernel_h == 0 || a->kernel_w == 0 ||
      dtype_size(a->input.dtype) == 0 || a->output.w == 0)
    return MCL_NATIVE_ERR_BAD_ARGS;
  if (entries < mcl_native_conv_table_size(a))
    return MCL_NATIVE_ERR_BAD_SIZE;
  if (((int64_t)a->pad_row_offset - (int64_t)a->input.offset) % dtype_size(a->input.dtype) != 0)
    return MCL_NATIVE_ERR_BAD_ARGS;
  fill_table(fn, *a, pad_row_delta(*a), 0, a->output.h * a->output.w, table);
  return MCL_NATIVE_OK;
}

size_t mcl_native_conv_params_size(uint32_t fn, const mcl_conv_args *a) {
  if (!a || a->groups == 0 || dtype_size(a->input.dtype) == 0)
    return 0;
  return (size_t)conv_params_size(fn, *a);
}

int mcl_native_pack_conv(uint32_t fn, const mcl_conv_args *a, const void *weights, const void *bias,
                         const mcl_weight_quant *quant, void *out, size_t out_size) {
  if (!a || !weights || !out || a->groups == 0 || a->input.c % a->groups != 0 ||
      a->output.c % a->groups != 0)
    return MCL_NATIVE_ERR_BAD_ARGS;
  const ParamLayout l = param_layout(fn, *a);
  if (out_size < l.total)
    return MCL_NATIVE_ERR_BAD_SIZE;
  if (l.int8 && (!quant || !quant->weight_scales ||
                 (quant->weight_scale_count != 1 && quant->weight_scale_count != a->output.c)))
    return MCL_NATIVE_ERR_BAD_ARGS;
  uint8_t *dst = static_cast<uint8_t *>(out);
  std::memset(dst, 0, l.total);
  const uint32_t in_dtype = a->input.dtype;
  const bool keep_weight_zps = l.weight_zp_offset != 0;
  auto out_channel = [&](uint32_t g, uint32_t co) { return g * l.cout_g + co; };
  auto weight_zp = [&](uint32_t oc) -> int32_t {
    return quant->weight_zero_points
               ? quant->weight_zero_points[quant->weight_scale_count == 1 ? 0 : oc]
               : 0;
  };
  auto weight_value = [&](uint32_t g, uint32_t co, uint32_t ci, uint32_t t) -> int64_t {
    const uint64_t idx = onnx_weight_index(fn, l, g, co, ci, t);
    if (in_dtype == MCL_DTYPE_F32) {
      float f = static_cast<const float *>(weights)[idx];
      uint32_t bits;
      std::memcpy(&bits, &f, 4);
      return bits;
    }
    if (in_dtype == MCL_DTYPE_F16)
      return static_cast<const uint16_t *>(weights)[idx];
    // INT8: w - w_zero_point (the kernels' value); the stored byte is below.
    return (int64_t) static_cast<const int8_t *>(weights)[idx] - weight_zp(out_channel(g, co));
  };
  // INT8 bytes: w - w_zero_point, or w itself when the block keeps the zero points.
  bool int8_out_of_range = false;
  auto store_weight = [&](uint64_t element, int64_t v, uint32_t oc) {
    if (l.int8) {
      const int64_t b = keep_weight_zps ? v + weight_zp(oc) : v;
      int8_out_of_range |= b < -128 || b > 127;
      dst[element] = (uint8_t)(int8_t)b;
    } else if (in_dtype == MCL_DTYPE_F32) {
      uint32_t bits = (uint32_t)v;
      std::memcpy(dst + element * 4, &bits, 4);
    } else {
      uint16_t h = (uint16_t)(int16_t)v;
      std::memcpy(dst + element * 2, &h, 2);
    }
  };
  if (l.depthwise) {
    for (uint32_t c = 0; c < a->output.c; ++c)
      for (uint32_t t = 0; t < l.taps; ++t)
        store_weight((uint64_t)t * l.channels_padded + c, weight_value(c, 0, 0, t), c);
  } else {
    const uint64_t group_elems = l.group_stride / dtype_size(in_dtype);
    const uint64_t quads = int8_padded_k(l.taps, l.cin_g) / 4;
    for (uint32_t g = 0; g < l.groups; ++g)
      for (uint32_t co = 0; co < l.cout_g; ++co) {
        const uint32_t nb = co / kPanelWidth, lane = co % kPanelWidth;
        for (uint32_t t = 0; t < l.taps; ++t)
          for (uint32_t ci = 0; ci < l.cin_g; ++ci) {
            uint64_t e;
            if (l.int8) { // [nb][k/4][16][4] with k = t*cin_g + ci (int8_conv.h)
              const uint64_t k = (uint64_t)t * l.cin_g + ci;
              e = (((uint64_t)nb * quads + k / 4) * kPanelWidth + lane) * 4 + k % 4;
            } else { // [nb][t][ci][16]
              e = (((uint64_t)nb * l.taps + t) * l.cin_g + ci) * kPanelWidth + lane;
            }
            store_weight(g * group_elems + e, weight_value(g, co, ci, t), out_channel(g, co));
          }
      }
  }
  if (int8_out_of_range)
    return MCL_NATIVE_ERR_BAD_ARGS; // needs MCL_CONV_WEIGHT_ZERO_POINTS
  // Bias and multipliers, in the padded channel order of the panels.
  for (uint32_t g = 0; g < l.groups; ++g)
    for (uint32_t co = 0; co < l.cout_g; ++co) {
      const uint32_t oc = out_channel(g, co);
      const uint64_t slot = l.depthwise ? oc : (uint64_t)g * l.nblocks * kPanelWidth + co;
      if (l.int8) {
        int32_t b = bias ? static_cast<const int32_t *>(bias)[oc] : 0;
        if (!l.depthwise) { // the kernels multiply bytes u = x (+128 for S8): see int8_conv.h
          uint32_t sum = 0;
          for (uint32_t t = 0; t < l.taps; ++t)
            for (uint32_t ci = 0; ci < l.cin_g; ++ci)
              sum += (uint32_t)weight_value(g, co, ci, t);
          b = (int32_t)((uint32_t)b -
                        (uint32_t)int8_unsigned_zero_point(in_dtype, a->input_zero_point) * sum);
        }
        std::memcpy(dst + l.bias_offset + slot * 4, &b, 4);
        if (keep_weight_zps) {
          const int32_t z = weight_zp(oc);
          std::memcpy(dst + l.weight_zp_offset + slot * 4, &z, 4);
        }
        const float ws = quant->weight_scales[quant->weight_scale_count == 1 ? 0 : oc];
        float m = quant->input_scale * ws / quant->output_scale;
        std::memcpy(dst + l.mult_offset + slot * 4, &m, 4);
      } else {
        float b = bias ? static_cast<const float *>(bias)[oc] : 0.0f;
        std::memcpy(dst + l.bias_offset + slot * 4, &b, 4);
      }
    }
  return MCL_NATIVE_OK;
}

size_t mcl_native_gemm_params_size(const mcl_gemm_args *g) {
  if (!g)
    return 0;
  mcl_conv_args c = gemm_as_conv(*g);
  return mcl_native_conv_params_size(MCL_NATIVE_FN_CONV2D, &c);
}

int mcl_native_pack_gemm(const mcl_gemm_args *g, const void *b, int trans_b, const void *bias,
                         const mcl_weight_quant *quant, void *out, size_t out_size) {
  if (!g || !b)
    return MCL_NATIVE_ERR_BAD_ARGS;
  const uint32_t esize = dtype_size(g->input.dtype);
  if (esize == 0)
    return MCL_NATIVE_ERR_BAD_ARGS;
  const uint32_t K = g->input.c, N = g->output.c;
  // Conv weights are [N][K]: transpose B when it is K x N.
  std::vector<uint8_t> nk((size_t)N * K * esize);
  const uint8_t *src = static_cast<const uint8_t *>(b);
  for (uint32_t n = 0; n < N; ++n)
    for (uint32_t k = 0; k < K; ++k) {
      size_t from = trans_b ? (size_t)n * K + k : (size_t)k * N + n;
      std::memcpy(&nk[((size_t)n * K + k) * esize], src + from * esize, esize);
    }
  mcl_conv_args c = gemm_as_conv(*g);
  return mcl_native_pack_conv(MCL_NATIVE_FN_CONV2D, &c, nk.data(), bias, quant, out, out_size);
}

const char *mcl_native_isa(void) {
  return active_kernels().name;
}

int mcl_native_set_isa(const char *name) {
  const IsaKernels *k = kernels_by_name(name);
  if (!k)
    return MCL_NATIVE_ERR_BAD_ARGS;
  g_selected = k;
  return MCL_NATIVE_OK;
}

uint32_t mcl_native_dtype_size(uint32_t dtype) {
  return dtype_size(dtype);
}

} // extern "C"

namespace manycl::native::cost {

namespace {

// Winograd F(4x4, 3x3) in four phases: the weights' transform (G g G^T, once per call: each
// PE transforms the output channels it multiplies), the inputs' transform (B^T d B per 4x4
// output block and channel, from a 6x6 patch), 36 GEMMs of (blocks x C) . (C x K) on the
// matrix engine, and the outputs' transform (A^T M A) with the epilogue. Transformed values
// stay in the input's type for the matrix engine; the products are FP32.
Cost winograd_cost(const mcl_conv_args &a, uint32_t pes, double epilogue_ops,
                   uint32_t residual_bytes) {
  const uint32_t dtype = a.input.dtype, in_bytes = dtype_size(dtype);
  const uint64_t cin = a.input.c, cout = a.output.c;
  const uint64_t blocks = ceil_div(a.output.h, kWinogradOut) * ceil_div(a.output.w, kWinogradOut);
  const uint32_t out_bytes = dtype_size(a.output.dtype);
  // Operations per transformed element, counted on the transforms' factored forms.
  constexpr double kWeightOps = 162.0 / 36.0, kInputOps = 192.0 / 36.0, kOutputOps = 140.0 / 16.0;
  const Cost weights = stream(cin * cout * kWinogradPoints,
                              (9.0 / 36.0) * in_bytes + in_bytes, kWeightOps, dtype, pes);
  const Cost inputs = stream(blocks * cin * kWinogradPoints, 2.0 * in_bytes, kInputOps, dtype, pes);
  const MatrixEngine e = matrix_engine(dtype);
  const uint64_t row_blocks = ceil_div(blocks, kBlockRows), col_blocks = ceil_div(cout, kBlockRows);
  const uint64_t mr = std::min<uint64_t>(e.mr, row_blocks), nr = std::min<uint64_t>(e.nr, col_blocks);
  const uint64_t units = kWinogradPoints * ceil_div(row_blocks, mr) * ceil_div(col_blocks, nr);
  const uint64_t k_blocks = ceil_div(cin, e.k_block);
  UnitCost u;
  u.matrix = (double)k_blocks * mr * nr * e.block_cycles / (kMatrixEfficiencyPct / 100.0);
  const double left = (double)ceil_div(cin * e.in_bytes, kLsuBytes) * kBlockRows * mr;
  const double right =
      (double)nr * ceil_div(k_blocks * e.k_block * kBlockRows * e.weight_bytes, kLsuBytes);
  const double tile_elems = (double)mr * nr * kBlockRows * kBlockRows;
  u.load_store = left + right + tile_elems * 4.0 / kLsuBytes;
  u.epilogue = (double)mr * nr * e.acc_move_cycles_per_block;
  u.overhead = (double)kUnitCycles + kTapCycles;
  Cost gemm = finish(units, pes, u);
  gemm.padded_macs = kWinogradPoints * row_blocks * kBlockRows * col_blocks * kBlockRows *
                     k_blocks * e.k_block;
  const Cost outputs =
      stream(blocks * cout * kWinogradOut * kWinogradOut,
             (double)kWinogradPoints / 16.0 * 4.0 + out_bytes + residual_bytes,
             kOutputOps + epilogue_ops, MCL_DTYPE_F32, pes);
  Cost c = sequence(sequence(sequence(weights, inputs), gemm), outputs);
  c.macs = (uint64_t)a.output.h * a.output.w * cout * 9 * cin;
  return c;
}

} // namespace

// Convolution / GEMM on the matrix engine. Output pixels form row blocks of 4 along a row
// (a row of width 13 pays for 16), output channels column blocks of 4, and the reduction
// runs tap by tap over the input channels in blocks of k_block (3 channels pay for a whole
// block). A work unit is a register tile of mr x nr blocks: per tap it loads its pixels'
// channels with 4-row load-scatters (32 bytes of one pixel each), its weights as packed
// 32-byte blocks and its address-table entries, and issues mr*nr block operations per
// channel block. Depthwise convolutions have no reduction to block: they run on the VLIW.
Cost conv_cost(uint32_t fn, const mcl_conv_args &a, uint32_t pes) {
  const uint64_t groups = std::max<uint32_t>(1, a.groups);
  const uint64_t cin_g = a.input.c / groups, cout_g = a.output.c / groups;
  const bool transposed = fn == MCL_NATIVE_FN_CONV_TRANSPOSE2D;
  // A transposed convolution reaches each output pixel through 1/(stride_h*stride_w) of
  // its taps; the others are skipped, not multiplied by zero.
  const uint64_t taps = transposed ? ceil_div(a.kernel_h, std::max<uint16_t>(1, a.stride_h)) *
                                         ceil_div(a.kernel_w, std::max<uint16_t>(1, a.stride_w))
                                   : (uint64_t)a.kernel_h * a.kernel_w;
  const uint64_t pixels = (uint64_t)a.output.h * a.output.w;
  const uint32_t out_bytes = dtype_size(a.output.dtype);
  const bool int8 = is_int8(a.input.dtype);
  // Epilogue work per output element: bias, activation, and the conversion to the output
  // type (INT8: scale, round, zero point, clamp); a fused residual is one more add of an
  // element loaded from the SPM (and widened when binary16).
  const bool residual = (a.flags & MCL_CONV_RESIDUAL) != 0;
  const double residual_ops = residual ? (a.output.dtype == MCL_DTYPE_F16 ? 2.0 : 1.0) : 0.0;
  const double epilogue_ops = 1.0 + activation_ops(a.act) + (int8 ? 4.0 : 0.0) +
                              (a.output.dtype == MCL_DTYPE_F16 ? 1.0 : 0.0) + residual_ops;
  const uint32_t residual_bytes = residual ? out_bytes : 0;
  if (a.flags & MCL_CONV_WINOGRAD)
    return winograd_cost(a, pes, epilogue_ops, residual_bytes);
  Cost c;
  if (conv_is_depthwise(a)) {
    // Vectors across channels; a row of outputs slides its window in registers, so each
    // output loads kernel_h input vectors (times the horizontal stride) and stores one.
    const uint32_t in_bytes = dtype_size(a.input.dtype);
    const double bytes = (double)a.kernel_h * std::max<uint16_t>(1, a.stride_w) * in_bytes +
                         out_bytes + residual_bytes;
    const double ops = (double)taps + epilogue_ops;
    c = stream(pixels * a.output.c, bytes, ops, a.input.dtype, pes);
    c.macs = c.padded_macs = pixels * a.output.c * taps;
    return c;
  }
  const MatrixEngine e = matrix_engine(a.input.dtype);
  const uint64_t row_blocks = (uint64_t)a.output.h * ceil_div(a.output.w, kBlockRows);
  const uint64_t col_blocks = ceil_div(cout_g, kBlockRows);
  const uint64_t mr = std::min<uint64_t>(e.mr, row_blocks),
                 nr = std::min<uint64_t>(e.nr, col_blocks);
  const uint64_t units = groups * ceil_div(row_blocks, mr) * ceil_div(col_blocks, nr);
  const uint64_t k_blocks = ceil_div(cin_g, e.k_block);            // per tap
  const uint64_t panels = ceil_div(cin_g * e.in_bytes, kLsuBytes); // 32-byte loads per pixel
  UnitCost u;
  const double eff = kMatrixEfficiencyPct / 100.0;
  u.matrix = (double)taps * k_blocks * mr * nr * e.block_cycles / eff;
  const double left = (double)panels * kBlockRows * mr; // load-scatters of the pixels
  const double right =
      (double)nr * ceil_div(k_blocks * e.k_block * kBlockRows * e.weight_bytes, kLsuBytes);
  // One scalar load per pixel and tap from the address table ([pixel][tap]: strided).
  const double addresses = (a.flags & MCL_CONV_NO_TABLE) ? 0.0 : (double)kBlockRows * mr;
  const double tile_elems = (double)mr * nr * kBlockRows * kBlockRows;
  u.load_store = (double)taps * (left + right + addresses) +
                 tile_elems * (out_bytes + residual_bytes) / kLsuBytes;
  u.epilogue = (double)mr * nr * e.acc_move_cycles_per_block +
               tile_elems * epilogue_ops / vliw_rate(MCL_DTYPE_F32);
  u.overhead = (double)kUnitCycles + (double)taps * kTapCycles;
  c = finish(units, pes, u);
  c.macs = pixels * a.output.c * taps * cin_g;
  c.padded_macs =
      groups * row_blocks * kBlockRows * col_blocks * kBlockRows * taps * k_blocks * e.k_block;
  return c;
}

} // namespace manycl::native::cost
