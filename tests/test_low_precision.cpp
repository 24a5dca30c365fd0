// Low precision: integer contractions (hjit::int_matmul) exact, eager and compiled, over every pair
// of 8-bit types, odd contraction lengths, broadcast batches and empty shapes; and the target that
// lets them use VNNI's dot products; and nn::quantize, which puts a module's layers on them.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <map>
#include <random>
#include <thread>

#include <Halide.h>
#include <dlfcn.h>
#include <sched.h>

#include "graph/op_def.h"
#include "frontend/compiled/function.h"
#include "frontend/tracing/const_eval.h"
#include "graph/passes/dce.h"
#include "graph/passes/optimize.h"
#include "graph/passes/simplify.h"
#include "halide_backend/build/build.h"
#include "halide_backend/codegen/object_file.h"
#include "halide_backend/codegen/target.h"
#include "halide_backend/lowering/lower.h"
#include "halide_backend/providers/extern_stages.h"
#include "support/cpu_vendor.h"
#include <hjit/nn.h>

#include "tests/support.h"

using hjit::DType;
using hjit::Shape;
using hjit::Tensor;

namespace {

// Full-range 8-bit values (the type's extremes included), so that the sums test the corrections
// int_matmul makes for signedness and every product's range.
Tensor full_range(const Shape& shape, DType dtype, uint64_t seed) {
  std::mt19937_64 gen(seed);
  std::vector<int32_t> v(size_t(hjit::shape_numel(shape)));
  const int lo = dtype == DType::U8 ? 0 : -128, hi = dtype == DType::U8 ? 255 : 127;
  std::uniform_int_distribution<int> d(lo, hi);
  for (size_t i = 0; i < v.size(); ++i) v[i] = i % 7 == 0 ? (i % 2 ? lo : hi) : d(gen);
  return Tensor::from_vector(v, shape).astype(dtype);
}

// One jitted function serving every case of a test: each case is a new signature on purpose.
hjit::JitOptions quiet() {
  hjit::JitOptions o;
  o.warn_after_retraces = 0;
  return o;
}

// The plain definition: both operands widened to i32, then matmul.
Tensor reference(const Tensor& a, const Tensor& b) { return hjit::matmul(a.astype(DType::I32), b.astype(DType::I32)); }

struct Case {
  Shape a, b;
};

const std::vector<Case> kCases = {
    {{5, 8}, {8, 3}},          {{7, 1}, {1, 9}},      {{6, 3}, {3, 17}},          {{4, 5}, {5, 2}},
    {{33, 70}, {70, 49}},      {{1, 64}, {64, 130}},  {{2, 3, 12}, {12, 20}},     {{3, 1, 4, 6}, {2, 6, 5}},
    {{0, 4}, {4, 3}},          {{3, 0}, {0, 5}},      {{12}, {12, 7}},            {{6, 10}, {10}},
    {{9}, {9}},                {{2, 50, 36}, {2, 36, 100}},
    // A batch of matrices of fewer rows than a tile times one matrix (folded into one product's
    // rows), and of more (kept a batch).
    {{64, 1, 96}, {96, 40}},   {{5, 3, 20}, {1, 20, 33}}, {{2, 9, 12}, {12, 20}},
};

}  // namespace

TEST_CASE("int_matmul is matmul of the operands widened to i32, eager and compiled, for every pair of 8-bit types") {
  const DType types[] = {DType::U8, DType::I8};
  auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::int_matmul(x, y); }, quiet());
  uint64_t seed = 1;
  for (DType ta : types)
    for (DType tb : types)
      for (const Case& c : kCases) {
        CAPTURE(std::string(hjit::dtype_name(ta)));
        CAPTURE(std::string(hjit::dtype_name(tb)));
        CAPTURE(hjit::shape_str(c.a));
        CAPTURE(hjit::shape_str(c.b));
        const Tensor a = full_range(c.a, ta, seed++), b = full_range(c.b, tb, seed++);
        const Tensor want = reference(a, b);
        const Tensor eager = hjit::int_matmul(a, b);
        CHECK(eager.dtype() == DType::I32);
        CHECK(eager.shape() == want.shape());
        CHECK(test::compare(eager, want, 0) == "");
        const Tensor compiled = f(a, b);
        CHECK(compiled.shape() == want.shape());
        CHECK(test::compare(compiled, want, 0) == "");
      }
}

TEST_CASE("int_matmul of extreme values: every product at the end of its range, summed without overflow") {
  auto f = hjit::jit([](const Tensor& a, const Tensor& b) { return hjit::int_matmul(a, b); }, quiet());
  for (int64_t k : {1, 4, 255, 1023}) {
    CAPTURE(k);
    const Tensor a = Tensor::full({3, k}, 255, DType::U8), b = Tensor::full({k, 40}, -128, DType::I8);
    const Tensor ai = Tensor::full({3, k}, -128, DType::I8), bu = Tensor::full({k, 40}, 255, DType::U8);
    CHECK(f(a, b).to_vector<int64_t>() == std::vector<int64_t>(120, -255 * 128 * k));
    CHECK(f(ai, ai.astype(DType::I8).reshape({k, 3}).astype(DType::I8)).to_vector<int64_t>() ==
          std::vector<int64_t>(9, 128 * 128 * k));
    CHECK(f(ai, bu).to_vector<int64_t>() == std::vector<int64_t>(120, -128 * 255 * k));
    CHECK(hjit::int_matmul(ai, bu).to_vector<int64_t>() == std::vector<int64_t>(120, -128 * 255 * k));
  }
}

TEST_CASE("int_matmul of a constant right operand (a frozen weight) packs it once, when compiling") {
  const Tensor w = full_range({96, 64}, DType::I8, 7);
  auto f = hjit::jit([w](const Tensor& x) { return hjit::int_matmul(x, w); });
  const Tensor x = full_range({10, 96}, DType::U8, 8);
  CHECK(test::compare(f(x), reference(x, w), 0) == "");
  // A sequence-first batch of one-row matrices is one product of all their rows: its register
  // tiles take several rows (6 with AVX-512's VNNI tiles of 64 columns, 6 with AVX2's of 16), not
  // one row of each matrix.
  const Tensor rows = full_range({64, 1, 96}, DType::U8, 9);
  CHECK(test::compare(f(rows), reference(rows, w), 0) == "");
  const std::string plan = f.explain(rows);
  const std::string tiles = "int_matmul: root tiles ";
  const size_t at = plan.find(tiles);
  REQUIRE(at != std::string::npos);
  const size_t by = plan.find('x', at + tiles.size());
  REQUIRE(by != std::string::npos);
  CAPTURE(plan.substr(at, 40));
  CHECK(std::stoi(plan.substr(by + 1)) > 1);
}

TEST_CASE("a frozen int_matmul weight is packed in panels when compiling where VNNI sums it: exact, over shapes and types") {
  // [K/4, N, 4] rearranged as [N / 16, K/4, 16, 4]: where N is a multiple of the vector's lanes and
  // the target has VNNI, the stage reads those panels (no copy per block at each call); elsewhere
  // the constant as it is.
  const hjit::backend::Target host = hjit::backend::Target::host(hjit::Device::CPU);
  const bool vnni = Halide::get_host_target().has_feature(Halide::Target::AVX512_SapphireRapids);
  struct Case {
    Shape x, w;
    DType wt;
    bool packed;
  };
  for (const Case& c : {Case{{50, 96}, {96, 64}, DType::I8, true}, Case{{3, 20, 96}, {96, 128}, DType::I8, true},
                        Case{{40, 96}, {96, 64}, DType::U8, true}, Case{{30, 96}, {96, 40}, DType::I8, false},
                        Case{{1, 64}, {64, 48}, DType::I8, true}}) {
    CAPTURE(hjit::shape_str(c.x));
    CAPTURE(hjit::shape_str(c.w));
    const Tensor w = full_range(c.w, c.wt, 51), x = full_range(c.x, DType::U8, 52);
    const hjit::Module frozen = hjit::make_module("frozen_int_matmul", {}, {.freeze_parameters = true},
                                                  [w](const Tensor& v) { return hjit::int_matmul(v, w); }, x);
    CHECK(test::compare(Tensor(frozen(x)), reference(x, w), 0) == "");
    const hjit::Graph& g = frozen.graph();
    const hjit::backend::LoweredPipeline p = hjit::backend::lower(g, host.halide(false, &g), {});
    int matmuls = 0;
    for (const hjit::backend::Stage& st : p.stages)
      if (st.op == hjit::OpKind::IntMatmul) {
        ++matmuls;
        CHECK(st.right_packed == (vnni && c.packed));
      }
    CHECK(matmuls == 1);
  }
}

TEST_CASE("an integer convolution with outputs in blocks narrower than a vector reads its weights by channel: exact, argument or constant") {
  // Where VNNI sums the products (four a lane, vectors of 16 sums with AVX-512), outputs in blocks
  // of 8 or fewer (24, 40, 200 channels) are read from their weights laid channel beside channel:
  // packed when compiling where frozen, copied once a call where an argument. A tile of 16
  // channels then starts anywhere (the last one shifted inwards) and loads its weights whole.
  const hjit::backend::Target host = hjit::backend::Target::host(hjit::Device::CPU);
  const bool vnni = Halide::get_host_target().has_feature(Halide::Target::AVX512_SapphireRapids);
  struct Case {
    Shape x, w;
    hjit::Pair stride, padding;
    bool by_channel;  // where VNNI sums them
  };
  const Tensor z = Tensor::scalar(9, DType::U8);
  for (const Case& c : {Case{{1, 144, 28, 28}, {24, 144, 1, 1}, {1, 1}, {0, 0}, true}, Case{{2, 20, 9, 13}, {40, 20, 3, 3}, {2, 2}, {1, 1}, true},
                        Case{{1, 64, 7, 7}, {200, 64, 1, 1}, {1, 1}, {0, 0}, true}, Case{{1, 8, 6, 6}, {12, 8, 3, 3}, {1, 1}, {1, 1}, true},
                        Case{{1, 32, 8, 8}, {48, 32, 1, 1}, {1, 1}, {0, 0}, false}}) {
    CAPTURE(hjit::shape_str(c.x));
    CAPTURE(hjit::shape_str(c.w));
    const Tensor x = full_range(c.x, DType::U8, 61), w = full_range(c.w, DType::I8, 62);
    auto conv = [&](const Tensor& in, const Tensor& weights) { return hjit::int_conv2d(in, weights, z, c.stride, c.padding); };
    const Tensor want = hjit::conv2d(x.astype(DType::I32) - z.astype(DType::I32), w.astype(DType::I32), std::nullopt, c.stride, c.padding);
    const hjit::Module frozen = hjit::make_module("frozen_int_conv", {}, {.freeze_parameters = true}, [&](const Tensor& in) { return conv(in, w); }, x);
    CHECK(test::compare(Tensor(frozen(x)), want, 0) == "");
    auto f = hjit::jit(conv, quiet());
    CHECK(test::compare(f(x, w), want, 0) == "");
    hjit::ConstEvaluator eval = hjit::detail::evaluate_node;
    const hjit::Graph argument = hjit::optimize(hjit::make_graph(conv, x, w), &eval);
    for (const hjit::Graph* g : {&frozen.graph(), &argument}) {
      std::lock_guard<std::mutex> lock(hjit::backend::compile_mutex());
      const hjit::backend::LoweredPipeline p = hjit::backend::lower(*g, host.halide(false, g), {});
      int convs = 0, by_channel = 0;
      for (const hjit::backend::Stage& st : p.stages) {
        if (st.op != hjit::OpKind::IntConv2d) continue;
        ++convs;
        for (const hjit::backend::Helper& h : st.helpers)
          if (h.role == "weights by channel") {
            ++by_channel;
            CHECK(h.stored == (g == &argument));
          }
      }
      CHECK(convs == 1);
      CHECK(by_channel == (vnni && c.by_channel ? 1 : 0));
    }
  }
}

// The bytes of constant weights that the library-call stages (externs) of g's pipeline read packed
// when compiling, in oneDNN's layout (0: none; a 64-byte header alone says there are none).
int64_t packed_weight_bytes(const hjit::Graph& g, const std::set<int>& externs) {
  const hjit::backend::Target host = hjit::backend::Target::host(hjit::Device::CPU);
  const hjit::backend::LoweredPipeline p = hjit::backend::lower(g, host.halide(false, &g), externs);
  int64_t bytes = 0;
  for (const hjit::TensorType& t : p.const_types)
    if (t.dtype == DType::U8 && t.rank() == 1 && t.shape[0] > hjit::kernel_abi::kPackedHeaderBytes) bytes += t.shape[0];
  return bytes;
}

// The products oneDNN's matmul computes where it runs on AMX (extern_int_gemm_nodes): a matrix
// times a matrix, a batch times one shared matrix or times one each, a constant weight, each of
// 2^28 multiply-adds at least, and the shapes that stay hjit's own (fewer rows than a tile, fewer
// multiply-adds).
TEST_CASE("int_matmul calls oneDNN's matmul where it runs on AMX: exact, as eager, over shapes, batches and constant weights") {
  auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::int_matmul(x, y); }, quiet());
  const bool amx = hjit::backend::gemm_on_amx(hjit::backend::ExternKind::IntGemm);
  struct Product {
    Shape a, b;
    bool on_amx;  // where the CPU has AMX
  };
  const Product products[] = {
      {{520, 1032}, {1032, 516}, true},      {{2, 264, 1024}, {1024, 512}, true}, {{3, 176, 1000}, {3, 1000, 520}, true},
      {{12, 24576}, {24576, 1000}, false},  {{100, 36}, {36, 70}, false},        {{64, 1, 96}, {96, 40}, false},
      {{4, 20, 36}, {4, 36, 17}, false},
  };
  uint64_t seed = 50;
  for (const Product& p : products) {
    CAPTURE(hjit::shape_str(p.a));
    CAPTURE(hjit::shape_str(p.b));
    const Tensor a = full_range(p.a, DType::U8, seed++), b = full_range(p.b, DType::I8, seed++);
    CHECK(test::compare(f(a, b), reference(a, b), 0) == "");
    CHECK(test::occurrences(f.explain(a, b), "extern oneDNN int_gemm") == (amx && p.on_amx ? 1 : 0));
  }
  // A captured weight is read where it lies; frozen (a constant), packed into oneDNN's layout when
  // compiling.
  const Tensor w = full_range({1024, 512}, DType::I8, 3);
  auto product = [w](const Tensor& x) { return hjit::int_matmul(x, w); };
  auto g = hjit::jit(product);
  const Tensor x = full_range({2, 272, 1024}, DType::U8, 4);
  CHECK(test::compare(g(x), reference(x, w), 0) == "");
  CHECK(test::occurrences(g.explain(x), "extern oneDNN int_gemm") == (amx ? 1 : 0));
  const hjit::Module frozen = hjit::make_module("frozen_int_gemm", {}, {.freeze_parameters = true}, product, x);
  CHECK(test::compare(Tensor(frozen(x)), reference(x, w), 0) == "");
  const std::set<int> externs = hjit::backend::extern_int_gemm_nodes(frozen.graph());
  CHECK(externs.size() == (amx ? 1u : 0u));
  CHECK(packed_weight_bytes(frozen.graph(), externs) >= (amx ? 1024 * 512 : 0));
  // Dynamic sizes take no library call: hjit's own tiles serve every size.
  hjit::JitOptions dynamic = quiet();
  dynamic.dynamic_dims = {{0, 0}};  // the rows
  auto d = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::int_matmul(x, y); }, dynamic);
  for (int64_t m : {520, 530}) {
    const Tensor dx = full_range({m, 1024}, DType::U8, uint64_t(m)), dw = full_range({1024, 512}, DType::I8, 5);
    CHECK(test::compare(d(dx, dw), reference(dx, dw), 0) == "");
    CHECK(test::occurrences(d.explain(dx, dw), "extern oneDNN") == 0);
  }
}

