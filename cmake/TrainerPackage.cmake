# The installed SDK: libtrainer's exported target, trainerConfig.cmake (find_package) with the
# plugin helper, and trainer.pc (pkg-config). Both are relocatable: they locate the prefix
# from their own path.
include(CMakePackageConfigHelpers)

set(_trainer_cmake_dir ${CMAKE_INSTALL_LIBDIR}/cmake/trainer)
install(EXPORT trainerTargets NAMESPACE trainer:: DESTINATION ${_trainer_cmake_dir})
configure_package_config_file(${CMAKE_CURRENT_LIST_DIR}/trainerConfig.cmake.in
  ${CMAKE_BINARY_DIR}/sdk/trainerConfig.cmake
  INSTALL_DESTINATION ${_trainer_cmake_dir}
  PATH_VARS CMAKE_INSTALL_BINDIR TRAINER_INSTALL_PLUGIN_DIR)
# find_package(trainer X.Y) accepts this framework version when the majors match and it is
# not older (the plugin ABI has its own version: TRAINER_ABI_MAJOR/MINOR, docs/abi.md).
write_basic_package_version_file(${CMAKE_BINARY_DIR}/sdk/trainerConfigVersion.cmake
  VERSION ${PROJECT_VERSION} COMPATIBILITY SameMajorVersion)
install(FILES ${CMAKE_BINARY_DIR}/sdk/trainerConfig.cmake ${CMAKE_BINARY_DIR}/sdk/trainerConfigVersion.cmake
              ${CMAKE_CURRENT_LIST_DIR}/TrainerPlugin.cmake
        DESTINATION ${_trainer_cmake_dir})

# Paths in trainer.pc relative to its own folder (${pcfiledir}), also when the install dirs
# are given absolute (-DCMAKE_INSTALL_LIBDIR=/usr/lib64).
file(RELATIVE_PATH TRAINER_PC_TO_PREFIX ${CMAKE_INSTALL_FULL_LIBDIR}/pkgconfig ${CMAKE_INSTALL_PREFIX})
file(RELATIVE_PATH TRAINER_PC_INCLUDEDIR ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_FULL_INCLUDEDIR})
file(RELATIVE_PATH TRAINER_PC_LIBDIR ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_FULL_LIBDIR})
file(RELATIVE_PATH TRAINER_PC_PLUGINDIR ${CMAKE_INSTALL_PREFIX} ${CMAKE_INSTALL_FULL_LIBDIR}/trainer/plugins)
string(REGEX REPLACE "/$" "" TRAINER_PC_TO_PREFIX "${TRAINER_PC_TO_PREFIX}")
if(TRAINER_PC_TO_PREFIX STREQUAL "")
  set(TRAINER_PC_TO_PREFIX .)
endif()
configure_file(${CMAKE_CURRENT_LIST_DIR}/trainer.pc.in ${CMAKE_BINARY_DIR}/sdk/trainer.pc @ONLY)
install(FILES ${CMAKE_BINARY_DIR}/sdk/trainer.pc DESTINATION ${CMAKE_INSTALL_LIBDIR}/pkgconfig)
