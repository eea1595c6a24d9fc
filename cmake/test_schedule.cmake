# The order ctest starts tests in under `make test` (-j2 on 2 cores).
#
# The integration tests that start a supervisor with a pool hold the lock
# sbx_supervisor (tests/CMakeLists.txt): they run one after another, and
# together they are the longest chain of the run (some 800 s of 2,100 in the
# clean-clone CI of 2026-12-02). A clean clone has no cost data, so ctest
# starts tests in the order they were added; the chain, added last, began
# after 550 s and ran on one slot while the other stood idle. Here the chain
# goes first, so one slot runs it from the start and the other takes the rest
# beside it; the lint parts next (the longest of the rest), then the other
# integration tests, then the unit tests (a second or less each) that fill
# the end. Before all of them the RUN_SERIAL tests, one at a time with
# nothing beside them: ctest starts one only while no other test runs, so
# left in the order it would wait for whatever long test ran beside it, or
# for the end of the run. A test with its own COST keeps it.

set(SBX_COST_ALONE 2000)  # RUN_SERIAL
set(SBX_COST_CHAIN 1000)  # holds sbx_supervisor
set(SBX_COST_LINT 500)    # scripts/lint's parts
set(SBX_COST_LONG 100)    # tests/: each tens of seconds

# sbx_test_schedule(): give the tests of the calling directory their COST
# once all of them are added (deferred to the directory's end, so a test
# added below the call is counted too).
function(sbx_test_schedule)
  cmake_language(DEFER DIRECTORY ${CMAKE_CURRENT_SOURCE_DIR} CALL _sbx_test_costs)
endfunction()

function(_sbx_test_costs)
  get_property(tests DIRECTORY PROPERTY TESTS)
  foreach(t IN LISTS tests)
    get_test_property(${t} COST cost)
    if(cost)
      continue()
    endif()
    get_test_property(${t} RESOURCE_LOCK locks)
    get_test_property(${t} RUN_SERIAL alone)
    if(alone)
      set(cost ${SBX_COST_ALONE})
    elseif(locks MATCHES "(^|;)sbx_supervisor(;|$)")
      set(cost ${SBX_COST_CHAIN})
    elseif(t MATCHES "^lint_")
      set(cost ${SBX_COST_LINT})
    elseif(CMAKE_CURRENT_SOURCE_DIR STREQUAL "${PROJECT_SOURCE_DIR}/tests")
      set(cost ${SBX_COST_LONG})
    else()
      continue()
    endif()
    set_tests_properties(${t} PROPERTIES COST ${cost})
  endforeach()
endfunction()
