// The device bundle's runner: a standalone program (no hjit, no Halide, no LLVM) that calls every
// exported case of a bundle (device_bundle.h) on its inputs, compares each output with what eager
// execution computed, and prints one line per case. It is compiled where the bundle is written, with
// the bundle's cases.inc (one thunk per exported function) and every case's library, so that the
// directory alone, carried to a machine with a GPU, checks that GPU.
//
//   runner [--repeat N]   in the bundle's directory; exit status 0 when every case matched, 77
//                         when the device's driver library (HJIT_BUNDLE_DRIVER) does not load
//
// Comparison, as the test suite's: equal, both NaN, or |got - want| <= tol (1 + |want|).
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace {

using Thunk = int (*)(void**);

template <class... A, size_t... I>
int call_with(int (*f)(A...), void** p, std::index_sequence<I...>) {
  return f(static_cast<A>(p[I])...);
}
// Calls an exported function with the argument pointers p, cast to its parameter types.
template <class... A>
int call(int (*f)(A...), void** p) {
  return call_with(f, p, std::index_sequence_for<A...>{});
}

}  // namespace

#include "cases.inc"  // HJIT_CASES(X): X(name) for each case; each case's header

namespace {

double half_to_double(uint16_t h) {
  const int sign = h >> 15, exp = (h >> 10) & 31, man = h & 1023;
  double v = exp == 0 ? std::ldexp(man, -24) : exp == 31 ? (man ? NAN : INFINITY) : std::ldexp(man + 1024, exp - 25);
  return sign ? -v : v;
}

double bf16_to_double(uint16_t b) {
  uint32_t bits = uint32_t(b) << 16;
  float f;
  std::memcpy(&f, &bits, 4);
  return f;
}

// Element i of a buffer of dtype `t` (hjit's printed names), as a double.
double element(const std::string& t, const uint8_t* p, size_t i) {
  auto get = [&](auto v) {
    std::memcpy(&v, p + i * sizeof(v), sizeof(v));
    return double(v);
  };
  if (t == "f32") return get(float{});
  if (t == "f64") return get(double{});
  if (t == "f16") return half_to_double(uint16_t(get(uint16_t{})));
  if (t == "bf16") return bf16_to_double(uint16_t(get(uint16_t{})));
  if (t == "i8") return get(int8_t{});
  if (t == "i16") return get(int16_t{});
  if (t == "i32") return get(int32_t{});
  if (t == "i64") return get(int64_t{});
  if (t == "u8" || t == "bool") return get(uint8_t{});
  if (t == "u16") return get(uint16_t{});
  if (t == "u32") return get(uint32_t{});
  if (t == "u64") return get(uint64_t{});
  std::fprintf(stderr, "runner: unknown dtype %s\n", t.c_str());
  std::exit(2);
}

struct Arg {
  bool output = false;
  std::string dtype;
  size_t numel = 0, nbytes = 0;
  double tol = 0;
};

struct Case {
  std::string name;
  std::vector<Arg> args;
};

std::vector<Case> read_manifest() {
  std::ifstream in("manifest.txt");
  if (!in) {
    std::fprintf(stderr, "runner: no manifest.txt here: run it in a device bundle's directory\n");
    std::exit(2);
  }
  std::vector<Case> cases;
  std::string line;
  while (std::getline(in, line)) {
    std::istringstream ls(line);
    std::string what;
    ls >> what;
    if (what == "case") {
      cases.emplace_back();
      ls >> cases.back().name;
    } else if (what == "in" || what == "out") {
      Arg a;
      a.output = what == "out";
      ls >> a.dtype >> a.numel >> a.nbytes >> a.tol;
      cases.back().args.push_back(a);
    }
  }
  return cases;
}

std::string read_bytes(const std::string& path, size_t n) {
  std::ifstream in(path, std::ios::binary);
  std::string s((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (s.size() != n) {
    std::fprintf(stderr, "runner: %s has %zu bytes, the manifest says %zu\n", path.c_str(), s.size(), n);
    std::exit(2);
  }
  return s;
}

// Empty when got matches want, else the first element that does not.
std::string compare(const Arg& a, const uint8_t* got, const uint8_t* want) {
  for (size_t i = 0; i < a.numel; ++i) {
    const double g = element(a.dtype, got, i), w = element(a.dtype, want, i);
    const bool same = g == w || (std::isnan(g) && std::isnan(w)) || (std::isfinite(w) && std::fabs(g - w) <= a.tol * (1 + std::fabs(w)));
    if (!same) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "element %zu of %s[%zu]: got %.17g, want %.17g (tolerance %g)", i, a.dtype.c_str(), a.numel, g, w, a.tol);
      return buf;
    }
  }
  return "";
}

}  // namespace

