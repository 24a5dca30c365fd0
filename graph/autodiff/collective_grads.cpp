// Gradient rules of the collectives, the transposes JAX uses: every rank's loss is its own, and a
// rank's gradient sums what each rank's loss says about it. all_reduce's sum is its own transpose,
// all_gather and reduce_scatter are each other's, a broadcast from a root is a sum onto that root.
#include <hjit/reduce_op.h>

#include "graph/autodiff/grad_rules.h"
#include "graph/op_def.h"

namespace hjit::grad_rules {
namespace {

using dist::ReduceOp;

int all_reduce(Builder& b, int v, ReduceOp op, int64_t root = -1) {
  return b.op(OpKind::AllReduce, {v}, Attrs{{"op", int64_t(op)}, {"root", root}});
}
int broadcast_from(Builder& b, int v, int64_t root) { return b.op(OpKind::DistBroadcast, {v}, Attrs{{"root", root}}); }

// The elements of a product over the ranks other than this one's, exactly where some are zero:
// the product of the non-zero ones divided by this rank's where no rank holds a zero, that product
// on the one rank holding the only zero, and zero wherever two or more ranks hold one.
int product_of_the_others(Builder& b, int x) {
  const int zero = b.like(x, 0), one = b.like(x, 1);
  const int nonzero = b.op(OpKind::Ne, {x, zero});
  const int zeros = all_reduce(b, b.cast(b.op(OpKind::Not, {nonzero}), b.type(x).dtype), ReduceOp::Sum);
  const int product = all_reduce(b, b.where(nonzero, x, one), ReduceOp::Prod);
  const int none_zero = b.op(OpKind::Eq, {zeros, zero}), one_zero = b.op(OpKind::Eq, {zeros, one});
  return b.where(nonzero, b.where(none_zero, b.div(product, x), zero), b.where(one_zero, product, zero));
}

}  // namespace

void AllReduce(GradCtx& c) {
  Builder& b = c.b;
  const auto op = ReduceOp(c.node.attrs.i("op"));
  const int64_t root = c.node.attrs.i("root");
  if (root < 0 && (op == ReduceOp::Sum || op == ReduceOp::Mean)) {
    c.dx[0] = all_reduce(b, c.g, op);
    return;
  }
  // Where only the root keeps the result, its gradient and value are the root's, sent to all.
  const int g_all = root < 0 ? all_reduce(b, c.g, ReduceOp::Sum) : broadcast_from(b, c.g, root);
  const int y = root < 0 ? c.out : broadcast_from(b, c.out, root);
  const int x = c.in[0];
  switch (op) {
    case ReduceOp::Sum: c.dx[0] = g_all; return;
    case ReduceOp::Mean: c.dx[0] = b.div(g_all, all_reduce(b, b.like(x, 1), ReduceOp::Sum)); return;
    case ReduceOp::Max:
    case ReduceOp::Min: {  // shared evenly between the ranks that hold the extreme, as torch.amax does
      const int at = b.op(OpKind::Eq, {x, y});
      const int holders = all_reduce(b, b.cast(at, b.type(x).dtype), ReduceOp::Sum);
      c.dx[0] = b.where(at, b.div(g_all, holders), b.like(x, 0));
      return;
    }
    case ReduceOp::Prod: c.dx[0] = b.mul(g_all, product_of_the_others(b, x)); return;
  }
}

void AllGather(GradCtx& c) {
  c.dx[0] = c.b.op(OpKind::ReduceScatter, {c.g},
                   Attrs{{"axis", c.node.attrs.i("axis")}, {"op", int64_t(ReduceOp::Sum)}, {"world", c.node.attrs.i("world")}});
}

void ReduceScatter(GradCtx& c) {
  const int gathered = c.b.op(OpKind::AllGather, {c.g}, Attrs{{"axis", c.node.attrs.i("axis")}, {"world", c.node.attrs.i("world")}});
  const bool mean = ReduceOp(c.node.attrs.i("op")) == ReduceOp::Mean;
  c.dx[0] = mean ? c.b.div(gathered, c.b.like(gathered, double(c.node.attrs.i("world")))) : gathered;
}

void DistBroadcast(GradCtx& c) { c.dx[0] = all_reduce(c.b, c.g, ReduceOp::Sum, c.node.attrs.i("root")); }

// Point to point transfers carry no gradient back (the sender's operand gets none): differentiate
// through all_gather / reduce_scatter / all_reduce instead.
void Send(GradCtx&) {}
void Recv(GradCtx&) {}

}  // namespace hjit::grad_rules
