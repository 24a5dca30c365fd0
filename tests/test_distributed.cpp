// Collectives as ops (hjit/distributed.h). The same program runs as one process (a world of one:
// every collective a copy, no MPI) and under `mpirun -np 2` (tests/CMakeLists.txt), where each
// rank computes every rank's operand itself, so the expected results are known on every rank.
// Eager is checked against those, and the jitted (host step) results against eager.
#include <chrono>
#include <csignal>
#include <cmath>
#include <cstdlib>
#include <thread>

#include <hjit/distributed.h>
#include <hjit/nn.h>

#include "support/settings.h"
#include "tests/support.h"

namespace dist = hjit::dist;
using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

// Joins the job once, before any test case (mpirun's environment, or a world of one).
const bool joined = [] {
  dist::init();
  return true;
}();

int world() { return dist::world_size(); }
int me() { return dist::rank(); }

// Rank r's operand: small values that differ per rank (products stay exact in every dtype).
Tensor operand(int r, const Shape& shape, DType dtype) {
  const int64_t n = hjit::shape_numel(shape);
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) v[size_t(i)] = dtype == DType::Bool ? double((i + r) % 3 == 0) : double((i * 3 + r * 5) % 7) - ((hjit::dtype_info(dtype).kind == hjit::DTypeKind::SignedInt) || hjit::is_floating(dtype) ? 3 : 0) + (hjit::is_floating(dtype) ? 0.5 * r : 0);
  return Tensor::from_vector(v, shape).astype(dtype);
}

// What all_reduce gives: every rank's operand combined, in double.
Tensor combined(const Shape& shape, DType dtype, dist::ReduceOp op) {
  Tensor acc = operand(0, shape, dtype).astype(DType::F64);
  for (int r = 1; r < world(); ++r) {
    const Tensor x = operand(r, shape, dtype).astype(DType::F64);
    switch (op) {
      case dist::ReduceOp::Sum: case dist::ReduceOp::Mean: acc = acc + x; break;
      case dist::ReduceOp::Max: acc = hjit::maximum(acc, x); break;
      case dist::ReduceOp::Min: acc = hjit::minimum(acc, x); break;
      case dist::ReduceOp::Prod: acc = acc * x; break;
    }
  }
  if (op == dist::ReduceOp::Mean) acc = acc / double(world());
  if (dtype == DType::Bool) acc = acc != 0.0;
  return acc.astype(dtype);
}

void check_equal(const Tensor& got, const Tensor& want) {
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  const std::string diff = test::compare(got, want, test::tolerance(got.dtype()));
  CHECK_MESSAGE(diff.empty(), diff);
}

const DType kDTypes[] = {DType::F32, DType::F64, DType::F16, DType::BF16, DType::I32, DType::I64, DType::U8, DType::I8, DType::Bool};

}  // namespace

TEST_CASE("all_reduce of every op and dtype: eager, and jitted with pipelines before and after it") {
  const Shape shape{3, 5};
  for (DType dt : kDTypes)
    for (int o = 0; o < hjit::dist::kNumReduceOps; ++o) {
      const auto op = dist::ReduceOp(o);
      if (op == dist::ReduceOp::Mean && !hjit::is_floating(dt)) {
        CHECK_THROWS_AS(dist::all_reduce(operand(me(), shape, dt), op), hjit::DTypeError);
        continue;
      }
      if (dt == DType::Bool && op == dist::ReduceOp::Prod) continue;  // and: tested as Min
      const std::string dtype = hjit::dtype_name(dt), reduce = dist::reduce_op_name(op);
      CAPTURE(dtype);
      CAPTURE(reduce);
      const Tensor x = operand(me(), shape, dt);
      check_equal(dist::all_reduce(x, op), combined(shape, dt, op));
      if (dt == DType::Bool) continue;
      // A pipeline on each side of the host step.
      auto f = hjit::jit([op](const Tensor& a) { return dist::all_reduce((a + a) - a, op) * 2 - dist::all_reduce(a, op); });
      check_equal(f(x), combined(shape, dt, op));
    }
}

