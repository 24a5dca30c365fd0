// Saved modules: the file format, load with validation, calls, freezing.
//
// File: the binary_io header (magic "HJITMODL", format version, payload size, checksum), then
//   name | graph text (Graph::to_text, constants included) | number of arguments |
//   parameters: dtype, shape, little-endian bytes |
//   (a module with dynamic_dims) its sizes: symbols' sources, every node's extents and varying
//   attributes as affine forms. A module without them is byte for byte what format 1 always was.
#include <hjit/module.h>

#include <hjit/jit.h>

#include <bit>
#include <cstring>
#include <fstream>
#include <iterator>
#include <algorithm>
#include <map>
#include <mutex>
#include <sstream>

#include "frontend/compiled/function.h"
#include "frontend/tracing/const_eval.h"
#include "frontend/io/file_bytes.h"
#include "frontend/jit/dynamic_sizes.h"
#include "frontend/tensor/tensor_impl.h"
#include "frontend/tracing/traced.h"
#include "graph/passes/optimize.h"
#include "graph/passes/verify.h"
#include "graph/symbolic_sizes.h"
#include "support/binary_io.h"
#include "support/log.h"
#include "support/thread_pool.h"

namespace hjit {

using detail::make_tensor;

namespace {

constexpr char kMagic[9] = "HJITMODL";
constexpr uint32_t kModuleFormatVersion = 1;
// A module in segments (Module::from_program): name | program kind | program bytes | why |
// arguments' types | parameters, each as a module's (dtype, shape, little-endian bytes).
constexpr char kProgramMagic[9] = "HJITMODS";
constexpr uint32_t kProgramFormatVersion = 1;

void write_type(BinaryWriter& w, const TensorType& t) {
  w.u8(uint8_t(t.dtype));
  w.u64(t.shape.size());
  for (int64_t d : t.shape) w.i64(d);
}

TensorType read_type(BinaryReader& r, const std::string& what) {
  const uint8_t code = r.u8();
  if (code >= kNumDTypes) throw ValueError(what + " has an unknown dtype");
  TensorType t{DType(code), {}};
  const size_t rank = r.count(64);
  for (size_t d = 0; d < rank; ++d) t.shape.push_back(r.i64());
  return t;
}

void write_parameter(BinaryWriter& w, const Tensor& p) {
  write_type(w, TensorType{p.dtype(), p.shape()});
  w.bytes(p.impl()->data(), size_t(p.numel()) * size_t(dtype_size(p.dtype())));
}

// A parameter of type `want`, read into a new tensor.
Tensor read_parameter(BinaryReader& r, const TensorType& want, const std::string& what) {
  const TensorType t = read_type(r, what);
  if (!(t == want)) throw ValueError(what + " is " + t.str() + " where the module reads " + want.str());
  const std::string bytes = r.str();
  if (bytes.size() != size_t(t.numel()) * size_t(dtype_size(t.dtype)))
    throw ValueError(what + " has " + std::to_string(bytes.size()) + " bytes of data");
  Tensor p = make_tensor(t);
  if (!bytes.empty()) std::memcpy(p.impl()->data(), bytes.data(), bytes.size());
  return p;
}

std::mutex& programs_mu() {
  static std::mutex mu;
  return mu;
}
std::map<std::string, ModuleProgramLoader>& program_loaders() {
  static std::map<std::string, ModuleProgramLoader> loaders;
  return loaders;
}

static_assert(std::endian::native == std::endian::little, "saved modules store little-endian data as is");

}  // namespace

Graph detail::freeze_inputs(const Graph& g, size_t first, const std::vector<Tensor>& values) {
  for (const Update& u : g.updates)
    if (size_t(g.node(u.target).attrs.i("index")) >= first)
      throw ValueError("hjit: cannot freeze the parameters of '" + g.name + "': the function assigns to parameter " +
                       std::to_string(g.node(u.target).attrs.i("index") - int64_t(first)));
  Graph out;
  out.name = g.name;
  std::vector<int> id(g.nodes.size(), -1);
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& node = g.nodes[n];
    if (node.op == OpKind::Parameter) {
      const size_t index = size_t(node.attrs.i("index"));
      if (index < first) {
        id[n] = out.add_parameter(node.type);
      } else {
        const detail::TensorImpl& v = *values[index - first].impl();
        id[n] = out.add_constant(node.type, ConstData{v.storage, v.data(), v.storage ? v.storage->nbytes : 0});
      }
    } else if (node.op == OpKind::Constant) {
      id[n] = out.add_constant(node.type, g.constants[size_t(node.constant)]);
    } else {
      Node copy = node;
      for (int& in : copy.inputs) in = id[size_t(in)];
      id[n] = out.add(std::move(copy));
    }
  }
  for (int o : g.outputs) out.outputs.push_back(id[size_t(o)]);
  for (const Update& u : g.updates) out.updates.push_back(Update{id[size_t(u.target)], id[size_t(u.value)]});
  ConstEvaluator eval = detail::evaluate_node;
  return optimize(out, &eval);
}

