#include "onnx_import/model_file.h"

#include <filesystem>
#include <fstream>
#include <iterator>

#include <hjit/error.h>
#include <hjit/memory.h>

#include "onnx/checker.h"
#include "onnx/shape_inference/implementation.h"
#include "onnx/version_converter/convert.h"
#include "onnx_import/model_checks.h"
#include "support/binary_io.h"
#include "support/child_process.h"

namespace hjit::onnx_import {

namespace fs = std::filesystem;
using ::onnx::TensorProto;

// Converting a model of any size takes seconds at most; a converter that loops is stopped.
constexpr double kConverterTimeLimitS = 120;

int64_t byte_limit(int64_t max_bytes) { return max_bytes > 0 ? std::min(max_bytes, memory_limit()) : memory_limit(); }

std::string read_file(const std::string& path, const std::string& what, int64_t max_bytes) {
  std::error_code ec;
  if (fs::is_directory(path, ec)) throw ValueError("hjit::onnx: " + what + " '" + path + "' is a directory");
  // Sized before it is read: a device (/dev/zero) or a pipe would be read for ever.
  const fs::file_status status = fs::status(path, ec);
  if (!ec && !fs::is_regular_file(status))
    throw ValueError("hjit::onnx: " + what + " '" + path + "' is not a regular file (a device, a pipe or a socket)");
  const uintmax_t size = fs::file_size(path, ec);
  if (!ec && size > uintmax_t(byte_limit(max_bytes)))
    throw ResourceError("hjit::onnx: " + what + " '" + path + "' holds " + std::to_string(size) + " bytes, more than the " +
                        std::to_string(byte_limit(max_bytes)) + " bytes hjit may read (LoadOptions::max_bytes, hjit::set_memory_limit)");
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

// Reads the external data of t into it; `budget` is what the model may still read.
void read_external(TensorProto& t, const std::string& base_dir, const std::string& what, int64_t& budget) {
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
  if (length > budget)
    throw ResourceError(what + " reads " + std::to_string(length) + " bytes of external data, past the " + std::to_string(budget) +
                        " bytes the model may still read (LoadOptions::max_bytes, hjit::set_memory_limit)");
  budget -= length;
  std::ifstream in(file, std::ios::binary);
  std::string bytes(size_t(length), '\0');
  in.seekg(offset);
  in.read(bytes.data(), length);
  if (!in) throw ValueError(what + " could not read its external data from '" + location + "'");
  t.clear_external_data();
  t.set_data_location(TensorProto::DEFAULT);
  t.set_raw_data(std::move(bytes));
}

void resolve_external(::onnx::GraphProto& g, const std::string& base_dir, const std::string& who, int64_t& budget) {
  for (TensorProto& t : *g.mutable_initializer())
    if (t.data_location() == TensorProto::EXTERNAL) read_external(t, base_dir, who + "initializer '" + t.name() + "'", budget);
  for (::onnx::NodeProto& n : *g.mutable_node())
    for (::onnx::AttributeProto& a : *n.mutable_attribute()) {
      if (a.has_t() && a.t().data_location() == TensorProto::EXTERNAL)
        read_external(*a.mutable_t(), base_dir, who + "node '" + n.name() + "' attribute '" + a.name() + "'", budget);
      if (a.has_g()) resolve_external(*a.mutable_g(), base_dir, who, budget);
      for (::onnx::GraphProto& sub : *a.mutable_graphs()) resolve_external(sub, base_dir, who, budget);
    }
}

// A model of an opset before kMinOpset, converted by ONNX's own version converter (its adapters
// carry each op's changed semantics, such as the broadcast attribute of opset 6's arithmetic). The
// converter trusts what ONNX's checker would refuse, which it runs only afterwards: a node without
// outputs or an op its opset does not have is a crash in it. Old models are rare and the checks
// that would make it safe are the checker's own, so it runs in a child process, where a crash is
// an error.
::onnx::ModelProto upgraded(::onnx::ModelProto model, const std::string& who) {
  int64_t opset = -1;
  for (const auto& o : model.opset_import())
    if (is_default_domain(o.domain())) opset = o.version();
  if (opset < 1 || opset >= kMinOpset) return model;
  const std::string why = who + "the model uses opset " + std::to_string(opset) + ", and ONNX's version converter cannot bring it to opset " +
                          std::to_string(kUpgradeOpset) + ": ";
  std::string bytes;
  try {
    bytes = run_in_child([&] {
      // The converter's adapters need the shapes of their inputs; opset 9 is the first whose
      // Constant takes integer tensors (old models' shape constants).
      ::onnx::shape_inference::InferShapes(model);
      return ::onnx::version_conversion::ConvertVersion(model, int(kUpgradeOpset)).SerializeAsString();
    }, kConverterTimeLimitS);
  } catch (const std::exception& e) {
    throw ValueError(why + e.what());
  }
  ::onnx::ModelProto converted;
  if (!converted.ParseFromString(bytes)) throw ValueError(why + "its result does not parse");
  return converted;
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

::onnx::ModelProto read_model(const std::string& bytes, const std::string& base_dir, const std::string& who, int64_t max_bytes) {
  ::onnx::ModelProto model;
  if (bytes.empty() || !model.ParseFromString(bytes))
    throw ValueError(who + "not an ONNX model (the protobuf does not parse: truncated or another format)");
  if (!model.has_graph()) throw ValueError(who + "the model has no graph");
  check_structure(model, who);
  model = upgraded(std::move(model), who);
  default_opset(model, who);
  if (int64_t(bytes.size()) > byte_limit(max_bytes))
    throw ResourceError(who + "the model's " + std::to_string(bytes.size()) + " bytes are more than the " + std::to_string(byte_limit(max_bytes)) +
                        " bytes it may take (LoadOptions::max_bytes, hjit::set_memory_limit)");
  int64_t budget = byte_limit(max_bytes) - int64_t(bytes.size());
  resolve_external(*model.mutable_graph(), base_dir, who, budget);
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
