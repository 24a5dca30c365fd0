// Deterministic mutation fuzzing of every file hjit reads: Graph::parse (each seed graph's
// complete text: constants, updates, nested control flow graphs), saved modules and disk-cache
// entries (the payload mutated under a valid header, so that the decoder, not the checksum, meets
// it), tuning databases (SQLite files with bytes changed) and the schedules they hold (parsed,
// applied to the pipeline and lowered by Halide), data files, and the built-in schedule's parameter
// models. Every mutation must give a valid result or a typed hjit::Error; anything else (another
// exception, a crash) fails.
#include <unistd.h>

#include <random>
#include <sstream>

#include "frontend/compiled/function.h"
#include "graph/passes/verify.h"
#include "halide_backend/backend.h"
#include "halide_backend/cache/cache_entry.h"
#include "halide_backend/cache/shared_cache.h"
#include "schedules/param_model.h"
#include "support/binary_io.h"
#include <hjit/data.h>
#include <hjit/io.h>

#include "tests/support.h"
#include "tuning/database.h"

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

// Binary mutations: bytes replaced, dropped, repeated, or a bit flipped.
std::string mutate_bytes(std::string p, std::mt19937_64& rng) {
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
  return p;
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

// One mutation of a schedule's text, word by word: a word replaced by another of the text or by a
// scheduling word (verbs, loop names, factors, tail strategies), a word dropped or repeated, a line
// dropped, repeated or moved; now and then the byte mutations of mutate().
std::string mutate_schedule(const std::string& text, std::mt19937_64& rng) {
  static const char* words[] = {"split", "fuse", "reorder", "vectorize", "unroll", "parallel", "compute_at", "store_at",
                                "compute_root", "compute_inline", "bound", "tile", "gpu_blocks", "d0", "d1", "d2", "d0_i",
                                "__outermost", "root", "inline", "0", "1", "-1", "3", "16", "65536", "2147483647",
                                "99999999999", "Auto", "GuardWithIf", "ShiftInwards", "RoundUp", ".update(0)", ".update(7)"};
  std::vector<std::vector<std::string>> lines;
  std::vector<std::string> vocabulary;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    std::istringstream ws(line);
    lines.emplace_back();
    for (std::string w; ws >> w;) lines.back().push_back(w), vocabulary.push_back(w);
  }
  if (rng() % 8 == 0 || lines.size() < 3) return mutate(text, rng);
  const int edits = 1 + int(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    auto& line = lines[2 + rng() % (lines.size() - 2)];  // the header and source stay
    const size_t at = line.empty() ? 0 : size_t(rng() % line.size());
    switch (rng() % 7) {
      case 0: if (!line.empty()) line[at] = vocabulary[rng() % vocabulary.size()]; break;
      case 1: if (!line.empty()) line[at] = words[rng() % (sizeof(words) / sizeof(words[0]))]; break;
      case 2: if (!line.empty()) line.erase(line.begin() + long(at)); break;
      case 3: line.insert(line.begin() + long(at), words[rng() % (sizeof(words) / sizeof(words[0]))]); break;
      case 4: lines.erase(lines.begin() + long(2 + rng() % (lines.size() - 2))); break;
      case 5: lines.insert(lines.begin() + long(2 + rng() % (lines.size() - 2)), line); break;
      default: std::swap(line, lines[2 + rng() % (lines.size() - 2)]);
    }
    if (lines.size() < 3) break;
  }
  std::string out;
  for (const auto& line : lines) {
    for (size_t i = 0; i < line.size(); ++i) out += (i ? " " : "") + line[i];
    out += "\n";
  }
  return out;
}

}  // namespace

