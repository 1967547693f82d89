# Finds the libraries the core needs and the optional ones (CUDA), reporting what it found.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS C)

# OpenBLAS. The OpenMP build is preferred: it shares the core's OpenMP thread pool, so BLAS
# threads and kernel threads never spin against each other, and a GEMM called inside a
# parallel region runs on its calling thread. Debian keeps each build in its own directory;
# the library is linked by full path with an RPATH so that the system-wide alternative does
# not swap it at run time.
set(_blas_arch_dirs x86_64-linux-gnu aarch64-linux-gnu)
set(OPENBLAS_VARIANT "")
foreach(_variant openblas-openmp openblas-pthread)
  foreach(_arch ${_blas_arch_dirs})
    if(NOT OPENBLAS_VARIANT AND EXISTS /usr/lib/${_arch}/${_variant}/libopenblas.so
       AND EXISTS /usr/include/${_arch}/${_variant}/cblas.h)
      set(OPENBLAS_VARIANT ${_variant})
      set(OPENBLAS_LIBRARY /usr/lib/${_arch}/${_variant}/libopenblas.so)
      set(OPENBLAS_INCLUDE_DIR /usr/include/${_arch}/${_variant})
    endif()
  endforeach()
endforeach()
if(NOT OPENBLAS_VARIANT)
  find_path(OPENBLAS_INCLUDE_DIR cblas.h PATHS /usr/include/openblas /usr/include)
  find_library(OPENBLAS_LIBRARY NAMES openblas)
  set(OPENBLAS_VARIANT "system")
