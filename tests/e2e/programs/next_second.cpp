// libnext_second.so: the "next" definition for libnext_first.so.
extern "C" int vgpumem_probe_value() { return 2; }

// Referenced by the program so the linker keeps this library, after libnext_first.so.
extern "C" int second_marker() { return 22; }
