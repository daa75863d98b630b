#include "kann/mixed_precision.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <map>

#include "kann/passes.h"
#include "manycl/device/device.h"
#include "manycl/kbin_runner.h"

namespace kann::mixed {

using ir::Graph;
using ir::Node;
using manycl::make_error;
using manycl::Result;

namespace {

using Samples = std::vector<std::vector<std::vector<float>>>;
// Per sample, the values of the program's outputs by graph tensor index.
using Values = std::vector<std::map<int, std::vector<float>>>;

bool is_view(const Node &n) {
  return ir::op_has(n.op, ir::kView);
}

bool is_float_activation(const ir::Tensor &t) {
  return !t.is_const && (t.dtype == ir::DType::F32 || t.dtype == ir::DType::F16);
}

// The operators a mixed binary may compute in float32: every operator that writes a float
// activation, views aside (they compute nothing).
std::vector<int> candidate_nodes(const Graph &g) {
  std::vector<int> nodes;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node &n = g.nodes[i];
    if (!n.dead && !is_view(n) && !n.outputs.empty() &&
        is_float_activation(g.tensors[n.outputs[0]]))
      nodes.push_back(int(i));
  }
  return nodes;
}

// The operators that keep tensor t (an operator's output) in float32: its producer and every
// reader, through views (a binary16 reader would read it rounded).
std::set<std::string> operators_keeping(const Graph &g, int t) {
  std::set<std::string> ops = {g.nodes[size_t(g.tensors[size_t(t)].producer)].name};
  std::vector<int> pending = {t};
  while (!pending.empty()) {
    const int x = pending.back();
    pending.pop_back();
    for (int r : g.consumers(x)) {
      ops.insert(g.nodes[size_t(r)].name);
      if (is_view(g.nodes[size_t(r)]))
        pending.push_back(g.nodes[size_t(r)].outputs[0]);
    }
  }
  return ops;
}

// g with the first output of every candidate operator as a network output too (a tensor a view
// of which is an output already is measured through nothing: one storage, one output).
Graph probe_graph(const Graph &g, const std::vector<int> &nodes) {
  Graph probe = g;
  std::set<int> viewed_outputs;
  for (const Node &n : g.nodes)
    if (!n.dead && is_view(n) && g.is_output(n.outputs[0]))
      viewed_outputs.insert(n.inputs[0]);
  for (int i : nodes) {
    const int o = g.nodes[size_t(i)].outputs[0];
    if (!probe.is_output(o) && !viewed_outputs.count(o))
      probe.outputs.push_back(o);
  }
  return probe;
}

// `measuring`: a binary only run for its outputs, in the layer schedule (the quickest to
// build; every schedule computes each output element in the same order of arithmetic).
Result<CompileOutput> compile_for(const Graph &g, const CompileOptions &options,
                                  const std::string &precision, std::set<std::string> fp32,
                                  bool measuring = true) {
  CompileOptions o = options;
  o.precision = precision;
  if (measuring) {
    o.schedule = "layer";
    o.batch = 0; // one image per sample
  }
  o.fp32_operators = precision == "fp16" ? std::move(fp32) : std::set<std::string>{};
  o.progress = nullptr;
  o.dump_schedule = false;
  return compile_graph(g, o);
}

// Runs a compiled `g` on every sample: the float32 values of its outputs.
Result<Values> run_samples(const Graph &g, const format::Program &program,
                           const manycl::device::DeviceConfig &config, const Samples &samples) {
  manycl::device::Device device(config);
  Values values(samples.size());
  for (size_t s = 0; s < samples.size(); ++s) {
    std::vector<std::vector<uint8_t>> args(program.arg_count);
    for (const auto &t : program.tensors) {
      if (t.role != KBIN_ROLE_INPUT)
        continue;
      const auto at = std::find(g.inputs.begin(), g.inputs.end(), g.find(t.name));
      if (at == g.inputs.end() || samples[s].size() != g.inputs.size())
        return make_error("mixed precision: program input '" + t.name + "' is not a model input");
      const auto &x = samples[s][size_t(at - g.inputs.begin())];
      if (x.size() * 4 != t.byte_size)
        return make_error("mixed precision: sample " + std::to_string(s) + " of input '" + t.name +
                          "' has " + std::to_string(x.size()) + " values, the model " + "needs " +
                          std::to_string(t.byte_size / 4));
      args[t.arg_index].resize(t.byte_size);
      std::memcpy(args[t.arg_index].data(), x.data(), t.byte_size);
    }
    auto run = manycl::interp::run_kbin(device, program, args);
    if (!run)
      return make_error("mixed precision: running sample " + std::to_string(s) +
                        " failed: " + run.error().message);
    for (const auto &t : program.tensors) {
      if (t.role != KBIN_ROLE_OUTPUT)
        continue;
      const auto &bytes = run.value().outputs[t.arg_index];
      std::vector<float> v(bytes.size() / 4);
      std::memcpy(v.data(), bytes.data(), v.size() * 4);
      values[s][g.find(t.name)] = std::move(v);
    }
  }
  return values;
}

// Worst |got - ref| / (abs + rel |ref|) over the network outputs of every sample.
double worst_ratio(const Graph &g, const Values &got, const Values &ref, const Tolerance &tol) {
  double worst = 0;
  for (size_t s = 0; s < ref.size(); ++s)
    for (int y : g.outputs) {
      const auto &a = got[s].at(y), &b = ref[s].at(y);
      for (size_t k = 0; k < a.size() && k < b.size(); ++k) {
        const double d = std::fabs(double(a[k]) - b[k]);
        worst =
            std::max(worst, std::isnan(d) ? INFINITY : d / (tol.abs + tol.rel * std::fabs(b[k])));
      }
    }
  return worst;
}

double rms(const std::vector<float> &a, const std::vector<float> *b = nullptr) {
  double sum = 0;
  for (size_t k = 0; k < a.size(); ++k) {
    const double d = b ? double(a[k]) - (*b)[k] : double(a[k]);
    sum += d * d;
  }
  return std::sqrt(sum / double(std::max<size_t>(1, a.size())));
}

// The value of an IEEE binary16 (finite or not).
double half_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f, mantissa = h & 0x3ff;
  const double sign = (h & 0x8000) ? -1.0 : 1.0;
  if (exponent == 0x1f)
    return mantissa ? NAN : sign * INFINITY;
  if (exponent == 0)
    return sign * std::ldexp(double(mantissa), -24);
  return sign * std::ldexp(double(mantissa | 0x400), exponent - 25);
}

