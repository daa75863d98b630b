#!/bin/sh
# The ICD library exports exactly the three entry points the loaders look up with dlsym.
set -u
lib="$1"
syms=$(nm -D --defined-only "$lib" | awk 'NF >= 3 { sub(/@.*/, "", $3); print $3 }' | sort -u)
want=$(printf '%s\n' clGetExtensionFunctionAddress clGetPlatformInfo clIcdGetPlatformIDsKHR | sort)
if [ "$syms" != "$want" ]; then
  echo "FAIL: $lib exports:"
  printf '%s\n' "$syms"
  echo "expected:"
  printf '%s\n' "$want"
  exit 1
fi
echo "exports: OK"
printf '%s\n' "$syms"
