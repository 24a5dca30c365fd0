// Convolution, pooling and attention: direct loops, the reference the compiled code is checked against.
#include <algorithm>
#include <functional>
#include <limits>

#include "frontend/eager/loops.h"
#include "support/thread_pool.h"

namespace hjit::eager {
namespace {

struct Window {
  int64_t kh, kw, sh, sw, ph, pw, dh = 1, dw = 1;
};

// [lo, hi) of output positions whose input position o * s - p + k * d lies in [0, n).
std::pair<int64_t, int64_t> valid_outputs(int64_t out_n, int64_t n, int64_t s, int64_t p, int64_t kd) {
  int64_t lo = std::max<int64_t>(0, (p - kd + s - 1) / s);
  if (p - kd < 0) lo = 0;
  int64_t hi = n - 1 + p - kd < 0 ? 0 : std::min(out_n, (n - 1 + p - kd) / s + 1);
  return {lo, std::max(lo, hi)};
}

}  // namespace

namespace {

// The accumulation type of a convolution: floats as C<T> (16-bit ones in f32), integers in u64,
// where products and sums wrap as C++ defines it (the result is then wrapped to the type, as the
// type's own arithmetic would).
template <class T>
using ConvAcc = std::conditional_t<std::is_integral_v<T>, uint64_t, C<T>>;

}  // namespace

void Conv2d(const KernelArgs& a) {
  const Shape &xs = a.in[0].type->shape, &ws = a.in[1].type->shape, &os = a.out.type->shape;
  const auto &stride = a.attrs.ints("stride"), &pad = a.attrs.ints("padding"), &dil = a.attrs.ints("dilation");
  const int64_t N = xs[0], Cin = xs[1], H = xs[2], W = xs[3], Cout = ws[0], Cg = ws[1], KH = ws[2], KW = ws[3];
  const int64_t OH = os[2], OW = os[3], groups = a.attrs.i("groups"), per_group = Cout / groups;
  dispatch_numeric(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = ConvAcc<T>;
    std::vector<A> bx, bw;
    const A* x = converted<A>(static_cast<const T*>(a.in[0].data), a.in[0].type->numel(), bx);
    const A* w = converted<A>(static_cast<const T*>(a.in[1].data), a.in[1].type->numel(), bw);
    T* out = static_cast<T*>(a.out.data);
    parallel_loop(N * Cout, true, [&](int64_t i_nco) {
      const int64_t n = i_nco / Cout, co = i_nco % Cout;
      std::vector<A> acc(static_cast<size_t>(OH * OW), A(0));
      const int64_t g = co / per_group;
      for (int64_t cg = 0; cg < Cg; ++cg) {
        const A* plane = x + (n * Cin + g * Cg + cg) * H * W;
        for (int64_t ky = 0; ky < KH; ++ky)
          for (int64_t kx = 0; kx < KW; ++kx) {
            const A wv = w[((co * Cg + cg) * KH + ky) * KW + kx];
            auto [y0, y1] = valid_outputs(OH, H, stride[0], pad[0], ky * dil[0]);
            auto [x0, x1] = valid_outputs(OW, W, stride[1], pad[1], kx * dil[1]);
            for (int64_t oy = y0; oy < y1; ++oy) {
              const A* row = plane + (oy * stride[0] - pad[0] + ky * dil[0]) * W - pad[1] + kx * dil[1];
              A* o = acc.data() + oy * OW;
              if (stride[1] == 1)
                for (int64_t ox = x0; ox < x1; ++ox) o[ox] += wv * row[ox];
              else
                for (int64_t ox = x0; ox < x1; ++ox) o[ox] += wv * row[ox * stride[1]];
            }
          }
      }
      T* dst = out + (n * Cout + co) * OH * OW;
      for (int64_t i = 0; i < OH * OW; ++i) dst[i] = T(acc[size_t(i)]);
    });
  });
}

