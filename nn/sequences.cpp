// Padding and packing of sequences of different lengths (torch.nn.utils.rnn), by gathers whose
// indices are made from the host lengths.
#include <algorithm>
#include <numeric>
#include <string>

#include <hjit/error.h>
#include <hjit/nn/sequences.h>
#include <hjit/ops.h>

namespace hjit::nn {

namespace {

Tensor indices(const std::vector<int64_t>& v) { return Tensor::from_vector(v, Shape{int64_t(v.size())}); }

// [A, B, ...] -> [B, A, ...]
Tensor first_two_swapped(const Tensor& x) {
  std::vector<int> perm{1, 0};
  for (int d = 2; d < x.ndim(); ++d) perm.push_back(d);
  return transpose(x, perm);
}

// [T, B, ...] -> [T * B, ...]
Tensor rows_of(const Tensor& time_major) {
  Shape s = time_major.shape();
  s.erase(s.begin());
  s[0] = time_major.shape()[0] * time_major.shape()[1];
  return time_major.reshape(s);
}

// The packing of a batch of these lengths: its sorted order and batch sizes.
PackedSequence packing(std::vector<int64_t> lengths, bool enforce_sorted, const char* what) {
  if (lengths.empty()) throw ValueError(std::string(what) + ": no sequences");
  for (size_t b = 0; b < lengths.size(); ++b) {
    if (lengths[b] < 1) throw ValueError(std::string(what) + ": sequence " + std::to_string(b) + " has length " + std::to_string(lengths[b]) + " (at least 1)");
    if (enforce_sorted && b > 0 && lengths[b] > lengths[b - 1])
      throw ValueError(std::string(what) + ": lengths must not increase with enforce_sorted (sequence " + std::to_string(b) + " has " +
                       std::to_string(lengths[b]) + " after " + std::to_string(lengths[b - 1]) + "); pass enforce_sorted = false");
  }
  std::vector<int64_t> order(lengths.size()), where(lengths.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return lengths[size_t(a)] > lengths[size_t(b)]; });
  for (size_t j = 0; j < order.size(); ++j) where[size_t(order[j])] = int64_t(j);
  std::vector<int64_t> sizes;
  sizes.assign(size_t(lengths[size_t(order[0])]), 0);
  for (int64_t len : lengths)
    for (int64_t t = 0; t < len; ++t) ++sizes[size_t(t)];
  return PackedSequence{Tensor(), indices(sizes), indices(order), indices(where)};
}

}  // namespace

std::vector<int64_t> PackedSequence::lengths() const {
  const std::vector<int64_t> sizes = batch_sizes.to_vector<int64_t>(), order = sorted_indices.to_vector<int64_t>();
  std::vector<int64_t> out(order.size(), 0);
  for (int64_t n : sizes)
    for (int64_t j = 0; j < n; ++j) ++out[size_t(order[size_t(j)])];
  return out;
}

Tensor pad_sequence(const std::vector<Tensor>& sequences, bool batch_first, double padding_value) {
  if (sequences.empty()) throw ValueError("pad_sequence: no sequences");
  int64_t longest = 0;
  for (size_t i = 0; i < sequences.size(); ++i) {
    const Tensor& s = sequences[i];
    if (s.ndim() < 1 || s.dtype() != sequences[0].dtype() ||
        !std::equal(s.shape().begin() + 1, s.shape().end(), sequences[0].shape().begin() + 1, sequences[0].shape().end()))
      throw ShapeError("pad_sequence: sequence " + std::to_string(i) + " is " + dtype_name(s.dtype()) + shape_str(s.shape()) +
                       ", sequence 0 " + dtype_name(sequences[0].dtype()) + shape_str(sequences[0].shape()) +
                       " (one dtype, the same trailing shape)");
    longest = std::max(longest, s.shape()[0]);
  }
  std::vector<Tensor> padded;
  for (const Tensor& s : sequences) {
    std::vector<std::pair<int64_t, int64_t>> widths(size_t(s.ndim()), {0, 0});
    widths[0].second = longest - s.shape()[0];
    padded.push_back(widths[0].second > 0 ? pad(s, widths, padding_value) : s);
  }
  return stack(padded, batch_first ? 0 : 1);
}

