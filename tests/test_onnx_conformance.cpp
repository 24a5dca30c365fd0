// ONNX's own conformance suite (Debian's libonnx-testdata): every case's model read, checked and
// converted, run eagerly and compiled at O1 on each of its test_data_set_N inputs, and compared with
// the expected outputs at ONNX's tolerances (rtol 1e-3, atol 1e-7, NaN equal to NaN).
//
// tests/onnx/expected_failures.txt lists the cases that do not pass, one reason each; a case that
// fails without being listed fails this test, and so does a listed case that passes (the list
// stays true). Every case, compiled too, takes about four minutes on 2 cores: make test (CI) runs
// every case eagerly and compiles the first of each op set and input dtypes (the compiled path
// meets every op with every dtype there), make test-full (HJIT_TEST_FULL=1) compiles every case.
// HJIT_ONNX_CASES=regex picks cases by name; HJIT_ONNX_REPORT=file writes each case's outcome.
#include <hjit/onnx.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "support/settings.h"
#include "tests/support.h"

namespace fs = std::filesystem;
using hjit::Tensor;

namespace {

const char* kGroups[] = {"node", "pytorch-converted", "pytorch-operator", "simple"};

std::string data_dir() {
  return *hjit::setting::text(hjit::setting::Id::OnnxTestdata);
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
  std::vector<hjit::onnx::Value> inputs, outputs;
};

// ONNX's test data stores bfloat16 values as uint16 (numpy has no bfloat16): read as declared.
hjit::onnx::Value as_declared(const hjit::onnx::Value& v, const hjit::onnx::ValueInfo& declared) {
  auto fix = [&](const Tensor& t) {
    return declared.dtype == hjit::DType::BF16 && t.dtype() == hjit::DType::U16 ? Tensor::from_bytes(t.data(), size_t(t.numel()) * 2, t.shape(), hjit::DType::BF16) : t;
  };
  if (v.is_tensor()) return fix(v.tensor());
  if (!v.is_sequence()) return v;
  std::vector<Tensor> items;
  for (const Tensor& t : v.items()) items.push_back(fix(t));
  return hjit::onnx::Value::sequence(items, declared.dtype);
}

std::vector<hjit::onnx::Value> read_values(const fs::path& dir, const std::string& prefix, const std::vector<hjit::onnx::ValueInfo>& declared) {
  std::vector<hjit::onnx::Value> values;
  for (size_t i = 0; fs::exists(dir / (prefix + std::to_string(i) + ".pb")); ++i) {
    // More files than the model declares: read as tensors, and the count compared later.
    hjit::onnx::ValueInfo as = i < declared.size() ? declared[i] : hjit::onnx::ValueInfo{};
    values.push_back(as_declared(hjit::onnx::read_value(dir / (prefix + std::to_string(i) + ".pb"), as), as));
  }
  return values;
}

std::vector<DataSet> data_sets(const fs::path& dir, const hjit::onnx::ModelInfo& info) {
  std::vector<DataSet> sets;
  for (int k = 0; fs::exists(dir / ("test_data_set_" + std::to_string(k))); ++k) {
    const fs::path d = dir / ("test_data_set_" + std::to_string(k));
    sets.push_back({read_values(d, "input_", info.inputs), read_values(d, "output_", info.outputs)});
  }
  return sets;
}

std::string compare_all(const std::vector<Tensor>& got, const std::vector<Tensor>& want) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " outputs where " + std::to_string(want.size()) + " are expected";
  for (size_t i = 0; i < want.size(); ++i)
    if (std::string d = compare(got[i], want[i]); !d.empty()) return "output " + std::to_string(i) + ": " + d;
  return "";
}

// Values compared kind by kind (a none where a sequence is expected differs), then their tensors.
std::string compare_values(const std::vector<hjit::onnx::Value>& got, const std::vector<hjit::onnx::Value>& want) {
  if (got.size() != want.size()) return std::to_string(got.size()) + " outputs where " + std::to_string(want.size()) + " are expected";
  for (size_t i = 0; i < want.size(); ++i)
    if (got[i].kind() != want[i].kind() || (want[i].is_sequence() && got[i].items().size() != want[i].items().size()))
      return "output " + std::to_string(i) + " is " + got[i].str() + " where " + want[i].str() + " is expected";
  return compare_all(hjit::onnx::flatten(got), hjit::onnx::flatten(want));
}

// The model compiled for these inputs (Model::compiled_for: one Module, or segments between graph
// breaks where the conversion reads values the inputs make).
std::vector<Tensor> run_compiled(const hjit::onnx::Model& model, const std::vector<hjit::onnx::Value>& inputs, bool* segmented) {
  const hjit::onnx::Compiled compiled = model.compiled_for(inputs);
  *segmented |= compiled.segmented();
  return compiled(hjit::onnx::flatten(inputs));
}

