// hjit's settings: every environment variable it reads, with its type, default, meaning and this
// process's value. `hjit-onnx --settings` prints the same table; docs/settings.md explains each.
//
//   for (const hjit::Setting& s : hjit::settings())
//     if (s.set) std::cout << s.name << " = " << s.value << "\n";
#pragma once
#include <string>
#include <vector>

namespace hjit {

struct Setting {
  std::string name;      // HJIT_CACHE_DIR
  std::string kind;      // text, path, count, seconds, flag or choice
  std::string fallback;  // the default ("(...)" where it is computed)
  std::string takes;     // what values it takes
  std::string scope;     // library, tools or tests: who reads it
  std::string meaning;
  bool set = false;      // whether this process's environment sets it
  std::string value;     // its value here ("(hidden)" for a secret); "" when not set
};

// Every setting, in the order of their declaration.
std::vector<Setting> settings();

// The settings as a table for a terminal: name, value here (or the default), what it does.
std::string settings_table();

// The settings as docs/settings.md's table (Markdown), which the test suite compares with the page.
std::string settings_markdown();

}  // namespace hjit
