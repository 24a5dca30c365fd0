// oneDNN's convolution primitive as the kernel of hjit's int_conv2d where it runs on AMX's tile
// unit (brgconv:avx512_core_amx_int8), which Halide 14 cannot drive at speed (docs/low-precision.md):
// u8 activations, s8 weights, s32 sums starting at minus the per-channel offsets. A call computes
// a part of the output rows of some images, all their channels and columns, planned once per
// shape. The built-in schedule stores the packed input and the sums channels innermost, which is
// oneDNN's nhwc: a call then reads and writes them where they lie, rows of one image at a time.
// Built into the kernels' object (providers/provider.h) when hjit was built with oneDNN: nothing of
// hjit's but kernel_abi.h.
#include <algorithm>
#include <array>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <vector>

#include "halide_backend/providers/kernels/onednn_calls.h"

namespace {

using namespace hjit::kernels;
using dnnl::memory;
using dt = memory::data_type;
using tag = memory::format_tag;

// One call's problem: `rows` output rows of one image (from `in_rows` input rows), all its
// channels and columns, and how hjit's weights lie: [O/B, C/4, KH, KW, B, 4], the strides of its
// four outer dimensions.
struct ConvShape {
  int64_t c4, in_rows, width, channels, block, kh, kw, sy, sx, dy, dx, rows;
  std::array<int64_t, 4> weight_strides;
  int64_t out_width() const { return (width - (kw - 1) * dx - 1) / sx + 1; }
  auto operator<=>(const ConvShape&) const = default;
};

// hjit's weights as oneDNN's blocked memory of dims {O, C, KH, KW}: O blocked by B, then C by 4,
// innermost. No format tag names this layout; oneDNN 2's descriptor is a public struct.
memory::desc hjit_weights(const ConvShape& s) {
  dnnl_memory_desc_t d;
  const dnnl_dims_t dims = {s.channels, s.c4 * 4, s.kh, s.kw};
  if (dnnl_memory_desc_init_by_tag(&d, 4, dims, dnnl_s8, dnnl_abcd) != dnnl_success) return {};
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  for (int i = 0; i < 4; ++i) b.strides[i] = s.weight_strides[size_t(i)];
  b.inner_nblks = 2;
  b.inner_blks[0] = s.block, b.inner_idxs[0] = 0;
  b.inner_blks[1] = 4, b.inner_idxs[1] = 1;
  return memory::desc(d);
}

// The primitive, the reorder of hjit's weights into the layout it picks, and its operands: nhwc
// rows of one image (the batch stride is never used), the offsets as an s32 bias.
struct ConvPlan {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::convolution_forward conv;
  dnnl::reorder pack;
  memory::desc src, dst, bias, user_weights, weights, scratchpad, pack_scratchpad;
  uint64_t weights_fingerprint = 0;
  bool amx = false;

  explicit ConvPlan(const ConvShape& s) {
    const int64_t c = s.c4 * 4;
    src = memory::desc({1, c, s.in_rows, s.width}, dt::u8, tag::nhwc);
    dst = memory::desc({1, s.channels, s.rows, s.out_width()}, dt::s32, tag::nhwc);
    bias = memory::desc({s.channels}, dt::s32, tag::a);
    user_weights = hjit_weights(s);
    dnnl::primitive_attr attr;
    attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);  // (each thread brings its own)
    const memory::desc any({s.channels, c, s.kh, s.kw}, dt::s8, tag::any);
    const dnnl::convolution_forward::primitive_desc pd(
        dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, dnnl::algorithm::convolution_direct, src, any, bias, dst,
                                        {s.sy, s.sx}, {s.dy - 1, s.dx - 1}, {0, 0}, {0, 0}),
        attr, engine);
    weights = pd.weights_desc();
    weights_fingerprint = fingerprint(weights);
    scratchpad = pd.scratchpad_desc();
    conv = dnnl::convolution_forward(pd);
    const dnnl::reorder::primitive_desc rpd(engine, user_weights, engine, weights, attr);
    pack_scratchpad = rpd.scratchpad_desc();
    pack = dnnl::reorder(rpd);
    amx = std::strstr(pd.impl_info_str(), "amx") != nullptr;
  }
};

