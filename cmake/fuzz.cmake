# sbx_fuzz(<test> <name> <corpus dir> <runs> <sources...>): a libFuzzer
# target built by clang from the sources (the tree may be built with gcc;
# libFuzzer comes with clang) and <name>.c of the calling folder, and the
# ctest test <test> that fuzzes a copy of the committed corpus for runs
# times SBX_FUZZ_SCALE executions (`make fuzz`: for SBX_FUZZ_SECONDS;
# protocol/fuzz/run_fuzz.cmake). Every part's headers are on the path and
# the libraries the parts link are linked. protocol/fuzz keeps its own
# rules (it builds the library whole).
find_program(SBX_CLANG NAMES clang-14 clang)
if(NOT SBX_CLANG)
  message(FATAL_ERROR "The fuzz targets need clang with libFuzzer (Debian: clang-14 "
    "libclang-rt-14-dev). Run scripts/install-deps.")
endif()
set(SBX_FUZZ_SCALE 1 CACHE STRING "Multiplies each fuzz test's count of executions under make test")
# Every folder of the supervisor and the agent that holds a header (both
# nest: node-supervisor/src/lib/base, guest-agent/src/fs, ...).
file(GLOB_RECURSE sbx_fuzz_own_headers ${PROJECT_SOURCE_DIR}/node-supervisor/src/*.h
  ${PROJECT_SOURCE_DIR}/guest-agent/src/*.h)
set(sbx_fuzz_parts)
foreach(h IN LISTS sbx_fuzz_own_headers)
  get_filename_component(d ${h} DIRECTORY)
  list(APPEND sbx_fuzz_parts -I${d})
endforeach()
list(REMOVE_DUPLICATES sbx_fuzz_parts)
file(GLOB sbx_fuzz_headers ${PROJECT_SOURCE_DIR}/node-supervisor/tests/*.h
  ${PROJECT_SOURCE_DIR}/protocol/include/sbx/*.h ${PROJECT_SOURCE_DIR}/common/include/sbx/*.h
  ${PROJECT_SOURCE_DIR}/mcp-host/include/mcp_host/*.h ${PROJECT_SOURCE_DIR}/guest-agent/tests/*.h
  ${PROJECT_SOURCE_DIR}/node-supervisor/fuzz/*.h)
list(APPEND sbx_fuzz_headers ${sbx_fuzz_own_headers})
function(sbx_fuzz test name corpus runs)
  set(bin ${CMAKE_CURRENT_BINARY_DIR}/${name})
  math(EXPR runs "${runs} * ${SBX_FUZZ_SCALE}")
  add_custom_command(OUTPUT ${bin}
    COMMAND ${SBX_CLANG} -g -O1 -std=gnu11 -D_GNU_SOURCE ${SBX_WARNINGS}
            -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined
            ${sbx_fuzz_parts} -I${PROJECT_SOURCE_DIR}/node-supervisor/tests
            -I${PROJECT_SOURCE_DIR}/protocol/include -I${PROJECT_SOURCE_DIR}/common/include
            -I${PROJECT_SOURCE_DIR}/mcp-host/include
            -I${PROJECT_SOURCE_DIR}/guest-agent/tests
            ${ARGN} ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c
            ${LIBEVENT_LINK_LIBRARIES} ${LIBEVENT_OPENSSL_LINK_LIBRARIES} ${JANSSON_LINK_LIBRARIES}
            ${SSL_LINK_LIBRARIES} ${CRYPTO_LINK_LIBRARIES}
            ${MSGPACK_LINK_LIBRARIES} -lwslay -o ${bin}
    DEPENDS ${ARGN} ${sbx_fuzz_headers} ${CMAKE_CURRENT_SOURCE_DIR}/${name}.c
    COMMENT "clang libFuzzer target ${name}"
    COMMAND_EXPAND_LISTS VERBATIM)
  add_custom_target(${name} ALL DEPENDS ${bin})
  add_test(NAME ${test}
    COMMAND ${CMAKE_COMMAND} -DFUZZER=${bin} -DCORPUS=${CMAKE_CURRENT_SOURCE_DIR}/${corpus}
            -DWORK=${CMAKE_CURRENT_BINARY_DIR}/${name}.run -DRUNS=${runs}
            -P ${PROJECT_SOURCE_DIR}/protocol/fuzz/run_fuzz.cmake)
  set_tests_properties(${test} PROPERTIES TIMEOUT 300)
endfunction()
