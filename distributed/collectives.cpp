#include "distributed/collectives.h"

#include <climits>
#include <functional>
#include <cstring>
#include <vector>

#include <hjit/reduce_op.h>

#include "distributed/communicator.h"
#include "graph/op_def.h"
#include "support/hash.h"

namespace hjit::distributed {
namespace {

using dist::ReduceOp;

int64_t bytes_of(const TensorType& t) { return t.numel() * dtype_size(t.dtype); }

int checked_rank(const Communicator& c, OpKind op, const char* what, int64_t r) {
  if (r < 0 || r >= c.size())
    throw ValueError(std::string(op_name(op)) + ": " + what + " " + std::to_string(r) + " is not a rank of this world of " +
                     std::to_string(c.size()) + (c.size() == 1 ? " (dist::init() was not called, or no launcher started this process)" : ""));
  return int(r);
}

// send's and recv's other rank: a rank of the world, not this one.
int checked_peer(const Communicator& c, OpKind op, const std::string& what, const Attrs& attrs) {
  const int peer = checked_rank(c, op, "peer", attrs.i("peer"));
  if (peer == c.rank())
    throw ValueError(what + ": rank " + std::to_string(peer) + " is this process (" + (op == OpKind::Send ? "send to" : "receive from") +
                     " another rank)");
  return peer;
}

int64_t checked_count(OpKind op, int64_t n) {
  if (n > INT_MAX)
    throw ValueError(std::string(op_name(op)) + ": " + std::to_string(n) + " elements in one exchange is more than MPI's 2^31-1: split the tensor");
  return n;
}

// Every rank reached a collective alike: the same op, attributes, dtype and shape. A mismatch is
// raised on every rank with what each one had.
void check_ranks_agree(Communicator& c, const std::string& what) {
  if (c.size() == 1) return;
  const uint64_t mine = Hasher().add_string(what).value();
  std::vector<uint64_t> all(size_t(c.size()));
  c.start_all_gather(&mine, all.data(), sizeof mine)->wait();
  bool same = true;
  for (uint64_t h : all) same &= h == mine;
  if (same) return;
  constexpr size_t kText = 160;
  char text[kText] = {};
  std::strncpy(text, what.c_str(), kText - 1);
  std::vector<char> texts(kText * size_t(c.size()));
  c.start_all_gather(text, texts.data(), kText)->wait();
  std::string msg = "the ranks reached different collectives:";
  for (int r = 0; r < c.size(); ++r) msg += " rank " + std::to_string(r) + " " + std::string(&texts[size_t(r) * kText]) + ";";
  msg.back() = '.';
  throw DistributedError(msg + " Every rank must call the same collectives, in the same order, on tensors of the same "
                         "shape and dtype");
}

// Mean is a sum divided here, in the result's dtype.
void divide(void* data, int64_t n, DType t, double by) {
  auto each = [&](auto* p) {
    for (int64_t i = 0; i < n; ++i) p[i] = decltype(+p[i])(double(p[i]) / by);
  };
  switch (t) {
    case DType::F32: each(static_cast<float*>(data)); break;
    case DType::F64: each(static_cast<double*>(data)); break;
    case DType::F16: each(static_cast<f16*>(data)); break;
    case DType::BF16: each(static_cast<bf16*>(data)); break;
    default: throw InternalError("a mean of integers");
  }
}

// [outer][blocks][inner] <-> [blocks][outer][inner], bytes.
void swap_outer_blocks(const void* in, void* out, int64_t outer, int64_t blocks, int64_t inner) {
  const auto* src = static_cast<const uint8_t*>(in);
  auto* dst = static_cast<uint8_t*>(out);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t b = 0; b < blocks; ++b)
      if (inner > 0) std::memcpy(dst + (b * outer + o) * inner, src + (o * blocks + b) * inner, size_t(inner));
}

int64_t product(const Shape& s, size_t from, size_t to) {
  int64_t p = 1;
  for (size_t i = from; i < to; ++i) p *= s[i];
  return p;
}

// What a send says ahead of its data, so that a recv of another shape or dtype is an error.
struct Header {
  uint64_t magic = 0x686a69742d703270ull;  // "hjit-p2p"
  uint64_t type_hash = 0;
  int64_t bytes = 0;
  char type[96] = {};
};
Header header_for(const TensorType& t) {
  Header h;
  h.type_hash = Hasher().add_string(t.str()).value();
  h.bytes = bytes_of(t);
  std::strncpy(h.type, t.str().c_str(), sizeof h.type - 1);
  return h;
}

}  // namespace