namespace {

}  // namespace

struct Module::Impl {
  std::string name;
  Graph graph;
  size_t num_args = 0;
  std::vector<Tensor> params;
  backend::ScheduleRequest schedule;  // from the ModuleOptions it was loaded with
  int threads = 0;                    // ModuleOptions::threads
  std::shared_ptr<const SymbolicSizes> dynamic;  // dynamic_dims: the graph's sizes as forms of them
  std::vector<std::pair<int, int>> dynamic_dims;

  // A module in segments (from_program): its program, and the program jitted with fullgraph =
  // false, which every call runs (no graph then).
  std::shared_ptr<const ModuleProgram> program;
  std::function<std::vector<Tensor>(const std::vector<Tensor>&)> segments;

  std::mutex compile_mu;
  std::shared_ptr<detail::CompiledFunction> compiled;
  // Dynamic modules: pipelines of fixed sizes for symbol values below the dynamic one's smallest.
  std::map<std::vector<int64_t>, std::shared_ptr<detail::CompiledFunction>> fixed;

  detail::FunctionRequest request() const {
    detail::FunctionRequest r;
    r.name = name;
    r.schedule = schedule;
    return r;
  }

  detail::CompiledFunction& function() {
    std::lock_guard lock(compile_mu);
    if (!compiled) {
      detail::FunctionRequest r = request();
      r.dynamic = dynamic;
      compiled = detail::CompiledFunction::compile(graph, std::move(r));
    }
    return *compiled;
  }

  // Why the graph cannot be one pipeline for every size ("" while it may): an op the backend
  // compiles for fixed sizes only. Every size then compiles its own.
  std::string per_size;

  // The function for these symbol values: the dynamic one, or one compiled for them alone.
  detail::CompiledFunction& function_for(const std::vector<int64_t>& symbols) {
    bool served;
    {
      std::lock_guard lock(compile_mu);
      served = per_size.empty();
    }
    if (served) {
      try {
        detail::CompiledFunction& any = function();
        for (int64_t v : symbols) served &= v >= any.executable().min_dynamic_size();
        if (served) return any;
      } catch (const ValueError& e) {
        std::lock_guard lock(compile_mu);
        per_size = e.what();
        log().debug("module '{}' compiles per size of its dynamic_dims: {}", name, per_size);
      }
    }
    std::lock_guard lock(compile_mu);
    auto& e = fixed[symbols];
    if (!e) e = detail::CompiledFunction::compile(instantiate(graph, *dynamic, symbols), request());
    return *e;
  }

