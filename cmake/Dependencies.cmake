# CUDA: headers only. Nothing here links libcuda or libcudart; the shim loads the
# real driver lazily at run time.
find_path(CUDA_INCLUDE_DIR cuda.h HINTS ${CUDA_HOME}/include REQUIRED)
add_library(cuda_headers INTERFACE)
target_include_directories(cuda_headers SYSTEM INTERFACE ${CUDA_INCLUDE_DIR})

find_package(Threads REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(fmt REQUIRED)
find_package(spdlog REQUIRED)

# The shim is preloaded into other people's processes, on machines that may not
# have spdlog or fmt installed: libvgpumem.so carries both, hidden. spdlog is
# used header-only, by common/log.cpp alone; fmt as a compiled library whose
# compiled part is common/fmt_build.cpp (header-only fmt, or spdlog in any
# header, costs seconds of compile time per file).
add_library(vgpumem_logging_deps INTERFACE)
target_compile_definitions(vgpumem_logging_deps INTERFACE SPDLOG_HEADER_ONLY SPDLOG_FMT_EXTERNAL)
target_include_directories(vgpumem_logging_deps SYSTEM INTERFACE
  $<TARGET_PROPERTY:spdlog::spdlog_header_only,INTERFACE_INCLUDE_DIRECTORIES>
  $<TARGET_PROPERTY:fmt::fmt-header-only,INTERFACE_INCLUDE_DIRECTORIES>)
