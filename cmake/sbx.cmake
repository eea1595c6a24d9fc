# Shared build settings. Sanitizers are applied per target (sbx_target) so
# the static, shipped sandbox-agent can be built without them in the same tree.
set(SBX_WARNINGS -Wall -Wextra -Werror -Wshadow -Wformat=2 -Wno-unused-parameter)
set(SBX_SAN_FLAGS -fsanitize=address,undefined -fno-omit-frame-pointer -fno-sanitize-recover=undefined)

# sbx_target(<target> [NOSAN]): warnings for every target; sanitizers when
# SBX_SANITIZE is on, unless NOSAN.
function(sbx_target tgt)
  cmake_parse_arguments(A "NOSAN" "" "" ${ARGN})
  target_compile_options(${tgt} PRIVATE ${SBX_WARNINGS} -D_GNU_SOURCE)
  if(SBX_SANITIZE AND NOT A_NOSAN)
    target_compile_options(${tgt} PRIVATE ${SBX_SAN_FLAGS})
    get_target_property(type ${tgt} TYPE)
    if(NOT type STREQUAL "STATIC_LIBRARY" AND NOT type STREQUAL "OBJECT_LIBRARY")
      target_link_options(${tgt} PRIVATE ${SBX_SAN_FLAGS})
    endif()
  endif()
endfunction()
