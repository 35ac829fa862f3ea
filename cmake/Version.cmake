# vgpumem_version: the generated header <vgpumem_version.h> that names the
# project's version (project(VERSION ...)) for C++ code.
configure_file(${CMAKE_CURRENT_LIST_DIR}/version.h.in ${CMAKE_BINARY_DIR}/generated/vgpumem_version.h @ONLY)
add_library(vgpumem_version INTERFACE)
target_include_directories(vgpumem_version INTERFACE ${CMAKE_BINARY_DIR}/generated)
