# Project-wide compile options: warnings and sanitizers.
set(MANYCL_SANITIZE "" CACHE STRING "Sanitizers: empty, 'address;undefined' or 'thread'")

add_library(manycl_warnings INTERFACE)
target_compile_options(manycl_warnings INTERFACE -Wall -Wextra)

if(MANYCL_SANITIZE)
  string(REPLACE ";" "," _manycl_san "${MANYCL_SANITIZE}")
  add_compile_options(-fsanitize=${_manycl_san} -fno-omit-frame-pointer -fno-sanitize-recover=undefined)
  if("undefined" IN_LIST MANYCL_SANITIZE)
    # The OpenCL C compiler is built without RTTI, as LLVM is; UBSan's vptr check then flags
    # every std::shared_ptr control block created there and released elsewhere (and LLVM's
    # own objects). Every other UBSan check stays on.
    add_compile_options(-fno-sanitize=vptr)
    add_link_options(-fno-sanitize=vptr)
  endif()
  add_link_options(-fsanitize=${_manycl_san})
  message(STATUS "ManyCL: sanitizers ${_manycl_san}")
endif()