std::string describe_collective(OpKind op, const Attrs& attrs, const TensorType& operand) {
  std::string s = op_name(op);
  switch (op) {
    case OpKind::AllReduce:
      s += std::string("(") + dist::reduce_op_name(ReduceOp(attrs.i("op"))) +
           (attrs.i("root") >= 0 ? ", root " + std::to_string(attrs.i("root")) : "") + ")";
      break;
    case OpKind::ReduceScatter: s += std::string("(") + dist::reduce_op_name(ReduceOp(attrs.i("op"))) + ", axis " + std::to_string(attrs.i("axis")) + ")"; break;
    case OpKind::AllGather: s += "(axis " + std::to_string(attrs.i("axis")) + ")"; break;
    case OpKind::DistBroadcast: s += "(root " + std::to_string(attrs.i("root")) + ")"; break;
    case OpKind::Send: s += "(to rank " + std::to_string(attrs.i("peer")) + ", tag " + std::to_string(attrs.i("tag")) + ")"; break;
    case OpKind::Recv: s += "(from rank " + std::to_string(attrs.i("peer")) + ", tag " + std::to_string(attrs.i("tag")) + ")"; break;
    default: break;
  }
  return s + " " + operand.str();
}

namespace {

class Finished final : public Pending {
 public:
  void wait() override {}
};

// An all_reduce under way: the exchange, then what makes its result final here.
class Reducing final : public Pending {
 public:
  Reducing(std::unique_ptr<Pending> exchange, std::function<void()> then) : exchange_(std::move(exchange)), then_(std::move(then)) {}
  void wait() override {
    if (!exchange_) return;
    exchange_->wait();
    exchange_.reset();
    then_();
  }

 private:
  std::unique_ptr<Pending> exchange_;
  std::function<void()> then_;
};

}  // namespace

void run_collective(OpKind op, const Attrs& attrs, const TensorType* in_type, const void* in, const TensorType& out_type,
                    void* out) {
  start_collective(op, attrs, in_type, in, out_type, out)->wait();
}

namespace {

// A failure inside a collective (a timeout in the all_gather that checks the ranks agree, in the
// exchange itself) said as the collective the user called, with the ranks it waited on.
[[noreturn]] void rethrow_as(const DistributedError& e, const std::string& what, const Communicator& c, int peer) {
  std::string others;
  for (int r = 0; r < c.size(); ++r)
    if (r != c.rank() && (peer < 0 || r == peer)) others += (others.empty() ? "" : ", ") + std::to_string(r);
  throw DistributedError(what + " on rank " + std::to_string(c.rank()) + " of a world of " + std::to_string(c.size()) + ", with rank" +
                         (others.find(',') == std::string::npos ? " " : "s ") + others + ": " + e.what());
}

// Its wait() raises as the collective that started it.
class Named final : public Pending {
 public:
  Named(std::unique_ptr<Pending> inner, std::string what, int peer) : inner_(std::move(inner)), what_(std::move(what)), peer_(peer) {}
  void wait() override {
    try {
      inner_->wait();
    } catch (const DistributedError& e) {
      rethrow_as(e, what_, world(), peer_);
    }
  }

 private:
  std::unique_ptr<Pending> inner_;
  std::string what_;
  int peer_;
};

std::unique_ptr<Pending> start_named(OpKind op, const Attrs& attrs, const TensorType* in_type, const void* in,
                                     const TensorType& out_type, void* out, const std::string& what);

}  // namespace

std::unique_ptr<Pending> start_collective(OpKind op, const Attrs& attrs, const TensorType* in_type, const void* in,
                                          const TensorType& out_type, void* out) {
  const TensorType& operand = in_type ? *in_type : out_type;
  const std::string what = describe_collective(op, attrs, operand);
  const int peer = op == OpKind::Send || op == OpKind::Recv ? int(attrs.i("peer")) : -1;
  try {
    return std::make_unique<Named>(start_named(op, attrs, in_type, in, out_type, out, what), what, peer);
  } catch (const DistributedError& e) {
    if (std::string(e.what()).rfind(what, 0) == 0) throw;  // already said as this collective
    rethrow_as(e, what, world(), peer);
  }
}

