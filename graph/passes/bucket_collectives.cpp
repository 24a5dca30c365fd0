#include "graph/passes/bucket_collectives.h"

#include <algorithm>
#include <limits>
#include <map>

#include "graph/op_def.h"
#include "graph/rewriter.h"

namespace hjit {
namespace {

struct Bucket {
  std::vector<int> members;  // all_reduce nodes of g
  int64_t bytes = 0;
  int after = -1;  // the node of g after which it starts: the last of its operands
  int deadline = std::numeric_limits<int>::max();  // the first node of g that reads one of its results
};

int64_t bytes_of(const TensorType& t) { return t.numel() * dtype_size(t.dtype); }

}  // namespace

Graph bucket_all_reduces(const Graph& g, const BucketSizes& sizes) {
  std::vector<int> reduces;
  for (size_t id = 0; id < g.nodes.size(); ++id)
    if (g.nodes[id].op == OpKind::AllReduce && g.nodes[id].attrs.i("root") < 0) reduces.push_back(int(id));
  if (reduces.size() < 2) return g;
  // In the order their operands are ready; one open bucket per (op, dtype).
  std::stable_sort(reduces.begin(), reduces.end(), [&](int a, int b) { return g.node(a).inputs[0] < g.node(b).inputs[0]; });
  std::vector<int> first_reader(g.nodes.size(), std::numeric_limits<int>::max());
  for (size_t id = g.nodes.size(); id-- > 0;)
    for (int in : g.nodes[id].inputs) first_reader[size_t(in)] = int(id);
  std::vector<Bucket> buckets;
  std::map<std::pair<int64_t, DType>, size_t> open;
  for (int r : reduces) {
    const Node& n = g.node(r);
    const auto key = std::make_pair(n.attrs.i("op"), n.type.dtype);
    auto it = open.find(key);
    // A bucket starts before anything reads its results: one whose results are needed before this
    // operand is ready is closed (a synchronized batch norm's statistics, read right away).
    if (it != open.end() && std::max(buckets[it->second].after, n.inputs[0]) >= buckets[it->second].deadline) {
      open.erase(it);
      it = open.end();
    }
    if (it == open.end()) {
      it = open.emplace(key, buckets.size()).first;
      buckets.emplace_back();
    }
    Bucket& b = buckets[it->second];
    b.members.push_back(r);
    b.bytes += bytes_of(n.type);
    b.after = std::max(b.after, n.inputs[0]);
    b.deadline = std::min(b.deadline, first_reader[size_t(r)]);
    if (b.bytes >= (buckets.size() == 1 ? sizes.first_bytes : sizes.bytes)) open.erase(it);
  }
  if (buckets.size() == reduces.size()) {
    bool in_place = true;  // every all_reduce alone, right after its operand already: nothing to do
    for (const Bucket& b : buckets) in_place &= b.after + 1 == b.members[0];
    if (in_place) return g;
  }
  std::multimap<int, size_t> starts_after;
  for (size_t k = 0; k < buckets.size(); ++k) starts_after.emplace(buckets[k].after, k);
  std::vector<bool> bucketed(g.nodes.size(), false);
  for (int r : reduces) bucketed[size_t(r)] = true;

  Rewriter rw(g);
  Graph& out = rw.out();
  for (size_t id = 0; id < g.nodes.size(); ++id) {
    if (rw.mapped(int(id)) < 0 && !bucketed[id]) rw.copy(int(id));
    auto [lo, hi] = starts_after.equal_range(int(id));
    for (auto it = lo; it != hi; ++it) {
      const Bucket& b = buckets[it->second];
      const Node& first = g.node(b.members[0]);
      std::vector<int> flat;
      for (int m : b.members) flat.push_back(out.add_op(OpKind::Reshape, {rw.mapped(g.node(m).inputs[0])}, Attrs{{"shape", Shape{g.type(g.node(m).inputs[0]).numel()}}}));
      const int joined = flat.size() == 1 ? flat[0] : out.add_op(OpKind::Concat, flat, Attrs{{"axis", int64_t(0)}});
      const int reduced = out.add_op(OpKind::AllReduce, {joined}, first.attrs);
      int64_t at = 0;
      for (int m : b.members) {
        const TensorType& t = g.node(m).type;
        const int part = out.add_op(OpKind::Slice, {reduced}, Attrs{{"starts", std::vector<int64_t>{at}}, {"stops", std::vector<int64_t>{at + t.numel()}}, {"steps", std::vector<int64_t>{1}}});
        rw.map(m, out.add_op(OpKind::Reshape, {part}, Attrs{{"shape", t.shape}}));
        at += t.numel();
      }
    }
  }
  return rw.finish();
}

}  // namespace hjit