TEST_CASE("reduce to a root, broadcast from one, all_gather and reduce_scatter along every axis") {
  const Shape shape{2, 2 * world(), 3};
  const Tensor x = operand(me(), shape, DType::F32);
  for (int root = 0; root < world(); ++root) {
    const Tensor want = me() == root ? combined(shape, DType::F32, dist::ReduceOp::Sum) : Tensor::zeros(shape);
    check_equal(dist::reduce(x, dist::ReduceOp::Sum, root), want);
    check_equal(dist::broadcast(x, root), operand(root, shape, DType::F32));
    auto jb = hjit::jit([root](const Tensor& a) { return dist::broadcast(a, root) * 2.0; });
    check_equal(jb(x), operand(root, shape, DType::F32) * 2.0);
  }
  for (int axis = 0; axis < 3; ++axis) {
    CAPTURE(axis);
    std::vector<Tensor> parts;
    for (int r = 0; r < world(); ++r) parts.push_back(operand(r, shape, DType::F32));
    const Tensor gathered = hjit::concat(parts, axis);
    check_equal(dist::all_gather(x, axis), gathered);
    auto jg = hjit::jit([axis](const Tensor& a) { return dist::all_gather(a + 1.0, axis); });
    check_equal(jg(x), gathered + 1.0);
    if (shape[size_t(axis)] % world() != 0) {
      CHECK_THROWS_AS(dist::reduce_scatter(x, axis), hjit::ShapeError);
      continue;
    }
    const int64_t part = shape[size_t(axis)] / world();
    const Tensor sum = combined(shape, DType::F32, dist::ReduceOp::Sum);
    const Tensor mine = hjit::slice(sum, axis, me() * part, (me() + 1) * part);
    check_equal(dist::reduce_scatter(x, axis), mine);
    check_equal(dist::reduce_scatter(x, axis, dist::ReduceOp::Mean), mine / double(world()));
    auto js = hjit::jit([axis](const Tensor& a) { return dist::reduce_scatter(a, axis); });
    check_equal(js(x), mine);
  }
  // Size 0, scalars, f16.
  check_equal(dist::all_reduce(Tensor::zeros({0, 3})), Tensor::zeros({0, 3}));
  check_equal(dist::all_reduce(Tensor::scalar(1.5)), Tensor::scalar(1.5 * world()));
  check_equal(dist::all_gather(operand(me(), {4}, DType::F16)), hjit::concat([] {
                std::vector<Tensor> p;
                for (int r = 0; r < world(); ++r) p.push_back(operand(r, {4}, DType::F16));
                return p;
              }(), 0));
  CHECK_THROWS_AS(dist::all_gather(Tensor::scalar(1.0)), hjit::ShapeError);
}

TEST_CASE("collectives are traced into the graph, never folded or dropped, and run at every call") {
  auto f = hjit::jit([](const Tensor& a) {
    Tensor unused = dist::all_reduce(Tensor::ones({2}));  // a constant operand, a result nobody reads
    (void)unused;
    return dist::all_reduce(a, dist::ReduceOp::Max);
  });
  const Tensor x = operand(me(), {4}, DType::F32);
  const hjit::Graph g = f.graph(x);
  int reduces = 0;
  for (const hjit::Node& n : g.nodes) reduces += n.op == hjit::OpKind::AllReduce;
  CHECK(reduces == 2);
  CHECK(g.str().find("all_reduce") != std::string::npos);
  CHECK(f.explain(x).find("all_reduce(max) f32[4] on the host") != std::string::npos);
  for (int call = 0; call < 3; ++call) {
    const Tensor y = operand(me(), {4}, DType::F32) + double(call);
    check_equal(f(y), combined({4}, DType::F32, dist::ReduceOp::Max) + double(call));
  }
}