// u8 [N, C, H, W, 4] x i8 [O/B, C, KH, KW, B, 4] -> i32 [N, O, OH, OW]: four input channels to a
// step, summed exactly (wrapping in i32 as the compiled code), less the offsets [O] where given.
void IntConv2d(const KernelArgs& a) {
  const Shape &xs = a.in[0].type->shape, &ws = a.in[1].type->shape, &os = a.out.type->shape;
  const auto &stride = a.attrs.ints("stride"), &dil = a.attrs.ints("dilation");
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], KH = ws[2], KW = ws[3], B = ws[4], O = os[1], OH = os[2], OW = os[3];
  const auto* x = static_cast<const uint8_t*>(a.in[0].data);
  const auto* w = static_cast<const int8_t*>(a.in[1].data);
  auto* out = static_cast<int32_t*>(a.out.data);
  const auto* offsets = a.in.size() > 2 ? static_cast<const int32_t*>(a.in[2].data) : nullptr;
  parallel_loop(N * O, N * O * OH * OW * C * KH * KW >= 1 << 15, [&](int64_t i_no) {
    const int64_t n = i_no / O, o = i_no % O;
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        uint32_t acc = offsets ? uint32_t(0) - uint32_t(offsets[o]) : 0;
        for (int64_t c = 0; c < C; ++c)
          for (int64_t ky = 0; ky < KH; ++ky)
            for (int64_t kx = 0; kx < KW; ++kx) {
              const uint8_t* v = x + (((n * C + c) * H + oy * stride[0] + ky * dil[0]) * W + ox * stride[1] + kx * dil[1]) * 4;
              const int8_t* k = w + ((((o / B * C + c) * KH + ky) * KW + kx) * B + o % B) * 4;
              acc += uint32_t(int32_t(v[0]) * k[0] + int32_t(v[1]) * k[1] + int32_t(v[2]) * k[2] + int32_t(v[3]) * k[3]);
            }
        out[((n * O + o) * OH + oy) * OW + ox] = int32_t(acc);
      }
  });
}

// u8 [N, C, H, W] x i8 [C/B, 1, R, KW, B, 4] -> i32 [N, C, OH, OW]: channel c of the input
// convolved with channel c's kernel, whose KH rows come in fours (rows past KH weigh nothing and are
// not read), summed exactly (wrapping in i32 as the compiled code), less the offsets [C] where given.
void IntDepthwise2d(const KernelArgs& a) {
  const Shape &xs = a.in[0].type->shape, &ws = a.in[1].type->shape, &os = a.out.type->shape;
  const auto &stride = a.attrs.ints("stride"), &dil = a.attrs.ints("dilation"), &kernel = a.attrs.ints("kernel");
  const int64_t N = xs[0], C = xs[1], H = xs[2], W = xs[3], R = ws[2], KW = ws[3], B = ws[4], OH = os[2], OW = os[3], KH = kernel[0];
  const auto* x = static_cast<const uint8_t*>(a.in[0].data);
  const auto* w = static_cast<const int8_t*>(a.in[1].data);
  auto* out = static_cast<int32_t*>(a.out.data);
  const auto* offsets = a.in.size() > 2 ? static_cast<const int32_t*>(a.in[2].data) : nullptr;
  parallel_loop(N * C, N * C * OH * OW * KH * KW >= 1 << 15, [&](int64_t i_nc) {
    const int64_t n = i_nc / C, c = i_nc % C;
    const uint8_t* plane = x + (n * C + c) * H * W;
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        uint32_t acc = offsets ? uint32_t(0) - uint32_t(offsets[c]) : 0;
        for (int64_t ky = 0; ky < KH; ++ky)
          for (int64_t kx = 0; kx < KW; ++kx) {
            const int8_t k = w[((((c / B) * R + ky / 4) * KW + kx) * B + c % B) * 4 + ky % 4];
            acc += uint32_t(int32_t(plane[(oy * stride[0] + ky * dil[0]) * W + ox * stride[1] + kx * dil[1]]) * k);
          }
        out[((n * C + c) * OH + oy) * OW + ox] = int32_t(acc);
      }
  });
}

