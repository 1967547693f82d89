# Warning and sanitizer flags applied to every target of the project.
add_compile_options(-Wall -Wextra -Wshadow -Wno-unused-parameter -Wvla
                    $<$<COMPILE_LANGUAGE:C>:-Wstrict-prototypes> $<$<COMPILE_LANGUAGE:C>:-Wmissing-prototypes>)
if(TRAINER_WERROR)
  add_compile_options(-Werror)
endif()
if(TRAINER_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
# libFuzzer (docs/fuzzing.md): everything is built with coverage instrumentation and the
# sanitizers; only the fuzz targets link libFuzzer itself (-fsanitize=fuzzer, tests/fuzz).
# UBSan aborts on its first report so that libFuzzer keeps the input.
if(TRAINER_FUZZ)
  if(NOT CMAKE_C_COMPILER_ID MATCHES "Clang")
    message(FATAL_ERROR "TRAINER_FUZZ needs clang's libFuzzer, not ${CMAKE_C_COMPILER_ID}: configure with "
                        "-DCMAKE_C_COMPILER=clang (tools/fuzz does)")
  endif()
  # The instrumentation keeps clang from vectorising `omp simd` loops, which it reports as
  # -Wpass-failed; that is the build mode, not the code.
  add_compile_options(-fsanitize=fuzzer-no-link,address,undefined -fno-sanitize-recover=all
                      -fno-omit-frame-pointer -g -Wno-pass-failed)
  add_link_options(-fsanitize=address,undefined)
endif()
if(TRAINER_MARCH)
  set(TRAINER_MARCH_FLAG -march=${TRAINER_MARCH})
endif()