  void encode_dynamic(BinaryWriter& w) const {
    w.u64(uint64_t(dynamic->num_symbols));
    for (const auto& src : dynamic->sources) w.i64(src.input), w.i64(src.dim);
    // One pair per symbol here; the dimensions that share a symbol with another (a contraction's
    // two sides) follow the extents, where a reader of the first files finds nothing more.
    const size_t here = std::min(dynamic_dims.size(), size_t(dynamic->num_symbols));
    for (size_t k = 0; k < here; ++k) w.i64(dynamic_dims[k].first), w.i64(dynamic_dims[k].second);
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      w.u64(dynamic->extents[n].size());
      for (const Affine& a : dynamic->extents[n]) write_affine(w, a);
      w.u64(dynamic->attrs[n].size());
      for (const auto& [attr, forms] : dynamic->attrs[n]) {
        w.str(attr);
        w.u64(forms.size());
        for (const Affine& a : forms) write_affine(w, a);
      }
    }
    if (dynamic_dims.size() > here) {
      w.u64(dynamic_dims.size() - here);
      for (size_t k = here; k < dynamic_dims.size(); ++k) w.i64(dynamic_dims[k].first), w.i64(dynamic_dims[k].second);
    }
  }

  void decode_dynamic(BinaryReader& r) {
    auto s = std::make_shared<SymbolicSizes>();
    s->num_symbols = int(r.count(64));
    if (s->num_symbols < 1) throw ValueError("its dynamic sizes have no symbol");
    for (int k = 0; k < s->num_symbols; ++k) {
      SymbolicSizes::Source src{int(r.i64()), int(r.i64())};
      if (src.input < 0 || size_t(src.input) >= num_args || src.dim < 0 || src.dim >= graph.type(graph.inputs[size_t(src.input)]).rank())
        throw ValueError("a dynamic size names a dimension its arguments do not have");
      s->sources.push_back(src);
    }
    for (int k = 0; k < s->num_symbols; ++k) dynamic_dims.emplace_back(int(r.i64()), int(r.i64()));
    s->extents.resize(graph.nodes.size());
    s->attrs.resize(graph.nodes.size());
    for (size_t n = 0; n < graph.nodes.size(); ++n) {
      const size_t rank = r.count(64);
      if (rank != size_t(graph.nodes[n].type.rank())) throw ValueError("its dynamic sizes do not match its graph");
      for (size_t d = 0; d < rank; ++d) s->extents[n].push_back(read_affine(r, s->num_symbols));
      const size_t attrs = r.count(64);
      for (size_t a = 0; a < attrs; ++a) {
        const std::string attr = r.str();
        if (!graph.nodes[n].attrs.has(attr)) throw ValueError("its dynamic sizes name an attribute its graph does not have");
        const size_t forms = r.count(1 << 16);
        for (size_t f = 0; f < forms; ++f) s->attrs[n][attr].push_back(read_affine(r, s->num_symbols));
      }
    }
    if (!r.done()) {
      const size_t more = r.count(64);
      for (size_t k = 0; k < more; ++k) dynamic_dims.emplace_back(int(r.i64()), int(r.i64()));
    }
    for (const auto& [input, dim] : dynamic_dims)
      if (input < 0 || size_t(input) >= num_args || dim < 0 || dim >= graph.type(graph.inputs[size_t(input)]).rank())
        throw ValueError("its dynamic_dims name a dimension its arguments do not have");
    dynamic = std::move(s);
  }

  std::string encode() const {
    BinaryWriter w;
    w.str(name);
    w.str(graph.to_text());
    w.u64(num_args);
    w.u64(params.size());
    for (const Tensor& p : params) write_parameter(w, p);
    if (dynamic) encode_dynamic(w);
    return wrap_payload(kMagic, kModuleFormatVersion, w.out());
  }

  std::string encode_program() const {
    if (program->kind.empty())
      throw ValueError("hjit: module '" + name + "' runs in segments of a program that cannot be saved (made without a kind)");
    BinaryWriter w;
    w.str(name);
    w.str(program->kind);
    w.str(program->bytes);
    w.str(program->why);
    w.u64(program->input_types.size());
    for (const TensorType& t : program->input_types) write_type(w, t);
    w.u64(program->parameters.size());
    for (const Tensor& p : program->parameters) write_parameter(w, p);
    return wrap_payload(kProgramMagic, kProgramFormatVersion, w.out());
  }

  // name and the program, rebuilt by the loader registered for its kind, with the saved parameters.
  static std::pair<std::string, ModuleProgram> decode_program(const std::string& file) {
    const std::string_view payload = unwrap_payload(file, kProgramMagic, kProgramFormatVersion, "a saved hjit module");
    BinaryReader r(payload);
    std::string module_name = r.str();
    const std::string kind = r.str();
    ModuleProgramLoader loader;
    {
      std::lock_guard lock(programs_mu());
      auto it = program_loaders().find(kind);
      if (it == program_loaders().end())
        throw ValueError("it runs in segments of a program of kind '" + kind + "', which no part of this hjit reads");
      loader = it->second;
    }
    const std::string bytes = r.str();
    const std::string why = r.str();
    std::vector<TensorType> inputs(r.count(1 << 16));
    for (TensorType& t : inputs) t = read_type(r, "an argument");
    ModuleProgram p = loader(bytes);
    if (p.input_types != inputs) throw ValueError("its program does not take the arguments the file declares");
    const size_t n_params = r.count(p.parameters.size());
    if (n_params != p.parameters.size())
      throw ValueError("it holds " + std::to_string(n_params) + " parameters where its program reads " +
                       std::to_string(p.parameters.size()));
    for (size_t j = 0; j < n_params; ++j) {
      Tensor& into = p.parameters[j];
      const Tensor saved = read_parameter(r, TensorType{into.dtype(), into.shape()}, "parameter " + std::to_string(j));
      if (saved.numel() > 0) std::memcpy(into.impl()->data(), saved.impl()->data(), size_t(saved.numel()) * size_t(dtype_size(saved.dtype())));
    }
    if (!r.done()) throw ValueError("it has bytes after its end");
    p.kind = kind;
    p.why = why;
    return {std::move(module_name), std::move(p)};
  }

  static std::shared_ptr<Impl> decode(const std::string& file) {
    auto m = std::make_shared<Impl>();
    const std::string_view payload = unwrap_payload(file, kMagic, kModuleFormatVersion, "a saved hjit module");
    BinaryReader r(payload);
    m->name = r.str();
    const std::string text = r.str();
    try {
      m->graph = Graph::parse(text);
      verify(m->graph, "loading");
    } catch (const std::exception& e) {
      throw ValueError(std::string("its graph is not valid: ") + e.what());
    }
    const Graph& g = m->graph;
    m->num_args = r.count(g.inputs.size());
    const size_t n_params = r.count(g.inputs.size());
    if (m->num_args + n_params != g.inputs.size())
      throw ValueError("it declares " + std::to_string(m->num_args) + " arguments and " + std::to_string(n_params) +
                       " parameters, but its graph has " + std::to_string(g.inputs.size()) + " inputs");
    for (size_t j = 0; j < n_params; ++j)
      m->params.push_back(read_parameter(r, g.type(g.inputs[m->num_args + j]), "parameter " + std::to_string(j)));
    if (!r.done()) m->decode_dynamic(r);
    if (!r.done()) throw ValueError("it has bytes after its end");
    return m;
  }
};

