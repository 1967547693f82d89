# Warning and sanitizer flags applied to every target of the project.
add_compile_options(-Wall -Wextra -Wshadow -Wstrict-prototypes -Wmissing-prototypes
                    -Wno-unused-parameter -Wvla)
if(TRAINER_WERROR)
  add_compile_options(-Werror)
endif()
if(TRAINER_SANITIZE)
  add_compile_options(-fsanitize=address,undefined -fno-omit-frame-pointer
                      -fno-sanitize-recover=undefined)
  add_link_options(-fsanitize=address,undefined)
endif()
if(TRAINER_MARCH)
  set(TRAINER_MARCH_FLAG -march=${TRAINER_MARCH})
endif()
