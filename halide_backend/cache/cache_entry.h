// The bytes of one disk-cache entry: a header (magic, format version, payload size, checksum),
// then the full key, the pipeline's description and the shared object. Nothing in an entry is
// trusted before the checksum and the key match.
#pragma once
#include <string>

#include "halide_backend/runtime/executable.h"

namespace hjit::backend {

inline constexpr uint32_t kCacheFormatVersion = 4;  // 2: device code (PTX) of GPU pipelines; 3: their device; 4: pipelines of dynamic sizes (their size forms)

std::string encode_cache_entry(const std::string& key, const PipelineInfo& info, const std::string& shared_object);

struct DecodedEntry {
  PipelineInfo info;
  std::string_view shared_object;  // a view into the decoded bytes
};
// Throws ValueError saying what is wrong: not an entry, another format version, truncated, a
// checksum that does not match, another key, or a description that does not hold together.
DecodedEntry decode_cache_entry(std::string_view bytes, const std::string& key);

}  // namespace hjit::backend
