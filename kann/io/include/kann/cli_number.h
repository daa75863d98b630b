// Strict parsing of the numbers given to kann's command-line options. std::stoul and atoi
// accept "-1" (wrapping to 4294967295), "3x" and "" in ways that silently run something else
// than asked; here the whole text must be a number inside the option's range, otherwise the
// caller gets a one-line message naming the option, the text and the range.
#pragma once

#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string>

namespace kann::cli {

// An integer in [min, max] ("--clusters: '0' is out of range (expected an integer in 1..5)").
inline bool parse_integer(const std::string &option, const std::string &text, uint64_t min,
                          uint64_t max, uint64_t &value, std::string &error) {
  const std::string expected =
      "expected an integer in " + std::to_string(min) + ".." + std::to_string(max);
  // strtoull would take a leading '-' or blanks; only plain decimal digits are a count.
  bool digits = !text.empty();
  for (char c : text)
    digits = digits && c >= '0' && c <= '9';
  if (!digits) {
    error = option + ": '" + text + "' is not a number (" + expected + ")";
    return false;
  }
  errno = 0;
  const unsigned long long v = std::strtoull(text.c_str(), nullptr, 10);
  if (errno == ERANGE || v < min || v > max) {
    error = option + ": " + text + " is out of range (" + expected + ")";
    return false;
  }
  value = v;
  return true;
}

// A finite number in (low, high] ("--calibration-percentile: 'nan' is not a number ...").
inline bool parse_real(const std::string &option, const std::string &text, double low, double high,
                       double &value, std::string &error) {
  const std::string expected = "expected a number greater than " + std::to_string(int(low)) +
                               ", at most " + std::to_string(int(high));
  char *end = nullptr;
  errno = 0;
  const double v = text.empty() ? NAN : std::strtod(text.c_str(), &end);
  if (text.empty() || end != text.c_str() + text.size() || errno == ERANGE || !std::isfinite(v)) {
    error = option + ": '" + text + "' is not a number (" + expected + ")";
    return false;
  }
  if (!(v > low && v <= high)) {
    error = option + ": " + text + " is out of range (" + expected + ")";
    return false;
  }
  value = v;
  return true;
}

} // namespace kann::cli
