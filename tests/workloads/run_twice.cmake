# Runs the trainer twice on the simulated driver and fails unless both RESULT
# lines are identical. ARGS (optional): more options for the trainer, as one
# space-separated string; ARGS2 (optional): the second run's options instead
# (two configurations that must agree bit for bit).
if(NOT DEFINED ARGS2)
  set(ARGS2 "${ARGS}")
endif()
separate_arguments(ARGS UNIX_COMMAND "${ARGS}")
separate_arguments(ARGS2 UNIX_COMMAND "${ARGS2}")
set(ARGS1 ${ARGS})
set(ENV{LD_LIBRARY_PATH} "${SIM_DIR}:$ENV{LD_LIBRARY_PATH}")
foreach(run 1 2)
  execute_process(COMMAND ${TRAINER} --steps 3 ${ARGS${run}} OUTPUT_VARIABLE out${run} RESULT_VARIABLE rc${run})
  if(NOT rc${run} EQUAL 0)
    message(FATAL_ERROR "trainer run ${run} failed (${rc${run}}): ${out${run}}")
  endif()
  string(REGEX MATCH "RESULT [^\n]*" result${run} "${out${run}}")
endforeach()
if(NOT result1 STREQUAL result2 OR result1 STREQUAL "")
  message(FATAL_ERROR "trainer is not deterministic:\n${result1}\n${result2}")
endif()
message(STATUS "${result1}")
