# The sanitizer settings of test processes, for tests/ and for the examples CTest runs (included
# before both). MANYCL_SAN_ENV: VAR=value entries for every instrumented test process (empty
# without sanitizers).
set(MANYCL_SAN_ENV "")
if(MANYCL_SANITIZE)
  # The ocl-icd loader is not instrumented and keeps what it allocates while loading
  # vendors; lsan.supp suppresses the loader's allocations (and only those).
  list(APPEND MANYCL_SAN_ENV
    "LSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/runtime/lsan.supp:print_suppressions=0"
    # gcc 12's LeakSanitizer misreads the dynamic TLS of a dlopen()ed library (libManyCL.so,
    # loaded by the loader) on glibc 2.36 and its tracer crashes at exit; not intercepting
    # __tls_get_addr avoids it (static TLS and every thread stack are still scanned).
    "ASAN_OPTIONS=detect_leaks=1:intercept_tls_get_addr=0"
    "UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1"
    "TSAN_OPTIONS=suppressions=${PROJECT_SOURCE_DIR}/tests/runtime/tsan.supp:halt_on_error=1:second_deadlock_stack=1")
endif()

# Programs that are not instrumented (Debian's clinfo and python3, the OpenCL-CTS binaries) but
# load an instrumented library (the ICD, the kann Python module) need the sanitizer runtimes
# preloaded: MANYCL_SAN_PRELOAD is "LD_PRELOAD=..." then, empty otherwise.
set(MANYCL_SAN_PRELOAD "")
if(MANYCL_SANITIZE)
  set(preload "")
  foreach(san IN LISTS MANYCL_SANITIZE)
    if(san STREQUAL "address")
      set(lib libasan.so)
    elseif(san STREQUAL "thread")
      set(lib libtsan.so)
    elseif(san STREQUAL "undefined")
      set(lib libubsan.so)
    else()
      continue()
    endif()
    execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${lib} OUTPUT_VARIABLE path
                    OUTPUT_STRIP_TRAILING_WHITESPACE)
    list(APPEND preload ${path})
  endforeach()
  string(REPLACE ";" ":" preload "${preload}")
  set(MANYCL_SAN_PRELOAD "LD_PRELOAD=${preload}")
endif()

# MANYCL_SAN_PYTHON: with ASan, the launcher of Debian's interpreter for a test that loads the
# instrumented kann module, followed by the test's report folder and the command (see
# tests/python/sanitized_python.sh); empty otherwise.
set(MANYCL_SAN_PYTHON "")
if("address" IN_LIST MANYCL_SANITIZE)
  string(REPLACE "LD_PRELOAD=" "" preload "${MANYCL_SAN_PRELOAD}")
  set(MANYCL_SAN_PYTHON ${PROJECT_SOURCE_DIR}/tests/python/sanitized_python.sh ${preload}
                        ${CMAKE_BINARY_DIR})
endif()
