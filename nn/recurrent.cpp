// LSTM and GRU: per layer, the input projection of every step at once, then a scan of the
// recurrence (PyTorch's gate order: i, f, g, o and r, z, n).
#include <cmath>
#include <string>

#include <hjit/control_flow.h>
#include <hjit/error.h>
#include <hjit/nn/init.h>
#include <hjit/nn/recurrent.h>

namespace hjit::nn {

namespace {

void make_weights(std::vector<RecurrentWeights>& layers, int64_t input_size, int64_t hidden, int64_t gates, const RecurrentOptions& o,
                  const char* what, const std::function<void(const std::string&, Tensor&)>& reg) {
  if (input_size < 1 || hidden < 1 || o.num_layers < 1)
    throw ValueError(std::string("nn::") + what + ": input_size, hidden_size and num_layers must be positive");
  if (!(o.dropout >= 0 && o.dropout <= 1)) throw ValueError(std::string("nn::") + what + ": dropout must be in [0, 1]");
  layers.resize(size_t(o.num_layers));  // sized once: the registry points into it
  const double bound = 1 / std::sqrt(double(hidden));
  for (size_t l = 0; l < layers.size(); ++l) {
    RecurrentWeights& w = layers[l];
    const int64_t in = l == 0 ? input_size : hidden;
    w.w_ih = Tensor::empty({gates * hidden, in}), w.w_hh = Tensor::empty({gates * hidden, hidden});
    if (o.bias) w.b_ih = Tensor::empty({gates * hidden}), w.b_hh = Tensor::empty({gates * hidden});
    for (Tensor* t : {&w.w_ih, &w.w_hh, &w.b_ih, &w.b_hh})
      if (t->defined()) init::uniform_(*t, -bound, bound);
    const std::string s = "_l" + std::to_string(l);
    reg("weight_ih" + s, w.w_ih), reg("weight_hh" + s, w.w_hh), reg("bias_ih" + s, w.b_ih), reg("bias_hh" + s, w.b_hh);
  }
}

// x as [T, N, I], checked.
Tensor time_major(const Tensor& x, int64_t input_size, bool batch_first, const char* what) {
  if (x.ndim() != 3 || x.shape()[2] != input_size)
    throw ShapeError(std::string("nn::") + what + ": takes [" + (batch_first ? "N, T, " : "T, N, ") + std::to_string(input_size) + "], given " +
                     shape_str(x.shape()));
  const Tensor t = batch_first ? transpose(x, {1, 0, 2}) : x;
  if (t.shape()[0] == 0) throw ShapeError(std::string("nn::") + what + ": a sequence of length 0, given " + shape_str(x.shape()));
  return t;
}

Tensor initial_state(const std::optional<Tensor>& given, int64_t layers, int64_t N, int64_t H, DType dtype, const char* what, const char* name) {
  if (!given) return Tensor::zeros({layers, N, H}, dtype);
  if (given->shape() != Shape{layers, N, H})
    throw ShapeError(std::string("nn::") + what + ": " + name + " must be [" + std::to_string(layers) + ", " + std::to_string(N) + ", " +
                     std::to_string(H) + "], given " + shape_str(given->shape()));
  return *given;
}

Tensor layer_of(const Tensor& state, size_t l) { return squeeze(slice(state, 0, int64_t(l), int64_t(l) + 1), {0}); }

// bool [T, N, 1]: whether step t is inside sequence n (padded [T, N, ...], lengths i64 [N]).
Tensor live_steps(const Tensor& padded, const Tensor& lengths) {
  const int64_t T = padded.shape()[0], N = padded.shape()[1];
  return iota({T, N, 1}, 0, DType::I64) < lengths.reshape({1, N, 1});
}

Tensor affine(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor y = matmul(x, transpose(w));
  return b.defined() ? y + b : y;
}

}  // namespace

LSTM::LSTM(int64_t input_size_, int64_t hidden_size_, RecurrentOptions o)
    : input_size(input_size_), hidden_size(hidden_size_), options_(o), drop_(o.dropout) {
  make_weights(layers_, input_size, hidden_size, 4, o, "LSTM", [&](const std::string& n, Tensor& t) { register_parameter(n, t); });
}

LSTMResult LSTM::operator()(const Tensor& x, const std::optional<Tensor>& h0, const std::optional<Tensor>& c0) {
  LSTMResult r = run(time_major(x, input_size, options_.batch_first, "LSTM"), Tensor(), h0, c0);
  if (options_.batch_first) r.output = transpose(r.output, {1, 0, 2});
  return r;
}

PackedLSTMResult LSTM::operator()(const PackedSequence& x, const std::optional<Tensor>& h0, const std::optional<Tensor>& c0) {
  const auto [padded, lengths] = pad_packed_sequence(x);
  const LSTMResult r = run(time_major(padded, input_size, false, "LSTM"), live_steps(padded, lengths), h0, c0);
  return {packed_like(x, r.output), r.h, r.c};
}

LSTMResult LSTM::run(Tensor seq, const Tensor& live, const std::optional<Tensor>& h0, const std::optional<Tensor>& c0) {
  const int64_t N = seq.shape()[1], H = hidden_size, L = options_.num_layers;
  const Tensor h_init = initial_state(h0, L, N, H, seq.dtype(), "LSTM", "h0"), c_init = initial_state(c0, L, N, H, seq.dtype(), "LSTM", "c0");
  std::vector<Tensor> hs, cs;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const RecurrentWeights& w = layers_[l];
    Tensor xp = affine(seq, w.w_ih, w.b_ih);  // [T, N, 4H]
    if (w.b_hh.defined()) xp = xp + w.b_hh;
    const Tensor w_hh_t = transpose(w.w_hh);
    const ScanResult r = scan(
        [&](const Tensors& carry, const Tensors& step) -> std::pair<Tensors, Tensors> {
          const std::vector<Tensor> g = split(step[0] + matmul(carry[0], w_hh_t), H, -1);
          const Tensor c = sigmoid(g[1]) * carry[1] + sigmoid(g[0]) * tanh(g[2]);
          const Tensor h = sigmoid(g[3]) * tanh(c);
          if (step.size() == 1) return {{h, c}, {h}};
          return {{where(step[1], h, carry[0]), where(step[1], c, carry[1])}, {where(step[1], h, 0.0)}};
        },
        {layer_of(h_init, l), layer_of(c_init, l)}, live.defined() ? Tensors{xp, live} : Tensors{xp});
    seq = r.ys[0];
    hs.push_back(r.carries[0]), cs.push_back(r.carries[1]);
    if (l + 1 < layers_.size() && training() && options_.dropout > 0) seq = drop_(seq);
  }
  return {seq, stack(hs, 0), stack(cs, 0)};
}

