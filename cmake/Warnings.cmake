# Warnings for the project's own targets. Third-party and CUDA headers are
# included as SYSTEM so they do not count.
add_library(vgpumem_warnings INTERFACE)
target_compile_options(vgpumem_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wnull-dereference -Wformat=2 -Wimplicit-fallthrough
  # Clang checks which lock guards what (common/thread_safety.h): the
  # pager's state is GUARDED_BY its lock, and what needs it REQUIRES it.
  $<$<CXX_COMPILER_ID:Clang>:-Wthread-safety>
  $<$<BOOL:${VGPUMEM_WERROR}>:-Werror>)
