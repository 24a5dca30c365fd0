// Recurrent layers with torch.nn's arguments, gate order and parameter names (weight_ih_l0,
// weight_hh_l0, bias_ih_l0, bias_hh_l0, ...; every one ~ U(-1/sqrt(hidden), 1/sqrt(hidden))).
// Each layer's input projection runs for all time steps as one matrix product; the recurrence is
// a scan (control_flow.h), so a jitted or differentiated model compiles one step, not T.
#pragma once
#include <cstdint>
#include <optional>
#include <vector>

#include <hjit/nn/layers.h>
#include <hjit/nn/sequences.h>

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
// A packed batch's: the output packed alike, and each sequence's state after its own last step
// (in the batch's order), as PyTorch's LSTM on a PackedSequence.
struct PackedLSTMResult {
  PackedSequence output;
  Tensor h, c;
};
class LSTM : public Module {
 public:
  LSTM(int64_t input_size, int64_t hidden_size, RecurrentOptions options = {});
  // h0 and c0 default to zeros.
  LSTMResult operator()(const Tensor& x, const std::optional<Tensor>& h0 = std::nullopt,
                        const std::optional<Tensor>& c0 = std::nullopt);
  // Sequences of different lengths (nn/sequences.h): each step past a sequence's end leaves its
  // state as it was (computed over the padded batch, then packed). batch_first does not apply.
  PackedLSTMResult operator()(const PackedSequence& x, const std::optional<Tensor>& h0 = std::nullopt,
                              const std::optional<Tensor>& c0 = std::nullopt);
  int64_t input_size, hidden_size;

 private:
  // seq [T, N, I]; `live` (bool [T, N, 1]) where given: the steps inside each sequence.
  LSTMResult run(Tensor seq, const Tensor& live, const std::optional<Tensor>& h0, const std::optional<Tensor>& c0);
  std::vector<RecurrentWeights> layers_;
  RecurrentOptions options_;
  Dropout drop_;
};

struct GRUResult {
  Tensor output, h;
};
struct PackedGRUResult {
  PackedSequence output;
  Tensor h;
};
class GRU : public Module {
 public:
  GRU(int64_t input_size, int64_t hidden_size, RecurrentOptions options = {});
  GRUResult operator()(const Tensor& x, const std::optional<Tensor>& h0 = std::nullopt);
  PackedGRUResult operator()(const PackedSequence& x, const std::optional<Tensor>& h0 = std::nullopt);  // as LSTM's
  int64_t input_size, hidden_size;

 private:
  GRUResult run(Tensor seq, const Tensor& live, const std::optional<Tensor>& h0);
  std::vector<RecurrentWeights> layers_;
  RecurrentOptions options_;
  Dropout drop_;
};

}  // namespace hjit::nn
