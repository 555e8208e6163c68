# specjit_embed_sources(OUTPUT <cpp> ROOT <dir> FILES <relative paths...>)
# Generates a C++ file holding every listed kernel source as a byte array, so the library needs
# no file paths and no CUDA headers at run time. Regenerated whenever a source changes.
function(specjit_embed_sources)
  cmake_parse_arguments(ARG "" "OUTPUT;ROOT" "FILES" ${ARGN})
  set(inputs "")
  foreach(f IN LISTS ARG_FILES)
    list(APPEND inputs ${ARG_ROOT}/${f})
  endforeach()
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DROOT=${ARG_ROOT} "-DFILES=${ARG_FILES}"
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_sources_script.cmake
    DEPENDS ${inputs} ${PROJECT_SOURCE_DIR}/cmake/embed_sources_script.cmake
    COMMENT "Embedding kernel sources into ${ARG_OUTPUT}")
endfunction()