namespace {

// Pools over the last two dimensions of x; `fold(window values)` gives each output.
template <class T, class Init, class Step, class Finish>
void pool(const KernelArgs& a, Init init, Step step, Finish finish) {
  const Shape &xs = a.in[0].type->shape, &os = a.out.type->shape;
  const auto &k = a.attrs.ints("kernel"), &s = a.attrs.ints("stride"), &p = a.attrs.ints("padding");
  const size_t r = xs.size();
  const int64_t H = xs[r - 2], W = xs[r - 1], OH = os[r - 2], OW = os[r - 1];
  const int64_t planes = shape_numel(xs) / std::max<int64_t>(1, H * W);
  const T* x = static_cast<const T*>(a.in[0].data);
  T* out = static_cast<T*>(a.out.data);
  parallel_loop(planes, planes * OH * OW >= kParallelGrain, [&](int64_t pl) {
    for (int64_t oy = 0; oy < OH; ++oy)
      for (int64_t ox = 0; ox < OW; ++ox) {
        auto acc = init();
        int64_t valid = 0;
        for (int64_t ky = 0; ky < k[0]; ++ky)
          for (int64_t kx = 0; kx < k[1]; ++kx) {
            int64_t iy = oy * s[0] - p[0] + ky, ix = ox * s[1] - p[1] + kx;
            if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
            acc = step(acc, C<T>(x[(pl * H + iy) * W + ix]));
            ++valid;
          }
        out[(pl * OH + oy) * OW + ox] = T(finish(acc, valid));
      }
  });
}

}  // namespace

void MaxPool2d(const KernelArgs& a) {
  dispatch_numeric(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    const A lowest = std::numeric_limits<A>::has_infinity ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::lowest();
    pool<T>(a, [&] { return lowest; }, [](A m, A v) { return max_nan(m, v); }, [](A m, int64_t) { return m; });
  });
}

void AvgPool2d(const KernelArgs& a) {
  const auto& k = a.attrs.ints("kernel");
  const bool include_pad = a.attrs.i("count_include_pad") != 0;
  // Integers accumulate in i64 and divide rounding toward zero, as PyTorch's avg_pool2d.
  dispatch_numeric(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = std::conditional_t<std::is_integral_v<T>, int64_t, C<T>>;
    pool<T>(a, [] { return A(0); }, [](A s, auto v) { return wrapping(s, A(v), std::plus<>()); },
            [&](A s, int64_t valid) { return s / A(include_pad ? k[0] * k[1] : std::max<int64_t>(valid, 1)); });
  });
}

void Attention(const KernelArgs& a) {
  const Shape &qs = a.in[0].type->shape, &ks = a.in[1].type->shape, &vs = a.in[2].type->shape;
  const size_t r = qs.size();
  const int64_t S = qs[r - 2], D = qs[r - 1], Tn = ks[r - 2], Dv = vs[r - 1];
  const int64_t batch = shape_numel(qs) / std::max<int64_t>(1, S * D);
  const bool causal = a.attrs.i("causal") != 0;
  const double scale = a.attrs.f("scale");
  dispatch_float(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    std::vector<A> bq, bk, bv;
    const A* q = widened(static_cast<const T*>(a.in[0].data), a.in[0].type->numel(), bq);
    const A* k = widened(static_cast<const T*>(a.in[1].data), a.in[1].type->numel(), bk);
    const A* v = widened(static_cast<const T*>(a.in[2].data), a.in[2].type->numel(), bv);
    T* out = static_cast<T*>(a.out.data);
    // One query row at a time: the scores of one row, never the whole [S, T] matrix.
    parallel_loop(batch * S, true, [&](int64_t i_bi) {
      const int64_t b = i_bi / S, i = i_bi % S;
      std::vector<A> p(static_cast<size_t>(Tn)), o(static_cast<size_t>(Dv), A(0));
      const A* qi = q + (b * S + i) * D;
      A m = -std::numeric_limits<A>::infinity();
      for (int64_t j = 0; j < Tn; ++j) {
        A s = 0;
        const A* kj = k + (b * Tn + j) * D;
        for (int64_t d = 0; d < D; ++d) s += qi[d] * kj[d];
        s = causal && j > i ? -std::numeric_limits<A>::infinity() : s * A(scale);
        p[size_t(j)] = s;
        m = std::max(m, s);
      }
      A l = 0;
      for (int64_t j = 0; j < Tn; ++j) l += (p[size_t(j)] = std::exp(p[size_t(j)] - m));
      // Masked keys do not contribute, whatever their values (inf or NaN in v included).
      const int64_t visible = causal ? std::min(Tn, i + 1) : Tn;
      for (int64_t j = 0; j < visible; ++j) {
        const A* vj = v + (b * Tn + j) * Dv;
        for (int64_t e = 0; e < Dv; ++e) o[size_t(e)] += p[size_t(j)] * vj[e];
      }
      T* oi = out + (b * S + i) * Dv;
      for (int64_t e = 0; e < Dv; ++e) oi[e] = T(o[size_t(e)] / l);
    });
  });
}

}  // namespace hjit::eager

