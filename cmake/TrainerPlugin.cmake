# trainer_add_plugin(<target> SOURCES <files...> [OUTPUT_DIR <dir>] [LIBS <libs...>]
#                    [INSTALL_DESTINATION <dir>])
#
# Builds one plugin as a MODULE library: C11, only the entry symbol exported
# (-fvisibility=hidden; TR_PLUGIN_DEFINE marks it default), no "lib" prefix, linked to
# trainer::trainer. OUTPUT_DIR: where the .so is built; INSTALL_DESTINATION: where
# `cmake --install` puts it (none: not installed).
#
# The same file serves the source tree and, installed next to trainerConfig.cmake, plugins
# built out of tree against find_package(trainer).
function(trainer_add_plugin target)
  cmake_parse_arguments(TP "" "OUTPUT_DIR;INSTALL_DESTINATION" "SOURCES;LIBS" ${ARGN})
  if(NOT TP_SOURCES)
    message(FATAL_ERROR "trainer_add_plugin(${target}): no SOURCES given")
  endif()
  add_library(${target} MODULE ${TP_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "" C_VISIBILITY_PRESET hidden)
  target_compile_features(${target} PRIVATE c_std_11)
  if(TP_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${TP_OUTPUT_DIR})
  endif()
  target_link_libraries(${target} PRIVATE trainer::trainer ${TP_LIBS})
  if(TP_INSTALL_DESTINATION)
    install(TARGETS ${target} LIBRARY DESTINATION ${TP_INSTALL_DESTINATION})
  endif()
endfunction()