ModuleResult::operator Tensor() const {
  if (size() != 1)
    throw ValueError("hjit: the module returned " + std::to_string(size()) + " tensors; read them from the result as a vector");
  return front();
}

namespace {

backend::ScheduleRequest module_schedule(const std::string& who, const ModuleOptions& options) {
  if (options.threads < 0)
    throw ValueError(who + ": threads must be >= 0 (0: the process's default), got " + std::to_string(options.threads));
  return backend::schedule_request(
      who, {.opt_level = options.opt_level, .autoscheduler = options.autoscheduler, .tuning_db = options.tuning_db});
}

}  // namespace

Module Module::load(const std::string& path, ModuleOptions options) {
  const backend::ScheduleRequest schedule = module_schedule("hjit: module '" + path + "'", options);
  if (!options.dynamic_dims.empty())
    throw ValueError("hjit: module '" + path + "': dynamic_dims are chosen when a module is made, and saved with it");
  try {
    const std::string file = io::read_whole_file(path, "the module file");
    if (file.compare(0, 8, kProgramMagic, 8) == 0) {
      auto [name, program] = Impl::decode_program(file);
      return from_program(name, std::move(program), options);
    }
    Module m(Impl::decode(file));
    m.impl_->schedule = schedule;
    m.impl_->threads = options.threads;
    log().debug("module '{}' loaded from {}: {} nodes, {} parameters", m.name(), path, m.graph().nodes.size(),
                m.parameters().size());
    return m;
  } catch (const ValueError& e) {
    const std::string what = e.what();
    if (what.rfind("hjit:", 0) == 0) throw;
    throw ValueError("hjit: cannot load the module '" + path + "': " + what);
  }
}