ConvPlan& plan_for(const ConvShape& shape) {
  static std::mutex mu;
  static std::map<ConvShape, std::unique_ptr<ConvPlan>> plans;
  std::lock_guard lock(mu);
  std::unique_ptr<ConvPlan>& p = plans[shape];
  if (!p) p = std::make_unique<ConvPlan>(shape);
  return *p;
}

// The problem sizes the pipeline passes, in its order.
struct Problem {
  int32_t c4, height, width, channels, block, kh, kw, sy, sx, dy, dx;
  int64_t out_rows() const { return (height - (kh - 1) * dy - 1) / sy + 1; }
  int64_t out_width() const { return (width - (kw - 1) * dx - 1) / sx + 1; }
  ConvShape shape(int64_t rows, std::array<int64_t, 4> weight_strides) const {
    return ConvShape{c4, (rows - 1) * sy + (kh - 1) * dy + 1, width, channels, block, kh, kw, sy, sx, dy, dx, rows, weight_strides};
  }
  std::array<int64_t, 4> dense_weight_strides() const {
    const int64_t kw_stride = int64_t(block) * 4;
    return {int64_t(c4) * kh * kw * kw_stride, int64_t(kh) * kw * kw_stride, kw * kw_stride, kw_stride};
  }
  bool valid() const {
    return c4 > 0 && height > 0 && width > 0 && channels > 0 && block > 0 && channels % block == 0 && kh > 0 && kw > 0 && sy > 0 &&
           sx > 0 && dy > 0 && dx > 0 && out_rows() > 0 && out_width() > 0;
  }
};

// Rows of one image of x (Halide order (4, W, H, C/4[, N])) as they lie: channels blocked by 4,
// innermost, the rest as x's strides say (hjit's own [N, C/4, H, W, 4], dense, by default).
memory::desc laid_out(const halide_buffer_t* x, int64_t channels, int64_t rows, int64_t width) {
  dnnl_memory_desc_t d;
  const dnnl_dims_t dims = {1, channels, rows, width};
  if (dnnl_memory_desc_init_by_tag(&d, 4, dims, dnnl_u8, dnnl_abcd) != dnnl_success) return {};
  dnnl_blocking_desc_t& b = d.format_desc.blocking;
  b.strides[0] = channels * rows * width;  // (one image: never used)
  b.strides[1] = x->dim[3].stride, b.strides[2] = x->dim[2].stride, b.strides[3] = x->dim[1].stride;
  b.inner_nblks = 1;
  b.inner_blks[0] = 4, b.inner_idxs[0] = 1;
  return memory::desc(d);
}

