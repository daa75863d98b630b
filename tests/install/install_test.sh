#!/bin/bash
# Installs the build tree into a staging folder (DESTDIR, prefix /opt/manycl) and builds and
# runs tests/install/consumer against it, once with find_package(ManyCL) and once with
# pkg-config; checks the installed layout and that `kann --version` and
# `pkg-config --modversion manycl` give the project version; with PYTHON_DIR (the package's
# folder under the prefix) it also imports the installed kann Python package and runs a network.
# usage: install_test.sh BUILD_DIR WORK_DIR PROJECT_VERSION CONSUMER_DIR DIGITS_DIR [PYTHON_DIR PYTHON]
set -eu
build="$1" work="$2" version="$3" consumer="$4" digits="$5" python_dir="${6:-}" python="${7:-}"
prefix=/opt/manycl

fail() {
  echo "FAIL: $*"
  exit 1
}

rm -rf "$work"
mkdir -p "$work"
DESTDIR="$work/stage" cmake --install "$build" --prefix "$prefix" >"$work/install.log" ||
  { cat "$work/install.log"; fail "cmake --install"; }
root="$work/stage$prefix"
for f in bin/kann lib/libManyCL.so.0 lib/libkann.so lib/libkann.so.0 include/kann/session.h \
  include/manycl/result.h include/CL/cl_ext_manycl.h lib/cmake/ManyCL/ManyCLConfig.cmake \
  lib/cmake/ManyCL/ManyCLConfigVersion.cmake lib/cmake/ManyCL/ManyCLTargets.cmake lib/pkgconfig/manycl.pc \
  include/manycl/native/custom.h include/manycl/native/args.h; do
  [ -e "$root/$f" ] || fail "not installed: $prefix/$f"
done
# A custom-operator library (examples/custom_operator) builds against the installed headers alone.
cc -std=c11 -Wall -Wextra -Werror -fPIC -shared -I"$root/include" "$digits/../../custom_operator/my_ops.c" \
  -o "$work/my_ops.so" -lm || fail "building a custom-operator library against the installed headers"
icd="$work/stage/etc/OpenCL/vendors/manycl.icd"
[ "$(cat "$icd")" = "$prefix/lib/libManyCL.so.0" ] || fail "$icd names '$(cat "$icd")', not $prefix/lib/libManyCL.so.0"

got=$("$root/bin/kann" --version) || fail "kann --version"
[ "$got" = "kann $version" ] || fail "kann --version says '$got', the project is $version"
export PKG_CONFIG_PATH="$root/lib/pkgconfig"
got=$(pkg-config --modversion manycl) || fail "pkg-config --modversion manycl"
[ "$got" = "$version" ] || fail "pkg-config --modversion manycl says '$got', the project is $version"
echo "installed: kann $version, manycl.pc $version"

# The staged library is not where the installed .icd says (/opt/manycl), so the loader is
# pointed at a copy of the .icd naming the staged path.
mkdir -p "$work/vendors"
echo "$root/lib/libManyCL.so.0" >"$work/vendors/manycl.icd"
export OCL_ICD_VENDORS="$work/vendors"
sample=("$digits/test_inputs.npy" "$digits/reference_logits.npy")

echo "== CMake: find_package(ManyCL)"
cmake -S "$consumer" -B "$work/cmake" -G Ninja -DCMAKE_PREFIX_PATH="$root" -DMODEL="$digits/model.onnx" \
  >"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "configuring the consumer"; }
cmake --build "$work/cmake" >>"$work/cmake.log" 2>&1 || { cat "$work/cmake.log"; fail "building the consumer"; }
"$work/cmake/consumer" "$work/cmake/model.kbin" "${sample[@]}" || fail "the CMake consumer"

echo "== pkg-config manycl"
kann=$(pkg-config --variable=kann manycl)
[ -x "$kann" ] || fail "pkg-config --variable=kann manycl: '$kann' is not the installed tool"
"$kann" compile "$digits/model.onnx" -o "$work/model.kbin" --clusters 1 >/dev/null || fail "installed kann compile"
# shellcheck disable=SC2046 # the flags are words
c++ -std=c++17 -Wall -Wextra -Werror "$consumer/main.cpp" -o "$work/consumer-pc" $(pkg-config --cflags --libs manycl) \
  -Wl,-rpath,"$(pkg-config --variable=libdir manycl)" || fail "building the consumer with pkg-config flags"
"$work/consumer-pc" "$work/model.kbin" "${sample[@]}" || fail "the pkg-config consumer"
if [ -n "$python_dir" ]; then
  echo "== Python: import kann from $prefix/$python_dir"
  case "$python_dir" in /*) site="$work/stage$python_dir" ;; *) site="$root/$python_dir" ;; esac
  [ -f "$site/kann/__init__.py" ] && ls "$site"/kann/_kann*.so >/dev/null ||
    fail "the Python package is not installed in $site/kann"
  PYTHONPATH="$site" "$python" - "$site" "$version" "$digits" <<'PY' || fail "the installed Python package"
import os, sys
import numpy as np
site, version, digits = sys.argv[1:4]
import kann
assert os.path.dirname(kann.__file__) == os.path.join(site, "kann"), kann.__file__
assert kann.__version__ == version, (kann.__version__, version)
session = kann.Session(kann.compile(os.path.join(digits, "model.onnx"), clusters=1))
(logits,) = session.run(None, {"input": np.load(os.path.join(digits, "test_inputs.npy"))[:4]})
np.testing.assert_allclose(logits, np.load(os.path.join(digits, "reference_logits.npy"))[:4], atol=1e-4)
print(f"python: kann {kann.__version__} from {site}: 4 samples match, {session.modeled_seconds * 1e6:.1f} us modeled")
PY
fi
echo "install test: OK"
