// Sizes that vary from call to call (jit's dynamic_dims): a graph traced at one size, plus which of
// its extents and integer attributes are affine in the dynamic sizes ("symbols"), found by tracing
// the function again at other sizes and comparing. One compiled pipeline then serves every size:
// the backend lowers those extents and attributes as expressions of the symbols.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include <hjit/graph.h>

#include "support/binary_io.h"

namespace hjit {

// constant + sum_k coef[k] * symbol[k]
struct Affine {
  int64_t constant = 0;
  std::vector<int64_t> coef;  // empty: a constant

  bool is_constant() const;
  int64_t at(const std::vector<int64_t>& symbols) const;
  std::string str() const;  // "2*s0+1"
  bool operator==(const Affine&) const = default;
};

// An affine form in hjit's binary files (saved modules, cache entries): its constant, then its
// coefficients (none, or one per symbol: a ValueError otherwise).
void write_affine(BinaryWriter& w, const Affine& a);
Affine read_affine(BinaryReader& r, int symbols);

struct SymbolicSizes {
  int num_symbols = 0;
  // Symbol k is extent `dim` (row-major) of graph input `input`.
  struct Source {
    int input = 0, dim = 0;
  };
  std::vector<Source> sources;
  std::vector<std::vector<Affine>> extents;  // per node, per dim (row-major)
  // Per node: integer (or integer list) attributes that vary, one Affine per element.
  std::vector<std::map<std::string, std::vector<Affine>>> attrs;
  // The smallest value of a symbol the pipeline must serve where it is below the graph's own sizes
  // (a function first called at a dynamic size of 1 is traced at 2); 0: the graph's sizes.
  int64_t serves_from = 0;

  bool extent_varies(int node) const;
  bool attr_varies(int node, const std::string& name) const;
  bool varies(int node) const { return extent_varies(node) || !attrs[size_t(node)].empty(); }
  Shape shape_at(int node, const std::vector<int64_t>& symbols) const;
  std::string str() const;  // every varying extent and attribute: part of a cache key
};

// The graph at these values of the symbols: every varying extent and attribute evaluated (what
// tracing at those sizes would give), for a pipeline of fixed sizes where the dynamic one does not
// serve (a size below its smallest).
Graph instantiate(const Graph& g, const SymbolicSizes& sizes, const std::vector<int64_t>& symbols);

// The graphs of one function traced at several sizes: traces[0] at symbols values[0] (the graph
// that is compiled), traces[1 + k] with symbol k changed alone, and a last one with all changed (a
// check). nullopt, with the reason in *why, when they differ other than in affine sizes (C++ that
// branches on a size, a constant whose size or value depends on one).
std::optional<SymbolicSizes> fit_symbolic_sizes(const std::vector<const Graph*>& traces,
                                                const std::vector<std::vector<int64_t>>& values,
                                                const std::vector<SymbolicSizes::Source>& sources, std::string* why);

}  // namespace hjit