endif()
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS not found: install libopenblas-openmp-dev (tools/dev deps does it)")
endif()
set(CMAKE_INSTALL_RPATH_USE_LINK_PATH ON)
add_library(trainer_blas INTERFACE)
target_include_directories(trainer_blas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(trainer_blas INTERFACE ${OPENBLAS_LIBRARY})
message(STATUS "trainer: OpenBLAS (${OPENBLAS_VARIANT}) ${OPENBLAS_LIBRARY}")

# CUDA is optional and never needed by the core (docs/design.md "No CUDA needed").
set(TRAINER_CUDA_ENABLED OFF)
if(NOT TRAINER_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(TRAINER_CUDA_ENABLED ON)
    message(STATUS "trainer: CUDA toolkit ${CUDAToolkit_VERSION} found; CUDA parts enabled")
  elseif(TRAINER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TRAINER_CUDA=ON but no CUDA toolkit was found")
  else()
    message(STATUS "trainer: no CUDA toolkit found; CUDA kernels skipped (the cuda device plugin's discovery needs none)")
  endif()
endif()

# Python with PyTorch: only the test oracle and benchmark peer, never a run-time dependency.
if(EXISTS /usr/bin/python3)
  set(_trainer_py_default /usr/bin/python3)
else()
  set(_trainer_py_default python3)
endif()
set(TRAINER_PYTHON ${_trainer_py_default} CACHE FILEPATH "Python with torch for reference tests")

# libyaml: the config loader.
find_path(YAML_INCLUDE_DIR yaml.h)
find_library(YAML_LIBRARY NAMES yaml)
if(NOT YAML_INCLUDE_DIR OR NOT YAML_LIBRARY)
  message(FATAL_ERROR "libyaml not found: install libyaml-dev (tools/dev deps does it)")
endif()
add_library(trainer_yaml INTERFACE)
target_include_directories(trainer_yaml INTERFACE ${YAML_INCLUDE_DIR})
target_link_libraries(trainer_yaml INTERFACE ${YAML_LIBRARY})

# jansson: JSON for trainer state and safetensors headers.
find_path(JANSSON_INCLUDE_DIR jansson.h)
find_library(JANSSON_LIBRARY NAMES jansson)
if(NOT JANSSON_INCLUDE_DIR OR NOT JANSSON_LIBRARY)
  message(FATAL_ERROR "jansson not found: install libjansson-dev (tools/dev deps does it)")
endif()
add_library(trainer_json INTERFACE)
target_include_directories(trainer_json INTERFACE ${JANSSON_INCLUDE_DIR})
target_link_libraries(trainer_json INTERFACE ${JANSSON_LIBRARY})

# utf8proc: Unicode categories, normalization forms and case for the tokenizers
# (core/src/tokenizer). Required: libtrainer reads Hugging Face tokenizer.json files.
find_package(PkgConfig QUIET)
if(PkgConfig_FOUND)
  pkg_check_modules(UTF8PROC QUIET libutf8proc)
endif()
find_path(UTF8PROC_INCLUDE_DIR utf8proc.h HINTS ${UTF8PROC_INCLUDE_DIRS})
find_library(UTF8PROC_LIBRARY NAMES utf8proc HINTS ${UTF8PROC_LIBRARY_DIRS})
if(NOT UTF8PROC_INCLUDE_DIR OR NOT UTF8PROC_LIBRARY)
  message(FATAL_ERROR "utf8proc not found: install libutf8proc-dev (tools/dev deps does it); "
                      "libtrainer's tokenizers take their Unicode tables from it")
endif()
message(STATUS "utf8proc: ${UTF8PROC_LIBRARY}")
add_library(trainer_utf8proc INTERFACE)
target_include_directories(trainer_utf8proc INTERFACE ${UTF8PROC_INCLUDE_DIR})
target_link_libraries(trainer_utf8proc INTERFACE ${UTF8PROC_LIBRARY})

# PCRE2 (its 32-bit code unit library, which matches code point arrays): the regular
# expressions of tokenizer.json (Split, Replace, ByteLevel's GPT-2 pattern).
if(PkgConfig_FOUND)
  pkg_check_modules(PCRE2 QUIET libpcre2-32)
endif()
find_path(PCRE2_INCLUDE_DIR pcre2.h HINTS ${PCRE2_INCLUDE_DIRS})
find_library(PCRE2_LIBRARY NAMES pcre2-32 HINTS ${PCRE2_LIBRARY_DIRS})
if(NOT PCRE2_INCLUDE_DIR OR NOT PCRE2_LIBRARY)
  message(FATAL_ERROR "pcre2 not found: install libpcre2-dev (tools/dev deps does it); "
                      "libtrainer's tokenizers run tokenizer.json's regular expressions with it")
endif()
message(STATUS "pcre2: ${PCRE2_LIBRARY}")
add_library(trainer_pcre2 INTERFACE)
target_include_directories(trainer_pcre2 INTERFACE ${PCRE2_INCLUDE_DIR})
target_link_libraries(trainer_pcre2 INTERFACE ${PCRE2_LIBRARY})
target_compile_definitions(trainer_pcre2 INTERFACE PCRE2_CODE_UNIT_WIDTH=32)

# protobuf-c: the TensorBoard logger's Event messages (core/src/run/tensorboard.proto, compiled
# by protoc-c at build time; core/src/run/logger_tensorboard.c).
if(PkgConfig_FOUND)
  pkg_check_modules(PROTOBUFC QUIET libprotobuf-c)
endif()
find_path(PROTOBUFC_INCLUDE_DIR protobuf-c/protobuf-c.h HINTS ${PROTOBUFC_INCLUDE_DIRS})
find_library(PROTOBUFC_LIBRARY NAMES protobuf-c HINTS ${PROTOBUFC_LIBRARY_DIRS})
find_program(PROTOC_C_EXECUTABLE NAMES protoc-c)
if(NOT PROTOBUFC_INCLUDE_DIR OR NOT PROTOBUFC_LIBRARY OR NOT PROTOC_C_EXECUTABLE)
  message(FATAL_ERROR "protobuf-c not found: install libprotobuf-c-dev and protobuf-c-compiler (tools/dev deps "
                      "does it); libtrainer's TensorBoard logger encodes its event files with it")
endif()
message(STATUS "protobuf-c: ${PROTOBUFC_LIBRARY} (${PROTOC_C_EXECUTABLE})")
add_library(trainer_protobufc INTERFACE)
target_include_directories(trainer_protobufc INTERFACE ${PROTOBUFC_INCLUDE_DIR})
target_link_libraries(trainer_protobufc INTERFACE ${PROTOBUFC_LIBRARY})

# librsvg + cairo (optional): `trainer plot --output FILE.png` rasterises its SVG with them, in
# the CLI only (libtrainer writes SVG alone). Without them PNG is refused, saying why.
set(TRAINER_PNG_ENABLED OFF)
if(NOT TRAINER_PNG STREQUAL "OFF")
  if(PkgConfig_FOUND)
    pkg_check_modules(RSVG QUIET librsvg-2.0>=2.52 cairo)
  endif()
  if(RSVG_FOUND)
    set(TRAINER_PNG_ENABLED ON)
    add_library(trainer_rsvg INTERFACE)
    target_include_directories(trainer_rsvg SYSTEM INTERFACE ${RSVG_INCLUDE_DIRS})
    target_link_libraries(trainer_rsvg INTERFACE ${RSVG_LINK_LIBRARIES})
    target_compile_definitions(trainer_rsvg INTERFACE TRAINER_HAVE_RSVG)
    message(STATUS "trainer: librsvg ${RSVG_librsvg-2.0_VERSION} found; trainer plot writes PNG too")
  elseif(TRAINER_PNG STREQUAL "ON")
    message(FATAL_ERROR "TRAINER_PNG=ON but librsvg-2.0 (>= 2.52) and cairo were not found: install librsvg2-dev")
  else()
    message(STATUS "trainer: no librsvg2-dev found; trainer plot writes SVG only (PNG refused)")
  endif()
endif()

# zlib: gzip'ed data files (tr_file_read).
find_package(ZLIB REQUIRED)
