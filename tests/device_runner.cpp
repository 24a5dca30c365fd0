// The device bundle's runner: a standalone program (no hjit, no Halide, no LLVM) that calls every
// exported case of a bundle (device_bundle.h) on its inputs, compares each output with what eager
// execution computed, and prints one line per case. It is compiled where the bundle is written, with
// the bundle's cases.inc (one thunk per exported function) and every case's library, so that the
// directory alone, carried to a machine with a GPU, checks that GPU.
//
//   runner [--repeat N]   in the bundle's directory; exit status 0 when every case matched, 77
//                         when the device's driver library (HJIT_BUNDLE_DRIVER) does not load
//
// --repeat N times every case N times on device-resident buffers (inputs copied to the device once,
// outputs left there, each call synchronized): the kernels' time, with no transfer in it, the
// median printed. Timing cases (the workloads W2, W3, W8, W10 in the CUDA bundle) carry no data:
// the runner fills their inputs with values in [-1, 1) and times them (20 calls without --repeat).
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

// The layout of Halide's buffer (HalideRuntime.h), which a machine without Halide has no header
// for; each library's <name>_buffers takes these.
struct halide_type_t {
  uint8_t code, bits;
  uint16_t lanes;
};
struct halide_dimension_t {
  int32_t min, extent, stride;
  uint32_t flags;
};
struct halide_buffer_t {
  uint64_t device;
  const void* device_interface;
  uint8_t* host;
  uint64_t flags;
  halide_type_t type;
  int32_t dimensions;
  halide_dimension_t* dim;
  void* padding;
};
extern "C" int halide_device_sync(void* user_context, halide_buffer_t* buf);
extern "C" int halide_device_free(void* user_context, halide_buffer_t* buf);

namespace {

using Thunk = int (*)(void**);
using BufferThunk = int (*)(halide_buffer_t**);

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
  std::vector<int64_t> shape;  // row-major
};

struct Case {
  std::string name;
  bool timing = false;  // no data: filled here, timed only
  std::vector<Arg> args;
};

// The Halide type hjit stores a dtype as: bool as u8, f16/bf16 as their 16 bits.
halide_type_t storage_type(const std::string& t) {
  const uint8_t bits = uint8_t(t == "bool" ? 8 : std::stoi(t.substr(t[0] == 'b' ? 2 : 1)));
  const uint8_t code = t[0] == 'i' ? 0 : (t[0] == 'f' && bits >= 32) ? 2 : 1;
  return halide_type_t{code, bits, 1};
}

