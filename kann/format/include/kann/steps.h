// Operator steps of a kann program, for traces. The compiler ends every operator step of
// every cluster with WAIT_DMA immediately followed by BARRIER (a single-cluster program: with
// WAIT_DMA alone); barriers between parameter slices inside a step follow no WAIT_DMA. Step 0
// is the prologue (network inputs and the first parameters), step s >= 1 runs operator s-1 of
// the compile report.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "kann/format.h"

namespace kann::format {

// Whether a record with function `fn`, after one with `previous_fn`, ends a step.
inline bool ends_step(uint32_t previous_fn, uint32_t fn, bool multi_cluster) {
  return multi_cluster ? fn == KBIN_FN_BARRIER && previous_fn == KBIN_FN_WAIT_DMA
                       : fn == KBIN_FN_WAIT_DMA;
}

// Trace names of the steps: "prologue", then "NAME (OP)" per operator of the stored compile
// report. Empty when the program has no report or when a cluster's step count does not match
// it (a single-cluster program that streams spilled tensors also waits for DMA inside steps):
// the interpreter then names the spans "step N".
std::vector<std::string> step_names(const Program &program);

} // namespace kann::format