namespace {

std::unique_ptr<Pending> start_named(OpKind op, const Attrs& attrs, const TensorType* in_type, const void* in,
                                     const TensorType& out_type, void* out, const std::string& what) {
  Communicator& c = world();
  const TensorType& operand = in_type ? *in_type : out_type;
  if (attrs.has("world") && attrs.i("world") != c.size())
    throw DistributedError(what + ": traced for a world of " + std::to_string(attrs.i("world")) + " ranks, run in a world of " +
                           std::to_string(c.size()) + " (trace it again in this world)");
  switch (op) {
    case OpKind::AllReduce: {
      const auto reduce = ReduceOp(attrs.i("op"));
      const int root = attrs.i("root") < 0 ? -1 : checked_rank(c, op, "root", attrs.i("root"));
      check_ranks_agree(c, what);
      auto exchange = c.start_all_reduce(in, out, checked_count(op, operand.numel()), operand.dtype, reduce, root);
      const int ranks = c.size();
      const bool zeros = root >= 0 && root != c.rank();
      return std::make_unique<Reducing>(std::move(exchange), [=] {
        if (zeros) std::memset(out, 0, size_t(bytes_of(out_type)));
        else if (reduce == ReduceOp::Mean) divide(out, out_type.numel(), out_type.dtype, double(ranks));
      });
    }
    case OpKind::AllGather: {
      check_ranks_agree(c, what);
      const size_t axis = size_t(attrs.i("axis"));
      const int64_t outer = product(operand.shape, 0, axis);
      const int64_t inner = product(operand.shape, axis, operand.shape.size()) * dtype_size(operand.dtype);
      checked_count(op, inner * outer);
      if (outer == 1) {
        c.start_all_gather(in, out, inner)->wait();
        return std::make_unique<Finished>();
      }
      std::vector<uint8_t> blocks(size_t(inner * outer * c.size()));
      c.start_all_gather(in, blocks.data(), inner * outer)->wait();
      swap_outer_blocks(blocks.data(), out, c.size(), outer, inner);
      return std::make_unique<Finished>();
    }
    case OpKind::ReduceScatter: {
      check_ranks_agree(c, what);
      const size_t axis = size_t(attrs.i("axis"));
      const int64_t outer = product(operand.shape, 0, axis);
      const int64_t block = out_type.numel() / std::max<int64_t>(outer, 1);  // elements of one rank's part per outer index
      const int64_t count = checked_count(op, out_type.numel());
      std::vector<uint8_t> by_rank;
      const void* src = in;
      if (outer > 1) {
        by_rank.resize(size_t(bytes_of(operand)));
        swap_outer_blocks(in, by_rank.data(), outer, c.size(), block * dtype_size(operand.dtype));
        src = by_rank.data();
      }
      const auto reduce = ReduceOp(attrs.i("op"));
      c.start_reduce_scatter(src, out, count, operand.dtype, reduce)->wait();
      if (reduce == ReduceOp::Mean) divide(out, count, out_type.dtype, double(c.size()));
      return std::make_unique<Finished>();
    }
    case OpKind::DistBroadcast: {
      const int root = checked_rank(c, op, "root", attrs.i("root"));
      check_ranks_agree(c, what);
      if (out != in && bytes_of(operand) > 0) std::memcpy(out, in, size_t(bytes_of(operand)));
      c.start_broadcast(out, bytes_of(operand), root)->wait();
      return std::make_unique<Finished>();
    }
    case OpKind::Send: {
      const int peer = checked_peer(c, op, what, attrs);
      const Header h = header_for(operand);
      const int tag = int(attrs.i("tag"));
      c.start_send(&h, sizeof h, peer, tag)->wait();
      if (h.bytes > 0) c.start_send(in, h.bytes, peer, tag)->wait();
      return std::make_unique<Finished>();
    }
    case OpKind::Recv: {
      const int peer = checked_peer(c, op, what, attrs);
      const Header want = header_for(out_type);
      const int tag = int(attrs.i("tag"));
      Header got;
      c.start_recv(&got, sizeof got, peer, tag)->wait();
      if (got.magic != want.magic) throw DistributedError(what + ": rank " + std::to_string(peer) + " sent something that is not hjit's");
      if (got.type_hash != want.type_hash || got.bytes != want.bytes) {
        std::vector<uint8_t> drained(size_t(std::max<int64_t>(got.bytes, 0)));  // keeps the channel in step
        if (got.bytes > 0) c.start_recv(drained.data(), got.bytes, peer, tag)->wait();
        throw DistributedError(what + ": rank " + std::to_string(peer) + " sent " + std::string(got.type, strnlen(got.type, sizeof got.type)) +
                               ", not " + out_type.str());
      }
      if (want.bytes > 0) c.start_recv(out, want.bytes, peer, tag)->wait();
      return std::make_unique<Finished>();
    }
    default: throw InternalError(std::string(op_name(op)) + " is not a collective");
  }
}

}  // namespace

}  // namespace hjit::distributed
