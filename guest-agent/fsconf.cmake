# Path confinement for file operations (src/fs/agent_fsconf*.c): request paths
# resolved beneath an allowed root with openat2 (or the component walk where
# the kernel lacks it), and the file operations built
# on that, as libraries of their own until the file protocol ops link them:
# agent_fsconf (sanitized with SBX_SANITIZE, for tests) and agent_fsconf_nosan
# (for the static sandbox-agent; needs nothing but libc). Included from
# CMakeLists.txt.
set(AGENT_FSCONF_SOURCES
  src/fs/agent_fsconf.c
  src/fs/agent_fsconf_ops.c
  src/fs/agent_fsconf_rm.c
  src/fs/agent_fsconf_walk.c
)
find_package(Threads REQUIRED)

add_library(agent_fsconf STATIC ${AGENT_FSCONF_SOURCES})
target_include_directories(agent_fsconf PUBLIC ${CMAKE_CURRENT_SOURCE_DIR}/src/fs)
target_link_libraries(agent_fsconf PUBLIC sbx_proto)
sbx_target(agent_fsconf)

add_library(agent_fsconf_nosan STATIC ${AGENT_FSCONF_SOURCES})
target_include_directories(agent_fsconf_nosan PUBLIC
  ${CMAKE_CURRENT_SOURCE_DIR}/src/fs
  $<TARGET_PROPERTY:sbx_proto_nosan,INTERFACE_INCLUDE_DIRECTORIES>
    $<TARGET_PROPERTY:sbx_common_nosan,INTERFACE_INCLUDE_DIRECTORIES>)
target_compile_options(agent_fsconf_nosan PRIVATE ${AGENT_COLD_OPT} ${AGENT_STATIC_CFLAGS})
sbx_target(agent_fsconf_nosan NOSAN)

# The unsanitized library in a -static link that fails on any linker warning
# (NSS functions warn there), run once: it links and resolves as shipped.
add_executable(agent_fsconf_static tests/test_fsconf_static.c)
target_link_libraries(agent_fsconf_static PRIVATE agent_fsconf_nosan $<TARGET_FILE:sbx_proto_nosan> $<TARGET_FILE:sbx_common_nosan>)
add_dependencies(agent_fsconf_static sbx_proto_nosan sbx_common_nosan)
target_link_options(agent_fsconf_static PRIVATE -static -Wl,--fatal-warnings)
sbx_target(agent_fsconf_static NOSAN)
add_test(NAME guest_agent_fsconf_static COMMAND agent_fsconf_static)

# Unit, hostile-corpus and race tests. The corpus is shared with the
# supervisor's policy test; the corpus, race and mount parts need root (they
# run in their own PID and mount namespaces) and are skipped without it.
add_executable(agent_test_fsconf tests/test_fsconf.c ${PROJECT_SOURCE_DIR}/tests/corpus/corpus.c)
target_include_directories(agent_test_fsconf PRIVATE ${PROJECT_SOURCE_DIR}/tests/corpus)
target_compile_definitions(agent_test_fsconf PRIVATE
  SBX_CORPUS_FILE="${PROJECT_SOURCE_DIR}/tests/corpus/hostile_paths.txt")
target_link_libraries(agent_test_fsconf PRIVATE agent_fsconf PkgConfig::CMOCKA
                      PkgConfig::LIBEVENT PkgConfig::SECCOMP Threads::Threads)
sbx_target(agent_test_fsconf)
add_test(NAME guest_agent_fsconf COMMAND agent_test_fsconf)
set_tests_properties(guest_agent_fsconf PROPERTIES TIMEOUT 300)
# The same tests, the corpus and the race included, against the component
# walk that stands in for openat2 where the kernel lacks it (gVisor).
add_test(NAME guest_agent_fsconf_walk COMMAND agent_test_fsconf)
set_tests_properties(guest_agent_fsconf_walk PROPERTIES TIMEOUT 300
                     ENVIRONMENT "SBX_FSCONF_RESOLVER=walk")
# And under gVisor (runsc, ptrace platform), where openat2 answers ENOSYS:
# the probe must pick the walk, and every test holds there too. Without
# LeakSanitizer there (it stops the world through ptrace, which gVisor does
# not give it); the two runs above check for leaks.
add_test(NAME guest_agent_fsconf_gvisor
  COMMAND /usr/bin/python3 ${PROJECT_SOURCE_DIR}/tests/runsc_exec.py
          --env SBX_FSCONF_RESOLVER=probe --env SBX_FSCONF_PROBE_WANT=walk
          --env ASAN_OPTIONS=detect_leaks=0
          -- $<TARGET_FILE:agent_test_fsconf>)
set_tests_properties(guest_agent_fsconf_gvisor PROPERTIES TIMEOUT 600 SKIP_RETURN_CODE 77
                     LABELS gvisor)
