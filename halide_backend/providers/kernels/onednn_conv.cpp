// oneDNN's convolutions as kernels: a forward convolution with the post-ops after it, and the
// gradient of its weights, each planned once per shape. Built into the kernels' object
// (providers/provider.h) when hjit was built with oneDNN: nothing of hjit's but kernel_abi.h.
#include <HalideRuntime.h>

#include <algorithm>
#include <array>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include <oneapi/dnnl/dnnl.hpp>

#include "halide_backend/providers/kernel_abi.h"

namespace {

using PostOpKinds = hjit::kernel_abi::PostOpKinds;
using PostOpKind = PostOpKinds::Kind;

}  // namespace

namespace {

using dnnl::memory;
using tag = memory::format_tag;
constexpr auto f32 = memory::data_type::f32;

// A user array (hjit's dense NCHW / OIHW) and, where the primitive wants another layout, its own
// copy with the reorder between them.
struct Operand {
  int arg;      // DNNL_ARG_SRC, ...; for a residual, DNNL_ARG_DST
  bool output;  // written by the primitive: reordered back after it runs
  memory user, internal;
  std::optional<dnnl::reorder> reorder;
  bool residual = false;  // copied into the destination before the primitive adds to it (sum post-op)
};

// One convolution (forward, or the gradient of its weights) of one shape, planned once: oneDNN
// picks its own blocked layouts, and reorders run around the primitive.
struct ConvPlan {
  dnnl::engine engine{dnnl::engine::kind::cpu, 0};
  dnnl::stream stream{engine};
  dnnl::primitive prim;
  std::vector<Operand> operands;
  memory scratchpad;
  std::mutex mu;  // one call at a time uses the plan's buffers

  void add(int arg, bool output, const memory::desc& user, const memory::desc& wanted) {
    Operand o{arg, output, memory(user, engine, nullptr), {}, {}};
    if (wanted != user) {
      o.internal = memory(wanted, engine);
      o.reorder = output ? dnnl::reorder(o.internal, o.user) : dnnl::reorder(o.user, o.internal);
    }
    operands.push_back(std::move(o));
  }
  // The value a sum post-op adds, copied (reordered) into what the primitive writes first.
  void add_residual(const memory::desc& user, const memory::desc& dst) {
    Operand o{DNNL_ARG_DST, false, memory(user, engine, nullptr), {}, {}};
    o.reorder = dnnl::reorder(dnnl::reorder::primitive_desc(engine, user, engine, dst));
    o.residual = true;
    operands.push_back(std::move(o));
  }

