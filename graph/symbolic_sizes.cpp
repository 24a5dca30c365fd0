#include "graph/symbolic_sizes.h"

#include <cstring>

namespace hjit {

void write_affine(BinaryWriter& w, const Affine& a) {
  w.i64(a.constant);
  w.u64(a.coef.size());
  for (int64_t c : a.coef) w.i64(c);
}

Affine read_affine(BinaryReader& r, int symbols) {
  Affine a;
  a.constant = r.i64();
  const size_t n = r.count(size_t(symbols));
  if (n != 0 && n != size_t(symbols)) throw ValueError("an affine size has " + std::to_string(n) + " coefficients");
  for (size_t k = 0; k < n; ++k) a.coef.push_back(r.i64());
  return a;
}

bool Affine::is_constant() const {
  for (int64_t c : coef)
    if (c != 0) return false;
  return true;
}

int64_t Affine::at(const std::vector<int64_t>& symbols) const {
  int64_t v = constant;
  for (size_t k = 0; k < coef.size() && k < symbols.size(); ++k) v += coef[k] * symbols[k];
  return v;
}

std::string Affine::str() const {
  std::string s;
  for (size_t k = 0; k < coef.size(); ++k)
    if (coef[k] != 0) s += (s.empty() ? "" : "+") + (coef[k] == 1 ? "" : std::to_string(coef[k]) + "*") + "s" + std::to_string(k);
  if (constant != 0 || s.empty()) s += (s.empty() || constant < 0 ? "" : "+") + std::to_string(constant);
  return s;
}

bool SymbolicSizes::extent_varies(int node) const {
  for (const Affine& a : extents[size_t(node)])
    if (!a.is_constant()) return true;
  return false;
}

bool SymbolicSizes::attr_varies(int node, const std::string& name) const { return attrs[size_t(node)].count(name) > 0; }

Shape SymbolicSizes::shape_at(int node, const std::vector<int64_t>& symbols) const {
  Shape s;
  for (const Affine& a : extents[size_t(node)]) s.push_back(a.at(symbols));
  return s;
}

std::string SymbolicSizes::str() const {
  std::string s = "symbols";
  for (const Source& src : sources) s += " in" + std::to_string(src.input) + "[" + std::to_string(src.dim) + "]";
  if (serves_from > 0) s += " from " + std::to_string(serves_from);
  for (size_t n = 0; n < extents.size(); ++n) {
    if (!varies(int(n))) continue;
    s += "\n%" + std::to_string(n) + " [";
    for (size_t d = 0; d < extents[n].size(); ++d) s += (d ? "," : "") + extents[n][d].str();
    s += "]";
    for (const auto& [name, forms] : attrs[n]) {
      s += " " + name + "=(";
      for (size_t i = 0; i < forms.size(); ++i) s += (i ? "," : "") + forms[i].str();
      s += ")";
    }
  }
  return s;
}

namespace {

// An integer attribute's elements (a single integer is a list of one); false for other kinds.
bool int_elements(const AttrValue& v, std::vector<int64_t>* out) {
  if (const int64_t* i = std::get_if<int64_t>(&v)) return *out = {*i}, true;
  if (const auto* l = std::get_if<std::vector<int64_t>>(&v)) return *out = *l, true;
  return false;
}

// Two values of an attribute alike: graphs (a loop's body, traced anew at each size) by their text
// and constants, not by identity.
bool same_value(const AttrValue& a, const AttrValue& b) {
  const auto* ga = std::get_if<std::shared_ptr<const Graph>>(&a);
  const auto* gb = std::get_if<std::shared_ptr<const Graph>>(&b);
  if (!ga || !gb || !*ga || !*gb) return a == b;
  const Graph &x = **ga, &y = **gb;
  if (x.constants.size() != y.constants.size() || x.str() != y.str()) return false;
  for (size_t c = 0; c < x.constants.size(); ++c)
    if (x.constants[c].nbytes != y.constants[c].nbytes || std::memcmp(x.constants[c].data, y.constants[c].data, x.constants[c].nbytes) != 0)
      return false;
  return true;
}

}  // namespace

std::optional<SymbolicSizes> fit_symbolic_sizes(const std::vector<const Graph*>& traces,
                                                const std::vector<std::vector<int64_t>>& values,
                                                const std::vector<SymbolicSizes::Source>& sources, std::string* why) {
  const size_t k_count = sources.size();
  if (traces.size() != k_count + 2 || values.size() != traces.size()) throw InternalError("fit_symbolic_sizes: wrong trace count");
  auto fail = [&](const std::string& w) -> std::optional<SymbolicSizes> {
    *why = w;
    return std::nullopt;
  };
  const Graph& g0 = *traces[0];
  for (const Graph* g : traces) {
    if (g->nodes.size() != g0.nodes.size() || g->inputs != g0.inputs || g->outputs != g0.outputs || g->updates != g0.updates)
      return fail("the function traces to a different graph at another size (C++ that depends on the size)");
  }
  // value(t) for one number read from every trace: an Affine in the symbols, or nullopt.
  auto fit = [&](const std::vector<int64_t>& v) -> std::optional<Affine> {
    Affine a;
    a.coef.assign(k_count, 0);
    bool varies = false;
    for (size_t k = 0; k < k_count; ++k) {
      const int64_t dv = v[1 + k] - v[0], ds = values[1 + k][k] - values[0][k];
      if (dv % ds != 0) return std::nullopt;
      a.coef[k] = dv / ds;
      varies |= a.coef[k] != 0;
    }
    a.constant = v[0];
    for (size_t k = 0; k < k_count; ++k) a.constant -= a.coef[k] * values[0][k];
    if (a.at(values.back()) != v.back()) return std::nullopt;  // not affine
    if (!varies) a.coef.clear();
    return a;
  };
  SymbolicSizes s;
  s.num_symbols = int(k_count);
  s.sources = sources;
  s.extents.resize(g0.nodes.size());
  s.attrs.resize(g0.nodes.size());
  for (size_t n = 0; n < g0.nodes.size(); ++n) {
    const Node& a = g0.nodes[n];
    const std::string where = std::string(op_name(a.op)) + " (node %" + std::to_string(n) + ")";
    for (const Graph* g : traces) {
      const Node& b = g->nodes[n];
      if (b.op != a.op || b.inputs != a.inputs || b.type.dtype != a.type.dtype || b.type.rank() != a.type.rank() ||
          b.attrs.items().size() != a.attrs.items().size())
        return fail("the function traces to a different graph at another size, at " + where);
    }
    for (int d = 0; d < a.type.rank(); ++d) {
      std::vector<int64_t> v;
      for (const Graph* g : traces) v.push_back(g->nodes[n].type.shape[size_t(d)]);
      std::optional<Affine> f = fit(v);
      if (!f) return fail("extent " + std::to_string(d) + " of " + where + " is not an affine function of the dynamic sizes");
      s.extents[n].push_back(*f);
    }
    if (a.op == OpKind::Constant) {
      if (s.extent_varies(int(n))) return fail("a constant's shape depends on a dynamic size, at " + where +
                                               " (a tensor made inside the function at that size; make it with ops)");
      for (const Graph* g : traces) {
        const ConstData &x = g0.constants[size_t(a.constant)], &y = g->constants[size_t(g->nodes[n].constant)];
        if (x.nbytes != y.nbytes || std::memcmp(x.data, y.data, x.nbytes) != 0)
          return fail("a constant's value depends on a dynamic size, at " + where);
      }
    }
    for (size_t i = 0; i < a.attrs.items().size(); ++i) {
      const auto& [name, value] = a.attrs.items()[i];
      std::vector<std::vector<int64_t>> elements;
      bool integer = true;
      for (const Graph* g : traces) {
        const auto& [bname, bvalue] = g->nodes[n].attrs.items()[i];
        if (bname != name) return fail("the function traces to a different graph at another size, at " + where);
        std::vector<int64_t> e;
        integer &= int_elements(bvalue, &e);
        elements.push_back(std::move(e));
        if (!integer && !same_value(bvalue, value))
          return fail(std::holds_alternative<std::shared_ptr<const Graph>>(value)
                          ? "the graph '" + name + "' of " + where +
                                " differs at another size (a branch or loop body that reads a tensor of a dynamic size: bodies compile for fixed sizes)"
                          : "attribute '" + name + "' of " + where + " depends on a dynamic size (a number computed from it)");
      }
      if (!integer) continue;
      std::vector<Affine> forms;
      bool varies = false;
      for (size_t e = 0; e < elements[0].size(); ++e) {
        std::vector<int64_t> v;
        for (const auto& el : elements) {
          if (el.size() != elements[0].size()) return fail("attribute '" + name + "' of " + where + " changes length with the size");
          v.push_back(el[e]);
        }
        std::optional<Affine> f = fit(v);
        if (!f) return fail("attribute '" + name + "' of " + where + " is not an affine function of the dynamic sizes");
        varies |= !f->is_constant();
        forms.push_back(*f);
      }
      if (varies) s.attrs[n][name] = std::move(forms);
    }
  }
  return s;
}

Graph instantiate(const Graph& g, const SymbolicSizes& sizes, const std::vector<int64_t>& symbols) {
  Graph out = g;
  for (size_t n = 0; n < out.nodes.size(); ++n) {
    Node& node = out.nodes[n];
    if (sizes.extent_varies(int(n))) node.type.shape = sizes.shape_at(int(n), symbols);
    for (const auto& [name, forms] : sizes.attrs[n]) {
      std::vector<int64_t> v;
      for (const Affine& f : forms) v.push_back(f.at(symbols));
      if (std::holds_alternative<int64_t>(node.attrs.get(name))) node.attrs.set(name, v.at(0));
      else node.attrs.set(name, v);
    }
  }
  return out;
}

}  // namespace hjit
