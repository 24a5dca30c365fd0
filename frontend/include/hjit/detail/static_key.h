// Static (non-tensor) arguments of a jitted function: their values are part of the cache key, as
// jax's static_argnums, chosen by type. A static argument must be hashable and comparable.
#pragma once
#include <concepts>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <typeinfo>
#include <utility>
#include <vector>

namespace hjit::detail {

template <class T>
concept Printable = requires(std::ostream& os, const T& v) { os << v; };

template <class T>
concept HashableStatic = std::is_arithmetic_v<T> || std::is_enum_v<T> || std::is_same_v<T, std::string> ||
                         (std::equality_comparable<T> && requires(const T& v) {
                           { std::hash<T>{}(v) } -> std::convertible_to<size_t>;
                         });

struct StaticValue {
  virtual ~StaticValue() = default;
  virtual bool equals(const StaticValue& other) const = 0;
  virtual size_t hash() const = 0;
  virtual std::string str() const = 0;
};

template <class T>
struct StaticValueOf final : StaticValue {
  T value;
  explicit StaticValueOf(T v) : value(std::move(v)) {}
  // Floating point values are keyed by their bits: a NaN argument finds its own entry again (NaN
  // != NaN), and -0.0 does not share 0.0's (1 / x tells them apart).
  bool equals(const StaticValue& other) const override {
    const auto* o = dynamic_cast<const StaticValueOf*>(&other);
    if constexpr (std::is_floating_point_v<T>) return o && std::memcmp(&o->value, &value, sizeof(T)) == 0;
    else return o && o->value == value;
  }
  size_t hash() const override {
    if constexpr (std::is_floating_point_v<T>) {
      uint64_t bits = 0;
      std::memcpy(&bits, &value, sizeof(T) < 8 ? sizeof(T) : 8);
      return std::hash<uint64_t>{}(bits);
    } else if constexpr (std::is_enum_v<T>) {
      return std::hash<std::underlying_type_t<T>>{}(std::underlying_type_t<T>(value));
    } else {
      return std::hash<T>{}(value);
    }
  }
  std::string str() const override {
    if constexpr (std::is_same_v<T, std::string>) {
      return "\"" + value + "\"";
    } else if constexpr (std::is_enum_v<T>) {
      return std::string(typeid(T).name()) + "(" + std::to_string(std::underlying_type_t<T>(value)) + ")";
    } else if constexpr (Printable<T>) {
      std::ostringstream os;
      os << value;
      return os.str();
    } else {
      return std::string("<") + typeid(T).name() + ">";
    }
  }
};

// The static arguments of one call: (argument position, value).
class StaticKey {
 public:
  template <class T>
  void add(int arg_index, const T& v) {
    using V = std::conditional_t<std::is_convertible_v<const T&, std::string> && !std::is_arithmetic_v<T>, std::string, T>;
    values_.emplace_back(arg_index, std::make_shared<StaticValueOf<V>>(V(v)));
  }
  bool empty() const { return values_.empty(); }
  size_t hash() const {
    size_t h = 0x51a7;
    for (const auto& [i, v] : values_) h = (h * 1000003u) ^ (size_t(i) * 31u + v->hash());
    return h;
  }
  bool operator==(const StaticKey& o) const {
    if (values_.size() != o.values_.size()) return false;
    for (size_t i = 0; i < values_.size(); ++i)
      if (values_[i].first != o.values_[i].first || !values_[i].second->equals(*o.values_[i].second)) return false;
    return true;
  }
  const std::vector<std::pair<int, std::shared_ptr<const StaticValue>>>& values() const { return values_; }

 private:
  std::vector<std::pair<int, std::shared_ptr<const StaticValue>>> values_;
};

}  // namespace hjit::detail
