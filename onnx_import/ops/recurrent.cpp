// RNN, GRU and LSTM onto hjit::scan (so they compile as one loop body and train): per direction,
// the input projections for every step at once, then the recurrence scanned over time.
#include <cmath>

#include <hjit/control_flow.h>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using V = std::vector<Tensor>;

// ONNX's activation functions for recurrent ops, with their alpha and beta.
Tensor activate(const NodeContext& n, const std::string& f, const Tensor& x, double alpha, double beta) {
  if (f == "Sigmoid") return sigmoid(x);
  if (f == "Tanh") return tanh(x);
  if (f == "Relu") return relu(x);
  if (f == "LeakyRelu") return where(x < 0.0, x * alpha, x);
  if (f == "ThresholdedRelu") return where(x > alpha, x, 0.0);
  if (f == "ScaledTanh") return tanh(x * beta) * alpha;
  if (f == "HardSigmoid") return clamp(x * alpha + beta, 0.0, 1.0);
  if (f == "Elu") return where(x < 0.0, (exp(x) - 1.0) * alpha, x);
  if (f == "Softsign") return x / (abs(x) + 1.0);
  if (f == "Softplus") return relu(x) + log1p(exp(-abs(x)));
  if (f == "Affine") return x * alpha + beta;
  n.fail("has the activation '" + f + "'");
}

enum class Cell { Rnn, Gru, Lstm };

struct Recurrent {
  Cell cell;
  int64_t gates, hidden, dirs;
  std::vector<std::string> acts;
  std::vector<double> alpha, beta;
  double clip;
  bool linear_before_reset, input_forget;
};

// Activation k of direction d (each direction has its own list, or shares the first's).
Tensor act(const NodeContext& n, const Recurrent& r, int64_t d, size_t k, const Tensor& x) {
  const size_t per = r.cell == Cell::Rnn ? 1 : r.cell == Cell::Gru ? 2 : 3;
  const size_t i = size_t(d) * per + k < r.acts.size() ? size_t(d) * per + k : k;
  const double alpha = i < r.alpha.size() ? r.alpha[i] : (r.acts[i] == "LeakyRelu" ? 0.01 : r.acts[i] == "HardSigmoid" ? 0.2 : 1.0);
  const double beta = i < r.beta.size() ? r.beta[i] : (r.acts[i] == "HardSigmoid" ? 0.5 : 0.0);
  return activate(n, r.acts[i], x, alpha, beta);
}

Tensor clipped(const Recurrent& r, const Tensor& x) { return r.clip > 0 ? clamp(x, -r.clip, r.clip) : x; }

// One direction: X [seq, batch, input] -> (Y [seq, batch, hidden], h, c).
std::tuple<Tensor, Tensor, Tensor> run_direction(const NodeContext& n, const Recurrent& r, int64_t d, const Tensor& x, bool reverse) {
  const int64_t H = r.hidden, G = r.gates, batch = x.shape()[1];
  const Tensor W = squeeze(slice(n.input(1), 0, d, d + 1), {0});  // [G*H, input]
  const Tensor R = squeeze(slice(n.input(2), 0, d, d + 1), {0});  // [G*H, H]
  Tensor wb = Tensor::zeros({G * H}, x.dtype()), rb = Tensor::zeros({G * H}, x.dtype());
  if (auto B = n.optional_input(3)) {
    const Tensor b = squeeze(slice(*B, 0, d, d + 1), {0});
    wb = slice(b, 0, 0, G * H), rb = slice(b, 0, G * H, 2 * G * H);
  }
  auto initial = [&](size_t k) {
    if (auto t = n.optional_input(k)) return squeeze(slice(*t, 0, d, d + 1), {0});
    return Tensor::zeros({batch, H}, x.dtype());
  };
  const Tensor h0 = initial(5), c0 = r.cell == Cell::Lstm ? initial(6) : Tensor::zeros({batch, H}, x.dtype());
  Tensor P = Tensor::zeros({3 * H}, x.dtype());
  if (r.cell == Cell::Lstm)
    if (auto p = n.optional_input(7)) P = squeeze(slice(*p, 0, d, d + 1), {0});
  const Tensor xw = matmul(x, transpose(W)) + wb;  // every step's input projection at once: [seq, batch, G*H]
  // The recurrent weights transposed once, outside the loop: inside, each step's matmul would read
  // R across its rows (a strided, unvectorized walk of G*H*H values every step).
  const Tensor Rt = transpose(R), RhT = slice(Rt, 1, 2 * H, 3 * H);
  // A GRU's step multiplies h by R once: by all three gates' weights where the reset gate scales
  // the product (linear_before_reset: its third block is R_h h), by the update and reset gates'
  // alone where it scales h first. (R_h h as a product of its own read R_h twice a step: a 2-layer
  // GRU of 256, batch 1, read 1 MiB of weights a step instead of 768 KiB.)
  const bool reset_scales_h = r.cell == Cell::Gru && !r.linear_before_reset;
  const Tensor Rg = reset_scales_h ? slice(Rt, 1, 0, 2 * H) : Rt, rbg = reset_scales_h ? slice(rb, 0, 0, 2 * H) : rb;
  auto gate = [&](const Tensor& t, int64_t g) { return slice(t, -1, g * H, (g + 1) * H); };
  const ScanResult res = scan(
      [&](const Tensors& carry, const Tensors& step) {
        const Tensor &h = carry[0], &c = carry[1], &xt = step[0];
        if (r.cell == Cell::Rnn) {
          const Tensor hn = act(n, r, d, 0, clipped(r, xt + matmul(h, Rt) + rb));
          return std::make_pair(Tensors{hn, c}, Tensors{hn});
        }
        if (r.cell == Cell::Gru) {  // gates z, r, h
          const Tensor hr = matmul(h, Rg) + rbg;
          const Tensor z = act(n, r, d, 0, clipped(r, gate(xt, 0) + gate(hr, 0)));
          const Tensor rr = act(n, r, d, 0, clipped(r, gate(xt, 1) + gate(hr, 1)));
          const Tensor hh = reset_scales_h ? matmul(rr * h, RhT) + slice(rb, 0, 2 * H, 3 * H) : rr * gate(hr, 2);
          const Tensor ht = act(n, r, d, 1, clipped(r, gate(xt, 2) + hh));
          const Tensor hn = (1.0 - z) * ht + z * h;
          return std::make_pair(Tensors{hn, c}, Tensors{hn});
        }
        // LSTM: gates i, o, f, c; peepholes P = [pi, po, pf].
        const Tensor g = xt + matmul(h, Rt) + rb;
        const Tensor pi = slice(P, 0, 0, H), po = slice(P, 0, H, 2 * H), pf = slice(P, 0, 2 * H, 3 * H);
        const Tensor i = act(n, r, d, 0, clipped(r, gate(g, 0) + pi * c));
        Tensor f = act(n, r, d, 0, clipped(r, gate(g, 2) + pf * c));
        if (r.input_forget) f = 1.0 - i;
        const Tensor ct = act(n, r, d, 1, clipped(r, gate(g, 3)));
        const Tensor cn = f * c + i * ct;
        const Tensor o = act(n, r, d, 0, clipped(r, gate(g, 1) + po * cn));
        const Tensor hn = o * act(n, r, d, 2, cn);
        return std::make_pair(Tensors{hn, cn}, Tensors{hn});
      },
      {h0, c0}, {xw}, -1, reverse);
  return {res.ys[0], res.carries[0], res.carries[1]};
}

