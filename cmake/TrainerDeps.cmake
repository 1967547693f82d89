# Finds the libraries the core needs and the optional ones (CUDA), reporting what it found.
find_package(Threads REQUIRED)
find_package(OpenMP REQUIRED COMPONENTS C)

# OpenBLAS: Debian installs the header under an alternative-specific directory.
find_path(OPENBLAS_INCLUDE_DIR cblas.h
          PATHS /usr/include/x86_64-linux-gnu/openblas-pthread
                /usr/include/aarch64-linux-gnu/openblas-pthread
                /usr/include/openblas /usr/include
          NO_DEFAULT_PATH)
find_library(OPENBLAS_LIBRARY NAMES openblas)
if(NOT OPENBLAS_INCLUDE_DIR OR NOT OPENBLAS_LIBRARY)
  message(FATAL_ERROR "OpenBLAS not found: install libopenblas-dev (tools/dev deps does it)")
endif()
add_library(trainer_blas INTERFACE)
target_include_directories(trainer_blas INTERFACE ${OPENBLAS_INCLUDE_DIR})
target_link_libraries(trainer_blas INTERFACE ${OPENBLAS_LIBRARY})
message(STATUS "trainer: OpenBLAS ${OPENBLAS_LIBRARY} (${OPENBLAS_INCLUDE_DIR})")

# CUDA is optional and never needed by the core (DESIGN.md decision 8).
set(TRAINER_CUDA_ENABLED OFF)
if(NOT TRAINER_CUDA STREQUAL "OFF")
  find_package(CUDAToolkit QUIET)
  if(CUDAToolkit_FOUND)
    set(TRAINER_CUDA_ENABLED ON)
    message(STATUS "trainer: CUDA toolkit ${CUDAToolkit_VERSION} found; CUDA plugins enabled")
  elseif(TRAINER_CUDA STREQUAL "ON")
    message(FATAL_ERROR "TRAINER_CUDA=ON but no CUDA toolkit was found")
  else()
    message(STATUS "trainer: no CUDA toolkit found; CUDA plugins skipped")
  endif()
endif()

# Python with PyTorch: only the test oracle and benchmark peer, never a run-time dependency.
if(EXISTS /usr/bin/python3)
  set(_trainer_py_default /usr/bin/python3)
else()
  set(_trainer_py_default python3)
endif()
set(TRAINER_PYTHON ${_trainer_py_default} CACHE FILEPATH "Python with torch for reference tests")
