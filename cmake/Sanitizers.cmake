# VGPUMEM_SANITIZE=address builds everything with ASan+UBSan, =thread with TSan.
# Every target (the shim, the simulated driver, test programs) gets the same
# flags so that preloading an instrumented shim into an instrumented program works.
if(VGPUMEM_SANITIZE STREQUAL "address")
  set(_san -fsanitize=address,undefined -fno-sanitize-recover=undefined -fno-omit-frame-pointer)
elseif(VGPUMEM_SANITIZE STREQUAL "thread")
  set(_san -fsanitize=thread -fno-omit-frame-pointer)
elseif(NOT VGPUMEM_SANITIZE STREQUAL "")
  message(FATAL_ERROR "VGPUMEM_SANITIZE='${VGPUMEM_SANITIZE}': accepted values are '', 'address', 'thread'")
endif()
if(_san)
  # GCC's -Wmaybe-uninitialized is unreliable under -fsanitize (it reports
  # libstdc++ internals, e.g. <regex>); the plain build keeps it as an error.
  if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
    add_compile_options(-Wno-maybe-uninitialized)
  endif()
  add_compile_options(${_san})
  add_link_options(${_san})
  # Name the runtime library so tests can put it first in LD_PRELOAD, as the
  # sanitizer requires when an instrumented library is preloaded.
  if(VGPUMEM_SANITIZE STREQUAL "address")
    set(_rt asan)
  else()
    set(_rt tsan)
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    set(_rt libclang_rt.${_rt}-${CMAKE_SYSTEM_PROCESSOR}.so)
  else()
    set(_rt lib${_rt}.so)
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${_rt}
                  OUTPUT_VARIABLE VGPUMEM_SANITIZER_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(VGPUMEM_SANITIZER_RUNTIME "${VGPUMEM_SANITIZER_RUNTIME}" REALPATH)
  if(NOT EXISTS "${VGPUMEM_SANITIZER_RUNTIME}")
    message(FATAL_ERROR "VGPUMEM_SANITIZE=${VGPUMEM_SANITIZE}: ${CMAKE_CXX_COMPILER} has no ${_rt} "
                        "(the shared sanitizer runtime the tests preload)")
  endif()
  if(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
    # Clang links the sanitizer runtime statically into executables unless
    # told otherwise; the shim is preloaded, so every program must share one
    # runtime library, as GCC's do by default. That library lives in Clang's
    # own directory, off the loader's path.
    get_filename_component(_rt_dir "${VGPUMEM_SANITIZER_RUNTIME}" DIRECTORY)
    add_link_options(-shared-libsan -Wl,-rpath,${_rt_dir})
  endif()
  message(STATUS "vgpumem: ${VGPUMEM_SANITIZE} sanitizer, runtime ${VGPUMEM_SANITIZER_RUNTIME}")
else()
  set(VGPUMEM_SANITIZER_RUNTIME "")
endif()

# vgpumem_arithmetic_unsanitized(SOURCES...): under VGPUMEM_SANITIZE=address,
# these sources -- the simulated kernels' arithmetic: loops over the
# simulated device's memory, pages the simulator maps itself, which ASan does
# not watch (not its heap) and the simulator bounds (an access outside every
# mapping is its illegal access) -- are compiled without ASan and UBSan. They
# were 90 % of an end-to-end test's time under ASan (perf: mlp_trainer's
# linear_backward and linear_forward) for checks that could find nothing; the
# shim, the simulator and the programs' host code stay instrumented.
# ThreadSanitizer keeps them: the order of the kernels' and the copies'
# accesses to the same bytes is what it checks.
function(vgpumem_arithmetic_unsanitized)
  if(VGPUMEM_SANITIZE STREQUAL "address")
    set_property(SOURCE ${ARGN} APPEND PROPERTY COMPILE_OPTIONS -fno-sanitize=address,undefined)
  endif()
endfunction()
