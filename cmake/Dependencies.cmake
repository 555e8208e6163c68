# Every external dependency is found here, once. Debian packages: llvm-dev, libxxhash-dev,
# libfmt-dev, doctest-dev, libsodium-dev, libhiredis-dev, pkg-config; the CUDA toolkit for
# NVRTC and the driver API header (never libcuda).
find_package(CUDAToolkit REQUIRED)
# NVRTC alone: CMake's CUDA::nvrtc target also drags in the libcuda stub, and specjit must have
# no link dependency on the driver (it is dlopen'ed at first use).
find_library(SPECJIT_NVRTC_LIBRARY nvrtc HINTS ${CUDAToolkit_LIBRARY_DIR} REQUIRED)
add_library(specjit_nvrtc INTERFACE)
target_include_directories(specjit_nvrtc SYSTEM INTERFACE ${CUDAToolkit_INCLUDE_DIRS})
target_link_libraries(specjit_nvrtc INTERFACE ${SPECJIT_NVRTC_LIBRARY})
find_package(fmt REQUIRED)
find_package(doctest REQUIRED)

find_path(XXHASH_INCLUDE_DIR xxhash.h REQUIRED)
find_library(XXHASH_LIBRARY xxhash REQUIRED)
add_library(specjit_xxhash INTERFACE)
target_include_directories(specjit_xxhash INTERFACE ${XXHASH_INCLUDE_DIR})
target_link_libraries(specjit_xxhash INTERFACE ${XXHASH_LIBRARY})

# libsodium (libsodium-dev): the keyed MAC of entries crossing a trust boundary (cache/entry_auth).
find_path(SODIUM_INCLUDE_DIR sodium.h REQUIRED)
find_library(SODIUM_LIBRARY sodium REQUIRED)
add_library(specjit_sodium INTERFACE)
target_include_directories(specjit_sodium INTERFACE ${SODIUM_INCLUDE_DIR})
target_link_libraries(specjit_sodium INTERFACE ${SODIUM_LIBRARY})

# LLVM Support is linked statically: libLLVM.so is far too large to carry to a GPU host.
find_program(LLVM_CONFIG NAMES llvm-config llvm-config-14 llvm-config-15 llvm-config-16
             PATHS /usr/lib/llvm-14/bin /usr/lib/llvm-15/bin REQUIRED)
execute_process(COMMAND ${LLVM_CONFIG} --includedir OUTPUT_VARIABLE LLVM_INCLUDE_DIR
                OUTPUT_STRIP_TRAILING_WHITESPACE)
execute_process(COMMAND ${LLVM_CONFIG} --link-static --libfiles support
                OUTPUT_VARIABLE LLVM_SUPPORT_LIBS OUTPUT_STRIP_TRAILING_WHITESPACE)
separate_arguments(LLVM_SUPPORT_LIBS)
# llvm-config also names z3 and libxml2, which only parts of Support that specjit never calls use.
set(LLVM_SYSTEM_LIBS rt dl m z tinfo pthread)
add_library(specjit_llvm INTERFACE)
target_include_directories(specjit_llvm SYSTEM INTERFACE ${LLVM_INCLUDE_DIR})
target_link_libraries(specjit_llvm INTERFACE ${LLVM_SUPPORT_LIBS} ${LLVM_SYSTEM_LIBS})
target_compile_definitions(specjit_llvm INTERFACE _GNU_SOURCE __STDC_CONSTANT_MACROS
                           __STDC_FORMAT_MACROS __STDC_LIMIT_MACROS)

# The fleet tier's Redis client (Debian libhiredis-dev), linked into specjit_cache only.
find_package(PkgConfig REQUIRED)
pkg_check_modules(HIREDIS REQUIRED IMPORTED_TARGET hiredis)
add_library(specjit_hiredis INTERFACE)
target_link_libraries(specjit_hiredis INTERFACE PkgConfig::HIREDIS)
