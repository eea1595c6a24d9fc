# cmake -DFUZZER=bin -DCORPUS=dir -DWORK=dir -DSECONDS=n -P run_fuzz.cmake
# Fuzz a scratch copy of the committed corpus (libFuzzer adds to its corpus
# directory); keep crash reproducers in WORK/artifacts when it fails.
file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK}/artifacts)
file(COPY ${CORPUS}/ DESTINATION ${WORK}/corpus)
execute_process(
  COMMAND ${FUZZER} -max_total_time=${SECONDS} -timeout=10 -rss_limit_mb=2048
          -print_final_stats=1 -artifact_prefix=${WORK}/artifacts/ ${WORK}/corpus
  RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "${FUZZER} failed (${rc}); reproducers in ${WORK}/artifacts")
endif()
file(REMOVE_RECURSE ${WORK})
