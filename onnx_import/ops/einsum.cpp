// Einsum: each operand's labels (an ellipsis for broadcast dimensions, a repeated label for a
// diagonal) laid out along every label of the equation, multiplied with broadcasting, summed over
// the labels the output does not keep, and transposed to the output's order.
#include <algorithm>
#include <cctype>

#include "onnx_import/ops/ops.h"

namespace hjit::onnx_import {

namespace {

using Labels = std::vector<int>;  // letters by their code; ellipsis dimensions as 1000 + k

// The labels of one term; ellipsis dimensions counted from the right across operands (`width`: the
// most any operand has), so that they broadcast as numpy's do.
Labels parse_term(const NodeContext& n, const std::string& term, int64_t rank, int64_t* ellipsis_dims) {
  Labels out;
  const size_t dots = term.find("...");
  const int64_t letters = int64_t(term.size()) - (dots == std::string::npos ? 0 : 3);
  *ellipsis_dims = dots == std::string::npos ? 0 : rank - letters;
  if (*ellipsis_dims < 0 || (dots == std::string::npos && letters != rank))
    n.fail("the term '" + term + "' does not match an operand of rank " + std::to_string(rank));
  for (size_t i = 0; i < term.size(); ++i) {
    if (i == dots) {
      for (int64_t k = 0; k < *ellipsis_dims; ++k) out.push_back(-1 - int(k));  // placeholders, numbered below
      i += 2;
      continue;
    }
    if (!std::isalpha(static_cast<unsigned char>(term[i]))) n.fail("the equation has '" + std::string(1, term[i]) + "'");
    out.push_back(term[i]);
  }
  return out;
}

void number_ellipsis(Labels& l, int64_t dims, int64_t width) {
  for (int& x : l)
    if (x < 0) x = 1000 + int(width - dims + (-1 - x));
}

// x with a label that appears twice reduced to its diagonal (the second axis summed away under a mask).
Tensor take_diagonals(const NodeContext& n, Tensor x, Labels& l) {
  for (size_t a = 0; a < l.size(); ++a)
    for (size_t b = a + 1; b < l.size(); ++b) {
      if (l[a] != l[b]) continue;
      if (x.shape()[a] != x.shape()[b]) n.fail("a repeated label spans axes of different sizes");
      const Tensor eye = iota(x.shape(), int(a), DType::I64) == iota(x.shape(), int(b), DType::I64);
      x = sum(where(eye, x, Tensor::scalar(0, x.dtype())), {int(b)});
      l.erase(l.begin() + std::ptrdiff_t(b));
      --b;
    }
  return x;
}

std::vector<Tensor> Einsum(const NodeContext& n) {
  std::string eq = n.attr_string("equation", "");
  eq.erase(std::remove(eq.begin(), eq.end(), ' '), eq.end());
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  std::vector<std::string> terms;
  for (size_t at = 0;;) {
    const size_t comma = lhs.find(',', at);
    terms.push_back(lhs.substr(at, comma - at));
    if (comma == std::string::npos) break;
    at = comma + 1;
  }
  if (terms.size() != n.num_inputs()) n.fail("its equation names " + std::to_string(terms.size()) + " operands for " + std::to_string(n.num_inputs()) + " inputs");
  std::vector<Labels> labels(terms.size());
  std::vector<int64_t> dims(terms.size());
  int64_t width = 0;
  for (size_t i = 0; i < terms.size(); ++i) {
    labels[i] = parse_term(n, terms[i], int64_t(n.input(i).shape().size()), &dims[i]);
    width = std::max(width, dims[i]);
  }
  Labels all;
  std::vector<Tensor> xs;
  for (size_t i = 0; i < terms.size(); ++i) {
    number_ellipsis(labels[i], dims[i], width);
    xs.push_back(take_diagonals(n, n.input(i), labels[i]));
    for (int l : labels[i])
      if (std::find(all.begin(), all.end(), l) == all.end()) all.push_back(l);
  }
  Labels out;
  if (arrow != std::string::npos) {
    const std::string term = eq.substr(arrow + 2);
    for (size_t i = 0; i < term.size(); ++i) {
      if (term.compare(i, 3, "...") == 0) {
        for (int64_t k = 0; k < width; ++k) out.push_back(1000 + int(k));
        i += 2;
      } else if (std::isalpha(static_cast<unsigned char>(term[i]))) {
        out.push_back(term[i]);
      } else {
        n.fail("the equation's output has '" + std::string(1, term[i]) + "'");
      }
    }
  } else {  // implicit: the ellipsis, then the letters used once, in alphabetical order
    for (int64_t k = 0; k < width; ++k) out.push_back(1000 + int(k));
    Labels once;
    for (int l : all) {
      int64_t uses = 0;
      for (const std::string& t : terms) uses += std::count(t.begin(), t.end(), char(l));
      if (l < 1000 && uses == 1) once.push_back(l);
    }
    std::sort(once.begin(), once.end());
    out.insert(out.end(), once.begin(), once.end());
  }
  for (int l : out)
    if (std::find(all.begin(), all.end(), l) == all.end()) n.fail("its output names a label no operand has");
  // Every operand along `all`, then multiplied.
  Tensor product;
  for (size_t i = 0; i < xs.size(); ++i) {
    std::vector<int> perm;
    Shape expanded;
    for (int l : all) {
      auto at = std::find(labels[i].begin(), labels[i].end(), l);
      if (at != labels[i].end()) {
        perm.push_back(int(at - labels[i].begin()));
        expanded.push_back(xs[i].shape()[size_t(at - labels[i].begin())]);
      } else {
        expanded.push_back(1);
      }
    }
    const Tensor t = reshape(transpose(xs[i], perm), expanded);
    product = product.defined() ? product * t : t;
  }
  std::vector<int> summed;
  Labels kept;
  for (size_t a = 0; a < all.size(); ++a) {
    if (std::find(out.begin(), out.end(), all[a]) == out.end()) summed.push_back(int(a));
    else kept.push_back(all[a]);
  }
  if (!summed.empty()) product = sum(product, summed);
  std::vector<int> perm;
  for (int l : out) perm.push_back(int(std::find(kept.begin(), kept.end(), l) - kept.begin()));
  return {as_dtype(transpose(product, perm), n.input(0).dtype())};
}

}  // namespace

void add_einsum_ops(ConverterTable& t) { t["Einsum"] = Einsum; }

}  // namespace hjit::onnx_import