  // Runs the primitive on the arrays given in the order the operands were added.
  void run(const std::vector<void*>& data) {
    std::lock_guard lock(mu);
    std::unordered_map<int, memory> args{{DNNL_ARG_SCRATCHPAD, scratchpad}};
    auto it = data.begin();
    for (Operand& o : operands) {
      o.user.set_data_handle(*it++);
      if (o.residual) {
        o.reorder->execute(stream, o.user, args.at(DNNL_ARG_DST));
        continue;
      }
      if (o.reorder && !o.output) o.reorder->execute(stream, o.user, o.internal);
      args[o.arg] = o.reorder ? o.internal : o.user;
    }
    prim.execute(stream, args);
    for (Operand& o : operands)
      if (o.reorder && o.output) o.reorder->execute(stream, o.internal, o.user);
    stream.wait();
  }
};

// The shape of a convolution: NCHW input, OIHW weights, output size, its parameters, and the
// post-ops after it (post_op_code()).
struct ConvShape {
  int64_t n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw;
  int32_t post_ops = 0;
  int32_t layout = 0;  // ConvLayout bits: which of src and dst hjit hands over blocked
  memory::dims src() const { return {n, c, h, w}; }
  memory::dims weights() const { return {o, c, kh, kw}; }
  memory::dims dst() const { return {n, o, oh, ow}; }
  // PyTorch pads both sides alike and drops what does not fill a window: the right padding that
  // gives the same output size. oneDNN counts dilation from 0.
  memory::dims pad_r() const { return {(oh - 1) * sh + (kh - 1) * dh + 1 - h - ph, (ow - 1) * sw + (kw - 1) * dw + 1 - w - pw}; }
  memory::dims dilation() const { return {dh - 1, dw - 1}; }
  // Activations 16-channel blocked where the channels fill whole blocks: oneDNN's own choice here
  // (channels-last) convolves as fast, but its reorders from and to NCHW take three times as long
  // (W8's 3x3 64-channel convolution with both reorders: 2.26 ms against 2.46, Zen 5).
  dnnl::convolution_forward::desc forward(dnnl::prop_kind kind, bool bias = false) const {
    const tag activations = hjit::kernel_abi::blocked_activations(c, o) ? tag::nChw16c : tag::any;
    const memory::desc s(src(), f32, activations), w(weights(), f32, tag::any), d(dst(), f32, activations);
    if (bias)
      return {kind, dnnl::algorithm::convolution_direct, s, w, memory::desc({o}, f32, tag::a), d, {sh, sw}, dilation(), {ph, pw}, pad_r()};
    return {kind, dnnl::algorithm::convolution_direct, s, w, d, {sh, sw}, dilation(), {ph, pw}, pad_r()};
  }
  std::vector<int64_t> key(int kind) const { return {kind, n, c, h, w, o, kh, kw, oh, ow, sh, sw, ph, pw, dh, dw, post_ops, layout}; }
  // The post-ops' kinds, in order.
  std::vector<PostOpKind> post_op_kinds() const {
    std::vector<PostOpKind> out;
    for (int32_t code = post_ops; code; code >>= 3) out.push_back(PostOpKind(code & 7));
    return out;
  }
  int64_t binary_post_ops() const {
    int64_t k = 0;
    for (auto kind : post_op_kinds()) k += kind != PostOpKinds::Relu && kind != PostOpKinds::Sum;
    return k;
  }
  bool sum() const {
    for (auto kind : post_op_kinds())
      if (kind == PostOpKinds::Sum) return true;
    return false;
  }
};

dnnl::post_ops make_post_ops(const ConvShape& s) {
  dnnl::post_ops po;
  const memory::desc per_channel({1, s.o, 1, 1}, f32, tag::nchw);
  for (PostOpKind kind : s.post_op_kinds()) {
    switch (kind) {
      case PostOpKinds::Add: po.append_binary(dnnl::algorithm::binary_add, per_channel); break;
      case PostOpKinds::Sub: po.append_binary(dnnl::algorithm::binary_sub, per_channel); break;
      case PostOpKinds::Mul: po.append_binary(dnnl::algorithm::binary_mul, per_channel); break;
      case PostOpKinds::Div: po.append_binary(dnnl::algorithm::binary_div, per_channel); break;
      case PostOpKinds::Relu: po.append_eltwise(1.0f, dnnl::algorithm::eltwise_relu, 0.0f, 0.0f); break;
      case PostOpKinds::Sum: po.append_sum(1.0f); break;
    }
  }
  return po;
}

enum PlanKind { kForward, kWeightGrad };

std::unique_ptr<ConvPlan> make_plan(const ConvShape& s, PlanKind kind) {
  auto plan = std::make_unique<ConvPlan>();
  dnnl::primitive_attr attr;
  attr.set_scratchpad_mode(dnnl::scratchpad_mode::user);
  const memory::desc src(s.src(), f32, tag::nchw), wts(s.weights(), f32, tag::oihw), dst(s.dst(), f32, tag::nchw);
  if (kind == kForward) {
    attr.set_post_ops(make_post_ops(s));
    using hjit::kernel_abi::kBlockedInput, hjit::kernel_abi::kBlockedOutput;
    const memory::desc src_given(s.src(), f32, s.layout & kBlockedInput ? tag::nChw16c : tag::nchw),
        dst_given(s.dst(), f32, s.layout & kBlockedOutput ? tag::nChw16c : tag::nchw);
    dnnl::convolution_forward::primitive_desc pd(s.forward(dnnl::prop_kind::forward_inference, true), attr, plan->engine);
    plan->prim = dnnl::convolution_forward(pd);
    plan->add(DNNL_ARG_SRC, false, src_given, pd.src_desc());
    plan->add(DNNL_ARG_WEIGHTS, false, wts, pd.weights_desc());
    plan->add(DNNL_ARG_DST, true, dst_given, pd.dst_desc());
    const memory::desc bias({s.o}, f32, tag::a), per_channel({1, s.o, 1, 1}, f32, tag::nchw);
    plan->add(DNNL_ARG_BIAS, false, bias, pd.bias_desc());
    if (s.sum()) plan->add_residual(memory::desc(s.dst(), f32, tag::nchw), pd.dst_desc());
    const auto kinds = s.post_op_kinds();
    for (size_t i = 0; i < kinds.size(); ++i)
      if (kinds[i] != PostOpKinds::Relu && kinds[i] != PostOpKinds::Sum)
        plan->add(DNNL_ARG_ATTR_MULTIPLE_POST_OP(int(i)) | DNNL_ARG_SRC_1, false, per_channel, per_channel);
    plan->scratchpad = memory(pd.scratchpad_desc(), plan->engine);
  } else {
    // The weights' gradient is planned against the forward convolution it differentiates.
    dnnl::convolution_forward::primitive_desc hint(s.forward(dnnl::prop_kind::forward_training), plan->engine);
    dnnl::convolution_backward_weights::desc d(dnnl::algorithm::convolution_direct, memory::desc(s.src(), f32, tag::any),
                                               memory::desc(s.weights(), f32, tag::any), memory::desc(s.dst(), f32, tag::any),
                                               {s.sh, s.sw}, s.dilation(), {s.ph, s.pw}, s.pad_r());
    dnnl::convolution_backward_weights::primitive_desc pd(d, attr, plan->engine, hint);
    plan->prim = dnnl::convolution_backward_weights(pd);
    plan->add(DNNL_ARG_SRC, false, src, pd.src_desc());
    plan->add(DNNL_ARG_DIFF_DST, false, dst, pd.diff_dst_desc());
    plan->add(DNNL_ARG_DIFF_WEIGHTS, true, wts, pd.diff_weights_desc());
    plan->scratchpad = memory(pd.scratchpad_desc(), plan->engine);
  }
  return plan;
}

ConvPlan& conv_plan(const ConvShape& s, PlanKind kind) {
  static std::mutex mu;
  static std::map<std::vector<int64_t>, std::unique_ptr<ConvPlan>> plans;
  std::lock_guard lock(mu);
  std::unique_ptr<ConvPlan>& slot = plans[s.key(kind)];
  if (!slot) slot = make_plan(s, kind);
  return *slot;
}

bool dense(const halide_buffer_t* b) {
  int64_t stride = 1;
  for (int d = 0; d < b->dimensions; ++d) {
    if (b->dim[d].stride != stride || b->dim[d].min != 0) return false;
    stride *= b->dim[d].extent;
  }
  return true;
}

// In a bounds query (some host pointer null) an extern convolution reads its whole operands:
// the extents given in Halide order.
bool bounds_query(std::initializer_list<std::pair<halide_buffer_t*, std::array<int64_t, 4>>> operands) {
  bool query = false;
  for (auto& [b, extent] : operands)
    if (!b->host) {
      query = true;
      for (int d = 0; d < 4; ++d) b->dim[d].min = 0, b->dim[d].extent = int32_t(extent[size_t(d)]);
    }
  return query;
}

}  // namespace

