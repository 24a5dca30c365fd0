// ONNX's own conformance suite (Debian's libonnx-testdata): every case's model read, checked and
// converted, run eagerly and compiled at O1 on each of its test_data_set_N inputs, and compared with
// the expected outputs at ONNX's tolerances (rtol 1e-3, atol 1e-7, NaN equal to NaN).
//
// tests/onnx/expected_failures.txt lists the cases that do not pass, one reason each; a case that
// fails without being listed fails this test, and so does a listed case that passes (the list
// stays true). Every case, compiled too, takes about two minutes on 2 cores. HJIT_ONNX_CASES=regex
// picks cases by name; HJIT_ONNX_REPORT=file writes each case's outcome.
#include <hjit/onnx.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "tests/support.h"

namespace fs = std::filesystem;
using hjit::Tensor;

namespace {

const char* kGroups[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

std::string data_dir() {
  const char* d = std::getenv("HJIT_ONNX_TESTDATA");
  return d ? d : "/usr/share/libonnx-testdata/data";
}

// Listed cases: name -> reason.
std::map<std::string, std::string> expected_failures() {
  std::map<std::string, std::string> list;
  std::ifstream in(HJIT_ONNX_EXPECTED_FAILURES);
  std::string line;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    const size_t colon = line.find(':');
    REQUIRE_MESSAGE(colon != std::string::npos, "expected_failures.txt: a line without 'name: reason': " << line);
    list[line.substr(0, colon)] = line.substr(colon + 2);
  }
  return list;
}

// Empty when `got` equals `want` at ONNX's tolerances, else what differs.
std::string compare(const Tensor& got, const Tensor& want) {
  if (got.dtype() != want.dtype())
    return std::string("dtype ") + hjit::dtype_name(got.dtype()) + " where " + hjit::dtype_name(want.dtype()) + " is expected";
  if (got.shape() != want.shape()) return "shape " + hjit::shape_str(got.shape()) + " where " + hjit::shape_str(want.shape()) + " is expected";
  if (hjit::is_floating(want.dtype())) {
    const std::vector<double> g = got.to_vector<double>(), w = want.to_vector<double>();
    for (size_t i = 0; i < w.size(); ++i) {
      if (std::isnan(w[i]) && std::isnan(g[i])) continue;
      if (g[i] == w[i]) continue;
      if (!(std::abs(g[i] - w[i]) <= 1e-7 + 1e-3 * std::abs(w[i])))
        return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + " where " + std::to_string(w[i]) + " is expected";
    }
    return "";
  }
  const std::vector<int64_t> g = got.to_vector<int64_t>(), w = want.to_vector<int64_t>();
  for (size_t i = 0; i < w.size(); ++i)
    if (g[i] != w[i]) return "element " + std::to_string(i) + " is " + std::to_string(g[i]) + " where " + std::to_string(w[i]) + " is expected";
  return "";
}

struct DataSet {
  std::vector<Tensor> inputs, outputs;
};

std::vector<DataSet> data_sets(const fs::path& dir) {
  std::vector<DataSet> sets;
  for (int k = 0; fs::exists(dir / ("test_data_set_" + std::to_string(k))); ++k) {
    const fs::path d = dir / ("test_data_set_" + std::to_string(k));
    DataSet s;
    for (int i = 0; fs::exists(d / ("input_" + std::to_string(i) + ".pb")); ++i)
      s.inputs.push_back(hjit::onnx::read_tensor(d / ("input_" + std::to_string(i) + ".pb")));
    for (int i = 0; fs::exists(d / ("output_" + std::to_string(i) + ".pb")); ++i)
      s.outputs.push_back(hjit::onnx::read_tensor(d / ("output_" + std::to_string(i) + ".pb")));
    sets.push_back(std::move(s));
  }
  return sets;
}

std::string compare_all(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " outputs where " + std::to_string(want.size()) + " are expected";
  for (size_t i = 0; i < want.size(); ++i)
    if (std::string d = compare(got[i], want[i]); !d.empty()) return "output " + std::to_string(i) + ": " + d;
  return "";
}

// The name an error says must be known when converting ("input 1 ('shape') must be known").
std::string input_to_fix(const std::string& message) {
  static const std::regex re("\\('([^']*)'\\) must be known when the model is converted");
  std::smatch m;
  return std::regex_search(message, m, re) ? m[1].str() : "";
}

// The model compiled for these inputs; inputs the model reads as shapes or axes are fixed to their
// values (Model::module's `fixed`), as they would be initializers in a deployed model.
std::vector<Tensor> run_compiled(const hjit::onnx::Model& model, const std::vector<Tensor>& inputs, size_t* fixed_count) {
  std::map<std::string, Tensor> fixed;
  for (int tries = 0;; ++tries) {
    try {
      std::vector<hjit::TensorType> types;
      for (const Tensor& t : inputs) types.push_back({t.dtype(), t.shape()});
      hjit::Module m = model.module(types, fixed);
      std::vector<Tensor> args;
      for (size_t i = 0; i < inputs.size(); ++i)
        if (!fixed.count(model.info().inputs[i].name)) args.push_back(inputs[i]);
      *fixed_count = fixed.size();
      return m.call(args);
    } catch (const hjit::ValueError& e) {
      const std::string name = input_to_fix(e.what());
      auto it = std::find_if(model.info().inputs.begin(), model.info().inputs.end(), [&](const auto& v) { return v.name == name; });
      if (name.empty() || fixed.count(name) || it == model.info().inputs.end() || tries > 8) throw;
      fixed[name] = inputs[size_t(it - model.info().inputs.begin())];
    }
  }
}

struct Outcome {
  std::string group, name, ops, eager, compiled;  // eager/compiled: "" passed, "-" not run, else why not
  size_t fixed = 0;                               // inputs compiled in as constants (Model::module's `fixed`)
  bool passed() const { return eager.empty() && compiled.empty(); }
};

std::string what_of(const std::exception& e) {
  std::string w = e.what();
  return w.size() > 300 ? w.substr(0, 300) + "..." : w;
}

Outcome run_case(const std::string& group, const fs::path& dir) {
  Outcome o{group, dir.filename().string(), "", "-", "-"};
  std::string* stage = &o.eager;  // what an exception fails
  try {
    const hjit::onnx::Model model = hjit::onnx::Model::read((dir / "model.onnx").string());
    for (const auto& [op, count] : model.info().op_counts) o.ops += (o.ops.empty() ? "" : "+") + op;
    std::vector<DataSet> sets = data_sets(dir);
    // ONNX's test data stores bfloat16 values as uint16 (numpy has no bfloat16): read them as declared.
    auto as_declared = [](std::vector<Tensor>& ts, const std::vector<hjit::onnx::ValueInfo>& declared) {
      for (size_t i = 0; i < ts.size() && i < declared.size(); ++i)
        if (declared[i].dtype == hjit::DType::BF16 && ts[i].dtype() == hjit::DType::U16)
          ts[i] = Tensor::from_bytes(ts[i].data(), ts[i].shape(), hjit::DType::BF16);
    };
    for (DataSet& s : sets) as_declared(s.inputs, model.info().inputs), as_declared(s.outputs, model.info().outputs);
    o.eager = "";
    for (const DataSet& s : sets)
      if (o.eager.empty()) o.eager = compare_all(model(s.inputs), s.outputs);
    stage = &o.compiled;
    o.compiled = "";
    for (const DataSet& s : sets)
      if (o.compiled.empty()) o.compiled = compare_all(run_compiled(model, s.inputs, &o.fixed), s.outputs);
  } catch (const hjit::Error& e) {
    *stage = what_of(e);
  } catch (const std::exception& e) {
    *stage = std::string("not an hjit::Error: ") + what_of(e);
  }
  return o;
}

}  // namespace