// How a matmul kernel's call finds its weights (the `packed` operand): none packed when compiling,
// packed (hjit_matmul_pack_constant), or packed in a layout that is not the call's (a header whose
// fingerprint differs: packed on the call instead).
enum class Packing { None, Packed, Stale };

// The `packed` operand of a kernel call for mode p, of shared weights w [K, N] (as the kind stores
// them, dense), as Halide passes a constant: the whole buffer.
struct PackedOperand {
  std::vector<uint8_t> bytes;
  halide_dimension_t dim{0, 0, 1, 0};
  halide_buffer_t buffer{};
  PackedOperand(Packing p, bool bf16, int64_t k, int64_t n, const void* w) {
    bytes.assign(size_t(hjit::kernel_abi::kPackedHeaderBytes), 0);
    if (p != Packing::None) {
      bytes.resize(size_t(hjit_matmul_pack_constant(bf16, k, n, w, nullptr, 0)));
      REQUIRE(bytes.size() > size_t(hjit::kernel_abi::kPackedHeaderBytes));
      REQUIRE(hjit_matmul_pack_constant(bf16, k, n, w, bytes.data(), int64_t(bytes.size())) == int64_t(bytes.size()));
      if (p == Packing::Stale) bytes[8] ^= 1;  // the fingerprint
    }
    buffer.dimensions = 1, buffer.dim = &dim, buffer.type = halide_type_t(halide_type_uint, 8);
  }
  halide_buffer_t* query() { return dim.min = 0, dim.extent = 0, buffer.host = nullptr, &buffer; }
  halide_buffer_t* call() { return dim.min = 0, dim.extent = int32_t(bytes.size()), buffer.host = bytes.data(), &buffer; }
};

// The kernel itself, called as Halide calls an extern stage, on every machine built with oneDNN
// (without AMX its primitive runs on VNNI or AVX2): a bounds query, a region of the output, a batch
// whose matrices are not one after another, weights of one matrix per batch, and weights packed
// when compiling (their layout checked).
TEST_CASE("the int_gemm kernel answers bounds queries and computes the region asked for, over strided batches") {
  using Kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, int32_t, int32_t, halide_buffer_t*);
  const auto kernel = reinterpret_cast<Kernel>(dlsym(RTLD_DEFAULT, hjit::kernel_abi::kIntGemmSymbol));
  if (!hjit::backend::provider_for(hjit::backend::ExternKind::IntGemm)) return;
  REQUIRE(bool(kernel));
  const int M = 24, K4 = 40, N = 20, B = 3;
  // A: [B, M, K4] stored with rows of 48 bytes and matrices 30 rows apart; W: [B, K4/4, N, 4].
  const int lda = 48, a_batch = 30 * lda;
  std::vector<uint8_t> a(size_t(B * a_batch));
  std::vector<int8_t> w(size_t(B * K4 * N));
  std::mt19937 gen(7);
  for (auto& v : a) v = uint8_t(gen());
  for (auto& v : w) v = int8_t(gen());
  std::vector<int32_t> c(size_t(B * M * N), -1);
  for (auto [shared, packing] : {std::pair{true, Packing::None}, {false, Packing::None}, {true, Packing::Packed}, {true, Packing::Stale}}) {
    PackedOperand packed(packing, false, K4, N, w.data());
    // C's region: columns 4..19 (all of them, where packed), rows 2..23, batches 1..2.
    const int x0 = packing == Packing::None ? 4 : 0;
    halide_dimension_t cd[3] = {{x0, N - x0, 1, 0}, {2, 22, N, 0}, {1, 2, M * N, 0}};
    halide_dimension_t ad[3] = {{0, 0, 1, 0}, {0, 0, lda, 0}, {0, 0, a_batch, 0}};
    halide_dimension_t wd[4] = {{0, 0, 1, 0}, {0, 0, 4, 0}, {0, 0, 4 * N, 0}, {0, 0, K4 * N, 0}};
    halide_buffer_t cb{}, ab{}, wb{};
    cb.dimensions = 3, cb.dim = cd, cb.type = halide_type_t(halide_type_int, 32);
    ab.dimensions = 3, ab.dim = ad, ab.type = halide_type_t(halide_type_uint, 8);
    wb.dimensions = shared ? 3 : 4, wb.dim = wd, wb.type = halide_type_t(halide_type_int, 8);
    cb.host = reinterpret_cast<uint8_t*>(c.data()) + 4 * (-x0 - 2 * N - M * N);  // host: element (0, 0, 0)
    REQUIRE(kernel(&ab, &wb, packed.query(), K4, !shared, &cb) == 0);  // the bounds query
    CHECK(ad[0].min == 0);
    CHECK(ad[0].extent == K4);
    CHECK(ad[1].min == 2);
    CHECK(ad[1].extent == 22);
    CHECK(ad[2].min == 1);
    CHECK(ad[2].extent == 2);
    CHECK(wd[1].min == x0);
    CHECK(wd[1].extent == N - x0);
    CHECK(wd[2].extent == K4 / 4);
    if (!shared) CHECK(wd[3].min == 1);
    CHECK(packed.dim.extent == hjit::kernel_abi::kPackedHeaderBytes);
    // Buffers as Halide would pass them: host at each one's min.
    ab.host = a.data() + 2 * lda + a_batch;
    wb.host = reinterpret_cast<uint8_t*>(w.data()) + x0 * 4 + (shared ? 0 : K4 * N);
    cb.host = reinterpret_cast<uint8_t*>(c.data() + x0 + 2 * N + M * N);
    std::fill(c.begin(), c.end(), -1);
    REQUIRE(kernel(&ab, &wb, packed.call(), K4, !shared, &cb) == 0);
    for (int z = 0; z < B; ++z)
      for (int y = 0; y < M; ++y)
        for (int x = 0; x < N; ++x) {
          const bool asked = z >= 1 && y >= 2 && x >= x0;
          int32_t want = -1;
          if (asked) {
            want = 0;
            const int8_t* wz = w.data() + (shared ? 0 : z * K4 * N);
            for (int k = 0; k < K4; ++k) want += int(a[size_t(z * a_batch + y * lda + k)]) * int(wz[(k / 4) * N * 4 + x * 4 + k % 4]);
          }
          CAPTURE(shared);
          CAPTURE(int(packing));
          CAPTURE(z);
          CAPTURE(y);
          CAPTURE(x);
          REQUIRE(c[size_t((z * M + y) * N + x)] == want);
        }
  }
}

TEST_CASE("int_matmul's errors name what was wrong") {
  const Tensor u = Tensor::zeros({2, 3}, DType::U8), i = Tensor::zeros({3, 4}, DType::I8);
  CHECK_THROWS_AS(hjit::int_matmul(u.astype(DType::F32), i), hjit::DTypeError);
  CHECK_THROWS_AS(hjit::int_matmul(u, i.astype(DType::I16)), hjit::DTypeError);
  CHECK_THROWS_WITH_AS(hjit::int_matmul(u, Tensor::zeros({4, 4}, DType::I8)), doctest::Contains("contraction sizes differ"),
                       hjit::ShapeError);
  CHECK_THROWS_AS(hjit::int_matmul(Tensor::zeros({}, DType::U8), i), hjit::ShapeError);
  auto f = hjit::jit([](const Tensor& a, const Tensor& b) { return hjit::int_matmul(a, b); });
  CHECK_THROWS_WITH_AS(f(u, Tensor::zeros({5, 4}, DType::I8)), doctest::Contains("contraction sizes differ"), hjit::ShapeError);
}

TEST_CASE("the code of an integer matmul may use VNNI where the CPU has it, and no other code changes target") {
  const hjit::backend::Target host = hjit::backend::Target::host(hjit::Device::CPU);
  auto graph_of = [](bool half) {
    return hjit::make_graph([half](const Tensor& a, const Tensor& b) {
      Tensor r = hjit::int_matmul(a, b);
      return half ? r.astype(DType::F16) : r;
    }, Tensor::zeros({4, 8}, DType::U8), Tensor::zeros({8, 4}, DType::I8));
  };
  const hjit::Graph mm = graph_of(false), half = graph_of(true);
  const hjit::Graph plain = hjit::make_graph([](const Tensor& a) { return a.astype(DType::F16) * 2; }, Tensor::zeros({4}));
  const Halide::Target::Feature spr = Halide::Target::AVX512_SapphireRapids;
  const bool vnni = Halide::get_host_target().has_feature(spr), fp16 = hjit::backend::cpu_has_avx512_fp16();
  CHECK(host.halide(false, &mm).has_feature(spr) == vnni);
  // f16 values too: the object is written without AVX512-FP16 where the CPU lacks it (object_file.cpp).
  CHECK(host.halide(false, &half).has_feature(spr) == vnni);
  // Other pipelines, and Halide's JIT (which cannot be told to leave those instructions out), keep
  // the target they had.
  CHECK(host.halide(false, &plain).has_feature(spr) == (vnni && fp16));
  CHECK(host.halide(true, &mm).has_feature(spr) == (vnni && fp16));
  // And they run: an integer matmul whose result is stored as f16 (16-bit moves, which LLVM's
  // sapphirerapids makes with AVX512-FP16's vmovw).
  auto f = hjit::jit([](const Tensor& a, const Tensor& b) { return hjit::int_matmul(a, b).astype(DType::F16); });
  const Tensor a = full_range({8, 40}, DType::U8, 3), b = full_range({40, 24}, DType::I8, 4);
  CHECK(test::compare(f(a, b), reference(a, b).astype(DType::F16), 0) == "");
}

TEST_CASE("without VNNI (AVX2), integer contractions sum pairs of products: exact, constant weights paired when compiling") {
  // Built for an AVX2 target whatever this CPU has (every x86 machine hjit runs on has AVX2), and
  // run: the pairs' code is tested on a machine with VNNI too.
  const hjit::backend::Target avx2 = hjit::backend::Target::parse("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const Tensor w = full_range({2, 70, 49}, DType::I8, 30), wc = full_range({24, 13, 3, 3}, DType::I8, 31);
  const Tensor a = full_range({3, 1, 33, 70}, DType::U8, 32), b = full_range({2, 70, 49}, DType::I8, 33);
  const Tensor x = full_range({2, 13, 9, 7}, DType::U8, 34), z = Tensor::scalar(7, DType::U8);  // (z a captured input, after the arguments)
  const Tensor xs = full_range({1, 13, 9, 7}, DType::I8, 35);
  struct Program {
    std::string what;
    hjit::Graph graph;
    std::vector<Tensor> args;
    Tensor want;
    std::string helper;
    bool stored;
  };
  auto conv = [&](const Tensor& in, const Tensor& weights) { return hjit::int_conv2d(in, weights, z, {1, 2}, {1, 1}); };
  // As a call compiles them: optimized, weights folded into their packed constants when frozen.
  hjit::ConstEvaluator eval = hjit::detail::evaluate_node;
  auto optimized = [&](const hjit::Graph& g) { return hjit::optimize(g, &eval); };
  const hjit::SaveOptions frozen{.freeze_parameters = true};
  std::vector<Program> programs;
  programs.push_back({"matmul, weight an argument", optimized(hjit::make_graph([](const Tensor& p, const Tensor& q) { return hjit::int_matmul(p, q); }, a, b)),
                      {a, b}, reference(a, b), "pairs", true});
  programs.push_back({"matmul, weight a constant",
                      hjit::make_module("mm", {}, frozen, [&](const Tensor& p) { return hjit::int_matmul(p, w); }, a).graph(), {a},
                      reference(a, w), "pairs", false});
  programs.push_back({"convolution, weight an argument", optimized(hjit::make_graph(conv, x, wc)), {x, wc, z}, conv(x, wc), "weight pairs", true});
  programs.push_back({"convolution, weight a constant, signed input",
                      hjit::make_module("conv", {}, frozen, [&](const Tensor& in) { return conv(in, wc); }, xs).graph(), {xs}, conv(xs, wc),
                      "weight pairs", false});
  // Depthwise (int_depthwise2d): the kernel's rows in pairs; 5 rows, the last pair half zeros.
  const Tensor wd = full_range({24, 1, 5, 3}, DType::I8, 36), xd = full_range({2, 24, 11, 9}, DType::U8, 37);
  auto depthwise = [&](const Tensor& in, const Tensor& weights) { return hjit::int_conv2d(in, weights, z, {2, 1}, {2, 1}, {1, 1}, 24); };
  programs.push_back({"depthwise, weight an argument", optimized(hjit::make_graph(depthwise, xd, wd)), {xd, wd, z}, depthwise(xd, wd),
                      "weight pairs", true});
  programs.push_back({"depthwise, weight a constant",
                      hjit::make_module("dw", {}, frozen, [&](const Tensor& in) { return depthwise(in, wd); }, xd).graph(), {xd},
                      depthwise(xd, wd), "weight pairs", false});
  for (Program& prog : programs) {
    CAPTURE(prog.what);
    const hjit::Graph& g = prog.graph;
    REQUIRE(g.inputs.size() == prog.args.size());
    {
      std::lock_guard<std::mutex> lock(hjit::backend::compile_mutex());
      const hjit::backend::LoweredPipeline p = hjit::backend::lower(g, avx2.halide(false, &g));
      int pairs = 0;
      for (const hjit::backend::Stage& s : p.stages) {
        if (s.op != hjit::OpKind::IntMatmul && s.op != hjit::OpKind::IntConv2d && s.op != hjit::OpKind::IntDepthwise2d) continue;
        CHECK(s.dot_lanes == 2);
        for (const hjit::backend::Helper& h : s.helpers)
          if (h.role == prog.helper) {
            ++pairs;
            CHECK(h.stored == prog.stored);
          }
      }
      CHECK(pairs == 1);
    }
    hjit::backend::Built built;
    {
      std::lock_guard<std::mutex> lock(hjit::backend::compile_mutex());
      hjit::backend::Options options;
      options.name = "avx2_pairs";
      built = hjit::backend::build(g, options, avx2);
    }
    REQUIRE(built.executable);
    std::vector<const void*> in;
    for (const Tensor& t : prog.args) in.push_back(t.data());
    REQUIRE(g.outputs.size() == 1);
    const Shape shape = g.type(g.outputs[0]).shape;
    REQUIRE(g.type(g.outputs[0]).dtype == DType::I32);
    std::vector<int32_t> out(size_t(hjit::shape_numel(shape)));
    void* outs[] = {out.data()};
    built.executable->run(in.data(), outs);
    CHECK(test::compare(Tensor::from_vector(out, shape), prog.want, 0) == "");
  }
}

TEST_CASE("without VNNI (AVX2), an integer convolution's channel tile fits the 16 registers with its weights, input and products; its input copy is vectorized") {
  // vpmaddwd does not accumulate in place: a step holds its accumulators, a vector of weights per
  // channel vector, the broadcast input and the product before its add. A tile of 3 vectors by 4
  // columns (12 sums, int8 MobileNet V2's choice for 13 of its layers) needed 17 and spilled a sum,
  // which then went through memory at every step.
  const hjit::backend::Target avx2 = hjit::backend::Target::parse("x86-64-linux-avx-avx2-f16c-fma-sse41");
  const Tensor z = Tensor::scalar(3, DType::U8);
  struct Layer { int64_t c, o, side, kernel; };
  for (const Layer l : {Layer{32, 192, 28, 1}, Layer{96, 24, 56, 1}, Layer{144, 48, 28, 1}, Layer{64, 96, 112, 1}, Layer{64, 64, 28, 3},
                        Layer{3, 64, 56, 7}}) {
    CAPTURE(l.c);
    CAPTURE(l.o);
    CAPTURE(l.side);
    CAPTURE(l.kernel);
    const Tensor x = full_range({1, l.c, l.side, l.side}, DType::U8, 40), w = full_range({l.o, l.c, l.kernel, l.kernel}, DType::I8, 41);
    const hjit::Graph g = hjit::make_graph([&](const Tensor& in, const Tensor& weights) {
      return hjit::int_conv2d(in, weights, z, {1, 1}, {l.kernel / 2, l.kernel / 2});
    }, x, w);
    std::string text;
    {
      std::lock_guard<std::mutex> lock(hjit::backend::compile_mutex());
      std::string why;
      text = hjit::backend::decide(g, avx2, hjit::backend::BuiltIn{}, &why).value_or("");
    }
    // "tile 24x4 vec8": 24 channels (3 vectors of 8 i32 sums) by 4 columns.
    const size_t at = text.find("int_conv2d_acc: per tile of");
    REQUIRE(at != std::string::npos);
    const size_t tile = text.find("tile ", text.find(",", at));
    REQUIRE(tile != std::string::npos);
    const int channels = std::stoi(text.substr(tile + 5)), columns = std::stoi(text.substr(text.find('x', tile) + 1));
    const int vectors = channels / 8, accumulators = vectors * columns;
    CAPTURE(text.substr(tile, 16));
    CHECK(accumulators >= 6);
    CHECK(accumulators + vectors + 2 <= 16);
    // The input's copy widened to i16 is a vector loop, an RGB stem's single four of channels
    // included (fused with its columns).
    CHECK(text.find("wide input: root vec") != std::string::npos);
  }
}

TEST_CASE("bf16 matmul sums pairs of products in f32 (vdpbf16ps where the CPU has AVX512_BF16), as eager within bf16's rounding") {
  // The exact sum of the bf16 values, rounded once to bf16, is what eager gives (in f32) and what
  // the compiled code gives (its sums ordered differently): at most one bf16 step apart.
  const std::vector<Case> cases = {{{5, 8}, {8, 3}},     {{33, 70}, {70, 49}}, {{6, 3}, {3, 17}},     {{2, 3, 12}, {12, 20}},
                                   {{3, 1, 4, 6}, {2, 6, 5}}, {{1, 64}, {64, 130}}, {{0, 4}, {4, 3}}, {{3, 0}, {0, 5}},
                                   {{2, 50, 36}, {2, 36, 100}}, {{64, 256}, {256, 64}}};
  uint64_t seed = 100;
  auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::matmul(x, y); }, quiet());
  for (const Case& c : cases) {
    CAPTURE(hjit::shape_str(c.a));
    CAPTURE(hjit::shape_str(c.b));
    const Tensor a = Tensor::randn(c.a, seed++).astype(DType::BF16), b = Tensor::randn(c.b, seed++).astype(DType::BF16);
    const Tensor exact = hjit::matmul(a.astype(DType::F64), b.astype(DType::F64));
    const Tensor compiled = f(a, b);
    const Tensor eager = hjit::matmul(a, b);
    CHECK(compiled.dtype() == DType::BF16);
    REQUIRE(compiled.shape() == exact.shape());
    const std::vector<double> got = compiled.to_vector<double>(), want = exact.to_vector<double>(), e = eager.to_vector<double>();
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(std::abs(got[i] - want[i]) <= std::abs(want[i]) * (1.0 / 128) + 1e-6);
      CHECK(std::abs(got[i] - e[i]) <= std::abs(e[i]) * (1.0 / 128) + 1e-6);
    }
  }
}