V recurrent(const NodeContext& n, Cell cell) {
  Tensor x = n.input(0);
  const bool batch_first = n.attr_int("layout", 0) != 0;
  if (batch_first) x = transpose(x, {1, 0, 2});
  const std::string direction = n.attr_string("direction", "forward");
  Recurrent r{cell, cell == Cell::Rnn ? 1 : cell == Cell::Gru ? 3 : 4, n.attr_int("hidden_size", n.input(2).shape().at(2)),
              direction == "bidirectional" ? 2 : 1, {}, n.attr_floats("activation_alpha"), n.attr_floats("activation_beta"),
              n.attr_float("clip", 0.0), n.attr_int("linear_before_reset", 0) != 0, n.attr_int("input_forget", 0) != 0};
  if (direction != "forward" && direction != "reverse" && direction != "bidirectional") n.fail("has direction '" + direction + "'");
  for (const auto& a : n.proto().attribute())
    if (a.name() == "activations")
      for (const auto& s : a.strings()) r.acts.push_back(s);
  if (r.acts.empty())
    r.acts = cell == Cell::Rnn ? std::vector<std::string>{"Tanh"} : cell == Cell::Gru ? std::vector<std::string>{"Sigmoid", "Tanh"}
                                                                    : std::vector<std::string>{"Sigmoid", "Tanh", "Tanh"};
  if (auto lens = n.optional_input(4))
    for (int64_t l : n.input_ints(4))
      if (l != x.shape()[0]) n.fail("runs sequences shorter than the input (sequence_lens), which is not converted");
  std::vector<Tensor> ys, hs, cs;
  for (int64_t d = 0; d < r.dirs; ++d) {
    auto [y, h, c] = run_direction(n, r, d, x, direction == "reverse" || d == 1);
    ys.push_back(unsqueeze(y, 1)), hs.push_back(unsqueeze(h, 0)), cs.push_back(unsqueeze(c, 0));
  }
  Tensor Y = concat(ys, 1), Yh = concat(hs, 0), Yc = concat(cs, 0);  // [seq, dirs, batch, H], [dirs, batch, H]
  if (batch_first) Y = transpose(Y, {2, 0, 1, 3}), Yh = transpose(Yh, {1, 0, 2}), Yc = transpose(Yc, {1, 0, 2});
  V out{Y, Yh};
  if (cell == Cell::Lstm) out.push_back(Yc);
  return out;
}

V RNN(const NodeContext& n) { return recurrent(n, Cell::Rnn); }
V GRU(const NodeContext& n) { return recurrent(n, Cell::Gru); }
V LSTM(const NodeContext& n) { return recurrent(n, Cell::Lstm); }

}  // namespace

void add_recurrent_ops(ConverterTable& t) {
  t["RNN"] = RNN;
  t["GRU"] = GRU;
  t["LSTM"] = LSTM;
}

}  // namespace hjit::onnx_import