TEST_CASE("gradients through collectives: psum is its own transpose, all_gather and reduce_scatter each other's") {
  // Each rank's loss is its own; a rank's gradient sums what every rank's loss says about its x.
  // Rank r's loss: sum(c_r * f(x_r)), with c_r a rank-dependent weight.
  const Shape shape{2, 2 * world()};
  auto weight = [&](int r, const Shape& s) { return operand(r, s, DType::F32) + 4.0; };
  const Tensor x = operand(me(), shape, DType::F32) + 0.25;
  Tensor sum_of_weights = Tensor::zeros(shape);
  for (int r = 0; r < world(); ++r) sum_of_weights = sum_of_weights + weight(r, shape);

  SUBCASE("all_reduce sum and mean") {
    auto loss = [&](const Tensor& v) { return hjit::sum(weight(me(), shape) * dist::all_reduce(v)); };
    check_equal(hjit::grad(loss)(x), sum_of_weights);
    check_equal(hjit::jit(hjit::grad(loss))(x), sum_of_weights);
    auto mean = [&](const Tensor& v) { return hjit::sum(weight(me(), shape) * dist::all_reduce(v, dist::ReduceOp::Mean)); };
    check_equal(hjit::grad(mean)(x), sum_of_weights / double(world()));
  }
  SUBCASE("all_reduce max: the ranks holding the maximum share the gradient") {
    auto loss = [&](const Tensor& v) { return hjit::sum(weight(me(), shape) * dist::all_reduce(v, dist::ReduceOp::Max)); };
    const Tensor top = combined(shape, DType::F32, dist::ReduceOp::Max);
    Tensor holders = Tensor::zeros(shape);
    for (int r = 0; r < world(); ++r) holders = holders + (operand(r, shape, DType::F32) + 0.25 == top + 0.25).astype(DType::F32);
    const Tensor want = hjit::where(x == top + 0.25, sum_of_weights / holders, Tensor::zeros(shape));
    check_equal(hjit::grad(loss)(x), want);
  }
  SUBCASE("all_reduce prod, with zeros") {
    const Tensor z = hjit::where(operand(me(), shape, DType::F32) > 1.0, Tensor::zeros(shape), x);
    auto loss = [&](const Tensor& v) { return hjit::sum(weight(me(), shape) * dist::all_reduce(v, dist::ReduceOp::Prod)); };
    // The product of the other ranks' values, by hand.
    std::vector<Tensor> all;
    for (int r = 0; r < world(); ++r) {
      const Tensor xr = operand(r, shape, DType::F32) + 0.25;
      all.push_back(hjit::where(operand(r, shape, DType::F32) > 1.0, Tensor::zeros(shape), xr));
    }
    Tensor others = Tensor::ones(shape);
    for (int r = 0; r < world(); ++r)
      if (r != me()) others = others * all[size_t(r)];
    check_equal(hjit::grad(loss)(z), sum_of_weights * others);
  }
  SUBCASE("all_gather and reduce_scatter") {
    const Shape big{2, 2 * world() * world()};
    Tensor gather_weights = Tensor::zeros(big);
    for (int r = 0; r < world(); ++r) gather_weights = gather_weights + weight(r, big);
    auto gathered = [&](const Tensor& v) { return hjit::sum(weight(me(), big) * dist::all_gather(v, 1)); };
    const int64_t w = shape[1];
    check_equal(hjit::grad(gathered)(x), hjit::slice(gather_weights, 1, me() * w, (me() + 1) * w));
    const Tensor xb = operand(me(), big, DType::F32);
    auto scattered = [&](const Tensor& v) { return hjit::sum(weight(me(), shape) * dist::reduce_scatter(v, 1)); };
    std::vector<Tensor> per_rank;
    for (int r = 0; r < world(); ++r) per_rank.push_back(weight(r, shape));
    check_equal(hjit::grad(scattered)(xb), hjit::concat(per_rank, 1));
    check_equal(hjit::jit(hjit::grad(scattered))(xb), hjit::concat(per_rank, 1));
  }
  SUBCASE("broadcast: the root collects every rank's gradient") {
    auto loss = [&](const Tensor& v) { return hjit::sum(weight(me(), shape) * dist::broadcast(v, 0)); };
    check_equal(hjit::grad(loss)(x), me() == 0 ? sum_of_weights : Tensor::zeros(shape));
  }
}

