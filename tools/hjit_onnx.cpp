// hjit-onnx: ONNX models from the command line (hjit/onnx.h).
//
//   hjit-onnx info model.onnx                       what the model takes and gives, its ops (and any hjit does not convert),
//                                                   and what load() makes of it: one graph, or a module in segments
//   hjit-onnx run model.onnx [IN.pb ...] [--out DIR] [--expect DIR] [--eager]
//                                                   runs it on TensorProto files (random inputs without), saves or compares
//   hjit-onnx bench model.onnx [--repeat N]         the first call (conversion and compile) and the steady time
//   hjit-onnx export model.onnx --out DIR [--name N] [--target T]
//                                                   a static library and header (hjit::export_library)
//   hjit-onnx quantize model.onnx --out Q.onnx [IN.pb ...] [--percentile P] [--batches N]
//                                                   an int8 QDQ model (hjit::onnx::quantize), calibrated on the inputs
//   hjit-onnx --settings [--markdown]               every environment variable hjit reads, with its value here
//
// Every command takes --dim NAME=SIZE for symbolic input dimensions and --opt-level 0|1|2.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <new>
#include <cstdlib>
#include <filesystem>
#include <set>
#include <string>
#include <vector>

#include <hjit/hjit.h>
#include <hjit/onnx.h>
#include <hjit/settings.h>

namespace {

namespace fs = std::filesystem;
using hjit::Tensor;

int usage(bool asked = false) {
  std::fprintf(asked ? stdout : stderr,
               "usage: hjit-onnx info MODEL.onnx\n"
               "       hjit-onnx run MODEL.onnx [INPUT.pb ...] [--out DIR] [--expect DIR] [--eager]\n"
               "       hjit-onnx bench MODEL.onnx [--repeat N]\n"
               "       hjit-onnx export MODEL.onnx --out DIR [--name NAME] [--target TARGET]\n"
               "       hjit-onnx save MODEL.onnx --out FILE.hjit   (a saved module: Module::load, hjit-tune --module)\n"
               "       hjit-onnx quantize MODEL.onnx --out Q.onnx [INPUT.pb ...] [--percentile P] [--batches N]\n"
               "                 (int8 QDQ: calibrated on the input files, or on N batches of random inputs without)\n"
               "       hjit-onnx --settings [--markdown]   every HJIT_* variable hjit reads, its value here, its default\n"
               "options: --dim NAME=SIZE (a symbolic input dimension)  --opt-level 0|1|2  --freeze (initializers as\n"
               "         constants: weights packed once, while compiling)  --autocast bf16|f16 (contractions in that\n"
               "         dtype, hjit::autocast's rules)  --help\n"
               "run reads inputs from TensorProto files in the model's input order (random ones without), prints each\n"
               "output, writes them as output_K.pb with --out and compares them with DIR/output_K.pb with --expect\n"
               "(ONNX's tolerances). docs/onnx.md says more.\n");
  return asked ? 0 : 2;
}

struct Args {
  std::string command, model, out, expect, name, target = "host";
  std::vector<std::string> inputs;
  hjit::onnx::LoadOptions load;
  bool eager = false;
  int repeat = 20;
  double percentile = 0;  // quantize: 0 for min-max calibration
  int batches = 0;        // quantize: batches of random inputs (without input files: 4)
  std::string autocast;   // --autocast: the dtype's name, for LoadOptions::autocast
};

double ms_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t).count();
}

std::vector<Tensor> made_up_inputs(const hjit::onnx::Model& m, uint64_t seed = 1) {
  std::vector<Tensor> in;
  for (const hjit::TensorType& t : m.input_types())
    in.push_back(hjit::is_floating(t.dtype) ? Tensor::randn(t.shape, seed++, t.dtype) : Tensor::zeros(t.shape, t.dtype));
  return in;
}