TEST_CASE("bf16 matmuls with dynamic sizes, gradients and a batch: compiled as eager") {
  hjit::JitOptions o;
  o.dynamic_dims = {{0, 0}};
  auto f = hjit::jit([](const Tensor& x, const Tensor& w) { return hjit::matmul(x, w); }, o);
  const Tensor w = Tensor::randn({32, 48}, 5).astype(DType::BF16);
  for (int64_t rows : {7, 16, 1}) {
    const Tensor x = Tensor::randn({rows, 32}, 6 + uint64_t(rows)).astype(DType::BF16);
    CHECK(test::compare(f(x, w).astype(DType::F32), hjit::matmul(x, w).astype(DType::F32), 1.0 / 64) == "");
  }
  auto loss = [](const Tensor& x, const Tensor& w) { return hjit::sum(hjit::matmul(x, w).astype(DType::F32)); };
  const Tensor x = Tensor::randn({16, 32}, 9).astype(DType::BF16);
  const std::vector<Tensor> g = hjit::jit(hjit::grad(loss, {0, 1}))(x, w), ge = hjit::grad(loss, {0, 1})(x, w);
  REQUIRE(g.size() == 2);
  for (size_t k = 0; k < 2; ++k) CHECK(test::compare(g[k].astype(DType::F32), ge[k].astype(DType::F32), 1.0 / 64) == "");
}

// Compiled bf16 products against the exact sum of their operands' values: as the compiled code
// sums in another order and rounds once, at most one bf16 step (1/128 relative) apart.
void check_bf16_product(const Tensor& got, const Tensor& a, const Tensor& b) {
  const Tensor exact = hjit::matmul(a.astype(DType::F64), b.astype(DType::F64));
  CHECK(got.dtype() == DType::BF16);
  REQUIRE(got.shape() == exact.shape());
  const std::vector<double> g = got.to_vector<double>(), want = exact.to_vector<double>();
  size_t off = 0;
  for (size_t i = 0; i < g.size(); ++i) off += std::abs(g[i] - want[i]) > std::abs(want[i]) * (1.0 / 128) + 1e-6;
  CHECK(off == 0);
}

// The bf16 products oneDNN's matmul computes where it runs on AMX (extern_bf16_gemm_nodes): graph
// inputs, constants and computed values as operands, batches times one matrix or one each, the
// result read by the ops after it; and the shapes that stay hjit's own.
TEST_CASE("bf16 matmuls call oneDNN's matmul where it runs on AMX: as eager within bf16's rounding, over shapes, batches and operands") {
  const bool amx = hjit::backend::gemm_on_amx(hjit::backend::ExternKind::Bf16Gemm);
  struct Product {
    Shape a, b;
    bool on_amx;  // where the CPU has AMX
  };
  const Product products[] = {
      {{256, 300}, {300, 130}, true}, {{2, 96, 128}, {128, 200}, true}, {{3, 64, 160}, {3, 160, 96}, true},
      {{8, 256}, {256, 512}, false},  {{64, 64}, {64, 64}, false},      {{4, 48, 20}, {4, 20, 36}, false},
  };
  auto f = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::matmul(x, y); }, quiet());
  // Both operands computed (narrowed to their bits for the library), the product read by a relu.
  auto g = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::relu(hjit::matmul(x * 2.0, hjit::transpose(y, {1, 0}))); }, quiet());
  uint64_t seed = 300;
  for (const Product& p : products) {
    CAPTURE(hjit::shape_str(p.a));
    CAPTURE(hjit::shape_str(p.b));
    const Tensor a = Tensor::randn(p.a, seed++).astype(DType::BF16), b = Tensor::randn(p.b, seed++).astype(DType::BF16);
    check_bf16_product(f(a, b), a, b);
    CHECK(test::compare(f(a, b).astype(DType::F32), hjit::matmul(a, b).astype(DType::F32), 1.0 / 64) == "");
    CHECK(test::occurrences(f.explain(a, b), "extern oneDNN bf16_gemm") == (amx && p.on_amx ? 1 : 0));
    if (p.b.size() == 2) {
      const Tensor bt = hjit::transpose(b, {1, 0});
      const Tensor want = hjit::relu(hjit::matmul(a * 2.0, b));
      CHECK(test::compare(g(a, bt).astype(DType::F32), want.astype(DType::F32), 1.0 / 64) == "");
      CHECK(test::occurrences(g.explain(a, bt), "extern oneDNN bf16_gemm") == (amx && p.on_amx ? 1 : 0));
    }
  }
  // A captured weight is read where it lies; frozen (a constant), packed into oneDNN's layout when
  // compiling.
  const Tensor w = Tensor::randn({384, 256}, 7).astype(DType::BF16);
  auto product = [w](const Tensor& x) { return hjit::matmul(x, w); };
  auto captured = hjit::jit(product);
  const Tensor x = Tensor::randn({2, 80, 384}, 8).astype(DType::BF16);
  check_bf16_product(captured(x), x, w);
  CHECK(test::occurrences(captured.explain(x), "extern oneDNN bf16_gemm") == (amx ? 1 : 0));
  const hjit::Module frozen = hjit::make_module("frozen_bf16_gemm", {}, {.freeze_parameters = true}, product, x);
  check_bf16_product(Tensor(frozen(x)), x, w);
  const std::set<int> externs = hjit::backend::extern_bf16_gemm_nodes(frozen.graph());
  CHECK(externs.size() == (amx ? 1u : 0u));
  CHECK(packed_weight_bytes(frozen.graph(), externs) >= (amx ? 384 * 256 * 2 : 0));
  // Dynamic sizes take no library call; gradients (bf16 products of their own) as eager.
  hjit::JitOptions dynamic = quiet();
  dynamic.dynamic_dims = {{0, 0}};
  auto d = hjit::jit([](const Tensor& x, const Tensor& y) { return hjit::matmul(x, y); }, dynamic);
  for (int64_t m : {200, 230}) {
    const Tensor dx = Tensor::randn({m, 384}, uint64_t(m)).astype(DType::BF16);
    check_bf16_product(d(dx, w), dx, w);
    CHECK(test::occurrences(d.explain(dx, w), "extern oneDNN") == 0);
  }
  auto loss = [](const Tensor& x, const Tensor& y) { return hjit::sum(hjit::matmul(x, y).astype(DType::F32)); };
  const Tensor gx = Tensor::randn({160, 384}, 9).astype(DType::BF16);
  const std::vector<Tensor> grads = hjit::jit(hjit::grad(loss, {0, 1}))(gx, w), eager = hjit::grad(loss, {0, 1})(gx, w);
  REQUIRE(grads.size() == 2);
  for (size_t k = 0; k < 2; ++k) CHECK(test::compare(grads[k].astype(DType::F32), eager[k].astype(DType::F32), 1.0 / 64) == "");
}

// The bf16 kernel called as Halide calls an extern stage, on every machine built with oneDNN
// (without AMX-BF16 its primitive runs on AVX-512 or AVX2): a bounds query, a region of the output,
// a batch whose matrices are not one after another, and weights of one matrix per batch. Its
// operands are bf16 bits; its result f32 values rounded to bf16.
TEST_CASE("the bf16_gemm kernel answers bounds queries and computes the region asked for, over strided batches") {
  using Kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, int32_t, int32_t, halide_buffer_t*);
  const auto kernel = reinterpret_cast<Kernel>(dlsym(RTLD_DEFAULT, hjit::kernel_abi::kBf16GemmSymbol));
  if (!hjit::backend::provider_for(hjit::backend::ExternKind::Bf16Gemm)) return;
  REQUIRE(bool(kernel));
  const std::vector<uint16_t> probe(64 * 64);
  if (hjit_matmul_pack_constant(1, 64, 64, probe.data(), nullptr, 0) == 0) {
    // oneDNN computes bf16 on AVX-512 only (not on Zen 3): there no pipeline calls the kernel.
    CHECK_FALSE(hjit::backend::gemm_on_amx(hjit::backend::ExternKind::Bf16Gemm));
    return;
  }
  const int M = 24, K = 40, N = 20, B = 3;
  // A: [B, M, K] stored with rows of 48 elements and matrices 30 rows apart; W: [B, K, N].
  const int lda = 48, a_batch = 30 * lda;
  auto bits = [](float v) {
    uint32_t u;
    std::memcpy(&u, &v, 4);
    return uint16_t(u >> 16);  // (values with 8 significant bits: exact)
  };
  auto value = [](uint16_t b) {
    const uint32_t u = uint32_t(b) << 16;
    float v;
    std::memcpy(&v, &u, 4);
    return v;
  };
  std::vector<uint16_t> a(size_t(B * a_batch)), w(size_t(B * K * N));
  std::mt19937 gen(11);
  std::uniform_int_distribution<int> small(-100, 100);
  for (auto& v : a) v = bits(float(small(gen)) / 64);
  for (auto& v : w) v = bits(float(small(gen)) / 32);
  std::vector<float> c(size_t(B * M * N));
  for (auto [shared, packing] : {std::pair{true, Packing::None}, {false, Packing::None}, {true, Packing::Packed}, {true, Packing::Stale}}) {
    PackedOperand packed(packing, true, K, N, w.data());
    // C's region: columns 4..19 (all of them, where packed), rows 2..23, batches 1..2.
    const int x0 = packing == Packing::None ? 4 : 0;
    halide_dimension_t cd[3] = {{x0, N - x0, 1, 0}, {2, 22, N, 0}, {1, 2, M * N, 0}};
    halide_dimension_t ad[3] = {{0, 0, 1, 0}, {0, 0, lda, 0}, {0, 0, a_batch, 0}};
    halide_dimension_t wd[3] = {{0, 0, 1, 0}, {0, 0, N, 0}, {0, 0, K * N, 0}};
    halide_buffer_t cb{}, ab{}, wb{};
    cb.dimensions = 3, cb.dim = cd, cb.type = halide_type_t(halide_type_float, 32);
    ab.dimensions = 3, ab.dim = ad, ab.type = halide_type_t(halide_type_uint, 16);
    wb.dimensions = shared ? 2 : 3, wb.dim = wd, wb.type = halide_type_t(halide_type_uint, 16);
    cb.host = reinterpret_cast<uint8_t*>(c.data()) + 4 * (-x0 - 2 * N - M * N);  // host: element (0, 0, 0)
    REQUIRE(kernel(&ab, &wb, packed.query(), K, !shared, &cb) == 0);  // the bounds query
    CHECK(ad[0].extent == K);
    CHECK(ad[1].min == 2);
    CHECK(ad[1].extent == 22);
    CHECK(ad[2].min == 1);
    CHECK(ad[2].extent == 2);
    CHECK(wd[0].min == x0);
    CHECK(wd[0].extent == N - x0);
    CHECK(wd[1].extent == K);
    if (!shared) CHECK(wd[2].min == 1);
    ab.host = reinterpret_cast<uint8_t*>(a.data() + 2 * lda + a_batch);
    wb.host = reinterpret_cast<uint8_t*>(w.data() + x0 + (shared ? 0 : K * N));
    cb.host = reinterpret_cast<uint8_t*>(c.data() + x0 + 2 * N + M * N);
    std::fill(c.begin(), c.end(), -1.0f);
    REQUIRE(kernel(&ab, &wb, packed.call(), K, !shared, &cb) == 0);
    for (int z = 0; z < B; ++z)
      for (int y = 0; y < M; ++y)
        for (int x = 0; x < N; ++x) {
          const bool asked = z >= 1 && y >= 2 && x >= x0;
          double want = -1;
          if (asked) {
            want = 0;
            const uint16_t* wz = w.data() + (shared ? 0 : z * K * N);
            for (int k = 0; k < K; ++k) want += double(value(a[size_t(z * a_batch + y * lda + k)])) * value(wz[k * N + x]);
            want = value(bits(float(want)));  // (the exact sum cut to bf16: a step from its rounding at most)
          }
          CAPTURE(shared);
          CAPTURE(int(packing));
          CAPTURE(z);
          CAPTURE(y);
          CAPTURE(x);
          const float got = c[size_t((z * M + y) * N + x)];
          REQUIRE(std::abs(got - want) <= std::abs(want) / 128 + 1e-6);
          CHECK(value(bits(got)) == got);  // a bf16 value
        }
  }
}

