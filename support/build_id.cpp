#include "support/build_id.h"

#include <dlfcn.h>
#include <elf.h>
#include <link.h>

#include <cstring>

namespace hjit {
namespace {

struct Search {
  const void* base = nullptr;
  std::string id;
};

int visit(dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  if (reinterpret_cast<const void*>(info->dlpi_addr) != s->base) return 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type != PT_NOTE) continue;
    const char* p = reinterpret_cast<const char*>(info->dlpi_addr + ph.p_vaddr);
    const char* end = p + ph.p_memsz;
    while (p + sizeof(ElfW(Nhdr)) <= end) {
      const auto* note = reinterpret_cast<const ElfW(Nhdr)*>(p);
      const char* name = p + sizeof(ElfW(Nhdr));
      const char* desc = name + ((note->n_namesz + 3) & ~3u);
      if (note->n_type == NT_GNU_BUILD_ID && note->n_namesz == 4 && std::memcmp(name, "GNU", 4) == 0) {
        static const char* hex = "0123456789abcdef";
        for (unsigned k = 0; k < note->n_descsz; ++k) {
          const unsigned char b = static_cast<unsigned char>(desc[k]);
          s->id += hex[b >> 4];
          s->id += hex[b & 15];
        }
        return 1;
      }
      p = desc + ((note->n_descsz + 3) & ~3u);
    }
  }
  return 1;
}

}  // namespace

std::string library_build_id() {
  static const std::string id = [] {
    Dl_info info{};
    Search s;
    if (dladdr(reinterpret_cast<const void*>(&library_build_id), &info) && info.dli_fbase) {
      // dlpi_addr is the load bias; for a shared object it equals the base dladdr reports.
      s.base = info.dli_fbase;
      dl_iterate_phdr(visit, &s);
    }
    // Without a build-id (a linker that writes none): the version and the time this file was built.
    return s.id.empty() ? std::string(HJIT_VERSION " " __DATE__ " " __TIME__) : s.id;
  }();
  return id;
}

}  // namespace hjit
