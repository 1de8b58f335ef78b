// SPDX-License-Identifier: Apache-2.0
// x86_target.h - the x86 target (Xbyak machine code) and what `--emit asm` shows of it.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "targets/target.h"

namespace ternjit::targets {

/// The x86 target: every kernel op of a specialized function as Xbyak machine code,
/// run by a plan of steps (targets/x86/plan.h). Available when the host runs at least
/// AVX2. Its artifact (kind "x86-plan") holds the specialized module's IR text and
/// the chosen ISA and threads in its metadata; load() regenerates the code from them
/// (microseconds), asks the tuning source for each tmatmul's configuration and packs
/// weights once per Program (its ProgramState), so no machine code is stored.
std::unique_ptr<Target> make_x86_target();

}  // namespace ternjit::targets

namespace ternjit::targets::x86 {

/// One step of a compiled x86 function, as `ternjit compile --emit asm` shows it.
struct StepCode {
  std::string op;       ///< "tmatmul", "rmsnorm", ... ("reference" steps have no code)
  std::string summary;  ///< the instruction in IR text form (one line)
  std::string config;   ///< "isa=avx512_vnni,variant=dot,..." or the eltwise description
  struct Blob {
    std::string label;
    std::vector<std::uint8_t> code;
  };
  std::vector<Blob> blobs;  ///< empty for steps run by the reference implementation
};

/// Generates the code of function `function` of `specialized` (pipeline already run,
/// static shapes) for `isa_cap` ("" = the best the host runs; a name of isa.h, code is
/// generated even for ISAs the host lacks) without running it.
Result<std::vector<StepCode>> describe_code(const ir::Module& specialized, std::string_view function,
                                            std::string_view isa_cap, int threads);

}  // namespace ternjit::targets::x86