double binary16_storage_rms(const std::vector<float> &a) {
  double sum = 0;
  for (float v : a) {
    const double d = half_value(passes::float_to_half(v)) - v;
    sum += d * d;
  }
  return std::sqrt(sum / double(std::max<size_t>(1, a.size())));
}

uint64_t spm_high_water(const CompileOutput &out) {
  uint64_t peak = 0;
  for (const auto &op : out.ops)
    for (uint64_t b : op.spm_peak)
      peak = std::max(peak, b);
  return peak;
}

} // namespace

std::string Choice::summary() const {
  char line[512];
  std::snprintf(line, sizeof line,
                "mixed precision: %zu activation(s) kept in float32, %zu operator(s) (worst "
                "error %.2f -> %.2f of the tolerance on the samples, %u binaries measured); "
                "parameters %llu -> %llu B, SPM high water %llu -> %llu B, modeled cycles %llu -> "
                "%llu",
                kept_tensors.size(), fp32_operators.size(), fp16_error, mixed_error, evaluations,
                (unsigned long long)fp16_params_bytes, (unsigned long long)mixed_params_bytes,
                (unsigned long long)fp16_spm_bytes, (unsigned long long)mixed_spm_bytes,
                (unsigned long long)fp16_cycles, (unsigned long long)mixed_cycles);
  return line;
}