PackedSequence pack_padded_sequence(const Tensor& input, const std::vector<int64_t>& lengths, bool batch_first, bool enforce_sorted) {
  if (input.ndim() < 2 || input.shape()[batch_first ? 0 : 1] != int64_t(lengths.size()))
    throw ShapeError("pack_padded_sequence: takes " + std::string(batch_first ? "[B, T, ...]" : "[T, B, ...]") + " for " +
                     std::to_string(lengths.size()) + " lengths, given " + shape_str(input.shape()));
  const Tensor time_major = batch_first ? first_two_swapped(input) : input;
  for (size_t b = 0; b < lengths.size(); ++b)
    if (lengths[b] > time_major.shape()[0])
      throw ValueError("pack_padded_sequence: sequence " + std::to_string(b) + " has length " + std::to_string(lengths[b]) +
                       " in a batch of " + std::to_string(time_major.shape()[0]) + " steps");
  PackedSequence p = packing(lengths, enforce_sorted, "pack_padded_sequence");
  return packed_like(p, time_major);
}

PackedSequence pack_sequence(const std::vector<Tensor>& sequences, bool enforce_sorted) {
  std::vector<int64_t> lengths;
  for (const Tensor& s : sequences) lengths.push_back(s.ndim() > 0 ? s.shape()[0] : 0);
  return pack_padded_sequence(pad_sequence(sequences), lengths, false, enforce_sorted);
}

PackedSequence packed_like(const PackedSequence& sequence, const Tensor& time_major) {
  const std::vector<int64_t> sizes = sequence.batch_sizes.to_vector<int64_t>(), order = sequence.sorted_indices.to_vector<int64_t>();
  const int64_t B = int64_t(order.size());
  if (time_major.ndim() < 2 || time_major.shape()[1] != B || time_major.shape()[0] < int64_t(sizes.size()))
    throw ShapeError("packed_like: takes [T, " + std::to_string(B) + ", ...] of at least " + std::to_string(sizes.size()) + " steps, given " +
                     shape_str(time_major.shape()));
  std::vector<int64_t> rows;
  for (size_t t = 0; t < sizes.size(); ++t)
    for (int64_t j = 0; j < sizes[t]; ++j) rows.push_back(int64_t(t) * B + order[size_t(j)]);
  PackedSequence p = sequence;
  p.data = take(rows_of(time_major), indices(rows), 0);
  return p;
}

std::pair<Tensor, Tensor> pad_packed_sequence(const PackedSequence& sequence, bool batch_first, double padding_value,
                                              std::optional<int64_t> total_length) {
  const std::vector<int64_t> sizes = sequence.batch_sizes.to_vector<int64_t>(), where = sequence.unsorted_indices.to_vector<int64_t>();
  const int64_t B = int64_t(where.size()), longest = int64_t(sizes.size());
  const int64_t T = total_length.value_or(longest);
  if (T < longest)
    throw ValueError("pad_packed_sequence: total_length " + std::to_string(T) + " is below the longest length, " + std::to_string(longest));
  const Tensor& data = sequence.data;
  Shape row = data.shape();
  row[0] = 1;
  // Every position reads its row of data, or the padding row appended after them.
  const Tensor rows = concat({data, Tensor::full(row, padding_value, data.dtype())}, 0);
  std::vector<int64_t> offset(size_t(longest) + 1, 0);
  for (size_t t = 0; t < sizes.size(); ++t) offset[t + 1] = offset[t] + sizes[t];
  std::vector<int64_t> at;
  for (int64_t t = 0; t < T; ++t)
    for (int64_t b = 0; b < B; ++b) {
      const int64_t j = where[size_t(b)];
      at.push_back(t < longest && j < sizes[size_t(t)] ? offset[size_t(t)] + j : offset.back());
    }
  Shape out = data.shape();
  out[0] = B;
  out.insert(out.begin(), T);
  const Tensor padded = take(rows, indices(at), 0).reshape(out);
  return {batch_first ? first_two_swapped(padded) : padded, indices(sequence.lengths())};
}

}  // namespace hjit::nn
