// Deterministic mutation fuzzing of what hjit reads: Graph::parse (each seed graph's complete
// text: constants, updates, nested control flow graphs) and saved modules (the payload mutated
// under a valid header, so that the decoder, not the checksum, meets it). Every mutation must
// give a valid result or a typed hjit::Error; anything else (another exception, a crash) fails.
#include <unistd.h>

#include <random>

#include "graph/passes/verify.h"
#include "support/binary_io.h"
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

TEST_CASE("saved modules: 10,000 mutations of a payload under a valid header load or throw a typed error") {
  Tensor w = test::random({4, 3}, hjit::DType::F32, 5), b = test::random({3}, hjit::DType::F32, 6);
  auto layer = [&](const Tensor& x) { return hjit::tanh(hjit::matmul(x, w) + b); };
  const std::string path = "/tmp/hjit_test_fuzz_" + std::to_string(getpid()) + ".hjit";
  const Tensor x = test::random({2, 4}, hjit::DType::F32, 7);
  hjit::save(path, layer, x);
  const std::string file = test::read_file(path);
  constexpr char kMagic[9] = "HJITMODL";  // the saved module format (frontend/module.cpp), version 1
  const std::string payload(hjit::unwrap_payload(file, kMagic, 1, "a saved module"));
  CHECK_CLOSE(hjit::Module::load(path)(x).front(), layer(x));
  std::mt19937_64 rng(777);
  int64_t loaded = 0, rejected = 0;
  for (int k = 0; k < 10000; ++k) {
    std::string p = payload;
    const int edits = 1 + int(rng() % 3);
    for (int e = 0; e < edits && !p.empty(); ++e) {
      const size_t at = size_t(rng() % p.size());
      switch (rng() % 4) {
        case 0: p[at] = char(rng() % 256); break;
        case 1: p.erase(at, 1 + rng() % 8); break;
        case 2: p.insert(at, p.substr(at, 1 + rng() % 8)); break;
        default: p[at] = char(p[at] ^ (1 << (rng() % 8)));
      }
    }
    test::write_file(path, hjit::wrap_payload(kMagic, 1, p));
    try {
      hjit::Module m = hjit::Module::load(path);
      hjit::verify(m.graph(), "load");
      ++loaded;
    } catch (const hjit::Error&) {
      ++rejected;
    } catch (const std::exception& e) {
      FAIL_CHECK("an untyped error (" << e.what() << ") for mutation " << k);
    }
  }
  std::remove(path.c_str());
  MESSAGE(loaded << " mutated modules loaded, " << rejected << " rejected with hjit::Error");
  CHECK(rejected > 0);
}
