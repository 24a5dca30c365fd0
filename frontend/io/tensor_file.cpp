// hjit's tensor files (checkpoints): under the header every hjit file has (magic, format version,
// payload size, checksum), a count, then for each tensor its name, dtype, shape and bytes. And the
// loading of named state into named slots that modules and optimizers share.
#include <map>
#include <set>

#include <hjit/io.h>

#include "frontend/io/file_bytes.h"
#include "support/binary_io.h"

namespace hjit {

namespace {

const char kMagic[9] = "HJITTENS";
constexpr uint32_t kVersion = 1;

std::string listed(const std::vector<std::string>& names) {
  std::string s;
  for (size_t i = 0; i < names.size() && i < 8; ++i) s += (i ? ", " : "") + names[i];
  if (names.size() > 8) s += ", ... (" + std::to_string(names.size()) + " in all)";
  return s;
}

}  // namespace

void save_tensors(const std::string& path, const NamedTensors& tensors) {
  BinaryWriter w;
  w.u64(tensors.size());
  std::set<std::string> names;
  for (const auto& [name, t] : tensors) {
    if (!t.defined()) throw ValueError("save_tensors: '" + name + "' is an undefined tensor");
    if (!names.insert(name).second) throw ValueError("save_tensors: the name '" + name + "' is given twice");
    const Tensor host = t.device() == Device::CPU ? t : t.to(Device::CPU);
    w.str(name);
    w.u8(uint8_t(host.dtype()));
    w.u64(host.shape().size());
    for (int64_t d : host.shape()) w.i64(d);
    w.bytes(host.numel() > 0 ? host.data() : "", size_t(host.numel()) * size_t(dtype_size(host.dtype())));
  }
  io::write_file_atomically(path, wrap_payload(kMagic, kVersion, w.out()), "the tensor file");
}

NamedTensors load_tensors(const std::string& path) {
  const std::string file = io::read_whole_file(path, "the tensor file");
  try {
    BinaryReader r(unwrap_payload(file, kMagic, kVersion, "an hjit tensor file"));
    NamedTensors out;
    std::set<std::string> names;
    const size_t n = r.count(file.size() / 8);
    for (size_t i = 0; i < n; ++i) {
      std::string name = r.str();
      const uint8_t code = r.u8();
      if (code >= kNumDTypes) throw ValueError("'" + name + "' has an unknown dtype code " + std::to_string(code));
      const DType dtype = DType(code);
      Shape shape(r.count(64));
      int64_t elements = 1;
      for (int64_t& d : shape) {
        d = r.i64();
        if (d < 0 || (d > 0 && elements > (int64_t(1) << 50) / d)) throw ValueError("'" + name + "' has a bad shape");
        elements *= d;
      }
      const std::string_view bytes = r.view();
      if (bytes.size() != size_t(elements) * size_t(dtype_size(dtype))) throw ValueError("'" + name + "' has the wrong number of bytes");
      if (!names.insert(name).second) throw ValueError("'" + name + "' is in it twice");
      out.push_back({std::move(name), Tensor::from_bytes(bytes.data(), bytes.size(), shape, dtype)});
    }
    if (!r.done()) throw ValueError("it has bytes after its last tensor");
    return out;
  } catch (const ValueError& e) {
    throw ValueError("load_tensors: '" + path + "' is not a valid hjit tensor file: " + e.what());
  }
}

void assign_by_name(const std::vector<std::pair<std::string, Tensor*>>& slots, const NamedTensors& state, bool strict,
                    const std::string& what) {
  std::map<std::string, Tensor*> by_name;
  for (const auto& [name, slot] : slots) by_name.emplace(name, slot);
  std::vector<std::string> unexpected, missing;
  std::set<std::string> given;
  for (const auto& [name, value] : state) {
    if (!given.insert(name).second) throw ValueError(what + ": '" + name + "' is given twice");
    if (!by_name.count(name)) unexpected.push_back(name);
  }
  for (const auto& [name, slot] : slots)
    if (!given.count(name)) missing.push_back(name);
  if (strict && (!unexpected.empty() || !missing.empty()))
    throw ValueError(what + ": the state does not match" + (missing.empty() ? std::string() : "; missing: " + listed(missing)) +
                     (unexpected.empty() ? std::string() : "; not expected: " + listed(unexpected)) +
                     " (strict = false loads the names both have)");
  // Checked in full before the first assign: a failed load leaves every slot as it was.
  for (const auto& [name, value] : state) {
    auto it = by_name.find(name);
    if (it == by_name.end()) continue;
    const Tensor& slot = *it->second;
    if (!value.defined()) throw ValueError(what + ": '" + name + "' is an undefined tensor");
    if (value.shape() != slot.shape())
      throw ShapeError(what + ": '" + name + "' is " + shape_str(value.shape()) + " in the state but " + shape_str(slot.shape()) + " here");
    if (value.dtype() != slot.dtype())
      throw DTypeError(what + ": '" + name + "' is " + dtype_name(value.dtype()) + " in the state but " + dtype_name(slot.dtype()) + " here");
  }
  for (const auto& [name, value] : state)
    if (auto it = by_name.find(name); it != by_name.end()) it->second->assign(value);
}

}  // namespace hjit
