# Include boundaries. Every layer is one folder and one target, and its headers are reachable
# only from the targets that link it: the include path never holds the project root, but per
# folder ${PROJECT_BINARY_DIR}/include/<folder>, a directory whose one entry <folder> links to
# the source folder, so that `#include "<folder>/file.h"` keeps its spelling. A target puts its
# own folder's directory on its include path (PUBLIC: what links it inherits it); a folder whose
# target is not linked is on no include path, and the compiler refuses the include.
# (Bazel's include_prefix builds the same kind of virtual include tree.)

# specjit_folder_include_dir(<folder> <out-var>): the include directory that exposes <folder>.
function(specjit_folder_include_dir folder out)
  set(root ${PROJECT_BINARY_DIR}/include/${folder})
  file(MAKE_DIRECTORY ${root})
  file(CREATE_LINK ${PROJECT_SOURCE_DIR}/${folder} ${root}/${folder} SYMBOLIC RESULT result)
  if(NOT result EQUAL 0)
    message(FATAL_ERROR "cannot link ${root}/${folder} to ${PROJECT_SOURCE_DIR}/${folder}: ${result}")
  endif()
  set(${out} ${root} PARENT_SCOPE)
endfunction()

# specjit_folder_headers(<target> <PUBLIC|PRIVATE> <folder>...): <target> may include those
# folders' headers (PUBLIC: and so may every target that links it).
function(specjit_folder_headers target scope)
  foreach(folder IN LISTS ARGN)
    specjit_folder_include_dir(${folder} dir)
    target_include_directories(${target} ${scope} ${dir})
  endforeach()
endfunction()
