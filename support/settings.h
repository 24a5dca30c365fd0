// Environment variables, read through their declaration (support/settings_list.h). Each reader
// checks the value as its kind says and throws ValueError naming the variable and what it takes;
// the environment is read at each call (a program, or a test, may set a variable between two),
// so whoever caches a value does so where it is used, as before.
#pragma once
#include <cstdint>
#include <optional>
#include <span>
#include <string>

#include "support/settings_list.h"

namespace hjit::setting {

enum class Id : uint8_t {
#define HJIT_SETTING_ID(id, name, kind, fallback, takes, scope, secret, meaning) id,
  HJIT_SETTINGS(HJIT_SETTING_ID)
#undef HJIT_SETTING_ID
};

enum class Kind : uint8_t { Text, Path, Count, Seconds, Flag, Choice };
enum class Scope : uint8_t { Library, Tools, Tests };

struct Row {
  Id id;
  const char* name;
  Kind kind;
  const char* fallback;  // the default; in parentheses where it is computed, not a value
  const char* takes;     // what it takes; a Choice's words, separated by |
  Scope scope;
  bool secret;
  const char* meaning;
};

std::span<const Row> rows();
const Row& row(Id id);
const char* kind_name(Kind k);
const char* scope_name(Scope s);

// The variable as the environment has it; nullopt when unset (set and empty is "").
std::optional<std::string> raw(Id id);

// The value, or the row's default when unset (a computed default, in parentheses, gives nullopt).
std::optional<std::string> text(Id id);
// A Count: a whole number >= 0; nullopt when unset and the default is computed.
std::optional<int64_t> count(Id id);
// A Seconds: a number > 0; nullopt when unset and the default is computed.
std::optional<double> seconds(Id id);
// A Flag: true for 1, false for 0 (or unset with default 0).
bool flag(Id id);
// A Choice: one of its words (the default when unset or empty).
std::string choice(Id id);

}  // namespace hjit::setting
