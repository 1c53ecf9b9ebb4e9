# `cmake --install BUILD [--prefix DIR]`: what a host or an operator needs.
#
#   bin/walship                                  the CLI
#   lib/libwalship.so.0.1.0 (+ .so.0, .so)       the library, public API only (core/walship.map)
#   include/walship/walship.h, ws_err.h, ws_log.h   its headers (-I include/walship)
#   lib/pkgconfig/walship.pc                     pkg-config --cflags --libs walship
#   lib/cmake/walship/                           find_package(walship): walship::walship
#
# (lib is CMAKE_INSTALL_LIBDIR, from GNUInstallDirs.) walship-bench and the
# other benchmarks are developer tools tied to this tree's scripts and test
# servers: not installed. tools/test.sh ("install") and
# tests/integration/test_install.sh install into a scratch prefix and build
# examples/host.c against it both ways.
include(CMakePackageConfigHelpers)

set(WS_CMAKE_DIR ${CMAKE_INSTALL_LIBDIR}/cmake/walship)
install(EXPORT walshipTargets NAMESPACE walship:: DESTINATION ${WS_CMAKE_DIR} FILE walshipTargets.cmake)
configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/walshipConfig.cmake.in
  ${PROJECT_BINARY_DIR}/walshipConfig.cmake INSTALL_DESTINATION ${WS_CMAKE_DIR})
# The soname changes with the major version (SOVERSION), and so may the API.
write_basic_package_version_file(${PROJECT_BINARY_DIR}/walshipConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${PROJECT_BINARY_DIR}/walshipConfig.cmake ${PROJECT_BINARY_DIR}/walshipConfigVersion.cmake
  DESTINATION ${WS_CMAKE_DIR})

# walship.pc is written when installing, not when configuring: `cmake
# --install --prefix DIR` picks the prefix then, and the file must name it.
# The directories are GNUInstallDirs' (relative to the prefix unless set absolute).
foreach(kind LIBDIR INCLUDEDIR)
  if(IS_ABSOLUTE "${CMAKE_INSTALL_${kind}}")
    set(WS_PC_${kind} "${CMAKE_INSTALL_${kind}}")
  else()
    set(WS_PC_${kind} "\${prefix}/${CMAKE_INSTALL_${kind}}")
  endif()
endforeach()
install(CODE "
  set(WS_PC_PREFIX \"\${CMAKE_INSTALL_PREFIX}\")
  set(WS_PC_LIBDIR [=[${WS_PC_LIBDIR}]=])
  set(WS_PC_INCLUDEDIR [=[${WS_PC_INCLUDEDIR}]=])
  set(PROJECT_VERSION \"${PROJECT_VERSION}\")
  configure_file(\"${PROJECT_SOURCE_DIR}/cmake/walship.pc.in\" \"${PROJECT_BINARY_DIR}/walship.pc\" @ONLY)
")
install(FILES ${PROJECT_BINARY_DIR}/walship.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)

# A library with fault sites obeys WS_FAULT=...:crash from any environment
# (base/ws_fault.h): never what an operator means to install.
if(WS_FAULTS)
  install(CODE "message(WARNING \"walship: installing a build with fault sites (WS_FAULTS=ON): it obeys \
WS_FAULT and WS_PAUSE_RANDOM from the environment. Build with -DCMAKE_BUILD_TYPE=Release (WS_FAULTS=OFF) to install.\")")
endif()