TEST_CASE("SyncBatchNorm: each rank's shard normalized as BatchNorm normalizes the whole batch, with its gradients") {
  namespace nn = hjit::nn;
  const int64_t rows = 3, C = 4;  // a shard's rows; the whole batch has rows * world()
  const Tensor whole = test::random({rows * world(), C, 5, 2}, DType::F32, 11) * 2.0 + 0.5;  // alike on every rank
  const Tensor weights = test::random({rows * world(), C, 5, 2}, DType::F32, 12);           // the loss's
  const Tensor shard = hjit::slice(whole, 0, me() * rows, (me() + 1) * rows);
  const Tensor shard_weights = hjit::slice(weights, 0, me() * rows, (me() + 1) * rows);
  auto with_parameters = [&](nn::BatchNorm& bn) {
    bn.weight.assign(test::random({C}, DType::F32, 13) + 1.0);
    bn.bias.assign(test::random({C}, DType::F32, 14));
  };
  nn::BatchNorm reference(C);
  with_parameters(reference);
  auto reference_loss = [&](const Tensor& x) { return hjit::sum(reference(x) * weights); };
  const Tensor want_y = reference(whole);
  const std::vector<Tensor> want_grads = hjit::value_and_grad(reference_loss, reference.parameters())(whole).second;
  const Tensor want_dx = hjit::slice(hjit::grad(reference_loss)(whole), 0, me() * rows, (me() + 1) * rows);
  for (const bool jitted : {false, true}) {
    CAPTURE(jitted);
    nn::SyncBatchNorm synced(C);
    with_parameters(synced);
    auto loss = [&](const Tensor& x) { return hjit::sum(synced(x) * shard_weights); };
    auto forward = [&](const Tensor& x) { return synced(x); };
    auto grads = [&](const Tensor& x) {
      std::vector<Tensor> g = hjit::value_and_grad(loss, synced.parameters())(x).second;
      g.push_back(hjit::grad(loss)(x));
      return g;
    };
    const Tensor y = jitted ? hjit::jit(forward)(shard) : forward(shard);
    check_equal(y, hjit::slice(want_y, 0, me() * rows, (me() + 1) * rows));
    // Its running statistics moved as the whole batch's do (on every rank alike), and eval mode
    // normalizes with them.
    nn::BatchNorm stepped(C);
    with_parameters(stepped);
    stepped(whole);
    check_equal(synced.running_mean, stepped.running_mean);
    check_equal(synced.running_var, stepped.running_var);
    synced.eval();
    stepped.eval();
    check_equal(synced(shard), stepped(shard));
    synced.train();
    // A parameter's gradient is the sum of the ranks' (what data parallel's all_reduce makes); the
    // shard's own is the whole batch's rows.
    const std::vector<Tensor> got = jitted ? hjit::jit(grads)(shard) : grads(shard);
    check_equal(dist::all_reduce(got[0]), want_grads[0]);
    check_equal(dist::all_reduce(got[1]), want_grads[1]);
    check_equal(got[2], want_dx);
  }
}