// The output region [y0, y0 + m) rows x all columns and channels of images [n0, n0 + nn) of x (Halide order (4, W, H,
// C/4, N)) convolved with w ((4, B, KW, KH, C/4, O/B)) into out ((OW, OH, O, N)), starting at
// -offsets. Where x's rows or the region's of out do not lie as nhwc rows, they are copied through
// a buffer of that layout; a region of a part of the columns or channels is computed whole and
// copied (the built-in schedule asks for neither).
int int_conv(const Problem& pb, halide_buffer_t* x, halide_buffer_t* w, halide_buffer_t* offsets, halide_buffer_t* packed,
             halide_buffer_t* out) {
  // The region asked for, less what lies past the output (a last part of a split that does not
  // divide the rows, rounded up: nothing reads those elements).
  auto clamped = [](int32_t min, int32_t extent, int64_t size) {
    const int32_t lo = std::max<int32_t>(min, 0), hi = int32_t(std::min<int64_t>(int64_t(min) + extent, size));
    return std::pair<int32_t, int32_t>{lo, std::max(hi - lo, 0)};
  };
  const auto [x0, ow] = clamped(out->dim[0].min, out->dim[0].extent, pb.out_width());
  const auto [y0, m] = clamped(out->dim[1].min, out->dim[1].extent, pb.out_rows());
  const auto [c0, oc] = clamped(out->dim[2].min, out->dim[2].extent, pb.channels);
  const int32_t n0 = out->dim[3].min, nn = out->dim[3].extent;
  const int64_t in_y0 = int64_t(y0) * pb.sy, in_rows = (int64_t(m) - 1) * pb.sy + (pb.kh - 1) * pb.dy + 1;
  if (!x->host || !w->host || !offsets->host || !packed->host || !out->host) {
    if (!x->host) {
      const int32_t extents[5] = {4, pb.width, int32_t(m > 0 ? in_rows : 0), pb.c4, nn}, mins[5] = {0, 0, int32_t(in_y0), 0, n0};
      for (int d = 0; d < 5; ++d) x->dim[d].min = mins[d], x->dim[d].extent = extents[d];
    }
    if (!w->host) {
      const int32_t extents[6] = {4, pb.block, pb.kw, pb.kh, pb.c4, pb.channels / pb.block};
      for (int d = 0; d < 6; ++d) w->dim[d].min = 0, w->dim[d].extent = extents[d];
    }
    if (!offsets->host) offsets->dim[0].min = 0, offsets->dim[0].extent = pb.channels;
    if (!packed->host) packed->dim[0].min = 0, packed->dim[0].extent = int32_t(sizeof(PackedHeader));  // (the whole is passed)
    return 0;
  }
  if (m <= 0 || ow <= 0 || oc <= 0 || nn <= 0) return 0;
  if (w->dim[0].stride != 1 || w->dim[1].stride != 4 || x->dim[0].stride != 1) return -1;
  const ConvShape shape = pb.shape(m, {w->dim[5].stride, w->dim[4].stride, w->dim[3].stride, w->dim[2].stride});
  const int64_t c = int64_t(pb.c4) * 4, width = pb.width, out_w = pb.out_width();
  // x's rows as nhwc: channels in fours, then columns, then rows, all of them dense.
  const bool src_direct = x->dim[3].stride == 4 && x->dim[1].stride == c && x->dim[2].stride == c * width && x->dim[1].min == 0 &&
                          x->dim[1].extent == width;
  const bool dst_direct = out->dim[2].stride == 1 && out->dim[0].stride == pb.channels && out->dim[1].stride == out_w * pb.channels &&
                          x0 == 0 && ow == out_w && c0 == 0 && oc == pb.channels;
  const OneThread one_thread;
  try {
    ConvPlan& plan = plan_for(shape);
    dnnl::stream stream(plan.engine);
    memory scratchpad = held(kScratchpad, plan.scratchpad, plan.engine);
    memory weights;
    if (const void* ready = packed_for(packed, plan.weights, plan.weights_fingerprint, c * pb.kh * pb.kw, pb.channels)) {
      weights = memory(plan.weights, plan.engine, const_cast<void*>(ready));
    } else {
      weights = held(kWeightsOrProduct, plan.weights, plan.engine);
      memory from(plan.user_weights, plan.engine, w->host), pad = held(kPackScratchpad, plan.pack_scratchpad, plan.engine);
      plan.pack.execute(stream, {{DNNL_ARG_FROM, from}, {DNNL_ARG_TO, weights}, {DNNL_ARG_SCRATCHPAD, pad}});
    }
    // hjit's sums start at minus the offsets; oneDNN adds its bias.
    thread_local std::vector<int32_t> bias;
    bias.resize(size_t(pb.channels));
    for (int32_t o = 0; o < pb.channels; ++o) bias[size_t(o)] = -*at<int32_t>(offsets, {o});
    memory bias_memory(plan.bias, plan.engine, bias.data());
    memory src_copy = src_direct ? memory() : held(kSource, plan.src, plan.engine);
    memory dst_copy = dst_direct ? memory() : held(kResult, plan.dst, plan.engine);
    for (int32_t n = n0; n < n0 + nn; ++n) {
      memory src = src_direct ? memory(plan.src, plan.engine, at<uint8_t>(x, {0, 0, in_y0, 0, n})) : src_copy;
      if (!src_direct) {
        memory from(laid_out(x, c, in_rows, width), plan.engine, at<uint8_t>(x, {0, 0, in_y0, 0, n}));
        dnnl::reorder(from, src_copy).execute(stream, from, src_copy);
      }
      memory dst = dst_direct ? memory(plan.dst, plan.engine, at<int32_t>(out, {0, y0, 0, n})) : dst_copy;
      plan.conv.execute(stream, {{DNNL_ARG_SRC, src}, {DNNL_ARG_WEIGHTS, weights}, {DNNL_ARG_BIAS, bias_memory}, {DNNL_ARG_DST, dst},
                                 {DNNL_ARG_SCRATCHPAD, scratchpad}});
      if (!dst_direct) {
        stream.wait();
        const auto* from = static_cast<const int32_t*>(dst_copy.get_data_handle());
        for (int32_t r = 0; r < m; ++r)
          for (int32_t col = x0; col < x0 + ow; ++col)
            for (int32_t ch = c0; ch < c0 + oc; ++ch)
              *at<int32_t>(out, {col, y0 + r, ch, n}) = from[(int64_t(r) * out_w + col) * pb.channels + ch];
      }
    }
    stream.wait();
  } catch (const std::exception&) {  // dnnl::error, std::bad_alloc
    return -1;
  }
  return 0;
}

}  // namespace

