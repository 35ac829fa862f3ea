// libnext_second.so: the "next" definition for libnext_first.so.
extern "C" int vgpumem_probe_value() { return 2; }