TEST_CASE("send and recv between ranks, eager and jitted; a recv of another shape is an error") {
  CHECK_THROWS_AS(dist::send(Tensor::ones({2}), world()), hjit::ValueError);
  CHECK_THROWS_AS(dist::recv({2}, DType::F32, -1), hjit::ValueError);
  if (world() < 2) return;
  const int next = (me() + 1) % world(), prev = (me() + world() - 1) % world();
  const Tensor x = operand(me(), {3, 2}, DType::F32);
  // A ring: even ranks send first (a recv waits for its send).
  auto ring = [&](auto&& send, auto&& recv) {
    Tensor got;
    if (me() % 2 == 0) send(), got = recv();
    else got = recv(), send();
    return got;
  };
  Tensor got = ring([&] { dist::send(x, next, 7); }, [&] { return dist::recv({3, 2}, DType::F32, prev, 7); });
  check_equal(got, operand(prev, {3, 2}, DType::F32));
  auto to_next = hjit::jit([&](const Tensor& a) {
    dist::send(a * 2.0, next);
    return a;
  });
  auto from_prev = hjit::jit([&](const Tensor& like) { return dist::recv({3, 2}, DType::F32, prev) + like; });
  got = ring([&] { to_next(x); }, [&] { return from_prev(Tensor::zeros({3, 2})); });
  check_equal(got, operand(prev, {3, 2}, DType::F32) * 2.0);
  // The receiver expects [3] f32; the sender sends [2] f32: the receiver says so, and both go on.
  if (me() == 0) dist::send(Tensor::ones({2}), 1, 9);
  if (me() == 1) CHECK_THROWS_WITH_AS(dist::recv({3}, DType::F32, 0, 9), doctest::Contains("sent f32[2], not f32[3]"), hjit::DistributedError);
  dist::barrier();
}

TEST_CASE("ranks that reach a collective with different shapes all raise DistributedError naming each") {
  if (world() < 2) return;
  const Tensor x = Tensor::ones({2 + me()});
  try {
    dist::all_reduce(x);
    FAIL("no error");
  } catch (const hjit::DistributedError& e) {
    const std::string m = e.what();
    CHECK(m.find("rank 0 all_reduce(sum) f32[2]") != std::string::npos);
    CHECK(m.find("rank 1 all_reduce(sum) f32[3]") != std::string::npos);
  }
  // The group is still usable: nothing was exchanged.
  check_equal(dist::all_reduce(Tensor::ones({2})), Tensor::ones({2}) * double(world()));
}

TEST_CASE("broadcast_parameters makes every rank's parameters root's; check_parameters_equal finds a rank out of step") {
  std::vector<Tensor> params = {operand(me(), {4, 3}, DType::F32), operand(me(), {5}, DType::F64)};
  dist::broadcast_parameters(params, 0);
  check_equal(params[0], operand(0, {4, 3}, DType::F32));
  CHECK_NOTHROW(dist::check_parameters_equal(params));
  if (world() < 2) return;
  if (me() == 1) params[1] = params[1] + 1e-12;
  CHECK_THROWS_WITH_AS(dist::check_parameters_equal(params), doctest::Contains("parameter 1 (f64[5]) differs between rank 0 and rank 1"),
                       hjit::DistributedError);
}

