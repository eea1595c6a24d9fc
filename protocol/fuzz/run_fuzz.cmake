# cmake -DFUZZER=bin -DCORPUS=dir -DWORK=dir -DRUNS=n -P run_fuzz.cmake
# Fuzz a scratch copy of the committed corpus (libFuzzer adds to its corpus
# directory); keep crash reproducers in WORK/artifacts when it fails. WORK
# is the fuzzer's working folder, for what a target makes on disk.
# Every input of the corpus first, then RUNS executions in all: a fixed
# amount of work, which `make test` can afford whatever the machine's load.
# With SBX_FUZZ_SECONDS in the environment (`make fuzz`), fuzz for that long
# instead.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/artifacts)
file(COPY ${CORPUS}/ DESTINATION ${WORK}/corpus)
if(DEFINED ENV{SBX_FUZZ_SECONDS})
  set(budget -max_total_time=$ENV{SBX_FUZZ_SECONDS})
else()
  set(budget -runs=${RUNS})
endif()
execute_process(
  COMMAND ${FUZZER} ${budget} -timeout=10 -rss_limit_mb=2048
          -print_final_stats=1 -artifact_prefix=${WORK}/artifacts/ ${WORK}/corpus
  WORKING_DIRECTORY ${WORK}
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); reproducers in ${WORK}/artifacts")
endif()
file(REMOVE_RECURSE ${WORK})
