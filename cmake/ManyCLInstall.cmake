# What `cmake --install` adds beyond the ICD itself (icd/CMakeLists.txt) and the `kann` tool
# (kann/tool): libkann with its public headers, a CMake package (find_package(ManyCL) ->
# ManyCL::kann, ManyCL_KANN_EXECUTABLE) and a pkg-config file (manycl.pc). Every path is
# relative to the install prefix, so `cmake --install build --prefix P` and DESTDIR staging
# both give a working tree.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)
if(NOT TARGET kann_shared)
  return()
endif()

set(MANYCL_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/ManyCL)
set_target_properties(kann_shared PROPERTIES INSTALL_RPATH_USE_LINK_PATH ON)
install(TARGETS kann_shared EXPORT ManyCLTargets
  LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
  INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR})
install(FILES ${CMAKE_SOURCE_DIR}/kann/session/include/kann/session.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/kann)
install(FILES ${CMAKE_SOURCE_DIR}/support/include/manycl/result.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/manycl)
# Custom-operator libraries compile against custom.h (and the tile layout of args.h).
install(FILES ${CMAKE_SOURCE_DIR}/kernels/native/include/manycl/native/custom.h
  ${CMAKE_SOURCE_DIR}/kernels/native/include/manycl/native/args.h
  DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/manycl/native)
install(EXPORT ManyCLTargets NAMESPACE ManyCL:: DESTINATION ${MANYCL_CMAKE_DIR})

configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/ManyCLConfig.cmake.in
  ${CMAKE_BINARY_DIR}/package/ManyCLConfig.cmake
  INSTALL_DESTINATION ${MANYCL_CMAKE_DIR}
  PATH_VARS CMAKE_INSTALL_BINDIR CMAKE_INSTALL_LIBDIR)
write_basic_package_version_file(${CMAKE_BINARY_DIR}/package/ManyCLConfigVersion.cmake
  COMPATIBILITY SameMinorVersion) # 0.x: minor versions may break the API
install(FILES ${CMAKE_BINARY_DIR}/package/ManyCLConfig.cmake
  ${CMAKE_BINARY_DIR}/package/ManyCLConfigVersion.cmake DESTINATION ${MANYCL_CMAKE_DIR})

# pkg-config: the prefix is found from the .pc file's own folder (pkgconf's ${pcfiledir}), so
# the file stays right whatever prefix the install is given.
file(RELATIVE_PATH MANYCL_PC_TO_PREFIX /prefix/${CMAKE_INSTALL_LIBDIR}/pkgconfig /prefix)
configure_file(${CMAKE_CURRENT_LIST_DIR}/manycl.pc.in ${CMAKE_BINARY_DIR}/package/manycl.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/package/manycl.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