Result<Choice> choose_fp32_operators(const Graph &g, const CompileOptions &options,
                                     const Samples &samples, const Tolerance &tolerance) {
  if (options.precision != "fp16")
    return make_error("mixed precision needs --precision fp16");
  if (samples.empty())
    return make_error("mixed precision: no calibration samples");
  if (!(tolerance.abs >= 0 && tolerance.rel >= 0 && tolerance.abs + tolerance.rel > 0))
    return make_error("mixed precision: the tolerance must be positive");
  const std::vector<int> nodes = candidate_nodes(g);
  const Graph probe = probe_graph(g, nodes);
  auto fp32 = compile_for(probe, options, "fp32", {});
  if (!fp32)
    return make_error("mixed precision: compiling the float32 probe failed: " +
                      fp32.error().message);
  auto reference = run_samples(probe, fp32.value().program, options.device, samples);
  if (!reference)
    return reference.error();
  auto fp16 = compile_for(probe, options, "fp16", {});
  if (!fp16)
    return make_error("mixed precision: compiling the binary16 probe failed: " +
                      fp16.error().message);
  auto rounded = run_samples(probe, fp16.value().program, options.device, samples);
  if (!rounded)
    return rounded.error();
  Choice choice;
  choice.fp16_error = worst_ratio(g, rounded.value(), reference.value(), tolerance);

  // 1. Ranking. An operator's own rounding (its output stored in binary16) is storage_error;
  // its output carries `carried` in the binary16 run, of which that share is its own; the
  // outputs carry `out`. Its rounding reaches the outputs amplified as the error it carries
  // does (out / carried), so it predicts storage_error * out / carried of the outputs' error.
  double out = 0;
  for (size_t s = 0; s < samples.size(); ++s)
    for (int y : g.outputs)
      out += rms(rounded.value()[s].at(y), &reference.value()[s].at(y));
  for (int i : nodes) {
    const int o = g.nodes[size_t(i)].outputs[0];
    Candidate c;
    c.tensor = g.tensors[size_t(o)].name;
    c.operators = operators_keeping(g, o);
    double carried = 0;
    for (size_t s = 0; s < samples.size(); ++s) {
      auto r = reference.value()[s].find(o), h = rounded.value()[s].find(o);
      if (r == reference.value()[s].end() || h == rounded.value()[s].end())
        continue;
      c.storage_error += binary16_storage_rms(r->second);
      carried += rms(h->second, &r->second);
    }
    c.injected_share = carried > 0 ? std::min(1.0, c.storage_error / carried) : 0;
    c.score = carried > 0 ? c.storage_error / carried * out / double(samples.size()) : 0;
    c.storage_error /= double(samples.size());
    choice.ranking.push_back(c);
  }
  std::stable_sort(choice.ranking.begin(), choice.ranking.end(),
                   [](const Candidate &a, const Candidate &b) { return a.score > b.score; });

  // 2. Selection on measured outputs of the network itself (its float32 outputs are the
  // probe's: more outputs change where tensors live, not the arithmetic).
  const Values &ref_out = reference.value();
  const auto operators_of = [&](const std::vector<size_t> &kept) {
    std::set<std::string> ops;
    for (size_t j : kept)
      ops.insert(choice.ranking[j].operators.begin(), choice.ranking[j].operators.end());
    return ops;
  };
  const auto error_of = [&](const std::vector<size_t> &kept) -> Result<double> {
    auto mixed = compile_for(g, options, "fp16", operators_of(kept));
    if (!mixed)
      return make_error("mixed precision: " + mixed.error().message);
    auto got = run_samples(g, mixed.value().program, options.device, samples);
    if (!got)
      return got.error();
    ++choice.evaluations;
    return worst_ratio(g, got.value(), ref_out, tolerance);
  };
  const auto first = [](size_t k) {
    std::vector<size_t> kept(k);
    for (size_t j = 0; j < k; ++j)
      kept[j] = j;
    return kept;
  };
  std::vector<size_t> kept;
  double chosen_error = choice.fp16_error;
  if (choice.fp16_error > tolerance.margin) {
    // The shortest prefix of the ranking that meets the margin: prefix lo fails, prefix hi
    // meets it (all of them: the float32 network itself).
    size_t lo = 0, hi = choice.ranking.size();
    chosen_error = 0;
    while (hi - lo > 1) {
      const size_t mid = lo + (hi - lo) / 2;
      auto e = error_of(first(mid));
      if (!e)
        return e.error();
      if (e.value() <= tolerance.margin)
        hi = mid, chosen_error = e.value();
      else
        lo = mid;
    }
    kept = first(hi);
    if (hi == choice.ranking.size()) { // never measured: every candidate in float32
      auto e = error_of(kept);
      if (!e)
        return e.error();
      chosen_error = e.value();
    }
    // The ranking is a prediction: each kept activation the margin does without is dropped
    // (the lowest-ranked first; at most kMaxDropTrials binaries).
    constexpr size_t kMaxDropTrials = 12;
    for (size_t j = kept.size(), trials = 0; j-- > 0 && kept.size() > 1 && trials < kMaxDropTrials;
         ++trials) {
      auto without = kept;
      without.erase(std::find(without.begin(), without.end(), j));
      auto e = error_of(without);
      if (!e)
        return e.error();
      if (e.value() <= tolerance.margin)
        kept = std::move(without), chosen_error = e.value();
    }
  }
  for (size_t j : kept)
    choice.kept_tensors.push_back(choice.ranking[j].tensor);
  const std::set<std::string> chosen = operators_of(kept);
  choice.fp32_operators = chosen;
  choice.mixed_error = chosen_error;
  auto plain = compile_for(g, options, "fp16", {}, false);
  auto mixed = compile_for(g, options, "fp16", chosen, false);
  if (!plain || !mixed)
    return make_error("mixed precision: " + (!plain ? plain : mixed).error().message);
  choice.fp16_params_bytes = plain.value().params_bytes;
  choice.mixed_params_bytes = mixed.value().params_bytes;
  choice.fp16_spm_bytes = spm_high_water(plain.value());
  choice.mixed_spm_bytes = spm_high_water(mixed.value());
  choice.fp16_cycles = plain.value().total_cycles;
  choice.mixed_cycles = mixed.value().total_cycles;
  return choice;
}

} // namespace kann::mixed