extern "C" int hjit_int_conv_uses_amx(const int32_t* problem) {
  const Problem pb{problem[0], problem[1], problem[2], problem[3], problem[4], problem[5],
                   problem[6], problem[7], problem[8], problem[9], problem[10]};
  if (!pb.valid()) return 0;
  const OneThread one_thread;  // as every call plans
  try {
    return plan_for(pb.shape(pb.out_rows(), pb.dense_weight_strides())).amx ? 1 : 0;
  } catch (const dnnl::error&) {
    return 0;
  }
}

extern "C" int64_t hjit_int_conv_pack_constant(const int32_t* problem, int32_t rows, const void* weights, void* out, int64_t out_bytes) {
  const Problem pb{problem[0], problem[1], problem[2], problem[3], problem[4], problem[5],
                   problem[6], problem[7], problem[8], problem[9], problem[10]};
  if (!pb.valid() || rows <= 0 || rows > pb.out_rows()) return 0;
  const OneThread one_thread;
  try {
    ConvPlan& plan = plan_for(pb.shape(rows, pb.dense_weight_strides()));
    return write_packed(plan.engine, plan.pack, plan.user_weights, plan.weights, plan.weights_fingerprint, plan.pack_scratchpad,
                        int64_t(pb.c4) * 4 * pb.kh * pb.kw, pb.channels, weights, out, out_bytes);
  } catch (const std::exception&) {
    return 0;
  }
}

// hjit's int_conv2d: u8 x [N, C/4, H, W, 4] by s8 w [O/B, C/4, KH, KW, B, 4] into s32 [N, O, OH,
// OW], starting at -offsets [O]; `packed`: w packed when compiling (hjit_int_conv_pack_constant;
// a header whose magic is 0 where it was not). In a bounds query (a host pointer null) it says
// which parts of the operands a region reads.
extern "C" int hjit_extern_int_conv2d(halide_buffer_t* x, halide_buffer_t* w, halide_buffer_t* offsets, halide_buffer_t* packed,
                                      int32_t c4, int32_t height, int32_t width, int32_t channels, int32_t block, int32_t kh,
                                      int32_t kw, int32_t sy, int32_t sx, int32_t dy, int32_t dx, halide_buffer_t* out) {
  const Problem pb{c4, height, width, channels, block, kh, kw, sy, sx, dy, dx};
  if (!pb.valid()) return -1;
  return int_conv(pb, x, w, offsets, packed, out);
}