// The input files, read as the model declares each input (tensor, sequence or optional).
std::vector<hjit::onnx::Value> inputs_of(const Args& a, const hjit::onnx::Model& m) {
  if (a.inputs.empty()) {
    const std::vector<Tensor> made_up = made_up_inputs(m);
    return std::vector<hjit::onnx::Value>(made_up.begin(), made_up.end());
  }
  const std::vector<hjit::onnx::ValueInfo>& declared = m.info().inputs;
  if (a.inputs.size() != declared.size())
    throw hjit::ValueError("the model takes " + std::to_string(declared.size()) + " inputs, given " + std::to_string(a.inputs.size()) + " files");
  std::vector<hjit::onnx::Value> in;
  for (size_t i = 0; i < a.inputs.size(); ++i) in.push_back(hjit::onnx::read_value(a.inputs[i], declared[i]));
  return in;
}

// "y", or "y[2]" for the items of a sequence output: a name for each flattened output.
// The names of a run's flat outputs: each declared output's, its items' in a sequence. `values`
// (an eager run's) tell how many items each has; null, every output is one tensor, `count` of them.
std::vector<std::string> flat_names(const std::vector<hjit::onnx::Value>* values, size_t count,
                                    const std::vector<hjit::onnx::ValueInfo>& declared) {
  std::vector<std::string> names;
  for (size_t k = 0; k < (values ? values->size() : count); ++k) {
    const std::string name = k < declared.size() ? declared[k].name : "output";
    if (!values || (*values)[k].is_tensor()) names.push_back(name);
    else if ((*values)[k].is_sequence())
      for (size_t i = 0; i < (*values)[k].items().size(); ++i) names.push_back(name + "[" + std::to_string(i) + "]");
  }
  return names;
}

std::vector<hjit::TensorType> types_of(const std::vector<Tensor>& ts) {
  std::vector<hjit::TensorType> types;
  for (const Tensor& t : ts) types.push_back({t.dtype(), t.shape()});
  return types;
}

// The largest difference from `want` beyond ONNX's tolerances (rtol 1e-3, atol 1e-7), or -1 when within.
double worst(const Tensor& got, const Tensor& want) {
  if (got.shape() != want.shape()) return INFINITY;
  const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
  double bad = -1;
  for (size_t i = 0; i < w.size(); ++i)
    if (!(std::isnan(g[i]) && std::isnan(w[i])) && g[i] != w[i] && !(std::abs(g[i] - w[i]) <= 1e-7 + 1e-3 * std::abs(w[i])))
      bad = std::max(bad, std::abs(g[i] - w[i]));
  return bad;
}

int info(const Args& a) {
  const hjit::onnx::Model m = hjit::onnx::Model::read(a.model, a.load);
  const hjit::onnx::ModelInfo& i = m.info();
  std::printf("%s\n", i.str().c_str());
  const std::vector<std::string> known = hjit::onnx::supported_ops();
  std::string missing;
  for (const auto& [op, n] : i.op_counts)
    if (!std::binary_search(known.begin(), known.end(), op)) missing += " " + op;
  std::printf("%s\n", missing.empty() ? "hjit converts every op of the model" : ("ops hjit does not convert:" + missing).c_str());
  if (!missing.empty()) return 1;
  // What load() makes of it (converted, not compiled): one graph, or a module in segments.
  try {
    const hjit::Module mod = m.module();
    if (mod.segmented()) std::printf("load: a module in segments between graph breaks: %s\n", mod.why_segmented().c_str());
    else std::printf("load: one graph of %zu nodes, %zu dynamic dimensions\n", mod.graph().nodes.size(), mod.dynamic_dims().size());
  } catch (const hjit::Error& e) {
    std::printf("load: %s\n", e.what());
  }
  return 0;
}

