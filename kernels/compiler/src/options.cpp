// Build/compile/link option parsing (OpenCL 1.2 section 5.6.4 and 5.6.5).
#include "internal.h"

#include <cctype>
#include <cstring>
#include <optional>

namespace manycl::compiler::detail {

static std::vector<std::string> splitArgs(std::string_view s) {
  std::vector<std::string> out;
  std::string cur;
  bool have = false;
  char quote = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    char c = s[i];
    if (quote) {
      if (c == quote)
        quote = 0;
      else if (c == '\\' && i + 1 < s.size() && s[i + 1] == quote)
        cur += s[++i];
      else
        cur += c;
      continue;
    }
    if (c == '"' || c == '\'') {
      quote = c;
      have = true;
      continue;
    }
    if (std::isspace(static_cast<unsigned char>(c))) {
      if (have)
        out.push_back(cur);
      cur.clear();
      have = false;
      continue;
    }
    if (c == '\\' && i + 1 < s.size()) {
      cur += s[++i];
      have = true;
      continue;
    }
    cur += c;
    have = true;
  }
  if (have)
    out.push_back(cur);
  return out;
}

ParsedOptions parseOptions(std::string_view options, OptionsKind kind) {
  ParsedOptions po;
  auto args = splitArgs(options);
  auto bad = [&](const std::string &a) { po.error = "invalid option '" + a + "'"; };
  // Options that are only meaningful to the compiler (not the linker).
  const bool compileLike = kind != OptionsKind::Link;
  for (size_t i = 0; i < args.size() && po.error.empty(); ++i) {
    const std::string &a = args[i];
    auto takeValue = [&](const char *opt) -> std::optional<std::string> {
      size_t n = std::strlen(opt);
      if (a.size() > n)
        return a.substr(n);
      if (i + 1 < args.size())
        return args[++i];
      po.error = std::string("missing value after '") + opt + "'";
      return std::nullopt;
    };
    if (compileLike && a.rfind("-D", 0) == 0) {
      auto v = takeValue("-D");
      if (!v)
        break;
      if (v->empty()) {
        bad(a);
        break;
      }
      po.clang_args.push_back("-D" + *v);
    } else if (compileLike && a.rfind("-I", 0) == 0) {
      auto v = takeValue("-I");
      if (!v)
        break;
      po.clang_args.push_back("-I" + *v);
    } else if (compileLike && a.rfind("-cl-std=", 0) == 0) {
      std::string v = a.substr(8);
      if (v == "CL1.0" || v == "CL1.1" || v == "CL1.2" || v == "CL2.0" || v == "CL3.0") {
        po.cl_std = v;
      } else {
        bad(a);
      }
    } else if (a == "-cl-opt-disable") {
      if (!compileLike) {
        bad(a);
        break;
      }
      po.opt_disable = true;
    } else if (a == "-cl-kernel-arg-info") {
      if (!compileLike) {
        bad(a);
        break;
      }
      po.kernel_arg_info = true;
      po.clang_args.push_back(a);
    } else if (a == "-cl-fast-relaxed-math" || a == "-cl-unsafe-math-optimizations" ||
               a == "-cl-finite-math-only" || a == "-cl-no-signed-zeros" || a == "-cl-mad-enable") {
      if (a == "-cl-fast-relaxed-math" || a == "-cl-unsafe-math-optimizations")
        po.fast_math = true;
      po.clang_args.push_back(a);
    } else if (compileLike && (a == "-cl-single-precision-constant" || a == "-cl-strict-aliasing" ||
                               a == "-cl-fp32-correctly-rounded-divide-sqrt" ||
                               a == "-cl-uniform-work-group-size" || a == "-cl-no-subgroup-ifp")) {
      if (a != "-cl-strict-aliasing" && a != "-cl-no-subgroup-ifp")
        po.clang_args.push_back(a);
    } else if (a == "-cl-denorms-are-zero") {
      // Allows flushing denormals, does not require it: the device keeps them (and cc1 has no
      // such option; the clang driver would turn it into a denormal mode for constant folding).
    } else if (compileLike && (a == "-w" || a == "-Werror")) {
      po.clang_args.push_back(a);
    } else if (compileLike && (a == "-g" || a == "-cl-g")) {
      // accepted, no debug info is generated
    } else if (kind == OptionsKind::Link && a == "-create-library") {
      po.create_library = true;
    } else if (kind == OptionsKind::Link && a == "-enable-link-options") {
      // accepted
    } else {
      bad(a);
    }
  }
  return po;
}

} // namespace manycl::compiler::detail