void Module::save(const std::string& path) const {
  io::write_file_atomically(path, impl_->program ? impl_->encode_program() : impl_->encode(), "the module file");
}

void register_module_program(const std::string& kind, ModuleProgramLoader loader) {
  if (kind.empty() || !loader) throw ValueError("hjit: register_module_program needs a kind and a loader");
  std::lock_guard lock(programs_mu());
  program_loaders()[kind] = std::move(loader);
}

Module Module::from_program(const std::string& name, ModuleProgram program, const ModuleOptions& options) {
  const std::string who = "hjit: module '" + name + "'";
  const backend::ScheduleRequest schedule = module_schedule(who, options);
  if (!program.run) throw ValueError(who + ": its program has no run function");
  for (const Tensor& p : program.parameters) (void)detail::impl_of(p, "a parameter of a module's program");
  if (!options.dynamic_dims.empty())
    throw ValueError(who + " runs in segments: it serves every size without dynamic_dims (each segment compiles for the sizes it meets)");
  auto m = std::make_shared<Impl>();
  m->name = name;
  m->schedule = schedule;
  m->threads = options.threads;
  m->num_args = program.input_types.size();
  m->params = program.parameters;
  m->graph.name = name;
  JitOptions jit_options;
  jit_options.name = name;
  jit_options.opt_level = options.opt_level;
  jit_options.autoscheduler = options.autoscheduler;
  jit_options.tuning_db = options.tuning_db;
  jit_options.threads = options.threads;
  jit_options.fullgraph = false;
  const auto run = program.run;
  // (Copies of a jitted function share its cache.)
  const auto jitted = jit([run](const std::vector<Tensor>& args) { return run(args); }, jit_options);
  m->segments = [jitted](const std::vector<Tensor>& args) { return jitted(args); };
  log().debug("module '{}' runs in segments between graph breaks: {}", name, program.why);
  m->program = std::make_shared<const ModuleProgram>(std::move(program));
  return Module(m);
}

bool Module::segmented() const { return impl_->program != nullptr; }

const std::string& Module::why_segmented() const {
  static const std::string none;
  return impl_->program ? impl_->program->why : none;
}

namespace {

// The {tensor, axis} pairs of ModuleOptions::dynamic_dims, checked against the traced arguments
// and made non-negative.
std::vector<std::pair<int, int>> checked_dynamic_dims(const std::string& who, const detail::CallArgs& args,
                                                      const std::vector<std::pair<int, int>>& dims) {
  std::vector<std::pair<int, int>> out;
  for (auto [tensor, axis] : dims) {
    if (tensor < 0 || size_t(tensor) >= args.count)
      throw ValueError(who + ": dynamic_dims names tensor " + std::to_string(tensor) + " of " + std::to_string(args.count) + " arguments");
    const int rank = args.tensor(size_t(tensor)).impl()->type.rank();
    if (axis < -rank || axis >= rank)
      throw ValueError(who + ": dynamic_dims names axis " + std::to_string(axis) + " of argument " + std::to_string(tensor) +
                       ", which has rank " + std::to_string(rank));
    out.emplace_back(tensor, axis < 0 ? axis + rank : axis);
  }
  return out;
}

}  // namespace