namespace hjit::eager {

void Conv2dWeightGrad(const KernelArgs& a) {
  const Shape &xs = a.in[0].type->shape, &gs = a.in[1].type->shape, &ws = a.out.type->shape;
  const auto &stride = a.attrs.ints("stride"), &pad = a.attrs.ints("padding"), &dil = a.attrs.ints("dilation");
  const int64_t N = xs[0], Cin = xs[1], H = xs[2], W = xs[3], Cout = gs[1], OH = gs[2], OW = gs[3];
  const int64_t Cg = ws[1], KH = ws[2], KW = ws[3], per_group = Cout / a.attrs.i("groups");
  dispatch_float(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    std::vector<A> bx, bg;
    const A* x = widened(static_cast<const T*>(a.in[0].data), a.in[0].type->numel(), bx);
    const A* g = widened(static_cast<const T*>(a.in[1].data), a.in[1].type->numel(), bg);
    T* out = static_cast<T*>(a.out.data);
    parallel_loop(Cout * Cg, true, [&](int64_t i_cocg) {
      const int64_t co = i_cocg / Cg, cg = i_cocg % Cg;
      const int64_t ci = (co / per_group) * Cg + cg;
      for (int64_t ky = 0; ky < KH; ++ky)
        for (int64_t kx = 0; kx < KW; ++kx) {
          auto [y0, y1] = valid_outputs(OH, H, stride[0], pad[0], ky * dil[0]);
          auto [x0, x1] = valid_outputs(OW, W, stride[1], pad[1], kx * dil[1]);
          A acc = 0;
          for (int64_t n = 0; n < N; ++n)
            for (int64_t oy = y0; oy < y1; ++oy) {
              const A* grow = g + ((n * Cout + co) * OH + oy) * OW;
              const A* xrow = x + ((n * Cin + ci) * H + oy * stride[0] - pad[0] + ky * dil[0]) * W - pad[1] + kx * dil[1];
              for (int64_t ox = x0; ox < x1; ++ox) acc += grow[ox] * xrow[ox * stride[1]];
            }
          out[((co * Cg + cg) * KH + ky) * KW + kx] = T(acc);
        }
    });
  });
}

void MaxPool2dGrad(const KernelArgs& a) {
  const Shape &xs = a.in[0].type->shape, &gs = a.in[1].type->shape;
  const auto &k = a.attrs.ints("kernel"), &s = a.attrs.ints("stride"), &p = a.attrs.ints("padding");
  const size_t r = xs.size();
  const int64_t H = xs[r - 2], W = xs[r - 1], OH = gs[r - 2], OW = gs[r - 1];
  const int64_t planes = shape_numel(xs) / std::max<int64_t>(1, H * W);
  dispatch_float(a.out.type->dtype, [&](auto tag) {
    using T = typename decltype(tag)::type;
    using A = C<T>;
    const T* x = static_cast<const T*>(a.in[0].data);
    const T* g = static_cast<const T*>(a.in[1].data);
    T* out = static_cast<T*>(a.out.data);
    parallel_loop(planes, planes * H * W >= kParallelGrain, [&](int64_t pl) {
      std::vector<A> acc(static_cast<size_t>(H * W), A(0));
      // Each window's gradient goes to its first maximum, the element max_pool2d picked.
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          int64_t best = -1;
          A best_v = A(0);
          for (int64_t ky = 0; ky < k[0]; ++ky)
            for (int64_t kx = 0; kx < k[1]; ++kx) {
              int64_t iy = oy * s[0] - p[0] + ky, ix = ox * s[1] - p[1] + kx;
              if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
              A v = A(x[(pl * H + iy) * W + ix]);
              if (best < 0 || v > best_v || (v != v && best_v == best_v)) best = iy * W + ix, best_v = v;
            }
          if (best >= 0) acc[size_t(best)] += A(g[(pl * OH + oy) * OW + ox]);
        }
      for (int64_t i = 0; i < H * W; ++i) out[pl * H * W + i] = T(acc[size_t(i)]);
    });
  });
}

}  // namespace hjit::eager
