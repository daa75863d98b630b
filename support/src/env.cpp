#include "manycl/env.h"

#include <cerrno>
#include <cstdlib>
#include <cstring>

namespace manycl::env {

const char *get(const char *name) {
  const char *value = std::getenv(name);
  return value && *value ? value : nullptr;
}

bool flag(const char *name) {
  const char *value = get(name);
  return value && std::strcmp(value, "0") != 0;
}

long number(const char *name, long fallback) {
  const char *value = get(name);
  if (!value)
    return fallback;
  char *end = nullptr;
  errno = 0;
  long n = std::strtol(value, &end, 10);
  if (errno != 0 || end == value || *end != '\0')
    return fallback;
  return n;
}

} // namespace manycl::env
