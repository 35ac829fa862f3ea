# cmake --install BUILD --prefix P: the layout the installed command expects
# (cli/paths.h), relocatable as a whole:
#   P/bin/vgpumem
#   P/lib/libvgpumem.so -> libvgpumem.so.<major> -> libvgpumem.so.<version>
#   P/lib/vgpumem/libcuda.so.1               the simulated driver, and beside it
#     libcublas.so.13, libcublasLt.so.13,    its cuBLAS, cuDNN and CUPTI, the demo's
#     libcudnn.so.9, libcupti.so.13,         trainer and the benchmark's (vgpumem
#     mlp_trainer, layered_trainer           bench): off the library path, so the
#                                            simulator never shadows a real driver
#   P/share/vgpumem/plot_timeline.py         draws the demo's picture (cli/paths.h)
#   P/share/vgpumem/plot_trace.py            draws a trace (vgpumem report --png)
#   P/share/doc/vgpumem/README.md, docs/     the docs with the images and recorded
#                                            runs they link to
#
# Target vgpumem_shipped builds all of it and nothing else: the install
# build of docs/install.md (-DVGPUMEM_BUILD_TESTS=OFF) builds just that, and
# scripts/demo.sh and scripts/build-wheel.sh build it in any build tree.
install(TARGETS vgpumem_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS vgpumem LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

set(_shipped_simulator vgpusim vgpusim_cublas vgpusim_cublaslt vgpusim_cudnn vgpusim_cupti)
set(_shipped_workloads mlp_trainer layered_trainer)
set(_private_dir ${CMAKE_INSTALL_LIBDIR}/vgpumem)
# The sonames only (libcuda.so.1, ...): a libcuda.so link serves linking, not running.
install(TARGETS ${_shipped_simulator} LIBRARY DESTINATION ${_private_dir} NAMELINK_SKIP)
install(TARGETS ${_shipped_workloads} RUNTIME DESTINATION ${_private_dir})
# Each finds the simulated libraries beside itself.
set_target_properties(${_shipped_simulator} ${_shipped_workloads} PROPERTIES INSTALL_RPATH "$ORIGIN")

add_custom_target(vgpumem_shipped)
add_dependencies(vgpumem_shipped vgpumem vgpumem_cli ${_shipped_simulator} ${_shipped_workloads})

install(PROGRAMS scripts/plot_timeline.py scripts/plot_trace.py DESTINATION ${CMAKE_INSTALL_DATADIR}/vgpumem)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
# Every file under docs/: the pages and what they show and link to (images/,
# the recorded runs in gpu-runs/ and sim-runs/); gpu-facts.md links the GPU
# scripts' README from the source tree (../scripts/gpu/README.md).
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs)
install(FILES scripts/gpu/README.md DESTINATION ${CMAKE_INSTALL_DOCDIR}/scripts/gpu)
