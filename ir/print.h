// SPDX-License-Identifier: Apache-2.0
// print.h - the canonical, deterministic text form of modules, functions and types.
//
// The grammar is in ir/README.md. For canonical text, print(parse(text)) == text byte
// for byte. The printer accepts any IR, valid or not (it is how the verifier names the
// instruction it complains about): ids that do not resolve print as `%?7`, `^?2`.
#pragma once

#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <vector>

#include "ir/ir.h"

namespace ternjit::ir {

/// Prints a whole module: `meta` lines sorted by key, `param` declarations in
/// declaration order, then the functions in module order separated by one blank
/// line. Ends with "\n" unless the module is empty.
std::string print_module(const Module& m);

/// Prints one function, from `func` to the closing `}` and its "\n". `m` may be null;
/// it is not needed to print.
std::string print_function(const Module* m, const Function& f);

/// Prints a type with names from `symbols` ("f32[N, 784]", scalar "f32[]"); a symbol
/// id outside the table prints as `?index`.
std::string print_type(const Type& t, std::span<const std::string> symbols);

/// The printed spellings of a function's values and blocks, as print_function uses
/// them: named values keep their name (made unique with `_1`, `_2`, ... and made a
/// valid identifier), unnamed values are numbered %0, %1, ... in definition order
/// (block arguments, then results, block by block in layout order). Blocks print their
/// name, else `entry` (first block) or `bb<layout position>`.
/// Computing it walks the whole function once; it does not keep a reference to `f`.
class FunctionNames {
 public:
  /// Names every block in f's layout and every value they define.
  explicit FunctionNames(const Function& f);

  /// `%name`, or `%?index` for a value not defined in the layout (erased, out of range).
  [[nodiscard]] std::string value(ValueId v) const;
  /// `^name`, or `^?index` for a block not in the layout.
  [[nodiscard]] std::string block(BlockId b) const;

 private:
  std::vector<std::string> values_;  ///< by ValueId index, empty when undefined
  std::vector<std::string> blocks_;  ///< by BlockId index, empty when not laid out
};

/// Names in use, handing out fresh ones: `base` if unused, else `base_1`, `base_2`, ...
/// The last suffix handed out is kept per base, so the 10,000th `%h` does not try the
/// 9,999 taken names first.
class UniqueNames {
 public:
  /// Marks `name` used.
  void insert(const std::string& name) { used_.insert(name); }
  /// Marks `name` free again (its suffix counter stays: freed suffixes are not reused).
  void erase(const std::string& name) { used_.erase(name); }
  /// `base` or the next free `base_<k>`, now marked used.
  std::string take(const std::string& base) {
    if (used_.insert(base).second) return base;
    for (int& k = next_[base];;) {
      std::string n = base + "_" + std::to_string(++k);
      if (used_.insert(n).second) return n;
    }
  }

 private:
  std::set<std::string> used_;
  std::map<std::string, int> next_;  ///< base -> the last suffix handed out
};

/// Prints one instruction the way print_function does, without indentation or
/// newline ("%3 = add %1, %2 : f32[4]"). `names` must come from `f`.
std::string print_inst(const Function& f, const FunctionNames& names, InstId i);

/// Prints the double `v` in the shortest form that reads back to the same double
/// (std::to_chars: "0.5", "1e-06", "3"); `inf`, `-inf` and `nan` are spelled so.
std::string format_double(double v);

/// Prints `v` as a value of kind `k`: integer kinds print integral values as integers,
/// float kinds print the shortest form that reads back to the same float.
std::string format_value(double v, ElemKind k);

}  // namespace ternjit::ir
