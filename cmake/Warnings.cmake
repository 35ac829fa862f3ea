# Warnings for the project's own targets. Third-party and CUDA headers are
# included as SYSTEM so they do not count.
add_library(vgpumem_warnings INTERFACE)
target_compile_options(vgpumem_warnings INTERFACE
  -Wall -Wextra -Wpedantic -Wshadow -Wnon-virtual-dtor -Wcast-align
  -Woverloaded-virtual -Wnull-dereference -Wformat=2 -Wimplicit-fallthrough
  $<$<BOOL:${VGPUMEM_WERROR}>:-Werror>)
