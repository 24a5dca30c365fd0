// Recurrent layers with torch.nn's arguments, gate order and parameter names (weight_ih_l0,
// weight_hh_l0, bias_ih_l0, bias_hh_l0, ...; every one ~ U(-1/sqrt(hidden), 1/sqrt(hidden))).
// Each layer's input projection runs for all time steps as one matrix product; the recurrence is
// a scan (control_flow.h), so a jitted or differentiated model compiles one step, not T.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <hjit/nn/layers.h>

namespace hjit::nn {

struct RecurrentOptions {
  int64_t num_layers = 1;
  bool bias = true;
  bool batch_first = false;  // inputs [N, T, I] instead of [T, N, I]
  double dropout = 0;        // on the outputs of each layer but the last, in training mode
};

// One layer's weights: input to gates, hidden state to gates, and their biases.
struct RecurrentWeights {
  Tensor w_ih, w_hh, b_ih, b_hh;
};

// output [T, N, H] (or [N, T, H]); h and c [num_layers, N, H].
struct LSTMResult {
  Tensor output, h, c;
};
class LSTM : public Module {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RecurrentOptions options = {});
  // h0 and c0 default to zeros.
  LSTMResult operator()(const Tensor& x, const std::optional<Tensor>& h0 = std::nullopt,
                        const std::optional<Tensor>& c0 = std::nullopt);
  int64_t input_size, hidden_size;

 private:
  std::vector<RecurrentWeights> layers_;
  RecurrentOptions options_;
  Dropout drop_;
};

struct GRUResult {
  Tensor output, h;
};
class GRU : public Module {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RecurrentOptions options = {});
  GRUResult operator()(const Tensor& x, const std::optional<Tensor>& h0 = std::nullopt);
  int64_t input_size, hidden_size;

 private:
  std::vector<RecurrentWeights> layers_;
  RecurrentOptions options_;
  Dropout drop_;
};

}  // namespace hjit::nn