int run(const Args& a) {
  const hjit::onnx::Model m = hjit::onnx::Model::read(a.model, a.load);
  const std::vector<hjit::onnx::Value> in = inputs_of(a, m);
  // Where every output is a tensor, each is one compiled output of its own name; a sequence's
  // length (or whether an optional holds a value) is known only from a run: then, and with
  // --eager, the model runs eagerly too (for ViT-B/16 that run was 1.6 s of `run`'s 2.3).
  const std::vector<hjit::onnx::ValueInfo>& declared = m.info().outputs;
  const bool plain = std::none_of(declared.begin(), declared.end(), [](const hjit::onnx::ValueInfo& v) { return v.sequence || v.optional; });
  std::vector<hjit::onnx::Value> eager;
  if (a.eager || !plain) eager = m.run(in);
  std::vector<Tensor> out;
  if (a.eager) {
    out = hjit::onnx::flatten(eager);
  } else {
    const hjit::onnx::Compiled compiled = m.compiled_for(in);
    if (compiled.segmented()) std::printf("compiled in segments between graph breaks: %s\n", compiled.why_segmented().c_str());
    out = compiled(hjit::onnx::flatten(in));
  }
  const std::vector<std::string> names = flat_names(plain ? nullptr : &eager, out.size(), declared);
  std::vector<Tensor> want;
  if (!a.expect.empty()) {
    std::vector<hjit::onnx::Value> expected;
    for (size_t k = 0; k < m.info().outputs.size(); ++k)
      expected.push_back(hjit::onnx::read_value((fs::path(a.expect) / ("output_" + std::to_string(k) + ".pb")).string(), m.info().outputs[k]));
    want = hjit::onnx::flatten(expected);
    if (want.size() != out.size()) {
      std::printf("%zu output tensors where %zu are expected\n", out.size(), want.size());
      return 1;
    }
  }
  int failed = 0;
  for (size_t k = 0; k < out.size(); ++k) {
    std::printf("%s = %s\n", names[k].c_str(), out[k].str().c_str());
    if (!a.out.empty()) {
      fs::create_directories(a.out);
      hjit::onnx::save_tensor((fs::path(a.out) / ("output_" + std::to_string(k) + ".pb")).string(), out[k], names[k]);
    }
    if (!want.empty()) {
      const double bad = worst(out[k], want[k]);
      std::printf("  %s: %s\n", names[k].c_str(), bad < 0 ? "matches" : ("differs by up to " + std::to_string(bad)).c_str());
      failed += bad >= 0;
    }
  }
  return failed ? 1 : 0;
}

int bench(const Args& a) {
  auto t0 = std::chrono::steady_clock::now();
  const hjit::onnx::Model m = hjit::onnx::Model::read(a.model, a.load);
  const std::vector<Tensor> in = made_up_inputs(m);
  const double read_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  const hjit::onnx::Compiled compiled = m.compiled_for(std::vector<hjit::onnx::Value>(in.begin(), in.end()));
  const double convert_ms = ms_since(t0);
  t0 = std::chrono::steady_clock::now();
  compiled(in);
  const double first_ms = ms_since(t0);
  std::vector<double> times;
  for (int r = 0; r < a.repeat; ++r) {
    t0 = std::chrono::steady_clock::now();
    compiled(in);
    times.push_back(ms_since(t0));
  }
  std::sort(times.begin(), times.end());
  std::printf("%s: read %.1f ms, convert %.1f ms, first call %.1f ms (compile or disk cache), steady %.4f ms (median of %d)%s\n",
              a.model.c_str(), read_ms, convert_ms, first_ms, times[times.size() / 2], a.repeat,
              compiled.segmented() ? ", in segments between graph breaks" : "");
  return 0;
}

int export_model(const Args& a) {
  if (a.out.empty()) return usage();
  const hjit::onnx::Model m = hjit::onnx::Model::read(a.model, a.load);
  const std::vector<Tensor> in = made_up_inputs(m);
  const hjit::Module mod = m.module(types_of(in));
  if (mod.segmented())
    throw hjit::ValueError("hjit-onnx export: " + a.model + " runs in segments between graph breaks (" + mod.why_segmented() +
                           "), and an exported library computes one graph; `hjit-onnx save` writes it as a module that "
                           "runs in segments (Module::load)");
  const std::string name = a.name.empty() ? fs::path(a.model).stem().string() : a.name;
  for (const std::string& p : hjit::export_library(a.out, name, mod, in, hjit::ExportOptions{.target = a.target}))
    std::printf("wrote %s\n", p.c_str());
  return 0;
}

// The model as a saved hjit module, for programs that load it without ONNX (Module::load) and for
// hjit-tune --module.
int save_model(const Args& a) {
  if (a.out.empty()) return usage();
  const hjit::onnx::Model m = hjit::onnx::Model::read(a.model, a.load);
  const hjit::Module mod = m.module();
  mod.save(a.out);
  std::printf("wrote %s (%s)\n", a.out.c_str(),
              mod.segmented() ? ("in segments between graph breaks: " + mod.why_segmented()).c_str()
              : mod.dynamic_dims().empty() ? "fixed sizes" : "dynamic sizes");
  return 0;
}

