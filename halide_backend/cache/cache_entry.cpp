#include "halide_backend/cache/cache_entry.h"

#include <algorithm>
#include <cstring>

#include "graph/symbolic_sizes.h"
#include "support/binary_io.h"

namespace hjit::backend {
namespace {
constexpr char kMagic[9] = "HJITCACH";
}  // namespace

std::string encode_cache_entry(const std::string& key, const PipelineInfo& info, const std::string& shared_object) {
  BinaryWriter w;
  w.str(key);
  w.str(info.function);
  w.str(info.summary);
  w.str(info.schedule);
  w.str(info.device_code);
  w.u8(uint8_t(info.device));
  w.i64(info.min_dynamic_size);
  size_t symbols = 0;
  for (const ArgSpec& a : info.args)
    for (const Affine& f : a.sizes) symbols = std::max(symbols, f.coef.size());
  w.u32(uint32_t(symbols));
  w.u64(info.args.size());
  for (const ArgSpec& a : info.args) {
    w.u8(uint8_t(a.from));
    w.i32(a.index);
    w.u8(uint8_t(a.type.code));
    w.u8(a.type.bits);
    w.u32(a.type.lanes);
    w.u64(a.dims.size());
    for (const halide_dimension_t& d : a.dims) w.i32(d.min), w.i32(d.extent), w.i32(d.stride);
    w.u64(a.sizes.size());
    for (const Affine& f : a.sizes) write_affine(w, f);
  }
  w.u64(info.constants.size());
  for (const auto& c : info.constants) w.bytes(c->data(), c->size());
  w.str(shared_object);
  return wrap_payload(kMagic, kCacheFormatVersion, w.out());
}

DecodedEntry decode_cache_entry(std::string_view bytes, const std::string& key) {
  const std::string_view payload = unwrap_payload(bytes, kMagic, kCacheFormatVersion, "an hjit cache entry");
  BinaryReader r(payload);
  if (r.view() != key) throw ValueError("it holds another pipeline (a different key)");
  DecodedEntry e;
  PipelineInfo& info = e.info;
  info.function = r.str();
  info.summary = r.str();
  info.schedule = r.str();
  info.device_code = r.str();
  const uint8_t device = r.u8();
  if (device > uint8_t(Device::OpenCL)) throw ValueError("it names an unknown device");
  info.device = Device(device);
  info.min_dynamic_size = r.i64();
  if (info.min_dynamic_size < 0) throw ValueError("its smallest dynamic size is negative");
  const uint32_t symbols = r.u32();
  if (symbols > 64) throw ValueError("it has " + std::to_string(symbols) + " dynamic sizes");
  const size_t nargs = r.count(1 << 16);
  size_t constants_used = 0;
  for (size_t i = 0; i < nargs; ++i) {
    ArgSpec a;
    const uint8_t from = r.u8();
    if (from > uint8_t(ArgSpec::From::Output)) throw ValueError("an argument has an unknown kind");
    a.from = ArgSpec::From(from);
    a.index = r.i32();
    a.type.code = halide_type_code_t(r.u8());
    a.type.bits = r.u8();
    a.type.lanes = uint16_t(r.u32());
    const size_t rank = r.count(16);
    for (size_t d = 0; d < rank; ++d) {
      halide_dimension_t dim{};
      dim.min = r.i32(), dim.extent = r.i32(), dim.stride = r.i32();
      a.dims.push_back(dim);
    }
    const size_t forms = r.count(16);
    if (forms != 0 && forms != rank) throw ValueError("an argument's dynamic sizes do not match its rank");
    for (size_t d = 0; d < forms; ++d) a.sizes.push_back(read_affine(r, int(symbols)));
    if (a.index < 0) throw ValueError("an argument index is negative");
    if (a.from == ArgSpec::From::Constant) constants_used = std::max(constants_used, size_t(a.index) + 1);
    info.args.push_back(std::move(a));
  }
  const size_t nconst = r.count(1 << 20);
  if (nconst < constants_used) throw ValueError("a constant argument has no data");
  for (size_t i = 0; i < nconst; ++i) {
    const std::string_view c = r.view();
    info.constants.push_back(std::make_shared<const std::vector<uint8_t>>(c.begin(), c.end()));
  }
  e.shared_object = r.view();
  if (!r.done()) throw ValueError("it has bytes after its end");
  return e;
}

}  // namespace hjit::backend
