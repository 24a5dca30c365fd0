#include "onnx_import/model_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <hjit/error.h>

#include "onnx/checker.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"
#include "onnx_import/model_checks.h"
#include "support/binary_io.h"

namespace hjit::onnx_import {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

std::string read_file(const std::string& path, const std::string& what) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ValueError("hjit::onnx: " + what + " '" + path + "' is a directory");
  std::optional<std::string> bytes = read_file_bytes(path);
  if (!bytes) throw ValueError("hjit::onnx: cannot open " + what + " '" + path + "'");
  return std::move(*bytes);
}

namespace {

bool is_default_domain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// The file an external tensor names, which must lie inside base_dir once links are resolved.
fs::path external_file(const std::string& location, const std::string& base_dir, const std::string& what) {
  if (base_dir.empty()) throw ValueError(what + " keeps its data in '" + location + "', but the model was not read from a file");
  const fs::path rel(location);
  if (location.empty() || rel.is_absolute())
    throw ValueError(what + " names external data '" + location + "': it must be a path relative to the model's folder");
  std::error_code ec;
  const fs::path base = fs::weakly_canonical(fs::path(base_dir), ec);
  const fs::path file = fs::weakly_canonical(fs::path(base_dir) / rel, ec);
  if (ec) throw ValueError(what + " names external data '" + location + "', which cannot be resolved");
  const auto [b, f] = std::mismatch(base.begin(), base.end(), file.begin(), file.end());
  if (b != base.end()) throw ValueError(what + " names external data '" + location + "', which lies outside the model's folder");
  return file;
}

void read_external(TensorProto& t, const std::string& base_dir, const std::string& what) {
  std::string location;
  int64_t offset = 0, length = -1;
  for (const auto& kv : t.external_data()) {
    try {
      if (kv.key() == "location") location = kv.value();
      else if (kv.key() == "offset") offset = std::stoll(kv.value());
      else if (kv.key() == "length") length = std::stoll(kv.value());
    } catch (const std::exception&) {
      throw ValueError(what + " has an external data " + kv.key() + " that is not a number: '" + kv.value() + "'");
    }
  }
  const fs::path file = external_file(location, base_dir, what);
  std::error_code ec;
  const uintmax_t size = fs::file_size(file, ec);
  if (ec || !fs::is_regular_file(file, ec))
    throw ValueError(what + " names external data '" + location + "', which is not a readable file");
  if (offset < 0 || uintmax_t(offset) > size || (length >= 0 && uintmax_t(length) > size - uintmax_t(offset)))
    throw ValueError(what + " reads bytes [" + std::to_string(offset) + ", +" + std::to_string(length) + ") of '" + location +
                     "', which holds " + std::to_string(size));
  if (length < 0) length = int64_t(size - uintmax_t(offset));
  std::ifstream in(file, std::ios::binary);
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw ValueError(what + " could not read its external data from '" + location + "'");
  t.clear_external_data();
  t.set_data_location(TensorProto::DEFAULT);
  t.set_raw_data(std::move(bytes));
}

void resolve_external(::onnx::GraphProto& g, const std::string& base_dir, const std::string& who) {
  for (TensorProto& t : *g.mutable_initializer())
    if (t.data_location() == TensorProto::EXTERNAL) read_external(t, base_dir, who + "initializer '" + t.name() + "'");
  for (::onnx::NodeProto& n : *g.mutable_node())
    for (::onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_t() && a.t().data_location() == TensorProto::EXTERNAL)
        read_external(*a.mutable_t(), base_dir, who + "node '" + n.name() + "' attribute '" + a.name() + "'");
      if (a.has_g()) resolve_external(*a.mutable_g(), base_dir, who);
      for (::onnx::GraphProto& sub : *a.mutable_graphs()) resolve_external(sub, base_dir, who);
    }
}

// A model of an opset before kMinOpset, converted by ONNX's own version converter (its adapters
// carry each op's changed semantics, such as the broadcast attribute of opset 6's arithmetic).
::onnx::ModelProto upgraded(::onnx::ModelProto model, const std::string& who) {
  int64_t opset = -1;
  for (const auto& o : model.opset_import())
    if (is_default_domain(o.domain())) opset = o.version();
  if (opset < 1 || opset >= kMinOpset) return model;
  try {
    // The converter's adapters need the shapes of their inputs; opset 9 is the first whose
    // Constant takes integer tensors (old models' shape constants).
    ::onnx::shape_inference::InferShapes(model);
    return ::onnx::version_conversion::ConvertVersion(model, int(kUpgradeOpset));
  } catch (const std::exception& e) {
    throw ValueError(who + "the model uses opset " + std::to_string(opset) + ", and ONNX's version converter cannot bring it to opset " +
                     std::to_string(kUpgradeOpset) + ": " + e.what());
  }
}

}  // namespace

int64_t default_opset(const ::onnx::ModelProto& model, const std::string& who) {
  int64_t opset = -1;
  for (const auto& o : model.opset_import())
    if (is_default_domain(o.domain())) opset = o.version();
  if (opset < 0) {
    // A model of the training preview domain only (an optimizer step) reads no default-domain op.
    for (const auto& o : model.opset_import())
      if (o.domain() == kTrainingDomain) return kMaxOpset;
    throw ValueError(who + "the model imports no opset of the default ONNX domain");
  }
  if (opset < kMinOpset || opset > kMaxOpset)
    throw ValueError(who + "the model uses opset " + std::to_string(opset) + "; hjit reads opsets " + std::to_string(kMinOpset) +
                     " to " + std::to_string(kMaxOpset) + " (convert it with onnx.version_converter)");
  return opset;
}

::onnx::ModelProto read_model(const std::string& bytes, const std::string& base_dir, const std::string& who) {
  ::onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes))
    throw ValueError(who + "not an ONNX model (the protobuf does not parse: truncated or another format)");
  if (!model.has_graph()) throw ValueError(who + "the model has no graph");
  check_structure(model, who);
  model = upgraded(std::move(model), who);
  default_opset(model, who);
  resolve_external(*model.mutable_graph(), base_dir, who);
  try {
    ::onnx::checker::check_model(model);
  } catch (const std::exception& e) {
    throw ValueError(who + "ONNX's checker rejects the model: " + e.what());
  }
  try {
    ::onnx::shape_inference::InferShapes(model, ::onnx::OpSchemaRegistry::Instance(),
                                         ::onnx::ShapeInferenceOptions(/*check_type=*/true, /*strict=*/1));
  } catch (const std::exception& e) {
    throw ValueError(who + "ONNX's shape inference rejects the model: " + e.what());
  }
  return model;
}

}  // namespace hjit::onnx_import