// Times `calls` calls of a case on device-resident buffers: the first call copies the inputs up
// (they are marked host-dirty), later ones find them there; each call waits for its outputs.
// Returns the median in ms, or a negative Halide error.
double time_on_device(BufferThunk f, const Case& c, const std::vector<void*>& host, int calls) {
  std::vector<std::vector<halide_dimension_t>> dims(c.args.size());
  std::vector<halide_buffer_t> bufs(c.args.size());
  std::vector<halide_buffer_t*> ptrs;
  for (size_t k = 0; k < c.args.size(); ++k) {
    const Arg& a = c.args[k];
    int32_t stride = 1;
    for (size_t d = a.shape.size(); d-- > 0;) {
      dims[k].push_back(halide_dimension_t{0, int32_t(a.shape[d]), stride, 0});
      stride *= int32_t(a.shape[d]);
    }
    halide_buffer_t& b = bufs[k];
    b = halide_buffer_t{};
    b.host = static_cast<uint8_t*>(host[k]);
    b.flags = a.output ? 0 : 1;  // host-dirty
    b.type = storage_type(a.dtype);
    b.dimensions = int32_t(dims[k].size());
    b.dim = dims[k].data();
    ptrs.push_back(&b);
  }
  double result = 0;
  std::vector<double> ms;
  for (int i = 0; i <= calls && result == 0; ++i) {  // call 0: the copies up, and kernel compiles
    const auto t0 = std::chrono::steady_clock::now();
    int r = f(ptrs.data());
    for (size_t k = 0; k < bufs.size() && r == 0; ++k)
      if (c.args[k].output && bufs[k].device) r = halide_device_sync(nullptr, &bufs[k]);
    if (r != 0) result = r;
    if (i > 0) ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  for (halide_buffer_t& b : bufs)
    if (b.device) halide_device_free(nullptr, &b);
  if (result != 0) return result;
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

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
      std::string kind;
      ls >> cases.back().name >> kind;
      cases.back().timing = kind == "time";
    } else if (what == "in" || what == "out") {
      Arg a;
      a.output = what == "out";
      std::string shape;
      ls >> a.dtype >> a.numel >> a.nbytes >> a.tol >> shape;
      std::istringstream dims(shape == "-" ? "" : shape);
      for (std::string d; std::getline(dims, d, ',');) a.shape.push_back(std::stoll(d));
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

// Empty when got matches want, else the first element that does not and how many do not (a GPU
// run is scarce: one report should say how much is wrong).
std::string compare(const Arg& a, const uint8_t* got, const uint8_t* want) {
  std::string first;
  size_t wrong = 0;
  for (size_t i = 0; i < a.numel; ++i) {
    const double g = element(a.dtype, got, i), w = element(a.dtype, want, i);
    const bool same = g == w || (std::isnan(g) && std::isnan(w)) || (std::isfinite(w) && std::fabs(g - w) <= a.tol * (1 + std::fabs(w)));
    if (same) continue;
    if (wrong++ == 0) {
      char buf[200];
      std::snprintf(buf, sizeof buf, "element %zu of %s[%zu]: got %.17g, want %.17g (tolerance %g)", i, a.dtype.c_str(), a.numel, g, w, a.tol);
      first = buf;
    }
  }
  return wrong == 0 ? "" : first + ", " + std::to_string(wrong) + " element(s) differ";
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
  std::map<std::string, BufferThunk> buffer_thunks;
#define HJIT_THUNK(name) thunks[#name] = [](void** p) { return call(&name, p); }, buffer_thunks[#name] = &name##_buffers;
  HJIT_CASES(HJIT_THUNK)
#undef HJIT_THUNK
  uint64_t seed = 1;
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
      if (c.timing && !a.output) {
        // Workload inputs: floats in [-1, 1), i32 in [-3, 3], from a fixed sequence; other
        // dtypes zeros.
        std::memset(p, 0, a.nbytes);
        for (size_t i = 0; i < a.numel; ++i) {
          seed = seed * 6364136223846793005ull + 1442695040888963407ull;
          const double v = double(seed >> 11) / double(1ull << 53) * 2 - 1;
          if (a.dtype == "f32") static_cast<float*>(p)[i] = float(v);
          else if (a.dtype == "f64") static_cast<double*>(p)[i] = v;
          else if (a.dtype == "i32") static_cast<int32_t*>(p)[i] = int32_t(v * 4);
        }
      } else if (!a.output) {
        const std::string bytes = read_bytes(c.name + "/in" + std::to_string(in++) + ".bin", a.nbytes);
        std::memcpy(p, bytes.data(), a.nbytes);
      } else {
        std::memset(p, 0xA5, a.nbytes);  // a stale value reads as a mismatch, never as a pass
      }
      ptrs.push_back(p);
    }
    const int r = c.timing ? 0 : it->second(ptrs.data());
    std::string why = r == 0 ? "" : "returned " + std::to_string(r);
    for (size_t k = 0, out = 0; k < c.args.size() && r == 0 && !c.timing; ++k) {
      const Arg& a = c.args[k];
      if (!a.output) continue;
      const std::string want = read_bytes(c.name + "/want" + std::to_string(out) + ".bin", a.nbytes);
      std::ofstream(c.name + "/got" + std::to_string(out) + ".bin", std::ios::binary)
          .write(static_cast<const char*>(ptrs[k]), std::streamsize(a.nbytes));
      const std::string diff = compare(a, static_cast<const uint8_t*>(ptrs[k]), reinterpret_cast<const uint8_t*>(want.data()));
      if (!diff.empty()) why += (why.empty() ? "output " : "; output ") + std::to_string(out) + ": " + diff;
      ++out;
    }
    std::string timing;
    if (why.empty() && (repeat > 0 || c.timing)) {
      const double ms = time_on_device(buffer_thunks[c.name], c, ptrs, repeat > 0 ? repeat : 20);
      if (ms < 0) why = "timed calls returned " + std::to_string(int(ms));
      else timing = " median " + std::to_string(ms) + " ms on device-resident buffers";
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
