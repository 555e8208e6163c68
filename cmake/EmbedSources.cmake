# specjit_embed_sources(OUTPUT <cpp> ROOT <dir> FILES <relative paths...>
#                       [NAMESPACE <ns> FUNCTION <name>])
# Generates a C++ file holding every listed file as a byte array, so the library needs no file
# paths (and no CUDA headers) at run time, and a function `ns::name()` returning them as
# jit::EmbeddedFile (jit/embedded_sources.h); by default specjit::jit::embedded_files(), the
# kernel sources. Regenerated whenever a listed file changes.
function(specjit_embed_sources)
  cmake_parse_arguments(ARG "" "OUTPUT;ROOT;NAMESPACE;FUNCTION" "FILES" ${ARGN})
  if(NOT ARG_NAMESPACE)
    set(ARG_NAMESPACE specjit::jit)
  endif()
  if(NOT ARG_FUNCTION)
    set(ARG_FUNCTION embedded_files)
  endif()
  set(inputs "")
  foreach(f IN LISTS ARG_FILES)
    # The names become C string literals and NVRTC header names: keep them plain.
    if(NOT f MATCHES "^[A-Za-z0-9_./+-]+$")
      message(FATAL_ERROR "${ARG_ROOT}/${f}: file names may only use [A-Za-z0-9_./+-]")
    endif()
    list(APPEND inputs ${ARG_ROOT}/${f})
  endforeach()
  # A ';' in a custom command splits it into two shell commands, so the list travels '|'-joined.
  list(JOIN ARG_FILES "|" files_joined)
  add_custom_command(
    OUTPUT ${ARG_OUTPUT}
    COMMAND ${CMAKE_COMMAND} -DOUTPUT=${ARG_OUTPUT} -DROOT=${ARG_ROOT} -DFILES=${files_joined}
            -DNAMESPACE=${ARG_NAMESPACE} -DFUNCTION=${ARG_FUNCTION} -P ${PROJECT_SOURCE_DIR}/cmake/embed_sources_script.cmake
    DEPENDS ${inputs} ${PROJECT_SOURCE_DIR}/cmake/embed_sources_script.cmake
    COMMENT "Embedding ${ARG_ROOT} files into ${ARG_OUTPUT}"
    VERBATIM)
endfunction()