TEST_CASE("Graph::parse: 10,000 mutations of each seed parse to a valid graph or throw a typed error") {
  const std::vector<std::string> seeds = seed_texts();
  std::mt19937_64 rng(12345);
  int64_t parsed = 0, rejected = 0;
  for (const std::string& seed : seeds) {
    CHECK_NOTHROW(hjit::verify(hjit::Graph::parse(seed), "parse"));
    auto [a, r] = test::fuzz(10000, [&](int) {
      const std::string text = mutate(seed, rng);
      const hjit::Graph g = hjit::Graph::parse(text);
      hjit::verify(g, "parse");
      const std::string again = g.to_text();
      CHECK_MESSAGE(hjit::Graph::parse(again).to_text() == again, "a parsed mutation does not print back the same:\n" << text);
    });
    parsed += a, rejected += r;
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
  constexpr char kMagic[9] = "HJITMODL";  // the saved module format (frontend/saving/module.cpp), version 1
  const std::string payload(hjit::unwrap_payload(file, kMagic, 1, "a saved module"));
  CHECK_CLOSE(hjit::Module::load(path)(x).front(), layer(x));
  std::mt19937_64 rng(777);
  auto [loaded, rejected] = test::fuzz(10000, [&](int) {
    test::write_file(path, hjit::wrap_payload(kMagic, 1, mutate_bytes(payload, rng)));
    hjit::Module m = hjit::Module::load(path);
    hjit::verify(m.graph(), "load");
  });
  std::remove(path.c_str());
  MESSAGE(loaded << " mutated modules loaded, " << rejected << " rejected with hjit::Error");
  CHECK(rejected > 0);
}

TEST_CASE("disk-cache entries: 10,000 mutations of a payload under a valid header decode or throw a typed error") {
  auto f = [](const Tensor& x) { return hjit::exp(x) * 2.0 + 1.0; };
  const hjit::Graph g = hjit::make_graph(f, test::random({3, 5}, hjit::DType::F32, 8));
  auto compiled = hjit::detail::CompiledFunction::compile(g, {.name = "fuzz"});
  auto exe = std::dynamic_pointer_cast<const hjit::backend::HalideExecutable>(compiled->code());
  REQUIRE(exe);
  const std::string key = "fuzz key", entry = hjit::backend::encode_cache_entry(key, exe->info(), std::string(300, 'x'));
  constexpr char kMagic[9] = "HJITCACH";  // the disk cache's entries (halide_backend/cache/cache_entry.cpp)
  const std::string payload(hjit::unwrap_payload(entry, kMagic, hjit::backend::kCacheFormatVersion, "an entry"));
  CHECK(hjit::backend::decode_cache_entry(entry, key).info.function == exe->info().function);
  std::mt19937_64 rng(4242);
  auto [decoded, rejected] = test::fuzz(10000, [&](int) {
    hjit::backend::decode_cache_entry(
        hjit::wrap_payload(kMagic, hjit::backend::kCacheFormatVersion, mutate_bytes(payload, rng)), key);
  });
  MESSAGE(decoded << " mutated entries decoded, " << rejected << " rejected with hjit::Error");
  CHECK(rejected > 0);
}

TEST_CASE("shared-cache entries: 10,000 mutations of a tagged entry are all refused; only the entry itself passes") {
  using hjit::backend::SharedCache;
  const std::string key = "the fleet's key, long enough", name = "0123456789abcdef", entry(500, 'e');
  const std::string framed = SharedCache::frame(key, name, entry);
  REQUIRE(SharedCache::unframe(key, name, framed) == entry);
  CHECK(!SharedCache::unframe(key + "!", name, framed));  // another key
  CHECK(!SharedCache::unframe(key, name + "0", framed));  // moved under another name
  std::mt19937_64 rng(77);
  int accepted = 0, same = 0;
  for (int i = 0; i < 10000; ++i) {
    const std::string mutated = mutate_bytes(framed, rng);
    if (mutated == framed) ++same;
    else if (SharedCache::unframe(key, name, mutated)) ++accepted;
  }
  MESSAGE((10000 - same) << " mutated entries, " << accepted << " accepted");
  CHECK(accepted == 0);
}

TEST_CASE("tuning databases: 10,000 files with bytes changed open and read, or throw a typed error") {
  using namespace hjit::tuning;
  const std::string path = "/tmp/hjit_test_fuzz_db_" + std::to_string(getpid()) + ".sqlite";
  std::remove(path.c_str());
  {
    auto db = Database::open(path, true);
    for (int p = 0; p < 3; ++p) {
      PipelineRecord r;
      r.key = "key" + std::to_string(p);
      r.graph_hash = std::string("g");
      r.signature = std::string("f32[2] -> f32[2]");
      r.target = std::string("host");
      r.hjit_version = std::string("0");
      r.halide_version = std::string("14");
      r.name = std::string("p");
      r.graph = std::string("{ lambda ; a:f32[2]. let in (a) }");
      const int64_t id = db->pipeline(r).id;
      for (int c = 0; c < 4; ++c) {
        CandidateRecord cand;
        cand.pipeline = id, cand.origin = "built-in cols=" + std::to_string(c), cand.ms = 1.0 + c, cand.valid = c != 2;
        cand.schedule = "hjit-schedule 1\nsource built-in\n";
        db->add(cand);
      }
    }
  }
  const std::string file = test::read_file(path);
  REQUIRE(!file.empty());
  std::mt19937_64 rng(99);
  auto [read, rejected] = test::fuzz(10000, [&](int) {
    test::write_file(path, mutate_bytes(file, rng));
    std::remove((path + "-journal").c_str());
    auto db = Database::open(path, false);
    for (const PipelineRecord& p : db->pipelines()) {
      db->candidates(p.id);
      db->best(p.id);
    }
  });
  std::remove(path.c_str());
  MESSAGE(read << " mutated databases read, " << rejected << " rejected with hjit::Error");
}

// What compile() does with a tuning database's schedule: parse it, apply it to the pipeline it was
// tuned for, and have Halide lower that in a child process (a Given schedule from a file).
TEST_CASE("tuned schedules: 10,000 mutations of a schedule's text parse, apply and lower, or throw a typed error") {
  Tensor w = test::random({8, 16}, hjit::DType::F32, 11);  // a contraction's tiles, a reduction, element-wise ops
  auto f = [&](const Tensor& x) { return hjit::relu(hjit::matmul(x, w)) + hjit::sum(x, {1}, true); };
  const hjit::Graph g = hjit::make_graph(f, test::random({4, 8}, hjit::DType::F32, 12));
  std::string why;
  const std::optional<std::string> text = hjit::backend::decide_schedule(g, hjit::Device::CPU, hjit::backend::BuiltIn{}, &why);
  REQUIRE(text);
  CHECK_NOTHROW(hjit::backend::check_schedule(g, hjit::Device::CPU, *text));
  std::mt19937_64 rng(2024);
  auto [accepted, rejected] = test::fuzz(10000, [&](int) { hjit::backend::check_schedule(g, hjit::Device::CPU, mutate_schedule(*text, rng)); });
  MESSAGE(accepted << " mutated schedules lowered, " << rejected << " rejected with hjit::Error");
  CHECK(rejected > 0);
  // The mutations reach Halide's lowering, not only the parser: about a quarter of them lower at
  // any count (HJIT_FUZZ_MUTATIONS lowers it under the sanitizers).
  CHECK(accepted * 10 > accepted + rejected);
}

// numpy's files (no checksum: every mutation reaches the parsers), zip archives stored and
// deflated, and hjit's tensor files (the payload mutated under a valid header).
TEST_CASE("npy, npz and tensor files: mutations load or throw a typed error") {
  const std::string dir = test::scratch_dir("io_fuzz");
  const hjit::NamedTensors tensors = {{"w", test::random({3, 4}, hjit::DType::F32, 1)},
                                      {"ids", test::random({5}, hjit::DType::I64, 2)},
                                      {"flag", test::random({}, hjit::DType::Bool, 3)},
                                      {"half", test::random({2, 1, 2}, hjit::DType::F16, 4)}};
  const std::string npy = hjit::npy_to_bytes(tensors[0].second);
  std::mt19937_64 rng(31);
  auto [read_npy, rejected_npy] = test::fuzz(5000, [&](int) { hjit::npy_from_bytes(mutate(npy, rng)); });
  MESSAGE(read_npy << " mutated .npy read, " << rejected_npy << " rejected");
  CHECK(rejected_npy > 0);
  for (bool compressed : {false, true}) {
    CAPTURE(compressed);
    hjit::save_npz(dir + "/a.npz", tensors, compressed);
    const std::string npz = test::read_file(dir + "/a.npz");
    auto [read, rejected] = test::fuzz(3000, [&](int) {
      test::write_file(dir + "/m.npz", mutate_bytes(npz, rng));
      hjit::load_npz(dir + "/m.npz");
    });
    MESSAGE(read << " mutated .npz read, " << rejected << " rejected");
    CHECK(rejected > 0);
  }
  hjit::save_tensors(dir + "/t.hjit", tensors);
  constexpr char kMagic[9] = "HJITTENS";  // frontend/io/tensor_file.cpp, version 1
  const std::string payload(hjit::unwrap_payload(test::read_file(dir + "/t.hjit"), kMagic, 1, "a tensor file"));
  auto [read, rejected] = test::fuzz(5000, [&](int) {
    test::write_file(dir + "/m.hjit", hjit::wrap_payload(kMagic, 1, mutate_bytes(payload, rng)));
    hjit::load_tensors(dir + "/m.hjit");
  });
  MESSAGE(read << " mutated tensor files read, " << rejected << " rejected");
  CHECK(rejected > 0);
}

TEST_CASE("CSV text: mutations parse or throw a typed error") {
  const std::string csv = "a,b,\"c\"\n1.5,2,3\n-4,nan,5e3\n\n6,7,8\n";
  std::mt19937_64 rng(41);
  auto [read, rejected] = test::fuzz(5000, [&](int) {
    const hjit::data::Csv t = hjit::data::parse_csv(mutate(csv, rng));
    CHECK(t.values.shape()[1] == int64_t(t.columns.size()));
  });
  MESSAGE(read << " mutated CSV files read, " << rejected << " rejected");
  CHECK(rejected > 0);
}

TEST_CASE("parameter models: 10,000 mutations parse to a model that prints back the same, or throw a typed error") {
  const std::string model =
      "hjit-param-model 1\n# fitted\n"
      "sample matmul 256 10.00 6.00 7.00 26.00 0.00 | cols=2 rows=4 | 1.30 | mm 1024x128x64\n"
      "sample conv2d 256 13.00 5.00 6.17 24.17 15.00 | vec=2 tasks=16 store_expensive=0 | 1.12 | conv\n"
      "sample none 512 0.00 0.00 0.00 0.00 20.00 |  | 1.00 | relu\n";
  std::mt19937_64 rng(43);
  auto [read, rejected] = test::fuzz(10000, [&](int) {
    const hjit::schedules::ParamModel m = hjit::schedules::ParamModel::parse(mutate(model, rng), "fuzz");
    const std::string text = m.str();
    CHECK(hjit::schedules::ParamModel::parse(text, "again").str() == text);
    for (const auto& s : m.samples()) CHECK(m.choose(s.features) == s.params);
  });
  MESSAGE(read << " mutated models read, " << rejected << " rejected");
  CHECK(rejected > 0);
}