int main(int argc, char** argv) {
  if (!dlopen(HJIT_BUNDLE_DRIVER, RTLD_NOW | RTLD_GLOBAL)) {
    std::printf("runner: the device driver %s does not load here (%s): nothing was run\n", HJIT_BUNDLE_DRIVER, dlerror());
    return 77;
  }
  int repeat = 0;
  for (int i = 1; i < argc; ++i)
    if (std::string(argv[i]) == "--repeat" && i + 1 < argc) repeat = std::atoi(argv[++i]);
  std::map<std::string, Thunk> thunks;
#define HJIT_THUNK(name) thunks[#name] = [](void** p) { return call(&name, p); };
  HJIT_CASES(HJIT_THUNK)
#undef HJIT_THUNK
  int failed = 0, passed = 0;
  for (const Case& c : read_manifest()) {
    auto it = thunks.find(c.name);
    if (it == thunks.end()) {
      std::printf("FAIL %s: not linked into this runner\n", c.name.c_str());
      ++failed;
      continue;
    }
    std::vector<void*> ptrs;
    for (size_t k = 0, in = 0; k < c.args.size(); ++k) {
      const Arg& a = c.args[k];
      void* p = std::aligned_alloc(64, (std::max<size_t>(a.nbytes, 64) + 63) / 64 * 64);
      if (!a.output) {
        const std::string bytes = read_bytes(c.name + "/in" + std::to_string(in++) + ".bin", a.nbytes);
        std::memcpy(p, bytes.data(), a.nbytes);
      } else {
        std::memset(p, 0xA5, a.nbytes);  // a stale value reads as a mismatch, never as a pass
      }
      ptrs.push_back(p);
    }
    const int r = it->second(ptrs.data());
    std::string why = r == 0 ? "" : "returned " + std::to_string(r);
    for (size_t k = 0, out = 0; k < c.args.size() && why.empty(); ++k) {
      const Arg& a = c.args[k];
      if (!a.output) continue;
      const std::string want = read_bytes(c.name + "/want" + std::to_string(out) + ".bin", a.nbytes);
      std::ofstream(c.name + "/got" + std::to_string(out) + ".bin", std::ios::binary)
          .write(static_cast<const char*>(ptrs[k]), std::streamsize(a.nbytes));
      const std::string diff = compare(a, static_cast<const uint8_t*>(ptrs[k]), reinterpret_cast<const uint8_t*>(want.data()));
      if (!diff.empty()) why = "output " + std::to_string(out) + ": " + diff;
      ++out;
    }
    std::string timing;
    if (why.empty() && repeat > 0) {
      std::vector<double> ms;
      for (int i = 0; i < repeat; ++i) {
        const auto t0 = std::chrono::steady_clock::now();
        it->second(ptrs.data());
        ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
      }
      std::sort(ms.begin(), ms.end());
      timing = " median " + std::to_string(ms[ms.size() / 2]) + " ms";
    }
    if (why.empty()) {
      std::printf("ok %s%s\n", c.name.c_str(), timing.c_str());
      ++passed;
    } else {
      std::printf("FAIL %s: %s\n", c.name.c_str(), why.c_str());
      ++failed;
    }
    for (void* p : ptrs) std::free(p);
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