TEST_CASE("ONNX's conformance suite, eagerly and compiled at O1") {
  if (!fs::exists(data_dir())) {
    MESSAGE("no ONNX test data at " << data_dir() << " (Debian's libonnx-testdata): skipped");
    return;
  }
  const std::map<std::string, std::string> listed = expected_failures();
  const char* pick = std::getenv("HJIT_ONNX_CASES");
  const std::regex only(pick ? pick : ".*");
  std::vector<std::pair<std::string, fs::path>> cases;
  for (const char* group : kGroups) {
    std::vector<fs::path> dirs;
    for (const auto& e : fs::directory_iterator(fs::path(data_dir()) / group))
      if (fs::exists(e.path() / "model.onnx") && std::regex_search(e.path().filename().string(), only)) dirs.push_back(e.path());
    std::sort(dirs.begin(), dirs.end());
    for (const fs::path& d : dirs) cases.push_back({group, d});
  }
  std::vector<Outcome> outcomes;
  for (const auto& [group, dir] : cases) outcomes.push_back(run_case(group, dir));

  std::map<std::string, std::array<int, 3>> by_group;  // cases, passed, listed
  std::map<std::string, std::array<int, 2>> by_op;     // cases, passed
  std::string unexpected, unlisted_passes;
  int with_fixed = 0;
  for (const Outcome& o : outcomes) {
    auto& g = by_group[o.group];
    ++g[0];
    g[1] += o.passed();
    g[2] += listed.count(o.name) > 0;
    auto& op = by_op[o.ops];
    ++op[0];
    op[1] += o.passed();
    if (!o.passed() && !listed.count(o.name))
      unexpected += "\n  " + o.group + "/" + o.name + " [" + o.ops + "]: " + (o.eager.empty() ? "compiled: " + o.compiled : "eager: " + o.eager);
    if (o.passed() && listed.count(o.name)) unlisted_passes += "\n  " + o.name;
    with_fixed += o.passed() && o.fixed > 0;
  }
  std::string summary = "ONNX conformance, eagerly and compiled at O1:";
  for (const auto& [group, n] : by_group)
    summary += "\n  " + group + ": " + std::to_string(n[1]) + " of " + std::to_string(n[0]) + " pass (" + std::to_string(n[2]) + " listed)";
  summary += "\n  " + std::to_string(with_fixed) +
             " of the passing cases compile with inputs fixed to their values (inputs read as shapes, axes, counts, or by ops "
             "whose output shape depends on values)";
  summary += "\nby op (passed/cases):";
  for (const auto& [op, n] : by_op)
    if (n[1] != n[0]) summary += "\n  " + op + ": " + std::to_string(n[1]) + "/" + std::to_string(n[0]);
  MESSAGE(summary);
  if (std::getenv("HJIT_ONNX_REPORT")) {
    std::ofstream report(std::getenv("HJIT_ONNX_REPORT"));
    for (const Outcome& o : outcomes)
      report << o.group << "\t" << o.name << "\t" << o.ops << "\t" << (o.eager.empty() ? "ok" : o.eager) << "\t"
             << (o.compiled.empty() ? "ok" : o.compiled) << "\n";
  }
  INFO("cases that fail and are not in tests/onnx/expected_failures.txt:" << unexpected);
  CHECK(unexpected.empty());
  INFO("listed in tests/onnx/expected_failures.txt but passing (take them off the list):" << unlisted_passes);
  CHECK(unlisted_passes.empty());
}
