# trainer_add_plugin(<target> SOURCES <files...> [OUTPUT_DIR <dir>] [LIBS <libs...>])
# Builds one plugin as a MODULE library: only the entry symbol is exported
# (-fvisibility=hidden; TR_PLUGIN_DEFINE marks it default), no "lib" prefix, linked to trainer.
function(trainer_add_plugin target)
  cmake_parse_arguments(TP "" "OUTPUT_DIR" "SOURCES;LIBS" ${ARGN})
  add_library(${target} MODULE ${TP_SOURCES})
  set_target_properties(${target} PROPERTIES PREFIX "" C_VISIBILITY_PRESET hidden)
  if(TP_OUTPUT_DIR)
    set_target_properties(${target} PROPERTIES LIBRARY_OUTPUT_DIRECTORY ${TP_OUTPUT_DIR})
  endif()
  target_link_libraries(${target} PRIVATE trainer ${TP_LIBS})
endfunction()