// out = the post-ops of conv2d(in, weights) + bias in NCHW / OIHW (Halide order: x, y, channel,
// image), or in oneDNN's blocked layout where `layout` says so (conv_layouts). per_channel holds the
// bias, then the binary post-ops' operands, one row of output channels each; residual, what a sum
// post-op adds (NCHW), or one unused element. Shapes and parameters come as arguments so that a bounds query can say what the
// whole stage reads; the stage is computed at root, for its whole output.
extern "C" int hjit_extern_conv2d(halide_buffer_t* in, halide_buffer_t* weights, halide_buffer_t* per_channel,
                                  halide_buffer_t* residual, int32_t c,
                                  int32_t h, int32_t w, int32_t kh, int32_t kw, int32_t sh, int32_t sw, int32_t ph,
                                  int32_t pw, int32_t dh, int32_t dw, int32_t post_ops, int32_t layout,
                                  halide_buffer_t* out) {
  ConvShape s{out->dim[3].extent, c, h, w, out->dim[2].extent, kh, kw, out->dim[1].extent, out->dim[0].extent,
              sh, sw, ph, pw, dh, dw};
  s.post_ops = post_ops, s.layout = layout;
  // The residual a sum post-op adds is the output's shape; without one, a single element.
  const std::array<int64_t, 4> out_extent{s.ow, s.oh, s.o, s.n};
  bool query = bounds_query({{in, {w, h, c, s.n}}, {weights, {kw, kh, c, s.o}}});
  if (!residual->host) {
    query = true;
    for (int d = 0; d < residual->dimensions; ++d)
      residual->dim[d].min = 0, residual->dim[d].extent = s.sum() ? int32_t(out_extent[size_t(d)]) : 1;
  }
  if (!per_channel->host) {
    query = true;
    per_channel->dim[0].min = 0, per_channel->dim[0].extent = int32_t(s.o);
    per_channel->dim[1].min = 0, per_channel->dim[1].extent = int32_t(1 + s.binary_post_ops());
  }
  if (query || !out->host) return 0;
  if (!dense(in) || !dense(weights) || !dense(per_channel) || !dense(out) || (s.sum() && !dense(residual))) return -1;
  try {
    float* row = reinterpret_cast<float*>(per_channel->host);
    std::vector<void*> data{in->host, weights->host, out->host};
    for (int64_t k = 0; k <= s.binary_post_ops(); ++k) data.push_back(row + k * s.o);
    if (s.sum()) data.push_back(residual->host);
    conv_plan(s, kForward).run(data);
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}

// out = conv2d_weight_grad(in, grad): the gradient of conv2d's OIHW weights (Halide order: kx, ky,
// input channel, output channel) given its NCHW input and the gradient of its output.
extern "C" int hjit_extern_conv2d_weight_grad(halide_buffer_t* in, halide_buffer_t* grad, int32_t n, int32_t h, int32_t w,
                                              int32_t oh, int32_t ow, int32_t sh, int32_t sw, int32_t ph, int32_t pw,
                                              int32_t dh, int32_t dw, halide_buffer_t* out) {
  const ConvShape s{n, out->dim[2].extent, h, w, out->dim[3].extent, out->dim[1].extent, out->dim[0].extent, oh, ow,
                    sh, sw, ph, pw, dh, dw};
  if (bounds_query({{in, {w, h, s.c, n}}, {grad, {ow, oh, s.o, n}}}) || !out->host) return 0;
  if (!dense(in) || !dense(grad) || !dense(out)) return -1;
  try {
    conv_plan(s, kWeightGrad).run({in->host, grad->host, out->host});
    return 0;
  } catch (const std::exception&) {
    return -1;
  }
}