Module detail_make_module(const std::string& name, const detail::CallArgs& args, detail::Tracer trace,
                          const SaveOptions& options, const ModuleOptions& module_options) {
  const std::string who = "hjit: module '" + name + "'";
  const backend::ScheduleRequest schedule = module_schedule(who, module_options);
  const std::vector<std::pair<int, int>> dynamic_dims = checked_dynamic_dims(who, args, module_options.dynamic_dims);
  detail::Traced tr = detail::trace_and_optimize(name, false, args, trace);
  auto m = std::make_shared<Module::Impl>();
  m->name = name;
  m->schedule = schedule;
  m->threads = module_options.threads;
  m->num_args = tr.num_args;
  for (const auto& c : tr.captured) {
    Tensor p = make_tensor(c->type);
    if (c->storage && c->storage->nbytes) std::memcpy(p.impl()->data(), c->data(), c->storage->nbytes);
    m->params.push_back(std::move(p));
  }
  // The module's graph from a trace: its parameters baked in when freezing.
  auto finished = [&](Graph g) {
    return options.freeze_parameters ? detail::freeze_inputs(g, m->num_args, m->params) : g;
  };
  m->graph = finished(std::move(tr.graph));
  if (!dynamic_dims.empty()) {
    std::string why;
    bool permanent = false;
    m->dynamic = detail::DynamicSizes::fit_marked(
        args, m->graph, [&](const detail::CallArgs& a) { return finished(detail::trace_and_optimize(name, false, a, trace).graph); },
        [&](const detail::CallArgs&, size_t i, int d, int) {
          return std::find(dynamic_dims.begin(), dynamic_dims.end(), std::pair<int, int>(int(i), d)) != dynamic_dims.end();
        },
        &why, &permanent);
    if (m->dynamic) {
      m->dynamic_dims = dynamic_dims;
      log().debug("module '{}': one pipeline for every size of {} dynamic dimensions", name, dynamic_dims.size());
    } else if (module_options.fixed_sizes_otherwise) {
      log().debug("module '{}' compiles for its traced sizes: one pipeline cannot serve every size of its dynamic_dims: {}", name, why);
    } else {
      throw DynamicDimsError(who + ": one pipeline cannot serve every size of its dynamic_dims: " + why);
    }
  }
  if (options.freeze_parameters) m->params.clear();
  return Module(m);
}

void detail_save(const std::string& path, const std::string& name, const detail::CallArgs& args, detail::Tracer trace,
                 const SaveOptions& options) {
  detail_make_module(name, args, trace, options, {}).save(path);
  log().debug("saved '{}' to {}", name, path);
}

namespace {

// The arguments checked against the types the module takes (want(i)): the dtype, then the shape,
// where dimension d of argument i may have any size when any_size(i, d) (dynamic_dims; a program's
// -1). note() follows the expected type in the ShapeError.
template <class Want, class AnySize, class Note>
void check_arguments(const std::string& name, const std::vector<Tensor>& args, Want want, AnySize any_size, Note note) {
  for (size_t i = 0; i < args.size(); ++i) {
    const TensorType& got = detail::impl_of(args[i], "a module argument").type;
    const TensorType& expected = want(i);
    if (got.dtype != expected.dtype)
      throw DTypeError("hjit: module '" + name + "' argument " + std::to_string(i) + " must be " + expected.str() + ", got " + got.str());
    bool fits = got.shape.size() == expected.shape.size();
    for (size_t d = 0; fits && d < expected.shape.size(); ++d)
      fits = got.shape[d] == expected.shape[d] || (any_size(i, d) && got.shape[d] >= 0);
    if (!fits)
      throw ShapeError("hjit: module '" + name + "' argument " + std::to_string(i) + " must be " + expected.str() + note() +
                       ", got " + got.str());
  }
}

}  // namespace

