# Runs the layered trainer on the simulated driver once per variant -- the
# same training issued another way, which must not change a bit: the static
# or the caching allocator, one issuing thread or a backward thread -- and
# fails unless every run's loss and weights hash are the same. It also
# checks what makes the caching allocator worth testing: a variant with
# "--allocator caching" must have placed at least one activation elsewhere
# in step 2 than in step 1 (the trainer's ALTERNATES line), and a variant
# without it none.
# TRAINER, SIM_DIR; ARGS: the options of every run, one space-separated
# string; VARIANTS: each variant's further options, variants separated by
# "|" (each non-empty: "--allocator static" names the default).
separate_arguments(common UNIX_COMMAND "${ARGS}")
string(REPLACE "|" ";" variants "${VARIANTS}")
set(ENV{LD_LIBRARY_PATH} "${SIM_DIR}:$ENV{LD_LIBRARY_PATH}")
set(first "")
foreach(variant IN LISTS variants)
  separate_arguments(extra UNIX_COMMAND "${variant}")
  execute_process(COMMAND ${TRAINER} ${common} ${extra} --report-addresses
                  OUTPUT_VARIABLE out ERROR_VARIABLE err RESULT_VARIABLE rc)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "[${variant}] the trainer failed (${rc}): ${out}${err}")
  endif()
  string(REGEX MATCH "RESULT loss=[^ ]* weights_fnv1a=[^ ]*" result "${out}")
  string(REGEX MATCH "ALTERNATES steps 1-2: ([0-9]+) of ([0-9]+) activations moved" alternates "${out}")
  set(moved "${CMAKE_MATCH_1}")
  if(result STREQUAL "" OR alternates STREQUAL "")
    message(FATAL_ERROR "[${variant}] no RESULT or no ALTERNATES line (at least two steps?): ${out}")
  endif()
  if(variant MATCHES "--allocator caching")
    if(moved EQUAL 0)
      message(FATAL_ERROR "[${variant}] ${alternates}: the caching allocator put every activation where it was")
    endif()
  elseif(NOT moved EQUAL 0)
    message(FATAL_ERROR "[${variant}] ${alternates}: without the caching allocator nothing may move")
  endif()
  if(first STREQUAL "")
    set(first "${result}")
    set(first_variant "${variant}")
  elseif(NOT result STREQUAL first)
    message(FATAL_ERROR "the variants differ:\n[${first_variant}] ${first}\n[${variant}] ${result}")
  endif()
  message(STATUS "[${variant}] ${result}; ${alternates}")
endforeach()
