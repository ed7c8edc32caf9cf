# `cmake --install` lays weft out so that `find_package(weft)` + `weft::weft` works:
# headers under include/weft/<layer>/..., the umbrella at include/weft/weft.h.
include(GNUInstallDirs)
include(CMakePackageConfigHelpers)

# Headers are listed one by one rather than with install(DIRECTORY): that would also create empty
# folders for layers that have no headers yet, and a second copy of the umbrella.
foreach(layer runtime kernels scheduler comm cluster api)
  file(GLOB_RECURSE headers CONFIGURE_DEPENDS RELATIVE ${PROJECT_SOURCE_DIR} ${PROJECT_SOURCE_DIR}/${layer}/*.h)
  list(FILTER headers EXCLUDE REGEX "^api/weft/")
  foreach(header IN LISTS headers)
    get_filename_component(dir ${header} DIRECTORY)
    install(FILES ${PROJECT_SOURCE_DIR}/${header} DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft/${dir})
  endforeach()
endforeach()
install(FILES ${PROJECT_SOURCE_DIR}/api/weft/weft.h DESTINATION ${CMAKE_INSTALL_INCLUDEDIR}/weft)

install(TARGETS weft_runtime weft_kernels weft_scheduler weft_comm weft_cluster weft
        EXPORT weftTargets
        ARCHIVE DESTINATION ${CMAKE_INSTALL_LIBDIR}
        LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR}
        INCLUDES DESTINATION ${CMAKE_INSTALL_INCLUDEDIR} ${CMAKE_INSTALL_INCLUDEDIR}/weft)
install(EXPORT weftTargets NAMESPACE weft:: DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)

configure_package_config_file(${PROJECT_SOURCE_DIR}/cmake/weftConfig.cmake.in
  ${PROJECT_BINARY_DIR}/weftConfig.cmake INSTALL_DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
write_basic_package_version_file(${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
  COMPATIBILITY SameMinorVersion)
install(FILES ${PROJECT_BINARY_DIR}/weftConfig.cmake ${PROJECT_BINARY_DIR}/weftConfigVersion.cmake
        DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/weft)