ModuleResult Module::call(const std::vector<Tensor>& args) const {
  Impl& m = *impl_;
  const Graph& g = m.graph;
  if (args.size() != m.num_args)
    throw ValueError("hjit: module '" + m.name + "' takes " + std::to_string(m.num_args) + " tensors, got " +
                     std::to_string(args.size()));
  if (m.program) {
    // (A dimension of -1 takes any size; the program checks what its sizes must agree on.)
    const std::vector<TensorType>& types = m.program->input_types;
    check_arguments(
        m.name, args, [&](size_t i) -> const TensorType& { return types[i]; },
        [&](size_t i, size_t d) { return types[i].shape[d] < 0; }, [] { return std::string(); });
    // Inside a traced function the program records its ops there (a read is that trace's break).
    const std::vector<Tensor> outs = detail::tracing_active() ? m.program->run(args) : m.segments(args);
    return ModuleResult(outs.begin(), outs.end());
  }
  check_arguments(
      m.name, args, [&](size_t i) -> const TensorType& { return g.type(g.inputs[i]); },
      [&](size_t i, size_t d) {
        return std::find(m.dynamic_dims.begin(), m.dynamic_dims.end(), std::pair<int, int>(int(i), int(d))) != m.dynamic_dims.end();
      },
      [&] { return m.dynamic ? " (dimensions of any size: " + std::to_string(m.dynamic_dims.size()) + " dynamic_dims)" : std::string(); });
  // This call's values of the symbols.
  std::vector<int64_t> symbols;
  if (m.dynamic)
    for (const SymbolicSizes::Source& src : m.dynamic->sources) symbols.push_back(args[size_t(src.input)].shape()[size_t(src.dim)]);
  if (detail::tracing_active()) {
    std::vector<Tensor> inputs = args;
    inputs.insert(inputs.end(), m.params.begin(), m.params.end());
    const std::vector<Tensor> outs = eval_graph(m.dynamic ? instantiate(g, *m.dynamic, symbols) : g, inputs);
    return ModuleResult(outs.begin(), outs.end());
  }
  detail::CompiledFunction& f = m.dynamic ? m.function_for(symbols) : m.function();
  detail::CallInputs inputs;
  for (const Tensor& a : args) inputs.push(a.impl().get());
  for (const Tensor& p : m.params) inputs.push(p.impl().get());
  std::vector<Tensor> outs;
  {
    const ThreadLimit threads(m.threads);
    std::unique_lock<std::mutex> call_lock = f.lock_for_call();
    f.run(inputs.view(), outs);
    f.apply_updates(inputs.view());
  }
  return ModuleResult(std::make_move_iterator(outs.begin()), std::make_move_iterator(outs.end()));
}

std::vector<Tensor> Module::parameters() const { return impl_->params; }

Module Module::freeze() const {
  if (impl_->program)
    throw ValueError("hjit: module '" + impl_->name + "' runs in segments (" + impl_->program->why +
                     "): its parameters are read by its program at every call, not baked into a graph");
  if (impl_->dynamic)
    throw ValueError("hjit: module '" + impl_->name + "' has dynamic_dims: freeze it when it is made (SaveOptions::freeze_parameters)");
  auto m = std::make_shared<Impl>();
  m->name = impl_->name;
  m->num_args = impl_->num_args;
  m->schedule = impl_->schedule;
  m->graph = detail::freeze_inputs(impl_->graph, impl_->num_args, impl_->params);
  return Module(m);
}

const std::string& Module::name() const { return impl_->name; }
namespace {

[[noreturn]] void no_graph(const std::string& name, const ModuleProgram& p, const char* what) {
  throw ValueError("hjit: module '" + name + "' runs in segments between graph breaks (" + p.why + "), so it has no " + what +
                   ": what it computes depends on values it reads");
}

}  // namespace

const Graph& Module::graph() const {
  if (impl_->program) no_graph(impl_->name, *impl_->program, "one graph");
  return impl_->graph;
}

std::vector<TensorType> Module::input_types() const {
  if (impl_->program) return impl_->program->input_types;
  std::vector<TensorType> t;
  for (size_t i = 0; i < impl_->num_args; ++i) t.push_back(impl_->graph.type(impl_->graph.inputs[i]));
  return t;
}

std::vector<std::pair<int, int>> Module::dynamic_dims() const { return impl_->dynamic_dims; }

std::vector<TensorType> Module::output_types() const {
  if (impl_->program) no_graph(impl_->name, *impl_->program, "output types before it runs");
  std::vector<TensorType> t;
  for (int o : impl_->graph.outputs) t.push_back(impl_->graph.type(o));
  return t;
}

std::string Module::str() const {
  std::ostringstream os;
  os << "module " << impl_->name << "\n  arguments:";
  for (const TensorType& t : input_types()) os << " " << t.str();
  os << "\n  parameters:";
  for (const Tensor& p : impl_->params) os << " " << TensorType{p.dtype(), p.shape()}.str();
  if (impl_->params.empty()) os << " none";
  if (impl_->program) {
    os << "\n  runs in segments between graph breaks: " << impl_->program->why << "\n";
    return os.str();
  }
  os << "\n  outputs:";
  for (const TensorType& t : output_types()) os << " " << t.str();
  os << "\n" << impl_->graph.str();
  return os.str();
}

}  // namespace hjit
