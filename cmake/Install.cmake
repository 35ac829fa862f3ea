# cmake --install BUILD --prefix P: the layout the installed command expects
# (cli/paths.h), relocatable as a whole:
#   P/bin/vgpumem
#   P/lib/libvgpumem.so -> libvgpumem.so.<major> -> libvgpumem.so.<version>
#   P/lib/vgpumem/libcuda.so.1, mlp_trainer   the simulated driver and the demo's
#                                             trainer, off the library path so the
#                                             simulator can never shadow a real driver
#   P/share/vgpumem/plot_timeline.py         draws the demo's picture (cli/paths.h)
#   P/share/vgpumem/plot_trace.py            draws a trace (vgpumem report --png)
#   P/share/doc/vgpumem/README.md, docs/*.md
install(TARGETS vgpumem_cli RUNTIME DESTINATION ${CMAKE_INSTALL_BINDIR})
install(TARGETS vgpumem LIBRARY DESTINATION ${CMAKE_INSTALL_LIBDIR})

if(TARGET vgpusim AND TARGET mlp_trainer)
  set(_private_dir ${CMAKE_INSTALL_LIBDIR}/vgpumem)
  # libcuda.so.1 only: a libcuda.so link serves linking, not running.
  install(TARGETS vgpusim LIBRARY DESTINATION ${_private_dir} NAMELINK_SKIP)
  install(TARGETS mlp_trainer RUNTIME DESTINATION ${_private_dir})
  # The trainer finds the simulated libcuda.so.1 beside itself.
  set_target_properties(mlp_trainer PROPERTIES INSTALL_RPATH "$ORIGIN")
endif()

install(PROGRAMS scripts/plot_timeline.py scripts/plot_trace.py DESTINATION ${CMAKE_INSTALL_DATADIR}/vgpumem)
install(FILES README.md DESTINATION ${CMAKE_INSTALL_DOCDIR})
install(DIRECTORY docs/ DESTINATION ${CMAKE_INSTALL_DOCDIR}/docs FILES_MATCHING PATTERN "*.md")
