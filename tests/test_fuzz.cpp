// Deterministic mutation fuzzing of what hjit reads from text: Graph::parse. Each seed graph's
// complete text (constants, updates, nested control flow graphs) is mutated many times: every
// mutation must parse into a graph that verifies, prints and parses back the same, or be
// rejected with a typed hjit::Error; anything else (another exception, a crash) fails the test.
#include <random>

#include "graph/passes/verify.h"
#include "tests/support.h"

using hjit::Tensor;

namespace {

std::vector<std::string> seed_texts() {
  Tensor w = test::random({3, 4}, hjit::DType::F32, 1);
  auto mlp = [&](const Tensor& x) { return hjit::softmax(hjit::relu(hjit::matmul(x, w)) * 2.0 + 1.0, -1); };
  auto loop = [](const Tensor& x) {
    Tensor c = Tensor::arange(2);
    return hjit::fori_loop(0, 3, [&](const Tensor& i, const Tensor& a) {
      return hjit::cond(hjit::sum(a) > 0.0, [](const Tensor& v) { return v * 2.0; }, [&](const Tensor& v) { return v - c; }, a);
    }, x);
  };
  auto assigning = [&](const Tensor& x) {
    w.assign(w * 0.5);
    return std::make_pair(hjit::sum(x, {0}, true), hjit::argmax(x, 1).astype(hjit::DType::I64));
  };
  return {hjit::make_graph(mlp, test::random({2, 3}, hjit::DType::F32, 2)).to_text(),
          hjit::make_graph(loop, test::random({2}, hjit::DType::F32, 3)).to_text(),
          hjit::make_graph(assigning, test::random({3, 3}, hjit::DType::F16, 4)).to_text()};
}

// One mutation of `s`: bytes flipped, dropped, repeated or inserted, a span moved, or a token of
// the grammar put in.
std::string mutate(const std::string& s, std::mt19937_64& rng) {
  static const char* tokens[] = {"{", "}", "(", ")", "[", "]", ",", ":", ";", ".", "=", "<-", "lambda", "let", "in",
                                 "updates", "f32", "i64", "bool", "-1", "0", "99999999999", "1e400", "nan", "-inf",
                                 "data=", "then={", "result=", "cond", "scan", "reshape", "\"", "\n", " "};
  std::string t = s;
  const int edits = 1 + int(rng() % 4);
  for (int e = 0; e < edits && !t.empty(); ++e) {
    const size_t at = size_t(rng() % t.size());
    switch (rng() % 6) {
      case 0: t[at] = char(rng() % 128); break;
      case 1: t.erase(at, 1 + rng() % 8); break;
      case 2: t.insert(at, t.substr(at, 1 + rng() % 16)); break;
      case 3: t.insert(at, tokens[rng() % (sizeof(tokens) / sizeof(tokens[0]))]); break;
      case 4: {
        const size_t from = size_t(rng() % t.size()), len = 1 + rng() % 32;
        t.insert(at, t.substr(from, len));
        break;
      }
      default: t[at] = char('0' + rng() % 10);
    }
  }
  return t;
}

}  // namespace

TEST_CASE("Graph::parse: 10,000 mutations of each seed parse to a valid graph or throw a typed error") {
  const std::vector<std::string> seeds = seed_texts();
  std::mt19937_64 rng(12345);
  int64_t parsed = 0, rejected = 0;
  for (const std::string& seed : seeds) {
    CHECK_NOTHROW(hjit::verify(hjit::Graph::parse(seed), "parse"));
    for (int k = 0; k < 10000; ++k) {
      const std::string text = mutate(seed, rng);
      try {
        const hjit::Graph g = hjit::Graph::parse(text);
        hjit::verify(g, "parse");
        const std::string again = g.to_text();
        CHECK_MESSAGE(hjit::Graph::parse(again).to_text() == again, "a parsed mutation does not print back the same:\n" << text);
        ++parsed;
      } catch (const hjit::Error&) {
        ++rejected;
      } catch (const std::exception& e) {
        FAIL_CHECK("an untyped error (" << e.what() << ") for:\n" << text);
      }
    }
  }
  MESSAGE(parsed << " mutations parsed, " << rejected << " rejected with hjit::Error");
  CHECK(rejected > 0);
}
