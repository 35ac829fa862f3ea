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
  add_compile_options(${_san} -Wno-maybe-uninitialized)
  add_link_options(${_san})
  # Name the runtime library so tests can put it first in LD_PRELOAD, as the
  # sanitizer requires when an instrumented library is preloaded.
  if(VGPUMEM_SANITIZE STREQUAL "address")
    set(_rt libasan.so)
  else()
    set(_rt libtsan.so)
  endif()
  execute_process(COMMAND ${CMAKE_CXX_COMPILER} -print-file-name=${_rt}
                  OUTPUT_VARIABLE VGPUMEM_SANITIZER_RUNTIME OUTPUT_STRIP_TRAILING_WHITESPACE)
  get_filename_component(VGPUMEM_SANITIZER_RUNTIME "${VGPUMEM_SANITIZER_RUNTIME}" REALPATH)
  message(STATUS "vgpumem: ${VGPUMEM_SANITIZE} sanitizer, runtime ${VGPUMEM_SANITIZER_RUNTIME}")
else()
  set(VGPUMEM_SANITIZER_RUNTIME "")
endif()
