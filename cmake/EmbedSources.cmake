# specjit_embed_sources(OUTPUT <cpp> ROOT <dir> FILES <relative paths...>)
# Generates a C++ file holding every listed kernel source as a byte array, so the library needs
# no file paths and no CUDA headers at run time. Regenerated whenever a source changes.
function(specjit_embed_sources)
  cmake_parse_arguments(ARG "" "OUTPUT;ROOT" "FILES" ${ARGN})
  set(inputs "")
  foreach(f IN LISTS ARG_FILES)
    # The names become C string literals and NVRTC header names: keep them plain.
    if(NOT f MATCHES "^[A-Za-z0-9_./+-]+$")
      message(FATAL_ERROR "kernels_src/${f}: file names may only use [A-Za-z0-9_./+-]")
    endif()
    list(APPEND inputs ${ARG_ROOT}/${f})
  endforeach()
  # A ';' in a custom command splits it into two shell commands, so the list travels '|'-joined.
  list(JOIN ARG_FILES "|" files_joined)
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DROOT=${ARG_ROOT} -DFILES=${files_joined}
            -P ${PROJECT_SOURCE_DIR}/cmake/embed_sources_script.cmake
    DEPENDS ${inputs} ${PROJECT_SOURCE_DIR}/cmake/embed_sources_script.cmake
    COMMENT "Embedding kernel sources into ${ARG_OUTPUT}"
    VERBATIM)
endfunction()
