# The jail a command's child enters before exec (src/jail/agent_jail*.c) and its
# seccomp profiles (src/jail/agent_seccomp*.c, seccomp/default.json), as libraries
# of their own beside agent_core: agent_jail (sanitized with SBX_SANITIZE,
# for tests) and agent_jail_nosan (for the static sandbox-agent, which then
# links AGENT_SECCOMP_A and AGENT_JANSSON_A). Included from CMakeLists.txt.
set(AGENT_JAIL_BUILTIN_C ${CMAKE_CURRENT_BINARY_DIR}/agent_seccomp_builtin.c)
add_custom_command(OUTPUT ${AGENT_JAIL_BUILTIN_C}
  COMMAND ${CMAKE_COMMAND} -DIN=${CMAKE_CURRENT_SOURCE_DIR}/seccomp/default.json
          -DOUT=${AGENT_JAIL_BUILTIN_C} -DNAME=agent_seccomp_builtin_json -DLEN=agent_seccomp_builtin_len
          -P ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
  DEPENDS seccomp/default.json ${PROJECT_SOURCE_DIR}/cmake/embed.cmake
  COMMENT "Embedding the default seccomp profile")
add_custom_target(agent_jail_builtin DEPENDS ${AGENT_JAIL_BUILTIN_C})

set(AGENT_JAIL_SOURCES
  src/jail/agent_jail.c
  src/jail/agent_jail_user.c
  src/jail/agent_seccomp.c
  src/jail/agent_seccomp_profile.c
  ${AGENT_JAIL_BUILTIN_C}
)

add_library(agent_jail STATIC ${AGENT_JAIL_SOURCES})
target_include_directories(agent_jail PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src/jail)
target_link_libraries(agent_jail PUBLIC sbx_proto PkgConfig::SECCOMP PkgConfig::JANSSON)
add_dependencies(agent_jail agent_jail_builtin)
sbx_target(agent_jail)

# Static archives for the -static link of sandbox-agent.
find_library(AGENT_SECCOMP_A NAMES libseccomp.a REQUIRED)
find_library(AGENT_JANSSON_A NAMES libjansson.a REQUIRED)
add_library(agent_jail_nosan STATIC ${AGENT_JAIL_SOURCES})
target_include_directories(agent_jail_nosan PUBLIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/jail
  $<TARGET_PROPERTY:sbx_proto_nosan,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:sbx_common_nosan,INTERFACE_INCLUDE_DIRECTORIES>
  ${SECCOMP_INCLUDE_DIRS} ${JANSSON_INCLUDE_DIRS})
target_compile_options(agent_jail_nosan PRIVATE ${AGENT_COLD_OPT} ${AGENT_STATIC_CFLAGS})
add_dependencies(agent_jail_nosan agent_jail_builtin)
sbx_target(agent_jail_nosan NOSAN)

# Tests (root): user lookup, profile parsing, and a probe program run in the
# jail as uid 1000; real programs (sh, python3, node, gcc, git, pip) in it.
# The probe is built without sanitizers: it runs under the filter, which
# refuses the ptrace LeakSanitizer needs.
add_executable(agent_jail_probe tests/test_jail_probe.c)
sbx_target(agent_jail_probe NOSAN)
foreach(t test_jail test_jail_programs)
  add_executable(agent_${t} tests/${t}.c tests/test_jail_util.c)
  target_link_libraries(agent_${t} PRIVATE agent_jail PkgConfig::CMOCKA)
  add_dependencies(agent_${t} agent_jail_probe)
  sbx_target(agent_${t})
  add_test(NAME guest_agent_${t} COMMAND agent_${t})
  set_tests_properties(guest_agent_${t} PROPERTIES TIMEOUT 300
                       ENVIRONMENT "JAIL_PROBE=$<TARGET_FILE:agent_jail_probe>")
endforeach()