struct Outcome {
  std::string group, name, ops, eager, compiled;  // eager/compiled: "" passed, "-" not run, else why not
  bool segmented = false;                         // compiled in segments between graph breaks
  bool sampled_out = false;                       // not compiled: another case of its ops and dtypes was
  bool passed() const { return eager.empty() && compiled.empty(); }
  bool passed_what_ran() const { return eager.empty() && (compiled.empty() || sampled_out); }
};

std::string what_of(const std::exception& e) {
  std::string w = e.what();
  return w.size() > 300 ? w.substr(0, 300) + "..." : w;
}

// Compiles the first case of each op set and input dtypes, unless HJIT_TEST_FULL asks for all.
bool sampled_out(const std::string& ops, const std::vector<hjit::onnx::Value>& inputs) {
  static const bool full = hjit::setting::flag(hjit::setting::Id::TestFull);
  static std::set<std::string> seen;
  std::string key = ops;
  for (const Tensor& t : hjit::onnx::flatten(inputs)) key += std::string(" ") + hjit::dtype_name(t.dtype());
  return !full && !seen.insert(key).second;
}

Outcome run_case(const std::string& group, const fs::path& dir) {
  Outcome o{group, dir.filename().string(), "", "-", "-"};
  std::string* stage = &o.eager;  // what an exception fails
  try {
    const hjit::onnx::Model model = hjit::onnx::Model::read((dir / "model.onnx").string());
    for (const auto& [op, count] : model.info().op_counts) o.ops += (o.ops.empty() ? "" : "+") + op;
    const std::vector<DataSet> sets = data_sets(dir, model.info());
    o.eager = "";
    for (const DataSet& s : sets)
      if (o.eager.empty()) o.eager = compare_values(model.run(s.inputs), s.outputs);
    stage = &o.compiled;
    if (sets.empty() || sampled_out(o.ops, sets[0].inputs)) {
      o.sampled_out = !sets.empty();
      return o;
    }
    o.compiled = "";
    for (const DataSet& s : sets)
      if (o.compiled.empty()) o.compiled = compare_all(run_compiled(model, s.inputs, &o.segmented), hjit::onnx::flatten(s.outputs));
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
  const std::string pick = hjit::setting::text(hjit::setting::Id::OnnxCases).value_or("");
  const std::regex only(pick.empty() ? ".*" : pick);
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
  int segmented = 0, sampled = 0;
  for (const Outcome& o : outcomes) {
    auto& g = by_group[o.group];
    ++g[0];
    g[1] += o.passed_what_ran();
    g[2] += listed.count(o.name) > 0;
    auto& op = by_op[o.ops];
    ++op[0];
    op[1] += o.passed_what_ran();
    sampled += o.sampled_out;
    if (!o.passed_what_ran() && !listed.count(o.name))
      unexpected += "\n  " + o.group + "/" + o.name + " [" + o.ops + "]: " + (o.eager.empty() ? "compiled: " + o.compiled : "eager: " + o.eager);
    if (o.passed() && listed.count(o.name)) unlisted_passes += "\n  " + o.name;
    segmented += o.passed() && o.segmented;
  }
  std::string summary = "ONNX conformance, eagerly and compiled at O1 (" + std::to_string(sampled) +
                        " cases run eagerly only: another of their ops and dtypes compiled; HJIT_TEST_FULL=1 compiles all):";
  for (const auto& [group, n] : by_group)
    summary += "\n  " + group + ": " + std::to_string(n[1]) + " of " + std::to_string(n[0]) + " pass (" + std::to_string(n[2]) + " listed)";
  summary += "\n  " + std::to_string(segmented) +
             " of the passing cases compile in segments between graph breaks (values read as shapes, axes or counts, or by "
             "ops whose output shape depends on values), the others as one Module";
  summary += "\nby op (passed/cases):";
  for (const auto& [op, n] : by_op)
    if (n[1] != n[0]) summary += "\n  " + op + ": " + std::to_string(n[1]) + "/" + std::to_string(n[0]);
  MESSAGE(summary);
  if (const std::string path = hjit::setting::text(hjit::setting::Id::OnnxReport).value_or(""); !path.empty()) {
    std::ofstream report(path);
    for (const Outcome& o : outcomes)
      report << o.group << "\t" << o.name << "\t" << o.ops << "\t" << (o.eager.empty() ? "ok" : o.eager) << "\t"
             << (o.compiled.empty() ? "ok" : o.compiled) << "\n";
  }
  INFO("cases that fail and are not in tests/onnx/expected_failures.txt:" << unexpected);
  CHECK(unexpected.empty());
  INFO("listed in tests/onnx/expected_failures.txt but passing (take them off the list):" << unlisted_passes);
  CHECK(unlisted_passes.empty());
}
