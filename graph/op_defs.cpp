#include <sstream>
#include <unordered_map>

#include "graph/op_def.h"
#include "graph/shape_inference.h"

namespace hjit {
namespace {

std::vector<std::string> split_names(const char* list) {
  std::vector<std::string> out;
  std::stringstream ss(list);
  for (std::string item; std::getline(ss, item, ',');)
    if (!item.empty()) out.push_back(item);
  return out;
}

const std::vector<OpDef>& table() {
  static const std::vector<OpDef> defs = [] {
    std::vector<OpDef> d;
#define HJIT_OP_DEF(kind, name, arity, traits, attrs, infer, sched) \
  d.push_back(OpDef{OpKind::kind, name, arity, traits, split_names(attrs), infer, ScheduleClass::sched});
    HJIT_OPS(HJIT_OP_DEF)
#undef HJIT_OP_DEF
    for (size_t i = 0; i < d.size(); ++i)
      if (size_t(d[i].kind) != i) throw InternalError("op table out of enum order");
    return d;
  }();
  return defs;
}

}  // namespace

const OpDef& op_def(OpKind op) { return table()[size_t(op)]; }

const char* schedule_class_name(ScheduleClass c) {
  static constexpr const char* kNames[] = {
#define HJIT_SCHEDULE_CLASS_NAME(cls, name) name,
      HJIT_SCHEDULE_CLASSES(HJIT_SCHEDULE_CLASS_NAME)
#undef HJIT_SCHEDULE_CLASS_NAME
  };
  static_assert(sizeof(kNames) / sizeof(kNames[0]) == kNumScheduleClasses);
  return kNames[int(c)];
}
const char* op_name(OpKind op) { return op_def(op).name; }

OpKind op_from_name(const std::string& name) {
  static const std::unordered_map<std::string, OpKind> by_name = [] {
    std::unordered_map<std::string, OpKind> m;
    for (const OpDef& d : table()) m.emplace(d.name, d.kind);
    return m;
  }();
  auto it = by_name.find(name);
  if (it == by_name.end()) throw ValueError("unknown op '" + name + "'");
  return it->second;
}

TensorType infer_type(OpKind op, const std::vector<const TensorType*>& inputs, const Attrs& attrs,
                      const TensorType* declared) {
  const OpDef& def = op_def(op);
  if (def.arity >= 0 && int(inputs.size()) != def.arity)
    throw ValueError(std::string(def.name) + ": expects " + std::to_string(def.arity) +
                     " operand(s), got " + std::to_string(inputs.size()));
  if (def.arity < 0 && inputs.empty())
    throw ValueError(std::string(def.name) + ": expects at least one operand");
  for (const auto& [name, value] : attrs.items()) {
    bool known = false;
    for (const std::string& a : def.attrs) known |= (a == name);
    if (!known) throw ValueError(std::string(def.name) + ": unknown attribute '" + name + "'");
  }
  for (const std::string& a : def.attrs)
    if (!attrs.has(a) && !(op == OpKind::Parameter && a == "captured"))
      throw ValueError(std::string(def.name) + ": missing attribute '" + a + "'");
  for (const TensorType* t : inputs) {
    const char* want = def.has(FloatOnly)     ? "floating point"
                       : def.has(BoolOnly)    ? "bool"
                       : def.has(NumericOnly) ? "numeric (not bool)"
                                              : nullptr;
    bool ok = def.has(FloatOnly) ? is_floating(t->dtype)
              : def.has(BoolOnly) ? t->dtype == DType::Bool
              : def.has(NumericOnly) ? t->dtype != DType::Bool
                                     : true;
    if (!ok)
      throw DTypeError(std::string(def.name) + ": expects " + want + " operands, got " + t->str());
  }
  if (def.has(Source) && !declared)
    throw InternalError(std::string(def.name) + ": a source op needs a declared type");
  return def.infer(InferArgs{op, inputs, attrs, declared});
}

}  // namespace hjit