TEST_CASE("bf16 convolution sums pairs of input channels in f32 (vdpbf16ps where the CPU has AVX512_BF16), as eager within bf16's rounding") {
  struct ConvCase {
    Shape x, w;
    hjit::Pair stride, padding, dilation;
    int64_t groups;
  };
  const std::vector<ConvCase> cases = {
      {{1, 8, 9, 9}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{2, 5, 7, 6}, {20, 5, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1},      // odd channels (a pair half zero), 20 outputs, batch 2
      {{1, 3, 16, 16}, {32, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1},    // a stem
      {{1, 12, 10, 10}, {33, 12, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1},  // dilated, 33 outputs
      {{1, 16, 5, 12}, {24, 16, 3, 1}, {1, 2}, {1, 0}, {1, 1}, 1},   // a tall window, strides apart
      {{1, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},
      {{1, 64, 7, 7}, {40, 64, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1},    // 1x1: a matmul
      {{1, 1, 5, 5}, {3, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1},       // one input channel
      {{1, 8, 7, 7}, {16, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2},      // grouped: f32 sums of the widened values
      {{0, 4, 5, 5}, {8, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1},       // no images
  };
  uint64_t seed = 700;
  for (const ConvCase& c : cases) {
    CAPTURE(hjit::shape_str(c.x));
    CAPTURE(hjit::shape_str(c.w));
    auto conv = [&](const Tensor& x, const Tensor& w) { return hjit::conv2d(x, w, std::nullopt, c.stride, c.padding, c.dilation, c.groups); };
    auto compiled_conv = hjit::jit(conv);
    const Tensor x = Tensor::randn(c.x, seed++).astype(DType::BF16), w = Tensor::randn(c.w, seed++).astype(DType::BF16);
    const Tensor compiled = compiled_conv(x, w), eager = conv(x, w);
    CHECK(compiled.dtype() == DType::BF16);
    // The exact sum of the bf16 products, and of their magnitudes: the f32 sums, in any order, are
    // within 2^-20 of the magnitudes' sum of it (at most 1024 terms here), and each result is then
    // rounded to bf16 once (a step of at most 2^-7 of it).
    const Tensor x64 = x.astype(DType::F64), w64 = w.astype(DType::F64);
    const std::vector<double> exact = conv(x64, w64).to_vector<double>(), size = conv(hjit::abs(x64), hjit::abs(w64)).to_vector<double>();
    REQUIRE(compiled.shape() == eager.shape());
    const std::vector<double> got = compiled.to_vector<double>(), e = eager.to_vector<double>();
    REQUIRE(got.size() == exact.size());
    for (size_t i = 0; i < got.size(); ++i) {
      const double tolerance = (std::abs(exact[i]) + size[i] * 0x1p-20) / 128;
      CHECK(std::abs(got[i] - exact[i]) <= tolerance + size[i] * 0x1p-20);
      CHECK(std::abs(got[i] - e[i]) <= 2 * (tolerance + size[i] * 0x1p-20));
    }
  }
}

TEST_CASE("bf16 contractions of constant weights (frozen) pack them once, when compiling: as eager") {
  const Tensor wc = Tensor::randn({20, 5, 3, 3}, 41).astype(DType::BF16);  // odd input channels, 20 outputs
  const Tensor left = Tensor::randn({24, 36}, 42).astype(DType::BF16), right = Tensor::randn({36, 40}, 43).astype(DType::BF16);
  auto conv = [&](const Tensor& x) { return hjit::conv2d(x, wc, std::nullopt, {1, 1}, {1, 1}); };
  auto products = [&](const Tensor& m) { return hjit::matmul(hjit::matmul(left, m), right); };
  const Tensor x = Tensor::randn({2, 5, 9, 8}, 44).astype(DType::BF16), m = Tensor::randn({36, 36}, 45).astype(DType::BF16);
  const hjit::SaveOptions frozen{.freeze_parameters = true};
  const hjit::Module frozen_conv = hjit::make_module("conv", {}, frozen, conv, x), frozen_products = hjit::make_module("products", {}, frozen, products, m);
  CHECK(test::compare(Tensor(frozen_conv(x)).astype(DType::F32), conv(x).astype(DType::F32), 1.0 / 64) == "");
  {
    // The product in bf16 is rounded to bf16 (eager) or kept in f32 (compiled where the CPU has no
    // AVX512_BF16) before the second: either is within a few steps of bf16 of the sum of the
    // magnitudes of the exact result's terms, which cancel (Zen 3: 1.0625 compiled, 0.996 eager,
    // 1.059 exact).
    auto in_f64 = [](const Tensor& t) { return t.astype(DType::F64); };
    const std::vector<double> exact = hjit::matmul(hjit::matmul(in_f64(left), in_f64(m)), in_f64(right)).to_vector<double>();
    const std::vector<double> size =
        hjit::matmul(hjit::matmul(hjit::abs(in_f64(left)), hjit::abs(in_f64(m))), hjit::abs(in_f64(right))).to_vector<double>();
    const std::vector<double> got = Tensor(frozen_products(m)).to_vector<double>(), eager = products(m).to_vector<double>();
    REQUIRE(got.size() == exact.size());
    REQUIRE(eager.size() == exact.size());
    for (size_t i = 0; i < exact.size(); ++i) {
      CAPTURE(i);
      CHECK(std::abs(got[i] - exact[i]) <= size[i] / 128);
      CHECK(std::abs(eager[i] - exact[i]) <= size[i] / 128);
    }
  }
  const hjit::backend::Target host = hjit::backend::Target::host(hjit::Device::CPU);
  if (!hjit::backend::bf16_dot_products(Halide::get_host_target())) return;
  // Where vdpbf16ps pays (bf16_dot_products): the weights are packed when compiling and read where they lie
  // (helpers not stored), and the constants bound are the packed ones only (the conv's weights)
  // and those read as they are (the left operand); the input's pairs are made at each call.
  auto helpers = [&](const hjit::Graph& g, size_t constants) {
    const hjit::backend::LoweredPipeline p = hjit::backend::lower(g, host.halide(false, &g));
    CHECK(p.const_params.size() == constants);
    std::map<std::string, bool> stored;
    for (const hjit::backend::Stage& s : p.stages)
      for (const hjit::backend::Helper& h : s.helpers) stored[h.role + (stored.count(h.role) ? " 2" : "")] = h.stored;
    return stored;
  };
  const std::map<std::string, bool> c = helpers(frozen_conv.graph(), 1), mm = helpers(frozen_products.graph(), 2);
  CHECK(c == std::map<std::string, bool>{{"padded pairs", true}, {"weight pairs", false}});
  // left @ m: left read as it is (rows), m's pairs made; (left @ m) @ right: its rows made, right packed.
  CHECK(mm == std::map<std::string, bool>{{"rows", false}, {"pairs", true}, {"rows 2", true}, {"pairs 2", false}});
}

TEST_CASE("bf16 contractions sum pairs with vdpbf16ps only where it does more multiply-adds than FMA: AVX512_BF16 on AMD, not Intel") {
  // Sapphire Rapids runs vdpbf16ps at half its FMA's multiply-adds (AMD's Zen 4 and 5 at twice):
  // there a bf16 matmul and convolution widen their operands to f32, and equal eager as closely.
  const Halide::Target host = Halide::get_host_target();
  const bool pairs = hjit::backend::bf16_dot_products(host);
  CHECK(pairs == (host.has_feature(Halide::Target::AVX512_SapphireRapids) && hjit::cpu_vendor() != hjit::CpuVendor::Intel));
  CHECK_FALSE(hjit::backend::bf16_dot_products(Halide::Target("x86-64-linux-avx-avx2-f16c-fma-sse41")));
  CHECK_FALSE(hjit::backend::bf16_dot_products(host.with_feature(Halide::Target::AVX512_SapphireRapids).with_feature(Halide::Target::CUDA)));
  const Tensor x = Tensor::randn({1, 16, 10, 10}, 51).astype(DType::BF16), w = (Tensor::randn({32, 16, 3, 3}, 52) * 0.2f).astype(DType::BF16);
  const Tensor a = Tensor::randn({24, 64}, 53).astype(DType::BF16), b = Tensor::randn({64, 48}, 54).astype(DType::BF16);
  auto conv = [](const Tensor& v, const Tensor& k) { return hjit::conv2d(v, k, std::nullopt, {1, 1}, {1, 1}); };
  auto mm = [](const Tensor& l, const Tensor& r) { return hjit::matmul(l, r); };
  auto fc = hjit::jit(conv, quiet());
  auto fm = hjit::jit(mm, quiet());
  CHECK(test::compare(fc(x, w).astype(DType::F32), conv(x, w).astype(DType::F32), 1.0 / 64) == "");
  CHECK(test::compare(fm(a, b).astype(DType::F32), mm(a, b).astype(DType::F32), 1.0 / 64) == "");
  const std::string conv_plan = fc.explain(x, w), mm_plan = fm.explain(a, b);
  CAPTURE(conv_plan);
  CAPTURE(mm_plan);
  CHECK((test::occurrences(conv_plan, "pairs") > 0) == pairs);
  CHECK((test::occurrences(mm_plan, "pairs") > 0) == pairs);
}

TEST_CASE("bf16 convolutions in a network: pairs copied once a call, vectorized; gradients as eager") {
  auto block = [](const Tensor& x, const Tensor& w1, const Tensor& w2) {
    return hjit::conv2d(hjit::relu(hjit::conv2d(x, w1, std::nullopt, {1, 1}, {1, 1})), w2, std::nullopt, {2, 2}, {1, 1});
  };
  const Tensor x = Tensor::randn({2, 16, 12, 12}, 31).astype(DType::BF16);
  const Tensor w1 = (Tensor::randn({32, 16, 3, 3}, 32) * 0.2f).astype(DType::BF16), w2 = (Tensor::randn({48, 32, 3, 3}, 33) * 0.2f).astype(DType::BF16);
  auto f = hjit::jit(block);
  CHECK(test::compare(f(x, w1, w2).astype(DType::F32), block(x, w1, w2).astype(DType::F32), 1.0 / 32) == "");
  const std::string plan = f.explain(x, w1, w2);
  CAPTURE(plan);
  if (hjit::backend::bf16_dot_products(Halide::get_host_target())) {
    // Where vdpbf16ps pays: each convolution's input and weights copied into pairs once, in vector
    // loops, and the sums per tile of output channels.
    CHECK(test::occurrences(plan, "padded pairs: root vec") == 2);
    CHECK(test::occurrences(plan, "weight pairs: root vec32") == 2);
    CHECK(test::occurrences(plan, "over channels") >= 2);
  } else {
    CHECK(test::occurrences(plan, "pairs") == 0);  // widened to f32, as any other convolution
  }
  // Training under autocast: the gradients of f32 master weights through bf16 convolutions.
  auto loss = [&](const Tensor& v, const Tensor& a, const Tensor& b) {
    auto scope = hjit::autocast(DType::BF16);
    const Tensor y = block(v, a, b).astype(DType::F32);
    return hjit::sum(y * y);
  };
  const Tensor xf = x.astype(DType::F32), a = w1.astype(DType::F32), b = w2.astype(DType::F32);
  const std::vector<Tensor> g = hjit::jit(hjit::grad(loss, {1, 2}))(xf, a, b), ge = hjit::grad(loss, {1, 2})(xf, a, b);
  REQUIRE(g.size() == 2);
  for (size_t k = 0; k < 2; ++k) {
    CHECK(g[k].dtype() == DType::F32);
    CHECK(test::compare(g[k], ge[k], 1.0 / 16) == "");
  }
}

TEST_CASE("int_conv2d is the convolution of (x - zero point) and the weight in i32, eager and compiled") {
  struct ConvCase {
    Shape x, w;
    hjit::Pair stride, padding, dilation;
    int64_t groups;
    DType xt, wt;
  };
  const std::vector<ConvCase> cases = {
      {{1, 8, 9, 9}, {16, 8, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, DType::U8, DType::I8},
      {{2, 5, 7, 6}, {20, 5, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 1, DType::U8, DType::I8},   // channels not in fours, stride 2
      {{1, 3, 16, 16}, {32, 3, 7, 7}, {2, 2}, {3, 3}, {1, 1}, 1, DType::U8, DType::I8}, // a stem
      {{1, 64, 7, 7}, {40, 64, 1, 1}, {1, 1}, {0, 0}, {1, 1}, 1, DType::I8, DType::I8}, // signed input
      {{1, 12, 10, 10}, {33, 12, 3, 3}, {1, 1}, {2, 2}, {2, 2}, 1, DType::U8, DType::I8}, // dilated
      {{1, 12, 8, 8}, {12, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 12, DType::U8, DType::I8},  // depthwise: its taps summed
      {{2, 40, 9, 11}, {40, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 40, DType::U8, DType::I8}, // depthwise, stride 2, odd sizes
      {{1, 24, 12, 10}, {24, 1, 5, 3}, {1, 2}, {2, 0}, {2, 1}, 24, DType::I8, DType::U8}, // depthwise: dilated, signed, u8 weight
      {{1, 16, 3, 3}, {16, 1, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 16, DType::U8, DType::I8},  // depthwise: one output
      {{1, 24, 11, 9}, {24, 1, 5, 5}, {2, 1}, {2, 2}, {1, 2}, 24, DType::U8, DType::I8},  // depthwise 5x5: rows in two fours
      {{2, 3, 7, 7}, {3, 1, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 3, DType::I8, DType::I8},     // depthwise: 3 channels, signed input
      {{1, 1, 6, 5}, {1, 1, 1, 3}, {1, 1}, {0, 1}, {1, 1}, 1, DType::U8, DType::I8},     // depthwise: one channel, one row
      {{1, 96, 15, 15}, {96, 1, 3, 3}, {2, 2}, {1, 1}, {1, 1}, 96, DType::U8, DType::I8}, // depthwise: MobileNet's channel tiles
      {{1, 40, 6, 6}, {40, 1, 7, 7}, {1, 1}, {3, 3}, {1, 1}, 40, DType::U8, DType::I8},  // depthwise 7x7, kernel as large as the input
      {{1, 8, 7, 7}, {16, 4, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 2, DType::U8, DType::I8},    // grouped: f32
      {{1, 8, 6, 6}, {4, 8, 3, 3}, {1, 1}, {0, 0}, {1, 1}, 1, DType::U8, DType::U8},    // u8 weight: i32
      {{1, 64, 14, 14}, {64, 64, 3, 3}, {1, 1}, {1, 1}, {1, 1}, 1, DType::U8, DType::I8},
  };
  auto f = hjit::jit([](const Tensor& x, const Tensor& w, const Tensor& z, int64_t s0, int64_t s1, int64_t p0, int64_t p1, int64_t d0,
                        int64_t d1, int64_t g) { return hjit::int_conv2d(x, w, z, {s0, s1}, {p0, p1}, {d0, d1}, g); },
                     quiet());
  uint64_t seed = 500;
  for (const ConvCase& c : cases) {
    CAPTURE(hjit::shape_str(c.x));
    CAPTURE(hjit::shape_str(c.w));
    const Tensor x = full_range(c.x, c.xt, seed++), w = full_range(c.w, c.wt, seed++);
    const Tensor z = Tensor::scalar(c.xt == DType::U8 ? 131 : -7, c.xt);
    const Tensor want = hjit::conv2d(x.astype(DType::I32) - z.astype(DType::I32), w.astype(DType::I32), std::nullopt, c.stride,
                                     c.padding, c.dilation, c.groups);
    const Tensor eager = hjit::int_conv2d(x, w, z, c.stride, c.padding, c.dilation, c.groups);
    CHECK(eager.dtype() == DType::I32);
    CHECK(test::compare(eager, want, 0) == "");
    CHECK(test::compare(f(x, w, z, c.stride[0], c.stride[1], c.padding[0], c.padding[1], c.dilation[0], c.dilation[1], c.groups), want, 0) ==
          "");
  }
  CHECK_THROWS_AS(hjit::int_conv2d(Tensor::zeros({1, 4, 4, 4}), Tensor::zeros({4, 4, 1, 1}, DType::I8), Tensor::scalar(0, DType::U8)),
                  hjit::DTypeError);
  CHECK_THROWS_AS(hjit::int_conv2d(Tensor::zeros({1, 4, 4, 4}, DType::U8), Tensor::zeros({4, 3, 1, 1}, DType::I8), Tensor::scalar(0, DType::U8)),
                  hjit::ShapeError);
  CHECK_THROWS_AS(hjit::int_conv2d(Tensor::zeros({1, 4, 4, 4}, DType::U8), Tensor::zeros({4, 4, 1, 1}, DType::I8), Tensor::zeros({4}, DType::U8)),
                  hjit::ShapeError);
}

namespace {

// Graph g compiled with the built-in schedule whose integer convolutions call oneDNN (a tuning
// candidate, off by default), run on `inputs`; its plan in *plan.
std::vector<Tensor> run_with_int_conv_extern(const hjit::Graph& g, const std::vector<Tensor>& inputs, std::string* plan) {
  hjit::backend::BuiltinParams params;
  params.extern_int_conv = true;
  hjit::detail::FunctionRequest request;
  request.name = "int_conv_extern";
  request.schedule = {hjit::backend::BuiltIn{params}};
  const auto compiled = hjit::detail::CompiledFunction::compile(g, request);
  *plan = compiled->executable().explain();
  hjit::detail::CallInputs bound;
  for (const Tensor& t : inputs) bound.push(t.impl().get());
  std::vector<Tensor> out;
  compiled->run(bound.view(), out);
  return out;
}

}  // namespace

// The convolutions oneDNN computes where it runs on AMX (extern_int_conv_nodes), where a schedule
// asks for them: of 2^24 multiply-adds at least, over batches (a part of the images a thread),
// rows that do not divide among the threads, strides, dilations, channels not in fours and output
// blocks of 8; each exact, as eager, with the input as the caller lays it out (reordered by the
// kernel into oneDNN's nhwc) or as the convolution before it stores its value (read where it lies),
// weights captured (packed on each call) or frozen (packed when compiling).
TEST_CASE("int_conv2d calls oneDNN's convolution on AMX where a schedule asks: exact, as eager, over shapes, strides and batches") {
  const bool amx = hjit::backend::gemm_on_amx(hjit::backend::ExternKind::IntGemm);
  struct Layer {
    Shape x, w;
    int64_t stride, padding, dilation;
    bool on_amx;
  };
  const Layer layers[] = {
      {{1, 64, 30, 30}, {64, 64, 3, 3}, 1, 1, 1, true},      {{2, 30, 57, 55}, {48, 30, 3, 3}, 2, 1, 1, true},
      {{1, 256, 14, 14}, {1024, 256, 1, 1}, 1, 0, 1, true},  {{1, 128, 7, 9}, {512, 128, 3, 3}, 1, 1, 1, true},
      {{1, 64, 24, 24}, {96, 64, 3, 3}, 1, 2, 2, true},      {{1, 128, 20, 20}, {40, 128, 3, 3}, 1, 1, 1, true},
      {{3, 3, 64, 64}, {64, 3, 7, 7}, 2, 3, 1, true},        {{1, 32, 14, 14}, {32, 32, 3, 3}, 1, 1, 1, false},
  };
  const Tensor z = Tensor::scalar(131, DType::U8);
  uint64_t seed = 700;
  for (const Layer& l : layers) {
    CAPTURE(hjit::shape_str(l.x));
    CAPTURE(hjit::shape_str(l.w));
    const Tensor x = full_range(l.x, DType::U8, seed++), w = full_range(l.w, DType::I8, seed++);
    auto conv = [&](const Tensor& in, const Tensor& weight) {
      return hjit::int_conv2d(in, weight, z, {l.stride, l.stride}, {l.padding, l.padding}, {l.dilation, l.dilation});
    };
    const Tensor want = conv(x, w);
    std::string plan;
    const hjit::TracedFunction traced = hjit::trace(conv, x, w);
    CHECK(test::compare(run_with_int_conv_extern(traced.graph, traced.inputs, &plan).at(0), want, 0) == "");
    CHECK(test::occurrences(plan, "extern oneDNN int_conv") == (amx && l.on_amx ? 1 : 0));
    // Frozen: the weights packed into oneDNN's layout when compiling.
    const hjit::Module frozen = hjit::make_module("frozen_int_conv", {}, {.freeze_parameters = true},
                                                  [&](const Tensor& in) { return conv(in, w); }, x);
    CHECK(test::compare(run_with_int_conv_extern(frozen.graph(), {x}, &plan).at(0), want, 0) == "");
    const std::set<int> externs = hjit::backend::extern_int_conv_nodes(frozen.graph());
    CHECK(externs.size() == (amx && l.on_amx ? 1u : 0u));
    CHECK(packed_weight_bytes(frozen.graph(), externs) >= (amx && l.on_amx ? hjit::shape_numel(l.w) : 0));
  }
  // The built-in schedule's default keeps hjit's own tiles.
  auto f = hjit::jit([&](const Tensor& x, const Tensor& w) { return hjit::int_conv2d(x, w, z, {1, 1}, {1, 1}); });
  const Tensor x = full_range({1, 64, 30, 30}, DType::U8, 1), w = full_range({64, 64, 3, 3}, DType::I8, 2);
  CHECK(test::occurrences(f.explain(x, w), "extern oneDNN") == 0);
}

// A quantized chain as the built-in schedule lays it out around the library calls: each sum stored
// channels innermost (oneDNN's nhwc), requantized in the next one's input copy, which the next call
// reads where it lies; a residual sum between them. Scales are powers of two: exact.
TEST_CASE("quantized convolutions on AMX in a chain with a residual sum: nhwc between the calls, exact") {
  const bool amx = hjit::backend::gemm_on_amx(hjit::backend::ExternKind::IntGemm);
  const Tensor z = Tensor::scalar(3, DType::U8);
  auto requantized = [&](const Tensor& acc, float scale) {
    return hjit::clamp(hjit::round(hjit::relu(acc.astype(DType::F32) * scale)) + 3.0f, 0, 255).astype(DType::U8);
  };
  auto block = [&](const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& w3) {
    const Tensor a = requantized(hjit::int_conv2d(x, w1, z, {1, 1}, {1, 1}), 1.0f / 1024);
    const Tensor b = requantized(hjit::int_conv2d(a, w2, z), 1.0f / 512);
    const Tensor sum = hjit::clamp(b.astype(DType::F32) + x.astype(DType::F32) - 3.0f, 0, 255).astype(DType::U8);
    return requantized(hjit::int_conv2d(sum, w3, z, {2, 2}, {1, 1}), 1.0f / 2048);
  };
  uint64_t seed = 1500;
  for (const std::array<int64_t, 2>& size : std::vector<std::array<int64_t, 2>>{{1, 28}, {2, 21}}) {
    CAPTURE(size[0]);
    CAPTURE(size[1]);
    const Tensor x = full_range({size[0], 192, size[1], size[1]}, DType::U8, seed++);
    const Tensor w1 = full_range({128, 192, 3, 3}, DType::I8, seed++), w2 = full_range({192, 128, 1, 1}, DType::I8, seed++),
                 w3 = full_range({128, 192, 3, 3}, DType::I8, seed++);
    const Tensor want = block(x, w1, w2, w3);
    const hjit::TracedFunction traced = hjit::trace(block, x, w1, w2, w3);
    std::string plan;
    CHECK(test::compare(run_with_int_conv_extern(traced.graph, traced.inputs, &plan).at(0), want, 0) == "");
    CAPTURE(plan);
    const size_t externs = hjit::backend::extern_int_conv_nodes(traced.graph).size();
    CHECK(test::occurrences(plan, "extern oneDNN int_conv, channels innermost") == externs);
    CHECK(externs == (amx ? 3u : 0u));
    // The inputs of the second and third calls: copies stored channels innermost, the sums before
    // them requantized (and the residual added) on the way.
    if (amx) CHECK(test::occurrences(plan, "_transpose: root channels innermost") == 2);
  }
}

// The kernel itself, called as Halide calls an extern stage, on every machine built with oneDNN
// (without AMX its primitive runs on VNNI or AVX2): a bounds query; a region of a part of the
// columns and channels whose rows run past the output (a split rounded up) into an NCHW buffer,
// from hjit's own [N, C/4, H, W, 4] input; the whole of an image's rows in nhwc, read and written
// where they lie; weights packed when compiling, none, or packed in another layout.
TEST_CASE("the int_conv kernel answers bounds queries and computes the region asked for, in either layout") {
  using Kernel = int (*)(halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, halide_buffer_t*, int32_t, int32_t, int32_t, int32_t,
                         int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, int32_t, halide_buffer_t*);
  const auto kernel = reinterpret_cast<Kernel>(dlsym(RTLD_DEFAULT, hjit::kernel_abi::kIntConvSymbol));
  if (!hjit::backend::provider_for(hjit::backend::ExternKind::IntConv)) return;
  REQUIRE(bool(kernel));
  // x [N, C/4, H, W, 4], w [O/B, C/4, KH, KW, B, 4]; strides 2 x 1, dilation 1 x 2.
  const int N = 2, C4 = 5, H = 11, W = 10, O = 32, B = 16, KH = 3, KW = 2, SY = 2, SX = 1, DY = 1, DX = 2;
  const int OH = (H - (KH - 1) * DY - 1) / SY + 1, OW = (W - (KW - 1) * DX - 1) / SX + 1;
  const int32_t problem[hjit::kernel_abi::kIntConvProblemInts] = {C4, H, W, O, B, KH, KW, SY, SX, DY, DX};
  std::mt19937 gen(11);
  std::vector<uint8_t> x(size_t(N * C4 * H * W * 4));
  std::vector<int8_t> w(size_t(O * C4 * KH * KW * 4));
  std::vector<int32_t> offsets(O);
  for (auto& v : x) v = uint8_t(gen());
  for (auto& v : w) v = int8_t(gen());
  for (auto& v : offsets) v = int32_t(gen() % 20001) - 10000;
  auto want = [&](int n, int o, int oy, int ox) {
    int64_t acc = -offsets[size_t(o)];
    for (int c = 0; c < C4 * 4; ++c)
      for (int ky = 0; ky < KH; ++ky)
        for (int kx = 0; kx < KW; ++kx) {
          const int iy = oy * SY + ky * DY, ix = ox * SX + kx * DX;
          acc += int(x[size_t((((n * C4 + c / 4) * H + iy) * W + ix) * 4 + c % 4)]) *
                 int(w[size_t(((((o / B) * C4 + c / 4) * KH + ky) * KW + kx) * B * 4 + (o % B) * 4 + c % 4)]);
        }
    return int32_t(acc);
  };
  std::vector<uint8_t> x_nhwc(x.size());  // the same values, channels innermost
  for (int n = 0; n < N; ++n)
    for (int c = 0; c < C4 * 4; ++c)
      for (int y = 0; y < H; ++y)
        for (int col = 0; col < W; ++col)
          x_nhwc[size_t(((n * H + y) * W + col) * C4 * 4 + c)] = x[size_t((((n * C4 + c / 4) * H + y) * W + col) * 4 + c % 4)];
  for (auto [nhwc, packing] : {std::pair{false, Packing::None}, {false, Packing::Packed}, {true, Packing::Packed}, {true, Packing::Stale},
                               {true, Packing::None}}) {
    CAPTURE(nhwc);
    CAPTURE(int(packing));
    std::vector<uint8_t> packed_bytes(size_t(hjit::kernel_abi::kPackedHeaderBytes), 0);
    if (packing != Packing::None) {
      packed_bytes.resize(size_t(hjit_int_conv_pack_constant(problem, OH, w.data(), nullptr, 0)));
      REQUIRE(hjit_int_conv_pack_constant(problem, OH, w.data(), packed_bytes.data(), int64_t(packed_bytes.size())) ==
              int64_t(packed_bytes.size()));
      if (packing == Packing::Stale) packed_bytes[8] ^= 1;  // the fingerprint
    }
    // The region: NCHW, image 1, columns 1.., channels 8.., rows 1..OH (one past the output); nhwc:
    // both images, every column and channel, rows 1..OH-1.
    const int x0 = nhwc ? 0 : 1, c0 = nhwc ? 0 : 8, y0 = 1, m = nhwc ? OH - 1 : OH, n0 = nhwc ? 0 : 1, nn = nhwc ? 2 : 1;
    const int rows = OH + 1;  // (the buffer holds the row past the output)
    std::vector<int32_t> out(size_t(N * O * rows * OW), -1);
    halide_dimension_t od[4];
    if (nhwc) od[0] = {x0, OW - x0, O, 0}, od[1] = {y0, m, OW * O, 0}, od[2] = {c0, O - c0, 1, 0}, od[3] = {n0, nn, rows * OW * O, 0};
    else od[0] = {x0, OW - x0, 1, 0}, od[1] = {y0, m, OW, 0}, od[2] = {c0, O - c0, rows * OW, 0}, od[3] = {n0, nn, O * rows * OW, 0};
    auto element = [&](int n, int o, int oy, int ox) -> int32_t& {
      return out[size_t(nhwc ? ((n * rows + oy) * OW + ox) * O + o : ((n * O + o) * rows + oy) * OW + ox)];
    };
    halide_dimension_t xd[5] = {{0, 0, 1, 0}, {0, 0, nhwc ? C4 * 4 : 4, 0}, {0, 0, nhwc ? W * C4 * 4 : W * 4, 0},
                                {0, 0, nhwc ? 4 : H * W * 4, 0}, {0, 0, C4 * H * W * 4, 0}};
    halide_dimension_t wd[6] = {{0, 0, 1, 0}, {0, 0, 4, 0}, {0, 0, B * 4, 0}, {0, 0, KW * B * 4, 0}, {0, 0, KH * KW * B * 4, 0},
                                {0, 0, C4 * KH * KW * B * 4, 0}};
    halide_dimension_t fd{0, 0, 1, 0}, pd{0, 0, 1, 0};
    halide_buffer_t xb{}, wb{}, fb{}, pb{}, ob{};
    xb.dimensions = 5, xb.dim = xd, xb.type = halide_type_t(halide_type_uint, 8);
    wb.dimensions = 6, wb.dim = wd, wb.type = halide_type_t(halide_type_int, 8);
    fb.dimensions = 1, fb.dim = &fd, fb.type = halide_type_t(halide_type_int, 32);
    pb.dimensions = 1, pb.dim = &pd, pb.type = halide_type_t(halide_type_uint, 8);
    ob.dimensions = 4, ob.dim = od, ob.type = halide_type_t(halide_type_int, 32);
    ob.host = reinterpret_cast<uint8_t*>(&element(n0, c0, y0, x0));
    auto call = [&] { return kernel(&xb, &wb, &fb, &pb, C4, H, W, O, B, KH, KW, SY, SX, DY, DX, &ob); };
    REQUIRE(call() == 0);  // the bounds query
    const int in_rows = (std::min(y0 + m, OH) - y0 - 1) * SY + (KH - 1) * DY + 1;
    CHECK(xd[0].extent == 4);
    CHECK(xd[1].min == 0);
    CHECK(xd[1].extent == W);
    CHECK(xd[2].min == y0 * SY);
    CHECK(xd[2].extent == in_rows);
    CHECK(xd[3].extent == C4);
    CHECK(xd[4].min == n0);
    CHECK(xd[4].extent == nn);
    CHECK(wd[5].extent == O / B);
    CHECK(wd[1].extent == B);
    CHECK(fd.extent == O);
    CHECK(pd.extent == hjit::kernel_abi::kPackedHeaderBytes);
    // Buffers as Halide would pass them: host at each one's min.
    const std::vector<uint8_t>& input = nhwc ? x_nhwc : x;
    xb.host = const_cast<uint8_t*>(input.data()) + xd[2].min * xd[2].stride + n0 * xd[4].stride;
    wb.host = reinterpret_cast<uint8_t*>(w.data());
    fb.host = reinterpret_cast<uint8_t*>(offsets.data());
    pd.extent = int32_t(packed_bytes.size()), pb.host = packed_bytes.data();
    REQUIRE(call() == 0);
    for (int n = 0; n < N; ++n)
      for (int o = 0; o < O; ++o)
        for (int oy = 0; oy < rows; ++oy)
          for (int ox = 0; ox < OW; ++ox) {
            const bool asked = n >= n0 && n < n0 + nn && o >= c0 && oy >= y0 && oy < std::min(y0 + m, OH) && ox >= x0;
            CAPTURE(n);
            CAPTURE(o);
            CAPTURE(oy);
            CAPTURE(ox);
            REQUIRE(element(n, o, oy, ox) == (asked ? want(n, o, oy, ox) : -1));
          }
  }
}

namespace {
// Per-channel scales [1, channels, 1, 1] that are powers of two (2^-lowest to 2^-(lowest+3)): the
// requantized values are exact, eager and compiled.
Tensor powers_of_two(int64_t channels, int lowest) {
  std::vector<float> v;
  for (int64_t c = 0; c < channels; ++c) v.push_back(std::ldexp(1.0f, -lowest - int(c % 4)));
  return Tensor::from_vector(v, {1, channels, 1, 1});
}
}  // namespace

TEST_CASE("an integer convolution's zero-point correction is where its sums start: eager, compiled and optimized alike") {
  // hjit::int_conv2d subtracts z times each output channel's weight sum; simplify makes that the
  // convolution's third operand, which its tiles load as their sums' starting values.
  uint64_t seed = 950;
  for (const auto& [channels, pad] : std::vector<std::pair<int64_t, int64_t>>{{8, 1}, {5, 0}, {16, 2}}) {
    CAPTURE(channels);
    const Tensor x = full_range({2, channels, 6, 7}, DType::U8, seed++), w = full_range({16, channels, 3, 3}, DType::I8, seed++);
    auto conv = [pad](const Tensor& x, const Tensor& w) { return hjit::int_conv2d(x, w, Tensor::scalar(131, DType::U8), {1, 1}, {pad, pad}); };
    const Tensor want = conv(x, w);
    CHECK(test::compare(hjit::jit(conv, quiet())(x, w), want, 0) == "");
    const hjit::Graph g = hjit::simplify(hjit::make_graph(conv, x, w));
    const hjit::Node& out = g.node(g.outputs[0]);
    CHECK(out.op == hjit::OpKind::IntConv2d);
    CHECK(out.inputs.size() == 3);
    // The optimized graph run eagerly (IntConv2d's kernel with the offsets) equals it too.
    CHECK(test::compare(hjit::eval_graph(g, {x, w})[0], want, 0) == "");
  }
  // Offsets of another length, or not i32, are refused; with no input channels the result is
  // the offsets' negations.
  const hjit::Attrs attrs{{"stride", std::vector<int64_t>{1, 1}}, {"dilation", std::vector<int64_t>{1, 1}}};
  {
    hjit::Graph bad;
    const int x = bad.add_parameter({DType::U8, {1, 2, 3, 3, 4}}), w = bad.add_parameter({DType::I8, {1, 2, 1, 1, 4, 4}});
    CHECK_THROWS_WITH_AS(bad.add_op(hjit::OpKind::IntConv2d, {x, w, bad.add_parameter({DType::I32, {3}})}, attrs),
                         doctest::Contains("one per output channel"), hjit::ShapeError);
    CHECK_THROWS_AS(bad.add_op(hjit::OpKind::IntConv2d, {x, w, bad.add_parameter({DType::F32, {4}})}, attrs), hjit::ShapeError);
    CHECK_THROWS_AS(bad.add_op(hjit::OpKind::IntConv2d, {x, w, x, w}, attrs), hjit::ValueError);
  }
  hjit::Graph g;
  const int x = g.add_parameter({DType::U8, {1, 0, 3, 3, 4}}), w = g.add_parameter({DType::I8, {1, 0, 1, 1, 4, 4}});
  const int offsets = g.add_parameter({DType::I32, {4}});
  g.outputs.push_back(g.add_op(hjit::OpKind::IntConv2d, {x, w, offsets}, attrs));
  const Tensor k = Tensor::from_vector(std::vector<int32_t>{5, -7, 0, 2147483647}, {4});
  const Tensor none = Tensor::zeros({1, 0, 3, 3, 4}, DType::U8), no_weights = Tensor::zeros({1, 0, 1, 1, 4, 4}, DType::I8);
  const std::vector<int32_t> negated{-5, 7, 0, -2147483647};
  std::vector<int32_t> expected;
  for (int32_t v : negated) expected.insert(expected.end(), 9, v);
  CHECK(hjit::eval_graph(g, {none, no_weights, k})[0].to_vector<int32_t>() == expected);
  CHECK(hjit::eval_graph(hjit::simplify(g), {none, no_weights, k})[0].to_vector<int32_t>() == expected);
}

TEST_CASE("int_depthwise2d: a depthwise convolution as dot products of four rows of a window column, exact") {
  // hjit::int_conv2d of i8 depthwise weights packs them [C/B, 1, R, KW, B, 4] (a kernel's rows in
  // fours, zeros past its last); simplify folds the zero point's correction into the op's offsets.
  uint64_t seed = 970;
  struct Case {
    int64_t channels, side, kernel, stride, pad, dilation;
  };
  for (const Case& c : std::vector<Case>{{16, 9, 3, 1, 1, 1}, {48, 10, 3, 2, 1, 1}, {8, 12, 5, 1, 2, 1}, {20, 11, 3, 1, 2, 2}, {2, 6, 9, 2, 4, 1}}) {
    CAPTURE(c.channels);
    CAPTURE(c.kernel);
    const Tensor x = full_range({2, c.channels, c.side, c.side + 1}, DType::U8, seed++);
    const Tensor w = full_range({c.channels, 1, c.kernel, c.kernel}, DType::I8, seed++);
    auto conv = [&c](const Tensor& x, const Tensor& w) {
      return hjit::int_conv2d(x, w, Tensor::scalar(131, DType::U8), {c.stride, c.stride}, {c.pad, c.pad}, {c.dilation, c.dilation}, c.channels);
    };
    const Tensor want = hjit::conv2d(x.astype(DType::I32) - 131, w.astype(DType::I32), std::nullopt, {c.stride, c.stride}, {c.pad, c.pad},
                                     {c.dilation, c.dilation}, c.channels);
    CHECK(test::compare(conv(x, w), want, 0) == "");
    auto compiled = hjit::jit(conv, quiet());
    CHECK(test::compare(compiled(x, w), want, 0) == "");
    // The caller's NCHW input is copied channels innermost once, where each tile's interleaved
    // rows would gather its channel vectors byte by byte.
    const std::string explained = compiled.explain(x, w);
    CHECK(test::occurrences(explained, "input copied channels innermost") == 1);
    // Its tiles are no wider than the channels: 16 of 2 shifted inwards read 14 channels before
    // the caller's tensor (a crash where that memory was not mapped).
    const std::string tiles = "input copied channels innermost: transposed in tiles ";
    const size_t at = explained.find(tiles);
    REQUIRE(at != std::string::npos);
    CHECK(std::stoll(explained.substr(at + tiles.size())) <= c.channels);
    {
      // Inputs that start just after an inaccessible page: such a read crashes here.
      const test::ScopedGuardPages before(hjit::GuardPages::Before);
      CHECK(test::compare(compiled(x.clone(), w.clone()), want, 0) == "");
    }
    const hjit::Graph g = hjit::simplify(hjit::make_graph(conv, x, w));
    const hjit::Node& out = g.node(g.outputs[0]);
    CHECK(out.op == hjit::OpKind::IntDepthwise2d);
    CHECK(out.inputs.size() == 3);
    CHECK(test::compare(hjit::eval_graph(g, {x, w})[0], want, 0) == "");
  }
  // The graph op checks its operands and its kernel against the packed weight.
  const hjit::Attrs attrs{{"stride", std::vector<int64_t>{1, 1}}, {"dilation", std::vector<int64_t>{1, 1}}, {"kernel", std::vector<int64_t>{3, 3}}};
  hjit::Graph bad;
  const int x = bad.add_parameter({DType::U8, {1, 32, 8, 8}}), w = bad.add_parameter({DType::I8, {2, 1, 1, 3, 16, 4}});
  CHECK(bad.type(bad.add_op(hjit::OpKind::IntDepthwise2d, {x, w}, attrs)).shape == hjit::Shape{1, 32, 6, 6});
  CHECK_THROWS_WITH_AS(bad.add_op(hjit::OpKind::IntDepthwise2d, {x, w},
                                  hjit::Attrs{{"stride", std::vector<int64_t>{1, 1}}, {"dilation", std::vector<int64_t>{1, 1}}, {"kernel", std::vector<int64_t>{5, 3}}}),
                       doctest::Contains("does not match the weight"), hjit::ShapeError);
  CHECK_THROWS_AS(bad.add_op(hjit::OpKind::IntDepthwise2d, {x, bad.add_parameter({DType::I8, {1, 1, 1, 3, 16, 4}})}, attrs), hjit::ShapeError);
  CHECK_THROWS_AS(bad.add_op(hjit::OpKind::IntDepthwise2d, {x, bad.add_parameter({DType::U8, {2, 1, 1, 3, 16, 4}})}, attrs), hjit::DTypeError);
  CHECK_THROWS_WITH_AS(bad.add_op(hjit::OpKind::IntDepthwise2d, {x, w, bad.add_parameter({DType::I32, {16}})}, attrs),
                       doctest::Contains("one per channel"), hjit::ShapeError);
  CHECK_THROWS_WITH_AS(bad.add_op(hjit::OpKind::IntDepthwise2d, {bad.add_parameter({DType::U8, {1, 32, 2, 8}}), w}, attrs),
                       doctest::Contains("larger than the input"), hjit::ShapeError);
}

TEST_CASE("quantized convolutions in a chain: each sum requantized in its tiles, 8-bit between them, every pack vectorized") {
  // Per-channel scales that are powers of two: the requantized values are exact, eager and compiled.
  auto layer = [](const Tensor& x, const Tensor& w, const Tensor& scale, int64_t pad) {
    const Tensor acc = hjit::int_conv2d(x, w, Tensor::scalar(3, DType::U8), {1, 1}, {pad, pad});
    const Tensor y = hjit::relu(acc.astype(DType::F32) * scale);
    return hjit::clamp(hjit::round(y) + 3.0f, 0, 255).astype(DType::U8);
  };
  auto chain = hjit::jit(
      [&](const Tensor& x, const Tensor& w1, const Tensor& s1, const Tensor& w2, const Tensor& s2) {
        return layer(layer(x, w1, s1, 1), w2, s2, 0);
      },
      quiet());
  uint64_t seed = 900;
  for (int64_t side : {7, 14}) {  // rows of the packed activation shorter than a vector
    CAPTURE(side);
    const Tensor x = full_range({1, 32, side, side}, DType::U8, seed++);
    const Tensor w1 = full_range({48, 32, 3, 3}, DType::I8, seed++), w2 = full_range({16, 48, 1, 1}, DType::I8, seed++);
    const Tensor s1 = powers_of_two(48, 10), s2 = powers_of_two(16, 9);
    const Tensor want = layer(layer(x, w1, s1, 1), w2, s2, 0);
    CHECK(test::compare(chain(x, w1, s1, w2, s2), want, 0) == "");
    const std::string plan = chain.explain(x, w1, s1, w2, s2);
    CAPTURE(plan);
    // The first convolution computes per tile of its requantized u8 value (not stored whole in
    // i32 and requantized by the next one's pack), and the packs (two activations, two weights)
    // are vector loops.
    CHECK(plan.find("_int_conv2d_acc: per tile of") != std::string::npos);
    CHECK(plan.find("int_conv2d: root") == std::string::npos);
    // The first one's u8 value is stored channels innermost (its tiles store channel vectors),
    // which the second one (1x1, unpadded) reads as its packed operand: no copy.
    CHECK(test::occurrences(plan, ", stored channels innermost") == 1);
    if (test::occurrences(plan, "wide input: root vec") == 0) {
      CHECK(test::occurrences(plan, "_transpose: inlined (a view of a value stored channels innermost)") == 1);
      CHECK(test::occurrences(plan, "_transpose: root fused innermost vec") == 3);
    } else {
      // On x86 without VNNI, each pack is read by a vector loop of its own: the activations' by
      // their i16 copies, the weights' by their pairs' (IntConv2d).
      CHECK(test::occurrences(plan, "wide input: root vec") == 2);
      CHECK(test::occurrences(plan, "weight pairs: root vec") == 2);
    }
  }
}

TEST_CASE("an 8-bit image handed between compiled parts goes channels innermost: tiles store vectors, the next part reads them in place") {
  // Quantized convolutions and a residual sum of u8 images, compiled in parts of one convolution
  // or so: each value a part hands on is [N, H, W, C] between them (backend::partition), which the
  // tiles before the cut store a channel vector at a time and the convolutions after it read as
  // their packed operand, or copy padded, contiguous; the caller's input and output stay NCHW.
  auto layer = [](const Tensor& x, const Tensor& w, const Tensor& scale, int64_t pad) {
    const Tensor acc = hjit::int_conv2d(x, w, Tensor::scalar(3, DType::U8), {1, 1}, {pad, pad});
    return hjit::clamp(hjit::round(hjit::relu(acc.astype(DType::F32) * scale)) + 3.0f, 0, 255).astype(DType::U8);
  };
  auto net = [&](const Tensor& x, const Tensor& w1, const Tensor& s1, const Tensor& w2, const Tensor& s2, const Tensor& w3, const Tensor& s3) {
    const Tensor a = layer(x, w1, s1, 1), b = layer(a, w2, s2, 0);
    const Tensor sum = hjit::clamp(a.astype(DType::F32) + b.astype(DType::F32) - 3.0f, 0, 255).astype(DType::U8);
    return layer(sum, w3, s3, 1);
  };
  test::ScopedEnv small_parts("HJIT_PART_MAX_COST", "40");
  auto compiled = hjit::jit(net, quiet());
  cpu_set_t affinity;
  const int cores = sched_getaffinity(0, sizeof affinity, &affinity) == 0 ? CPU_COUNT(&affinity) : 1;
  uint64_t seed = 1100;
  for (int64_t side : {7, 14, 15}) {
    CAPTURE(side);
    const Tensor x = full_range({1, 32, side, side}, DType::U8, seed++);
    const Tensor w1 = full_range({48, 32, 3, 3}, DType::I8, seed++), w2 = full_range({48, 48, 1, 1}, DType::I8, seed++);
    const Tensor w3 = full_range({16, 48, 3, 3}, DType::I8, seed++);
    const Tensor s1 = powers_of_two(48, 10), s2 = powers_of_two(48, 10), s3 = powers_of_two(16, 11);
    CHECK(test::compare(compiled(x, w1, s1, w2, s2, w3, s3), net(x, w1, s1, w2, s2, w3, s3), 0) == "");
    const std::string plan = compiled.explain(x, w1, s1, w2, s2, w3, s3);
    CAPTURE(plan);
    REQUIRE(plan.find("part 2 of") != std::string::npos);
    // Split in parts: every convolution's tiles but the caller's output's store channel vectors,
    // every part but the last hands its values on through a contiguous copy (a transpose of a
    // value stored so), and the convolutions after a cut read what is handed in as their packed
    // operand (1x1) or copy it padded channels innermost (3x3). Only the first part copies its
    // activation by interleaving rows (the caller's NCHW input); each copies its weights so.
    std::vector<std::string> parts;
    for (size_t at = plan.find("part 1 of"); at != std::string::npos;) {
      const size_t next = plan.find("\npart ", at + 1);
      parts.push_back(plan.substr(at, next == std::string::npos ? std::string::npos : next - at));
      at = next == std::string::npos ? next : next + 1;
    }
    for (size_t k = 0; k < parts.size(); ++k) {
      CAPTURE(k);
      const bool last = k + 1 == parts.size();
      const int tiled = test::occurrences(parts[k], " over channels");
      const int stored = test::occurrences(parts[k], ", stored channels innermost");
      CHECK(stored == (last ? tiled - 1 : tiled));
      // With two cores or more, threads take blocks of rows of those (a pixel's channel tiles write
      // its cache lines together), not channel tiles.
      if (cores > 1) CHECK(test::occurrences(parts[k], " over channels in row blocks par, stored channels innermost") == stored);
      if (!last) CHECK(test::occurrences(parts[k], "_transpose: fused innermost") >= 1);
      if (tiled == 0) continue;  // (the residual sum's part)
      CHECK(test::occurrences(parts[k], ": root fused innermost") == (k == 0 ? 2 : 1));
      if (k > 0)
        CHECK(test::occurrences(parts[k], ": inlined (a view of a value stored channels innermost)") +
                  test::occurrences(parts[k], "_transpose: root channels innermost") ==
              1);
    }
  }
}

TEST_CASE("a quantized depthwise convolution after a pointwise one reads its channels innermost, strided or not, exact") {
  // MobileNet's inverted residual in 8 bits: the expanding 1x1 convolution's requantized u8 value
  // is stored channels innermost by its tiles; the depthwise convolution after it reads a pixel's
  // channels contiguous, at stride 2 as at stride 1.
  auto requantized = [](const Tensor& acc, const Tensor& scale) {
    return hjit::clamp(hjit::round(hjit::relu(acc.astype(DType::F32) * scale)) + 3.0f, 0, 255).astype(DType::U8);
  };
  // One pipeline (a graph this small is otherwise cut in two to compile on both cores): the counts
  // below are one pipeline's.
  test::ScopedEnv whole("HJIT_PARTITION_WORK", "100000");
  uint64_t seed = 1000;
  for (int64_t stride : {1, 2}) {
    for (int64_t side : {14, 15}) {
      CAPTURE(stride);
      CAPTURE(side);
      auto block = [&](const Tensor& x, const Tensor& w1, const Tensor& s1, const Tensor& w2, const Tensor& s2) {
        const Tensor expanded = requantized(hjit::int_conv2d(x, w1, Tensor::scalar(3, DType::U8)), s1);
        return requantized(hjit::int_conv2d(expanded, w2, Tensor::scalar(3, DType::U8), {stride, stride}, {1, 1}, {1, 1}, 96), s2);
      };
      auto compiled = hjit::jit(block, quiet());
      const Tensor x = full_range({1, 32, side, side}, DType::U8, seed++);
      const Tensor w1 = full_range({96, 32, 1, 1}, DType::I8, seed++), w2 = full_range({96, 1, 3, 3}, DType::I8, seed++);
      const Tensor s1 = powers_of_two(96, 10), s2 = powers_of_two(96, 9);
      CHECK(test::compare(compiled(x, w1, s1, w2, s2), block(x, w1, s1, w2, s2), 0) == "");
      const std::string plan = compiled.explain(x, w1, s1, w2, s2);
      CAPTURE(plan);
      CHECK(test::occurrences(plan, ", stored channels innermost") == 1);
      // The depthwise sums are dot products of four rows of a window column (int_depthwise2d; two
      // on x86 without VNNI), whose interleaved rows each tile builds from the stored value.
      CHECK(test::occurrences(plan, "rows in fours: per tile") + test::occurrences(plan, "rows in pairs: per tile") == 1);
      CHECK(test::occurrences(plan, "input copied") == 0);  // (the expanded value is stored channels innermost)
    }
  }
}

namespace {
// ONNX's QuantizeLinear and DequantizeLinear to u8 with zero point 3, as the QDQ cases below write them.
Tensor requantize(const Tensor& v, float scale) { return hjit::clamp(hjit::round(v / scale) + 3.0f, 0, 255).astype(DType::U8); }
Tensor dequantize(const Tensor& q, float scale) { return (q.astype(DType::F32) - 3.0f) * scale; }
}  // namespace

TEST_CASE("a requantization clamps before it rounds and converts the rounded sum's bits: the same integers as eager") {
  // clamp(round(v) + z, lo, hi) as an integer type, each zero point a literal, a runtime u8 or none.
  struct Form {
    DType to;
    double lo, hi;
    std::optional<float> z;  // nullopt: the zero point is the function's u8 argument (7)
  };
  const std::vector<Form> forms{{DType::U8, 0, 255, 3.0f}, {DType::I8, -128, 127, -5.0f}, {DType::U8, 0, 255, std::nullopt},
                                {DType::I32, -1000, 1000, 0.0f}, {DType::I16, -300, 300, 1.0f}};
  auto quantize = [](const Tensor& v, const Tensor& zp, const Form& f) {
    Tensor r = hjit::round(v);
    if (!f.z) r = r + zp.astype(DType::F32);
    else if (*f.z != 0) r = r + *f.z;
    return hjit::clamp(r, f.lo, f.hi).astype(f.to);
  };
  // Every quarter over [-1200, 1200] (ties of both parities), and what no clamp lets through whole.
  std::vector<float> xs;
  for (int i = -4800; i <= 4800; ++i) xs.push_back(float(i) * 0.25f);
  for (float v : {4194303.5f, -4194303.5f, 5e6f, -5e6f, 1e30f, -1e30f, INFINITY, -INFINITY, NAN, -0.0f, -0.5f, 0.5f})
    xs.push_back(v);
  const Tensor any = Tensor::from_vector(xs, {int64_t(xs.size())});
  // Whole 16-bit values, a quarter apart once scaled: a range the graph knows, so that the
  // conversion reads the rounded sum's bits.
  const Tensor levels = full_range({4, 4099}, DType::I16, 77), zp = Tensor::scalar(7, DType::U8);
  for (size_t k = 0; k < forms.size(); ++k) {
    CAPTURE(k);
    const Form f = forms[k];
    auto of_floats = [&](const Tensor& v, const Tensor& z) { return quantize(v * 1.5f, z, f); };
    auto of_levels = [&](const Tensor& q, const Tensor& z) { return quantize(q.astype(DType::F32) * 0.25f - 0.5f, z, f); };
    CHECK(test::compare(hjit::jit(of_floats, quiet())(any, zp), of_floats(any, zp), 0) == "");
    CHECK(test::compare(hjit::jit(of_levels, quiet())(levels, zp), of_levels(levels, zp), 0) == "");
    // The optimized graph rounds the clamped value: the conversion's operand is round(...) (+ z).
    const hjit::Graph g = hjit::simplify(hjit::make_graph(of_levels, levels, zp));
    const hjit::Node& cast = g.node(g.outputs[0]);
    REQUIRE(cast.op == hjit::OpKind::Cast);
    const hjit::Node& sum = g.node(cast.inputs[0]);
    const hjit::Node& round = sum.op == hjit::OpKind::Add ? g.node(sum.inputs[0]) : sum;
    REQUIRE(round.op == hjit::OpKind::Round);
    CHECK(g.node(round.inputs[0]).op == hjit::OpKind::Where);
  }
}

TEST_CASE("a requantized value only its dequantization reads is not narrowed to 8 bits and back: rounded by its bits, as eager") {
  // ONNX's QuantizeLinear then DequantizeLinear inside one expression (an encoder's attention
  // scores before their softmax): simplify's drop_whole_round_trip leaves round(v) + z, which the
  // graph bounds, so the round adds 1.5 * 2^23, keeping its operand's sign (round(-0.25) is -0).
  const Tensor levels = full_range({4, 4099}, DType::I16, 78);
  auto quarters = [](const Tensor& q) { return q.astype(DType::F32) * 0.25f - 0.5f; };  // ties of both parities, and -0.25
  auto requantized = [&](const Tensor& q) { return hjit::clamp(hjit::round(quarters(q) * 1.5f) + 3.0f, 0, 255).astype(DType::U8); };
  auto dequantized = [&](const Tensor& q) { return (requantized(q).astype(DType::F32) - 3.0f) * 0.125f; };
  auto rounded = [&](const Tensor& q) { return hjit::round(quarters(q)); };
  // Bit for bit, the signs of zeros too: the rounded quarters' -0 (round(-0.25)), and the
  // dequantized value's +0 ((-0 + 3) - 3: the round read by its zero point alone keeps none).
  for (bool dequantize : {false, true}) {
    CAPTURE(dequantize);
    const std::vector<float> got = Tensor(dequantize ? hjit::jit(dequantized, quiet())(levels) : hjit::jit(rounded, quiet())(levels)).to_vector<float>(),
                             want = (dequantize ? dequantized(levels) : rounded(levels)).to_vector<float>();
    REQUIRE(got.size() == want.size());
    int negative_zeros = 0, zeros = 0;
    for (size_t i = 0; i < got.size(); ++i) {
      CHECK(got[i] == want[i]);
      CHECK(std::signbit(got[i]) == std::signbit(want[i]));
      negative_zeros += want[i] == 0 && std::signbit(want[i]);
      zeros += want[i] == 0;
    }
    CHECK(zeros > 0);
    CHECK((negative_zeros > 0) == !dequantize);
  }
  auto casts_to_u8 = [](const hjit::Graph& graph) {
    const hjit::Graph g = hjit::dce(hjit::simplify(graph));
    int n = 0;
    for (const hjit::Node& node : g.nodes) n += node.op == hjit::OpKind::Cast && node.type.dtype == DType::U8;
    return n;
  };
  // Dropped where the dequantization alone reads it and no movement follows.
  CHECK(casts_to_u8(hjit::make_graph(dequantized, levels)) == 0);
  // Kept where the u8 value is read elsewhere too (here an output; a contraction's operand), and
  // where a transpose moves the dequantized value (stored narrow, it moves a quarter of the bytes).
  auto both = [&](const Tensor& q) { return std::vector<Tensor>{requantized(q), dequantized(q)}; };
  auto moved = [&](const Tensor& q) { return hjit::transpose(dequantized(q)) + 1.0f; };
  CHECK(casts_to_u8(hjit::make_graph(both, levels)) == 1);
  CHECK(casts_to_u8(hjit::make_graph(moved, levels)) == 1);
  CHECK(test::compare(hjit::jit(moved, quiet())(levels), moved(levels), 0) == "");
}

TEST_CASE("a quantized residual block: the 8-bit sums stored channels innermost, exact at every size") {
  // ResNet's bottleneck as ONNX's QDQ form computes it: two convolutions requantized, their sum
  // requantized, read by the next convolution and by the next sum. Scales are powers of two, so
  // eager and compiled agree exactly.
  auto conv = [&](const Tensor& x, const Tensor& w, int64_t pad) {
    return requantize(hjit::int_conv2d(x, w, Tensor::scalar(3, DType::U8), {1, 1}, {pad, pad}).astype(DType::F32) * 0.25f, 1.0f);
  };
  auto block = [&](const Tensor& x, const Tensor& w1, const Tensor& w2, const Tensor& w3) {
    const Tensor a = conv(conv(x, w1, 1), w2, 0);
    const Tensor sum = requantize(hjit::relu(dequantize(a, 1.0f) + dequantize(x, 1.0f)), 2.0f);
    return std::vector<Tensor>{conv(sum, w3, 1), requantize(dequantize(sum, 2.0f) + dequantize(x, 1.0f), 4.0f)};
  };
  auto compiled = hjit::jit(block, quiet());
  uint64_t seed = 1200;
  for (const std::array<int64_t, 3>& size : std::vector<std::array<int64_t, 3>>{{1, 32, 7}, {2, 36, 9}, {1, 64, 30}}) {
    const int64_t batch = size[0], channels = size[1], side = size[2];
    CAPTURE(batch);
    CAPTURE(channels);
    CAPTURE(side);
    const Tensor x = full_range({batch, channels, side, side}, DType::U8, seed++);
    const Tensor w1 = full_range({48, channels, 3, 3}, DType::I8, seed++), w2 = full_range({channels, 48, 1, 1}, DType::I8, seed++),
                 w3 = full_range({32, channels, 3, 3}, DType::I8, seed++);
    const std::vector<Tensor> want = block(x, w1, w2, w3), got = compiled(x, w1, w2, w3);
    CHECK(test::compare(got[0], want[0], 0) == "");
    CHECK(test::compare(got[1], want[1], 0) == "");
    const std::string plan = compiled.explain(x, w1, w2, w3);
    CAPTURE(plan);
    CHECK(test::occurrences(plan, ", stored channels innermost") >= 1);
    // Each convolution computed per tile of its requantized u8 value, none stored whole in i32
    // (the round each requantize reads past hid the convolutions beneath: int8 ResNet-50 ran 1.9x
    // slower).
    CHECK(test::occurrences(plan, "int_conv2d: root") == 0);
    CHECK(test::occurrences(plan, "int_conv2d_acc: per tile of") == 3);
  }
}

TEST_CASE("a quantized depthwise convolution quantized twice around a ReLU6: computed per tile of its u8 output, exact") {
  // MobileNet V2's QDQ form: the depthwise sums requantized, dequantized, clipped to [0, 6] and
  // quantized again, then read by the next 1x1 convolution's packed copy. The u8 value is stored,
  // with the depthwise sums computed per tile of it: read through the packing instead, the i32 sums
  // were stored whole and gathered back. Scales are powers of two: eager and compiled agree exactly.
  const Tensor z = Tensor::scalar(3, DType::U8);
  auto block = [&](const Tensor& x, const Tensor& dw, const Tensor& pw) {
    const Tensor d = requantize(hjit::int_conv2d(x, dw, z, {1, 1}, {1, 1}, {1, 1}, x.shape()[1]).astype(DType::F32) * 0.25f, 1.0f);
    const Tensor r = requantize(hjit::clamp(dequantize(d, 1.0f), 0.0f, 6.0f), 0.03125f);
    return requantize(hjit::int_conv2d(r, pw, z).astype(DType::F32) * 0.125f, 2.0f);
  };
  auto compiled = hjit::jit(block, quiet());
  uint64_t seed = 1700;
  for (const std::array<int64_t, 3>& size : std::vector<std::array<int64_t, 3>>{{1, 32, 14}, {2, 48, 9}}) {
    const int64_t batch = size[0], channels = size[1], side = size[2];
    CAPTURE(batch);
    CAPTURE(channels);
    CAPTURE(side);
    const Tensor x = full_range({batch, channels, side, side}, DType::U8, seed++);
    const Tensor dw = full_range({channels, 1, 3, 3}, DType::I8, seed++), pw = full_range({24, channels, 1, 1}, DType::I8, seed++);
    CHECK(test::compare(compiled(x, dw, pw), block(x, dw, pw), 0) == "");
    const std::string plan = compiled.explain(x, dw, pw);
    CAPTURE(plan);
    CHECK(test::occurrences(plan, "int_depthwise2d_acc: per tile of") == 1);
    CHECK(test::occurrences(plan, "int_depthwise2d: root") == 0);
  }
}

TEST_CASE("a quantized encoder's layer norm and softmax: the requantized input stored once per row, equal to eager") {
  // The QDQ form of a transformer's sublayer: a matmul's sums requantized, dequantized, added to
  // the residual, the sum requantized, dequantized and normalized, and attention's scores
  // requantized and dequantized into a softmax. The inlined requantize would be recomputed by the
  // mean's sum, the variance's and the output: it is stored per row of the normalization instead.
  auto sublayer = [&](const Tensor& x, const Tensor& w, const Tensor& residual, const Tensor& scores) {
    const Tensor acc = hjit::int_matmul(x, w, Tensor::scalar(3, DType::U8), Tensor::scalar(0, DType::I8));
    const Tensor h = dequantize(requantize(dequantize(requantize(acc.astype(DType::F32) * 0.01f, 0.5f), 0.5f) + residual, 0.75f), 0.75f);
    const Tensor p = hjit::softmax(dequantize(requantize(scores.astype(DType::F32) * 0.03f, 0.25f), 0.25f));
    return std::vector<Tensor>{hjit::layer_norm(h, std::nullopt, std::nullopt), p};
  };
  auto compiled = hjit::jit(sublayer, quiet());
  uint64_t seed = 1500;
  for (const std::array<int64_t, 3>& size : std::vector<std::array<int64_t, 3>>{{1, 64, 256}, {37, 96, 72}, {128, 64, 256}}) {
    const int64_t rows = size[0], k = size[1], n = size[2];
    CAPTURE(rows);
    CAPTURE(n);
    const Tensor x = full_range({rows, k}, DType::U8, seed++), w = full_range({k, n}, DType::I8, seed++);
    const Tensor residual = test::random({rows, n}, DType::F32, seed++), scores = full_range({rows, 40}, DType::I32, seed++);
    const std::vector<Tensor> want = sublayer(x, w, residual, scores), got = compiled(x, w, residual, scores);
    CHECK(test::compare(got[0], want[0], 1e-5) == "");
    CHECK(test::compare(got[1], want[1], 1e-6) == "");
    const std::string plan = compiled.explain(x, w, residual, scores);
    CAPTURE(plan);
    // The softmax's dequantized scores (read by its maximum and its exponentials), its
    // exponentials, and the layer norm's centred input.
    CHECK(test::occurrences(plan, "(stored: read twice or more, costly to recompute)") >= 3);
  }
}

namespace {

// A small CNN and MLP head: every kind of layer nn::quantize takes (a grouped convolution, an
// unbatched-capable Conv2d, Linear layers with and without bias).
// Its parameters drawn from `seed`; in eval mode.
struct Seeded {
  explicit Seeded(uint64_t seed) { hjit::nn::manual_seed(seed); }
};
struct SmallNet : Seeded, hjit::nn::Module {
  hjit::nn::Conv2d c1{3, 8, 3, 1, 1}, c2{8, 8, 3, 1, 1, 1, 2};
  hjit::nn::Linear fc1{8 * 4 * 4, 16}, fc2{16, 5, false};
  explicit SmallNet(uint64_t seed) : Seeded(seed) {
    register_module("c1", c1), register_module("c2", c2), register_module("fc1", fc1), register_module("fc2", fc2);
    eval();
  }
  Tensor operator()(const Tensor& x) {
    const Tensor h = hjit::relu(c2(hjit::relu(c1(x))));
    return fc2(hjit::relu(fc1(h.reshape({x.dim(0), -1}))));
  }
};

}  // namespace

TEST_CASE("nn::quantize: Linear and Conv2d compute on 8-bit inputs and weights, as their dequantized float arithmetic; jit as eager") {
  SmallNet net(3);
  const Tensor x = Tensor::randn({2, 3, 4, 4}, 31);
  const Tensor before = net(x);
  CHECK(hjit::nn::quantize(net, [&] {
          for (uint64_t k = 0; k < 3; ++k) net(Tensor::randn({2, 3, 4, 4}, 40 + k));
        }) == 4);
  CHECK(net.c1.int8.weight.dtype() == DType::I8);
  CHECK(net.fc2.int8.input_zero_point.dtype() == DType::U8);
  // The reference: each layer's input and weight quantized and dequantized, then float ops.
  auto fake = [](const hjit::nn::Int8State& s, const Tensor& x) {
    const Tensor q = s.quantize_input(x).q.astype(DType::F32) - s.input_zero_point.astype(DType::F32);
    return q * s.input_scale;
  };
  auto weight = [](const hjit::nn::Int8State& s, const Tensor& w) {
    Shape shape(size_t(w.ndim()), 1);
    shape[0] = w.dim(0);
    return s.weight.astype(DType::F32) * (s.scale / s.input_scale).reshape(shape);
  };
  auto conv = [&](hjit::nn::Conv2d& c, const Tensor& h) {
    return hjit::conv2d(fake(c.int8, h), weight(c.int8, c.weight), c.bias, c.stride, c.padding, c.dilation, c.groups);
  };
  const Tensor h = hjit::relu(conv(net.c2, hjit::relu(conv(net.c1, x)))).reshape({2, -1});
  const Tensor h2 = hjit::relu(hjit::matmul(fake(net.fc1.int8, h), hjit::transpose(weight(net.fc1.int8, net.fc1.weight))) + net.fc1.bias);
  const Tensor want = hjit::matmul(fake(net.fc2.int8, h2), hjit::transpose(weight(net.fc2.int8, net.fc2.weight)));
  const Tensor eager = net(x);
  CHECK(test::compare(eager, want, 1e-5) == "");
  CHECK(test::compare(eager, before, 0.05) == "");  // close to the float model, not equal to it
  CHECK(hjit::max(hjit::abs(eager - before)).item<float>() > 0);
  auto f = hjit::jit([&](const Tensor& a) { return net(a); });
  CHECK(test::compare(f(x), eager, 1e-6) == "");
  // An unbatched input through a quantized Conv2d.
  const Tensor first = hjit::slice(x, 0, 0, 1);
  CHECK(test::compare(net.c1(first.reshape({3, 4, 4})).reshape({1, 8, 4, 4}), net.c1(first), 0) == "");

  // The quantized state is buffers: a checkpoint of it restores the same outputs in a model
  // quantized the same way.
  const hjit::NamedTensors state = net.state();
  auto has = [&](const std::string& name) {
    return std::any_of(state.begin(), state.end(), [&](const auto& kv) { return kv.first == name; });
  };
  CHECK(has("c1.int8_weight"));
  CHECK(has("fc2.input_zero_point"));
  SmallNet other(99);
  hjit::nn::quantize(other, [&] { other(x); });
  other.load_state(state);
  CHECK(test::compare(other(x), eager, 0) == "");
}

TEST_CASE("nn::quantize's errors: calibration inside jit, a layer never reached, a bad percentile") {
  SmallNet net(4);
  auto traced = hjit::jit([&](const Tensor& a) { return net(a); });
  CHECK_THROWS_WITH_AS(hjit::nn::quantize(net, [&] { traced(Tensor::randn({1, 3, 4, 4}, 1)); }),
                       doctest::Contains("eagerly"), hjit::ValueError);
  CHECK_FALSE(net.c1.int8.weight.defined());  // nothing quantized, and no layer left calibrating
  CHECK_FALSE(net.c1.int8.calibrating);
  CHECK_THROWS_WITH_AS(hjit::nn::quantize(net, [&] { net.c1(Tensor::randn({1, 3, 4, 4}, 1)); }), doctest::Contains("'c2'"),
                       hjit::ValueError);
  hjit::QuantizeOptions o;
  o.calibration = hjit::QuantizeOptions::Calibration::Percentile;
  o.percentile = 40;
  CHECK_THROWS_AS(hjit::nn::quantize(net, [] {}, o), hjit::ValueError);
  o.percentile = 99.9;
  CHECK(hjit::nn::quantize(net, [&] { net(Tensor::randn({4, 3, 4, 4}, 2)); }, o) == 4);
  CHECK(test::compare(net(Tensor::randn({1, 3, 4, 4}, 3)), net(Tensor::randn({1, 3, 4, 4}, 3)), 0) == "");
}

TEST_CASE("nn::quantize_dynamic: Linear layers quantize each input with the scale of its own range; jit as eager") {
  SmallNet net(5);
  const Tensor x = Tensor::randn({3, 3, 4, 4}, 51);
  const Tensor before = net(x);
  CHECK(hjit::nn::quantize_dynamic(net) == 2);  // the Linear layers; the convolutions stay float
  CHECK_FALSE(net.c1.int8.weight.defined());
  CHECK_FALSE(net.fc1.int8.input_scale.defined());
  // fc2's input, quantized by hand from its own range: u8 steps of (max - min) / 255 holding 0.
  const Tensor h = hjit::relu(net.c2(hjit::relu(net.c1(x)))).reshape({3, -1});
  const Tensor a = hjit::relu(net.fc1(h));
  const float lo = std::min(0.0f, hjit::min(a).item<float>()), hi = std::max(0.0f, hjit::max(a).item<float>());
  const float step = (hi - lo) / 255;
  const Tensor a_q = (hjit::clamp(hjit::round(a / step) + std::nearbyint(-lo / step), 0, 255) - std::nearbyint(-lo / step)) * step;
  const Tensor w = net.fc2.int8.weight.astype(DType::F32) * net.fc2.int8.scale.reshape({-1, 1});
  const Tensor eager = net(x);
  CHECK(test::compare(eager, hjit::matmul(a_q, hjit::transpose(w)), 1e-5) == "");
  CHECK(test::compare(eager, before, 0.05) == "");
  auto f = hjit::jit([&](const Tensor& v) { return net(v); });
  CHECK(test::compare(f(x), eager, 1e-6) == "");
  const Tensor other = Tensor::randn({5, 3, 4, 4}, 52) * 10;  // another range, another scale
  CHECK(test::compare(f(other), net(other), 1e-6) == "");
}

namespace {
// The values a bf16 tensor holds, as f32 (for comparisons within bf16's rounding).
std::vector<float> f32_values(const Tensor& t) { return t.astype(DType::F32).to_vector<float>(); }
}  // namespace

TEST_CASE("autocast(bf16): contractions in bf16, reductions and normalizations in f32, other ops as promoted") {
  const Tensor x = Tensor::randn({6, 32}, 1), w = Tensor::randn({24, 32}, 2), b = Tensor::randn({24}, 3);
  const Tensor img = Tensor::randn({1, 4, 7, 7}, 4), k = Tensor::randn({8, 4, 3, 3}, 5), kb = Tensor::randn({8}, 6);
  const Tensor q = Tensor::randn({2, 5, 8}, 7);
  CHECK_FALSE(hjit::autocast_dtype().has_value());
  {
    auto scope = hjit::autocast(DType::BF16);
    REQUIRE(hjit::autocast_dtype() == DType::BF16);
    const Tensor mm = hjit::matmul(x, hjit::transpose(w));
    CHECK(mm.dtype() == DType::BF16);
    CHECK(f32_values(mm) == f32_values(hjit::matmul(x.astype(DType::BF16), hjit::transpose(w.astype(DType::BF16)))));
    // linear and conv2d convert their bias too: the result stays bf16.
    const Tensor lin = hjit::linear(x, w, b);
    CHECK(lin.dtype() == DType::BF16);
    CHECK(hjit::nn::Linear(32, 24).forward(x).dtype() == DType::BF16);
    CHECK(hjit::conv2d(img, k, kb, {1, 1}, {1, 1}).dtype() == DType::BF16);
    CHECK(hjit::conv1d(Tensor::randn({1, 4, 9}, 8), Tensor::randn({3, 4, 3}, 9), Tensor::randn({3}, 10)).dtype() == DType::BF16);
    CHECK(hjit::scaled_dot_product_attention(q, q, q, true).dtype() == DType::BF16);
    // Reductions and normalizations widen their bf16 operands and answer in f32.
    CHECK(hjit::softmax(lin).dtype() == DType::F32);
    CHECK(hjit::log_softmax(lin).dtype() == DType::F32);
    CHECK(hjit::layer_norm(lin, std::nullopt, std::nullopt).dtype() == DType::F32);
    CHECK(hjit::sum(lin).dtype() == DType::F32);
    CHECK(hjit::mean(lin, {1}).dtype() == DType::F32);
    CHECK(hjit::cumsum(lin, 1).dtype() == DType::F32);
    CHECK(test::compare(hjit::softmax(lin), hjit::softmax(lin.astype(DType::F32)), 1e-6) == "");
    const Tensor labels = Tensor::from_vector<int64_t>({0, 3, 5, 1, 2, 23}, {6});
    CHECK(hjit::cross_entropy(lin, labels).dtype() == DType::F32);
    // Everything else as promoted: bf16 + f32 is f32, relu keeps bf16; integers are not touched.
    CHECK((lin + b).dtype() == DType::F32);
    CHECK(hjit::relu(lin).dtype() == DType::BF16);
    const Tensor a8 = Tensor::ones({2, 4}, DType::U8), b8 = Tensor::ones({4, 3}, DType::I8);
    CHECK(hjit::int_matmul(a8, b8).dtype() == DType::I32);
    CHECK(hjit::matmul(Tensor::ones({2, 2}, DType::I32), Tensor::ones({2, 2}, DType::I32)).dtype() == DType::I32);
    {
      auto off = hjit::autocast(DType::BF16, false);  // an f32 island
      CHECK_FALSE(hjit::autocast_dtype().has_value());
      CHECK(hjit::matmul(x, hjit::transpose(w)).dtype() == DType::F32);
    }
    CHECK(hjit::autocast_dtype() == DType::BF16);
    // The state is the thread's own.
    bool other_thread_sees_it = true;
    std::thread([&] { other_thread_sees_it = hjit::autocast_dtype().has_value(); }).join();
    CHECK_FALSE(other_thread_sees_it);
  }
  CHECK_FALSE(hjit::autocast_dtype().has_value());
  CHECK(hjit::matmul(x, hjit::transpose(w)).dtype() == DType::F32);
  CHECK_THROWS_AS(hjit::autocast(DType::F32), hjit::ValueError);
  CHECK_THROWS_AS(hjit::autocast(DType::I8), hjit::ValueError);
  {
    auto scope = hjit::autocast(DType::F16);
    CHECK(hjit::linear(x, w, b).dtype() == DType::F16);
  }
}

TEST_CASE("autocast is part of a jitted function's key: compiled as eager in each state, traced once per state") {
  const Tensor x = Tensor::randn({16, 64}, 11), w = Tensor::randn({48, 64}, 12), b = Tensor::randn({48}, 13);
  const Tensor g = Tensor::randn({48}, 14);
  auto block = [&](const Tensor& v) { return hjit::layer_norm(hjit::gelu(hjit::linear(v, w, b)), g, std::nullopt); };
  auto f = hjit::jit(block);
  const Tensor plain = f(x);
  CHECK(plain.dtype() == DType::F32);
  CHECK(test::compare(plain, block(x), 1e-4) == "");
  Tensor mixed, mixed_eager;
  {
    auto scope = hjit::autocast(DType::BF16);
    mixed = f(x);
    mixed_eager = block(x);
    f(x);
  }
  CHECK(mixed.dtype() == DType::F32);  // layer_norm's result
  CHECK(test::compare(mixed, mixed_eager, 1.0 / 32) == "");
  // bf16's products moved the result, within what bf16's 8 bits allow.
  CHECK(test::compare(mixed, plain, 0.1) == "");
  CHECK(f32_values(mixed) != f32_values(plain));
  f(x);
  CHECK(f.stats().traces == 2);
  CHECK(f.stats().cache_hits == 2);
}

TEST_CASE("autocast training keeps f32 master weights: f32 gradients, as eager, and the loss falls") {
  hjit::nn::Sequential net;
  net.add<hjit::nn::Linear>(16, 32);
  net.add<hjit::nn::ReLU>();
  net.add<hjit::nn::Linear>(32, 4);
  const Tensor x = Tensor::randn({64, 16}, 21);
  const Tensor labels = hjit::argmax(hjit::matmul(x, Tensor::randn({16, 4}, 22)), 1);
  std::vector<Tensor> params = net.parameters();
  auto loss = [&](const Tensor& v, const Tensor& y) {
    auto scope = hjit::autocast(DType::BF16);
    return hjit::cross_entropy(net.forward(v), y);
  };
  auto step = hjit::jit(hjit::value_and_grad(loss, params));
  const auto [l0, g0] = hjit::value_and_grad(loss, params)(x, labels);
  const auto [l1, g1] = step(x, labels);
  CHECK(l1.dtype() == DType::F32);
  REQUIRE(g1.size() == params.size());
  for (size_t i = 0; i < params.size(); ++i) {
    CAPTURE(i);
    CHECK(params[i].dtype() == DType::F32);
    CHECK(g1[i].dtype() == DType::F32);
    CHECK(test::compare(g1[i], g0[i], 1.0 / 16) == "");
  }
  hjit::optim::SGD opt(params, 0.5);
  double first = 0, last = 0;
  for (int it = 0; it < 30; ++it) {
    auto [l, g] = step(x, labels);
    if (it == 0) first = l.item<double>();
    last = l.item<double>();
    opt.step(g);
  }
  CHECK(last < 0.5 * first);
}
