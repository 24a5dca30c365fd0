// Batches of sequences of different lengths without dynamic sizes: torch.nn.utils.rnn's padding and
// packing, as a PyTorch user knows them. A PackedSequence holds every sequence's steps, longest
// sequences first, one time step after another (no padding); the recurrent layers take one and
// give one back, each sequence's final state taken at its own last step.
//
//   Tensor padded = hjit::nn::pad_sequence({a, b, c}, /*batch_first=*/true);         // [3, T_max, ...]
//   PackedSequence packed = hjit::nn::pack_padded_sequence(padded, {5, 2, 4}, true, false);
//   auto [out, h, c] = lstm(packed);
//   auto [unpacked, lengths] = hjit::nn::pad_packed_sequence(out, true);            // [3, 5, H], {5, 2, 4}
//
// Lengths are host values (PyTorch's lengths on the CPU): inside a jitted function they are part
// of what it was traced for, and the index tensors made from them are constants of the trace.
#pragma once
#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include <hjit/tensor.h>

namespace hjit::nn {

struct PackedSequence {
  Tensor data;              // [sum of the lengths, ...]: step 0 of every sequence, then step 1 of those that have one, ...
  Tensor batch_sizes;       // i64 [longest length]: how many sequences have step t
  Tensor sorted_indices;    // i64 [batch]: the sequences longest first, as positions in the batch
  Tensor unsorted_indices;  // i64 [batch]: where each position of the batch is in that order
  // Each sequence's length, in the batch's order.
  std::vector<int64_t> lengths() const;
  int64_t batch() const { return sorted_indices.numel(); }
};

// torch.nn.utils.rnn.pad_sequence: sequences [L_i, ...] (one dtype, the same trailing shape)
// stacked into [T_max, B, ...] (or [B, T_max, ...]), padding_value past each one's end.
Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first = false, double padding_value = 0);

// torch.nn.utils.rnn.pack_padded_sequence: input [T, B, ...] (or [B, T, ...]) whose sequence b has
// lengths[b] steps (1 to T). enforce_sorted: the lengths must not increase (a ValueError
// otherwise); false: any order (sorted here, and restored by pad_packed_sequence).
PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first = false,
                                    bool enforce_sorted = true);
// torch.nn.utils.rnn.pack_sequence: the sequences [L_i, ...] packed.
PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted = true);
// torch.nn.utils.rnn.pad_packed_sequence: the padded batch [T, B, ...] (or [B, T, ...]; T the longest
// length, or total_length, which must be at least that) and the lengths (i64 [B]), in the batch's order.
std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first = false, double padding_value = 0,
                                              std::optional<int64_t> total_length = std::nullopt);
// The packing of `sequence` applied to another padded batch of its lengths: [T, B, ...] time-major
// (what a recurrent layer computes from a packed input; rows past a sequence's end are dropped).
PackedSequence packed_like(const PackedSequence& sequence, const Tensor& time_major);

}  // namespace hjit::nn