// Run alone, by the ctest entry that sets HJIT_TEST_FAULT and a 2 s timeout: rank 1 stops
// answering, and rank 0 must raise rather than wait for ever.
TEST_CASE("fault: a rank that stops answering makes the others raise DistributedError within the timeout" * doctest::skip(!hjit::setting::flag(hjit::setting::Id::TestFault))) {
  REQUIRE(world() >= 2);
  if (me() == 1) {
    std::this_thread::sleep_for(std::chrono::seconds(8));  // alive, not answering
    return;
  }
  const auto start = std::chrono::steady_clock::now();
  // Said as the collective called (not the all_gather that checks the ranks agree), with the ranks.
  try {
    dist::all_reduce(Tensor::ones({4}));
    FAIL("no DistributedError");
  } catch (const hjit::DistributedError& e) {
    const std::string m = e.what();
    INFO(m);
    CHECK(m.rfind("all_reduce(sum) f32[4] on rank 0 of a world of 2, with rank 1: ", 0) == 0);
    CHECK(m.find("no answer from the other ranks within 2000 ms") != std::string::npos);
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("rank 0 raised after " << s << " s");
  CHECK(s < 6.0);
  // And the group stays failed, naming the first failure.
  CHECK_THROWS_WITH_AS(dist::barrier(), doctest::Contains("failed earlier"), hjit::DistributedError);
  std::printf("hjit fault test: rank 0 raised DistributedError\n");
}

TEST_CASE("fault: a rank that dies makes the others raise DistributedError within the timeout" * doctest::skip(!hjit::setting::flag(hjit::setting::Id::TestFault))) {
  REQUIRE(world() >= 2);
  if (me() == 1) {
    std::fflush(nullptr);
    raise(SIGKILL);  // as a machine that goes away: no finalize, no goodbye
  }
  const auto start = std::chrono::steady_clock::now();
  CHECK_THROWS_WITH_AS(dist::all_reduce(Tensor::ones({4})), doctest::Contains("all_reduce(sum) f32[4] on rank 0 of a world of 2, with rank 1"),
                       hjit::DistributedError);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  MESSAGE("rank 0 raised after " << s << " s");
  CHECK(s < 6.0);
  std::printf("hjit fault test: rank 0 raised DistributedError when rank 1 died\n");
}

TEST_CASE("a step's all_reduces go in buckets, each started once its operands are computed") {
  std::vector<Tensor> params = {Tensor::randn({8, 4}, 1), Tensor::randn({4}, 2), Tensor::randn({4, 3}, 3)};
  auto loss = [&](const Tensor& x) { return hjit::sum(hjit::tanh(hjit::matmul(hjit::matmul(x, params[0]) + params[1], params[2]))); };
  auto averaged = [&](const Tensor& x) {
    auto [l, grads] = hjit::value_and_grad(loss, params)(x);
    for (Tensor& g : grads) g = dist::all_reduce(g, dist::ReduceOp::Mean);
    return grads;
  };
  const Tensor x = operand(me(), {5, 8}, DType::F32);
  auto step = hjit::jit(averaged);
  // 32 + 4 + 12 gradients in one exchange.
  const std::string plan = step.explain(x);
  CHECK(test::occurrences(plan, "all_reduce(mean) f32[48] on the host") == 1);
  CHECK(test::occurrences(plan, "all_reduce(") == 1);
  const std::vector<Tensor> got = step(x), want = averaged(x);  // eager: one exchange each
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < got.size(); ++i) check_equal(got[i], want[i]);

  // A result read before another operand is ready closes its bucket: two exchanges.
  auto chained = hjit::jit([](const Tensor& a) {
    const Tensor first = dist::all_reduce(a);
    return first + dist::all_reduce(hjit::exp(first) * 0.01);
  });
  CHECK(test::occurrences(chained.explain(x), "all_reduce(sum) f32[5,8] on the host") == 2);
  const Tensor sum = combined({5, 8}, DType::F32, dist::ReduceOp::Sum);
  check_equal(chained(x), sum + hjit::exp(sum) * 0.01 * double(world()));
  // Of other ops or dtypes: buckets of their own.
  auto mixed = hjit::jit([](const Tensor& a, const Tensor& b) {
    return std::vector<Tensor>{dist::all_reduce(a), dist::all_reduce(a * 2.0), dist::all_reduce(b, dist::ReduceOp::Max)};
  });
  const Tensor y = operand(me(), {3}, DType::F64);
  const std::string mixed_plan = mixed.explain(x, y);
  CHECK(test::occurrences(mixed_plan, "all_reduce(sum) f32[80] on the host") == 1);
  CHECK(test::occurrences(mixed_plan, "all_reduce(max) f64[3] on the host") == 1);
  const std::vector<Tensor> m = mixed(x, y);
  check_equal(m[0], sum);
  check_equal(m[1], sum * 2.0);
  check_equal(m[2], combined({3}, DType::F64, dist::ReduceOp::Max));
}
