#include "schedules/param_model.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <sstream>

#include <hjit/error.h>

#include <Halide.h>

#include "support/binary_io.h"
#include "support/log.h"
#include "support/settings.h"

namespace hjit::schedules {
namespace {

constexpr const char* kHeader = "hjit-param-model 1";
const char* const kKinds[] = {"none", "matmul", "conv2d", "conv2d_weight_grad", "attention"};

double log2p(double x) { return std::log2(1.0 + std::max(0.0, x)); }

int64_t numel_of(const Shape& s) {
  int64_t n = 1;
  for (int64_t d : s) n *= d;
  return n;
}

// A contraction's rows, columns and reduction, or nothing for other ops.
struct Mnk {
  const char* kind = nullptr;
  double m = 0, n = 0, k = 0;
};

Mnk mnk_of(const Graph& g, const Node& node) {
  const Shape& out = node.type.shape;
  auto in = [&](size_t i) -> const Shape& { return g.type(node.inputs[i]).shape; };
  switch (node.op) {
    case OpKind::Matmul: {
      const Shape& a = in(0);
      const double k = a.empty() ? 1 : double(a.back());
      const double n = out.empty() || in(1).size() < 2 ? 1 : double(out.back());
      return {"matmul", double(numel_of(out)) / n, n, k};
    }
    case OpKind::Conv2d: {  // out [B, O, Ho, Wo], weight [O, C/g, kh, kw]
      if (out.size() != 4 || in(1).size() != 4) return {};
      const Shape& w = in(1);
      return {"conv2d", double(out[0] * out[2] * out[3]), double(out[1]), double(w[1] * w[2] * w[3])};
    }
    case OpKind::Conv2dWeightGrad: {  // out [O, C/g, kh, kw], reduced over the gradient's [B, O, Ho, Wo]
      if (out.size() != 4 || in(1).size() != 4) return {};
      const Shape& gy = in(1);
      return {"conv2d_weight_grad", double(out[1] * out[2] * out[3]), double(out[0]), double(gy[0] * gy[2] * gy[3])};
    }
    case OpKind::Attention: {  // q [..., T, D], k [..., S, D]: scores and their product with v
      const Shape& q = in(0);
      const Shape& k = in(1);
      if (q.size() < 2 || k.size() < 2) return {};
      return {"attention", double(numel_of(q)) / double(q.back()), double(k[k.size() - 2]), double(q.back())};
    }
    default:
      return {};
  }
}

std::string fixed(double x) {
  std::ostringstream os;
  os.setf(std::ios::fixed);
  os.precision(2);
  os << x;
  return os.str();
}

std::string trim(const std::string& s) {
  const size_t a = s.find_first_not_of(" \t\r");
  if (a == std::string::npos) return "";
  return s.substr(a, s.find_last_not_of(" \t\r") - a + 1);
}

}  // namespace

double PipelineFeatures::distance(const PipelineFeatures& o) const {
  if (kind != o.kind || vector_bits != o.vector_bits) return std::numeric_limits<double>::infinity();
  double d = 0;
  for (size_t i = 0; i < v.size(); ++i) d += (v[i] - o.v[i]) * (v[i] - o.v[i]);
  return std::sqrt(d);
}

int vector_bits_of(const std::string& halide_target) {
  if (!Halide::Target::validate_target_string(halide_target)) return 0;
  return Halide::Target(halide_target).natural_vector_size<float>() * 32;
}

int host_vector_bits() { return Halide::get_host_target().natural_vector_size<float>() * 32; }

PipelineFeatures features_of(const Graph& g, int vector_bits) {
  PipelineFeatures f;
  f.vector_bits = vector_bits;
  Mnk largest;
  double macs = 0, written = 0;
  for (const Node& node : g.nodes) {
    const Mnk c = mnk_of(g, node);
    if (c.kind) {
      macs += c.m * c.n * c.k;
      if (!largest.kind || c.m * c.n * c.k > largest.m * largest.n * largest.k) largest = c;
    } else if (node.op != OpKind::Parameter && node.op != OpKind::Constant) {
      written += double(node.type.numel());
    }
  }
  if (largest.kind) f.kind = largest.kind;
  f.v = {log2p(largest.m), log2p(largest.n), log2p(largest.k), log2p(macs), log2p(written)};
  return f;
}

ParamModel::ParamModel(std::vector<ParamSample> samples) : samples_(std::move(samples)) {
  for (ParamSample& s : samples_) {
    // (A model decides what a compile without a library call is: extern stages are not its to pick.)
    s.params.extern_gemm = s.params.extern_conv = false;
    if (s.gain < kLeastGain || s.params.is_default()) s.params = {}, s.gain = 1;
  }
  identity_ = hash_hex(str()).substr(0, 16);
}

ParamModel ParamModel::parse(const std::string& text, const std::string& where) {
  std::istringstream in(text);
  std::string line;
  int number = 0;
  auto fail = [&](const std::string& why) -> ParamModel {
    throw ValueError("parameter model '" + where + "'" + (number ? ", line " + std::to_string(number) : "") + ": " + why +
                     " (fit one with hjit-tune --fit-model, or set HJIT_PARAM_MODEL=off)");
  };
  bool header = false;
  std::vector<ParamSample> samples;
  while (std::getline(in, line)) {
    ++number;
    const size_t hash = line.find('#');
    line = trim(hash == std::string::npos ? line : line.substr(0, hash));
    if (line.empty()) continue;
    if (!header) {
      if (line != kHeader) return fail("expected '" + std::string(kHeader) + "'");
      header = true;
      continue;
    }
    // sample KIND v0 v1 v2 v3 v4 | PARAMS | GAIN | NAME
    std::vector<std::string> fields;
    for (size_t at = 0;;) {
      const size_t bar = line.find('|', at);
      fields.push_back(trim(line.substr(at, bar == std::string::npos ? std::string::npos : bar - at)));
      if (bar == std::string::npos) break;
      at = bar + 1;
    }
    if (fields.size() != 4) return fail("expected 'sample KIND BITS M N K MACS WRITTEN | PARAMS | GAIN | NAME'");
    std::istringstream head(fields[0]);
    std::string word;
    ParamSample s;
    if (!(head >> word) || word != "sample") return fail("a line begins with 'sample'");
    if (!(head >> s.features.kind) || std::find(std::begin(kKinds), std::end(kKinds), s.features.kind) == std::end(kKinds))
      return fail("unknown kind '" + s.features.kind + "'");
    std::string bits;
    if (!(head >> bits) || bits.size() > 4 || bits.find_first_not_of("0123456789") != std::string::npos ||
        (s.features.vector_bits = std::atoi(bits.c_str())) > 4096)
      return fail("the vector width is a number of bits");
    for (double& x : s.features.v) {
      std::string t;
      char* end = nullptr;
      if (!(head >> t) || (x = std::strtod(t.c_str(), &end), *end != '\0') || !std::isfinite(x) || x < 0 || x > 128)
        return fail("a feature is a number in [0, 128]");
    }
    if (head >> word) return fail("unexpected '" + word + "' after the features");
    try {
      s.params = backend::BuiltinParams::parse(fields[1]);
    } catch (const ValueError& e) {
      return fail(e.what());
    }
    char* end = nullptr;
    s.gain = std::strtod(fields[2].c_str(), &end);
    if (fields[2].empty() || *end != '\0' || !std::isfinite(s.gain) || s.gain <= 0 || s.gain > 1e6)
      return fail("the gain is a positive number");
    s.name = fields[3];
    samples.push_back(std::move(s));
  }
  if (!header) return fail("empty: expected '" + std::string(kHeader) + "'");
  return ParamModel(std::move(samples));
}

std::string ParamModel::str() const {
  std::string s = std::string(kHeader) + "\n";
  for (const ParamSample& x : samples_) {
    s += "sample " + x.features.kind + " " + std::to_string(x.features.vector_bits);
    for (double v : x.features.v) s += " " + fixed(v);
    std::string name = x.name;
    for (char& c : name)
      if (c == '#' || c == '|' || c == '\n' || c == '\r') c = c == '#' || c == '|' ? '_' : ' ';
    s += " | " + x.params.str() + " | " + fixed(x.gain) + " | " + name + "\n";
  }
  return s;
}

backend::BuiltinParams ParamModel::choose(const PipelineFeatures& f) const {
  const ParamSample* nearest = nullptr;
  double best = kNear;
  for (const ParamSample& s : samples_) {
    const double d = f.distance(s.features);
    if (d <= best) best = d, nearest = &s;
  }
  return nearest ? nearest->params : backend::BuiltinParams{};
}

std::shared_ptr<const ParamModel> active_param_model() {
  static std::mutex mu;
  static std::map<std::string, std::shared_ptr<const ParamModel>> read;  // by HJIT_PARAM_MODEL's value
  const std::optional<std::string> env = setting::raw(setting::Id::ParamModel);
  const std::string path = env.value_or("");
  if (env && (path.empty() || path == "off")) return nullptr;
  std::lock_guard lock(mu);
  auto it = read.find(path);
  if (it != read.end()) return it->second;
  std::shared_ptr<const ParamModel> model;
  if (!env) {
    model = std::shared_ptr<const ParamModel>(&shipped_param_model(), [](const ParamModel*) {});
  } else {
    std::ifstream file(path, std::ios::binary);
    if (!file) throw ValueError("HJIT_PARAM_MODEL: cannot read '" + path + "' (a model hjit-tune --fit-model wrote, or off)");
    std::ostringstream text;
    text << file.rdbuf();
    model = std::make_shared<const ParamModel>(ParamModel::parse(text.str(), path));
    log().debug("param model: {} samples from '{}' ({})", model->samples().size(), path, model->identity());
  }
  read.emplace(path, model);
  return model;
}

}  // namespace hjit::schedules
