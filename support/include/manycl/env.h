// Reading the MANYCL_* environment switches. Every switch is read by name through these
// helpers so that "set", "off" and "a number" mean the same thing for all of them.
#pragma once

namespace manycl::env {

// The value of `name` when set and non-empty, else nullptr.
const char *get(const char *name);

// An on/off switch: on when set, non-empty and not "0".
bool flag(const char *name);

// A whole number; `fallback` when unset, empty or not entirely a base-10 number.
long number(const char *name, long fallback);

} // namespace manycl::env
