// SPDX-License-Identifier: Apache-2.0
// cpu_targets_testing.h - every CPU target configuration a test can run here: reference, x86 at each ISA, llvm.
#pragma once

#include <string>
#include <vector>

#include "targets/x86/isa.h"
#include "ternjit/engine.h"

namespace ternjit::testing {

/// One engine configuration and its name for messages.
struct CpuTarget {
  std::string label;  ///< "reference", "x86 avx512_vnni t=2", "llvm"
  EngineOptions options;
};

/// The reference target, x86 at every ISA this host runs with 1 and 2 threads, and llvm.
/// A target this host lacks is left out; `skipped` gets one line saying why.
inline std::vector<CpuTarget> cpu_targets(std::vector<std::string>* skipped = nullptr) {
  std::vector<CpuTarget> out;
  EngineOptions ref;
  ref.target = "reference";
  out.push_back({"reference", ref});
  for (targets::x86::Isa isa : targets::x86::kAllIsas) {
    const std::string name(targets::x86::isa_name(isa));
    if (!targets::x86::host_isas().supports(isa)) {
      if (skipped) skipped->push_back("x86 " + name + ": this CPU cannot run it");
      continue;
    }
    for (int threads : {1, 2}) {
      EngineOptions o;
      o.target = "x86";
      o.max_isa = name;
      o.threads = threads;
      out.push_back({"x86 " + name + " t=" + std::to_string(threads), o});
    }
  }
  EngineOptions llvm;
  llvm.target = "llvm";
  if (Engine::create(llvm).ok()) out.push_back({"llvm", llvm});
  else if (skipped) skipped->push_back("llvm: not available");
  return out;
}

}  // namespace ternjit::testing
