// Mixed FP16 / FP32 precision chosen by measurement (`kann compile --precision fp16
// --fp16-tolerance ABS[,REL] --calibration X.npy`): the activations whose binary16 storage
// costs the network's outputs the most stay in float32 (their producer and readers compute in
// float32, with float32 weights), the fewest that bring the FP16 binary within the tolerance
// of the float32 one on the calibration samples. docs/kann.md, "Mixed precision".
//
//   1. Ranking, from two probes (the float32 and the all-binary16 binary with every
//      activation an output, run on the samples): an activation's own rounding error (its
//      float32 values rounded to binary16) reaches the outputs amplified as the error it
//      carries in the binary16 run does: predicted = storage error x outputs' error / carried.
//   2. Selection on measured outputs: the shortest prefix of the ranking whose mixed binary
//      meets margin x the tolerance (bisection), then each kept activation the margin does
//      without is dropped (the ranking is a prediction; at most 12 such trials).
#pragma once

#include <set>
#include <string>
#include <vector>

#include "kann/compile.h"
#include "kann/ir.h"
#include "manycl/result.h"

namespace kann::mixed {

struct Tolerance {
  double abs = 2e-2, rel = 2e-2; // |fp16 - fp32| <= abs + rel * |fp32|, every output element
  // The chosen mix must meet margin x the tolerance on the calibration samples, so that inputs
  // outside them keep within it.
  double margin = 0.8;
};

// An activation that may stay in float32: its producer and readers then compute in float32.
struct Candidate {
  std::string tensor;              // tensor name of the optimized graph
  std::set<std::string> operators; // node names: its producer and its readers
  double storage_error = 0;        // RMS of its float32 output rounded to binary16
  double injected_share = 0;       // that error / its output's RMS error in the binary16 run
  double score = 0;                // predicted RMS error it causes at the outputs (the ranking)
};

struct Choice {
  std::vector<std::string> kept_tensors; // activations kept in float32, best-ranked first
  std::set<std::string> fp32_operators;  // their producers and readers
  double fp16_error = 0;          // worst |diff| / (abs + rel |ref|) of the all-binary16 binary
  double mixed_error = 0;         // the same for the chosen mix (<= margin unless none reaches it)
  std::vector<Candidate> ranking; // every candidate, best first
  unsigned evaluations = 0;       // mixed binaries compiled and run
  // What the float32 operators cost (the chosen mix against the all-binary16 binary, both
  // compiled with the caller's options): parameter bytes, SPM high water, modeled cycles.
  uint64_t fp16_params_bytes = 0, mixed_params_bytes = 0;
  uint64_t fp16_spm_bytes = 0, mixed_spm_bytes = 0;
  uint64_t fp16_cycles = 0, mixed_cycles = 0;
  std::string summary() const; // one line for `kann compile`
};

// samples[i] = the network inputs of sample i (one float vector per graph input, NCHW; see
// quantize::calibration_samples). `options.precision` must be "fp16".
manycl::Result<Choice>
choose_fp32_operators(const ir::Graph &g, const CompileOptions &options,
                      const std::vector<std::vector<std::vector<float>>> &samples,
                      const Tolerance &tolerance);

} // namespace kann::mixed