GRU::GRU(int64_t input_size_, int64_t hidden_size_, RecurrentOptions o)
    : input_size(input_size_), hidden_size(hidden_size_), options_(o), drop_(o.dropout) {
  make_weights(layers_, input_size, hidden_size, 3, o, "GRU", [&](const std::string& n, Tensor& t) { register_parameter(n, t); });
}

GRUResult GRU::operator()(const Tensor& x, const std::optional<Tensor>& h0) {
  GRUResult r = run(time_major(x, input_size, options_.batch_first, "GRU"), Tensor(), h0);
  if (options_.batch_first) r.output = transpose(r.output, {1, 0, 2});
  return r;
}

PackedGRUResult GRU::operator()(const PackedSequence& x, const std::optional<Tensor>& h0) {
  const auto [padded, lengths] = pad_packed_sequence(x);
  const GRUResult r = run(time_major(padded, input_size, false, "GRU"), live_steps(padded, lengths), h0);
  return {packed_like(x, r.output), r.h};
}

GRUResult GRU::run(Tensor seq, const Tensor& live, const std::optional<Tensor>& h0) {
  const int64_t N = seq.shape()[1], H = hidden_size, L = options_.num_layers;
  const Tensor h_init = initial_state(h0, L, N, H, seq.dtype(), "GRU", "h0");
  std::vector<Tensor> hs;
  for (size_t l = 0; l < layers_.size(); ++l) {
    const RecurrentWeights& w = layers_[l];
    const Tensor xp = affine(seq, w.w_ih, w.b_ih);  // [T, N, 3H]
    const ScanResult r = scan(
        [&](const Tensors& carry, const Tensors& step) -> std::pair<Tensors, Tensors> {
          const Tensor& h = carry[0];
          const std::vector<Tensor> gx = split(step[0], H, -1), gh = split(affine(h, w.w_hh, w.b_hh), H, -1);
          const Tensor r = sigmoid(gx[0] + gh[0]), z = sigmoid(gx[1] + gh[1]);
          const Tensor n = tanh(gx[2] + r * gh[2]);
          const Tensor next = (1.0 - z) * n + z * h;
          if (step.size() == 1) return {{next}, {next}};
          return {{where(step[1], next, h)}, {where(step[1], next, 0.0)}};
        },
        {layer_of(h_init, l)}, live.defined() ? Tensors{xp, live} : Tensors{xp});
    seq = r.ys[0];
    hs.push_back(r.carries[0]);
    if (l + 1 < layers_.size() && training() && options_.dropout > 0) seq = drop_(seq);
  }
  return {seq, stack(hs, 0)};
}

}  // namespace hjit::nn
