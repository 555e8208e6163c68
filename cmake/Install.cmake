# `cmake --install build --prefix P`: the shared library, the headers, the CLI, a CMake package
# (find_package(specjit CONFIG) -> specjit::specjit) and a pkg-config file. Both package files
# locate the prefix from where they lie, so the installed tree can be moved.
install(TARGETS specjit_shared LIBRARY DESTINATION lib)
install(FILES ${PROJECT_SOURCE_DIR}/include/specjit/specjit.h
              ${PROJECT_SOURCE_DIR}/include/specjit/specjit.hpp
        DESTINATION include/specjit)
if(TARGET specjit)
  install(TARGETS specjit RUNTIME DESTINATION bin)
endif()

include(CMakePackageConfigHelpers)
set(specjit_package_dir ${CMAKE_CURRENT_BINARY_DIR}/package)
configure_file(${PROJECT_SOURCE_DIR}/cmake/specjitConfig.cmake.in
               ${specjit_package_dir}/specjitConfig.cmake @ONLY)
write_basic_package_version_file(${specjit_package_dir}/specjitConfigVersion.cmake
                                 VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
configure_file(${PROJECT_SOURCE_DIR}/cmake/specjit.pc.in ${specjit_package_dir}/specjit.pc @ONLY)
install(FILES ${specjit_package_dir}/specjitConfig.cmake
              ${specjit_package_dir}/specjitConfigVersion.cmake
        DESTINATION lib/cmake/specjit)
install(FILES ${specjit_package_dir}/specjit.pc DESTINATION lib/pkgconfig)