// An int8 QDQ model, calibrated on the input files (one batch), or on random inputs: good for
// measuring speed, not for accuracy (say which).
int quantize_model(const Args& a) {
  if (a.out.empty()) return usage();
  const hjit::onnx::Model m = hjit::onnx::Model::read(a.model, a.load);
  std::vector<std::vector<Tensor>> batches;
  if (!a.inputs.empty()) {
    std::vector<Tensor> batch;
    for (const hjit::onnx::Value& v : inputs_of(a, m)) batch.push_back(v.tensor());
    batches.push_back(std::move(batch));
  }
  const int random = a.batches > 0 ? a.batches : a.inputs.empty() ? 4 : 0;
  for (int b = 0; b < random; ++b) batches.push_back(made_up_inputs(m, 1 + uint64_t(b) * 1000));
  hjit::onnx::QuantizeOptions o;
  if (a.percentile > 0) o.calibration = hjit::onnx::QuantizeOptions::Calibration::Percentile, o.percentile = a.percentile;
  hjit::onnx::quantize(a.model, a.out, batches, o);
  std::printf("wrote %s (calibrated on %zu batch%s%s)\n", a.out.c_str(), batches.size(), batches.size() == 1 ? "" : "es",
              a.inputs.empty() ? " of random inputs: for speed, not accuracy" : "");
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  Args a;
  bool settings = false, markdown = false;
  for (int i = 1; i < argc; ++i) {
    const std::string s = argv[i];
    const bool has_value = i + 1 < argc;
    if (s == "--help" || s == "-h") return usage(true);
    if (s == "--out" && has_value) a.out = argv[++i];
    else if (s == "--expect" && has_value) a.expect = argv[++i];
    else if (s == "--name" && has_value) a.name = argv[++i];
    else if (s == "--target" && has_value) a.target = argv[++i];
    else if (s == "--repeat" && has_value) a.repeat = std::max(1, std::atoi(argv[++i]));
    else if (s == "--opt-level" && has_value) a.load.module.opt_level = std::atoi(argv[++i]);
    else if (s == "--eager") a.eager = true;
    else if (s == "--freeze") a.load.freeze = true;
    else if (s == "--autocast" && has_value) a.autocast = argv[++i];
    else if (s == "--percentile" && has_value) a.percentile = std::atof(argv[++i]);
    else if (s == "--batches" && has_value) a.batches = std::max(1, std::atoi(argv[++i]));
    else if (s == "--settings") settings = true;
    else if (s == "--markdown") markdown = true;
    else if (s == "--dim" && has_value) {
      const std::string d = argv[++i];
      const size_t eq = d.find('=');
      if (eq == std::string::npos) return usage();
      a.load.dims[d.substr(0, eq)] = std::atoll(d.c_str() + eq + 1);
    } else if (!s.empty() && s[0] == '-') {
      return usage();
    } else if (a.command.empty()) {
      a.command = s;
    } else if (a.model.empty()) {
      a.model = s;
    } else {
      a.inputs.push_back(s);
    }
  }
  if (settings) {
    std::fputs((markdown ? hjit::settings_markdown() : hjit::settings_table()).c_str(), stdout);
    return 0;
  }
  if (a.model.empty()) return usage();
  try {
    if (!a.autocast.empty()) a.load.autocast = hjit::dtype_from_name(a.autocast);
    if (a.command == "info") return info(a);
    if (a.command == "run") return run(a);
    if (a.command == "bench") return bench(a);
    if (a.command == "export") return export_model(a);
    if (a.command == "save") return save_model(a);
    if (a.command == "quantize") return quantize_model(a);
  } catch (const hjit::Error& e) {
    std::fprintf(stderr, "hjit-onnx: %s\n", e.what());
    return 1;
  } catch (const std::bad_alloc&) {
    // (An allocation hjit did not bound in advance: still a message and a status, never an abort.)
    std::fprintf(stderr, "hjit-onnx: out of memory running '%s' (an input or a value of the model is larger than this machine holds)\n",
                 a.model.c_str());
    return 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "hjit-onnx: %s\n", e.what());
    return 1;
  }
  return usage();
}
