// probe_lookup: research/cuda-facts.md §8.2 and §8.4.
//   resolver          dlopen("libcuda.so.1"); for names x versions x flags: the result of
//                     cuGetProcAddress_v2, symbolStatus, and which exported symbol the
//                     returned address equals (dlsym of each _v2/_v3/_ptsz/_ptds variant,
//                     plus dladdr); the "" probe (before and after cuInit); version 99000;
//                     the legacy 4-argument cuGetProcAddress.
//   params_eager/lazy cuFuncGetParamInfo on a CUfunction (cuModuleLoadData), on a CUkernel
//                     (cuLibraryLoadData) cast to CUfunction, cuKernelGetParamInfo, on
//                     cuKernelGetFunction's CUfunction; cuFuncIsLoaded before/after; launching
//                     a CUkernel cast to CUfunction; with CUDA_MODULE_LOADING=EAGER and LAZY.
#include "common.h"

typedef CUresult (*GPA2)(const char*, void**, int, cuuint64_t, CUdriverProcAddressQueryResult*);
typedef CUresult (*GPA1)(const char*, void**, int, cuuint64_t);

static const char* kNames[] = {"cuMemAlloc", "cuLaunchKernel", "cuLaunchKernelEx", "cuMemcpyAsync", "cuMemcpyHtoD", "cuStreamIsCapturing",
                               "cuGetProcAddress", "cuCtxSynchronize", "cuMemAllocAsync", "cuMemCreate", "cuMemFree", "cuGraphLaunch",
                               "cuStreamBeginCapture", "cuMemGetInfo", "cuModuleLoadData", "cuGetExportTable"};
static const int kVersions[] = {2000, 3020, 4000, 7000, 11030, 11060, 12000, 12040, 13000};
static const char* kSuffixes[] = {"", "_v2", "_v3", "_v4", "_ptsz", "_ptds", "_v2_ptsz", "_v2_ptds", "_v3_ptsz", "_v3_ptds", "_v4_ptsz"};

static void resolver() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
  if (!lib) { emit("dlopen_error", q(dlerror())); return; }
  Dl_info li; if (dladdr(dlsym(lib, "cuInit"), &li)) emit("libcuda_path", q(li.dli_fname ? li.dli_fname : ""));
  GPA2 gpa2 = (GPA2)dlsym(lib, "cuGetProcAddress_v2");
  GPA1 gpa1 = (GPA1)dlsym(lib, "cuGetProcAddress");
  emit("have_cuGetProcAddress_v2", gpa2 ? "true" : "false"); emit("have_cuGetProcAddress", gpa1 ? "true" : "false");
  if (!gpa2) return;
  auto status_s = [](CUdriverProcAddressQueryResult s) { return s == CU_GET_PROC_ADDRESS_SUCCESS ? "SUCCESS" : s == CU_GET_PROC_ADDRESS_SYMBOL_NOT_FOUND ? "SYMBOL_NOT_FOUND" : s == CU_GET_PROC_ADDRESS_VERSION_NOT_SUFFICIENT ? "VERSION_NOT_SUFFICIENT" : "?"; };
  // which exported variants exist, and an address -> names table
  std::vector<std::pair<void*, std::string>> table; std::string exported = "{";
  for (const char* n : kNames) {
    std::string row;
    for (const char* sfx : kSuffixes) { std::string full = std::string(n) + sfx; void* a = dlsym(lib, full.c_str());
      if (a) { table.push_back({a, full}); row += (row.empty() ? "" : ",") + q(full); } }
    exported += (exported.size() > 1 ? "," : "") + q(n) + ":[" + row + "]";
  }
  emit("exported_variants", exported + "}");
  auto match = [&](void* p) {
    if (!p) return std::string("null");
    if (p == (void*)0x1) return std::string("untouched");
    std::string m; for (auto& t : table) if (t.first == p) m += (m.empty() ? "" : "|") + t.second;
    if (m.empty()) { Dl_info di; m = dladdr(p, &di) && di.dli_sname ? std::string("dladdr:") + di.dli_sname : "unknown"; }
    return m;
  };
  auto one = [&](const char* name, int ver, int flags) {
    void* p = (void*)0x1; CUdriverProcAddressQueryResult st = (CUdriverProcAddressQueryResult)-1;
    CUresult r = gpa2(name, &p, ver, (cuuint64_t)flags, &st);
    return fmt("[%s,%d,%d,%s,\"%s\",%s]", q(name).c_str(), ver, flags, rj(r).c_str(), (int)st == -1 ? "unset" : status_s(st), q(match(p)).c_str());
  };
  emit("row_format", q("[name, version, flags, result, symbolStatus, matching exported symbol(s) | null (pfn NULL) | dladdr:NAME | unknown]"));
  // before cuInit
  emit("before_cuInit", "[" + one("", 0, 0) + "," + one("cuMemAlloc", 3020, 0) + "," + one("cuInit", 2000, 0) + "," + one("cuGetProcAddress", 12000, 0) + "]");
  emit_r("cuInit", cuInit(0));
  int drv = 0; cuDriverGetVersion(&drv); emit("driver_version", fmt("%d", drv));
  std::string m = "[";
  for (const char* n : kNames) for (int v : kVersions) for (int f = 0; f < 3; ++f) m += (m.size() > 1 ? ",\n" : "") + one(n, v, f);
  emit("matrix", m + "]");
  emit("special", "[" + one("", 0, 0) + "," + one("", 13000, 0) + "," + one("cuMemAlloc", 99000, 0) + "," + one("cuMemAlloc", drv, 0) + "," +
                      one("cuMemAlloc", drv + 10, 0) + "," + one("cuNoSuchFunction", 13000, 0) + "," + one("cuMemAlloc_v2", 13000, 0) + "," +
                      one("cuLaunchKernel_ptsz", 13000, 0) + "," + one("cuMemAlloc", 13000, 4) + "]");
  if (gpa1) {
    std::string o = "[";
    struct { const char* n; int v; int f; } l[] = {{"cuMemAlloc", 3020, 0}, {"cuLaunchKernel", 7000, 2}, {"cuGetProcAddress", 12000, 0}, {"cuGetProcAddress", 11030, 0}, {"", 0, 0}};
    for (auto& e : l) { void* a = (void*)0x1; CUresult r = gpa1(e.n, &a, e.v, (cuuint64_t)e.f);
      o += fmt("%s[%s,%d,%d,%s,%s]", o.size() > 1 ? "," : "", q(e.n).c_str(), e.v, e.f, rj(r).c_str(), q(match(a)).c_str()); }
    emit("legacy_cuGetProcAddress_4arg", o + "]");
  }
}

// cuGetProcAddress_v2(NULL, ...): may crash, so in its own child.
static void null_symbol() {
  void* lib = dlopen("libcuda.so.1", RTLD_NOW); GPA2 gpa2 = lib ? (GPA2)dlsym(lib, "cuGetProcAddress_v2") : nullptr;
  if (!gpa2) return;
  cuInit(0); emit("attempting", q("cuGetProcAddress_v2(NULL, &p, 13000, 0, NULL); a child_signal here means it crashed"));
  void* p = nullptr; emit_r("null_symbol", gpa2(nullptr, &p, 13000, 0, nullptr));
}

static std::string params(std::function<CUresult(size_t, size_t*, size_t*)> f) {
  std::string o = "[";
  for (size_t i = 0; i < 6; ++i) { size_t off = 0, sz = 0; CUresult r = f(i, &off, &sz);
    o += fmt("%s[%zu,%zu,%zu,%s]", i ? "," : "", i, r == CUDA_SUCCESS ? off : 0, r == CUDA_SUCCESS ? sz : 0, rj(r).c_str());
    if (r != CUDA_SUCCESS) break; }
  return o + "]";
}
static std::string loaded(CUfunction f) {
  CUfunctionLoadingState s = CU_FUNCTION_LOADING_STATE_MAX; CUresult r = cuFuncIsLoaded(&s, f);
  return r != CUDA_SUCCESS ? rj(r) : s == CU_FUNCTION_LOADING_STATE_LOADED ? q("LOADED") : s == CU_FUNCTION_LOADING_STATE_UNLOADED ? q("UNLOADED") : q("?");
}

static void param_info(const char* loading) {
  setenv("CUDA_MODULE_LOADING", loading, 1);
  emit("CUDA_MODULE_LOADING", q(loading));
  emit("format", q("[index, offset, size, result]; kernel params_kernel(float*, int, double, char)"));
  Cuda c; if (!c.init(false)) return;
  CUmodule mod; if (!TRY("module", cuModuleLoadData(&mod, cubin_image()))) return;
  CUfunction f; if (!TRY("getfn", cuModuleGetFunction(&f, mod, "params_kernel"))) return;
  emit("cufunction_loaded_before", loaded(f));
  emit("cufunction", params([&](size_t i, size_t* o, size_t* s) { return cuFuncGetParamInfo(f, i, o, s); }));
  emit("cufunction_loaded_after_paraminfo", loaded(f));
  const char* nm = nullptr; CUresult rn = cuFuncGetName(&nm, f); emit("cufunction_name", rn == CUDA_SUCCESS ? q(nm ? nm : "") : rj(rn));
  CUdeviceptr a; cuMemAlloc(&a, 64); int b = 1; double dd = 2; char ch = 3;
  std::vector<void*> args = {&a, &b, &dd, &ch};
  emit_r("cufunction_launch", cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, 0, args.data(), nullptr)); cuCtxSynchronize();
  emit("cufunction_loaded_after_launch", loaded(f));

  CUlibrary lib; if (!TRY("library", cuLibraryLoadData(&lib, cubin_image(), nullptr, nullptr, 0, nullptr, nullptr, 0))) return;
  CUkernel k; if (!TRY("getkernel", cuLibraryGetKernel(&k, lib, "params_kernel"))) return;
  emit("cukernel_via_cuKernelGetParamInfo", params([&](size_t i, size_t* o, size_t* s) { return cuKernelGetParamInfo(k, i, o, s); }));
  emit("cukernel_cast_to_cufunction", params([&](size_t i, size_t* o, size_t* s) { return cuFuncGetParamInfo((CUfunction)k, i, o, s); }));
  emit("cukernel_cast_isloaded", loaded((CUfunction)k));
  rn = cuFuncGetName(&nm, (CUfunction)k); emit("cukernel_cast_name", rn == CUDA_SUCCESS ? q(nm ? nm : "") : rj(rn));
  const char* kn = nullptr; rn = cuKernelGetName(&kn, k); emit("cukernel_name", rn == CUDA_SUCCESS ? q(kn ? kn : "") : rj(rn));
  CUfunction kf = nullptr; CUresult r = cuKernelGetFunction(&kf, k); emit_r("cuKernelGetFunction", r);
  if (r == CUDA_SUCCESS) {
    emit("kernel_function_equals_cast", kf == (CUfunction)k ? "true" : "false");
    emit("kernel_function_loaded_before", loaded(kf));
    emit("kernel_function", params([&](size_t i, size_t* o, size_t* s) { return cuFuncGetParamInfo(kf, i, o, s); }));
  }
  emit_r("cukernel_cast_launch", cuLaunchKernel((CUfunction)k, 1, 1, 1, 1, 1, 1, 0, 0, args.data(), nullptr));
  emit_r("cukernel_cast_launch_sync", cuCtxSynchronize());
  if (r == CUDA_SUCCESS) emit("kernel_function_loaded_after_launch", loaded(kf));
  int nregs = -1; CUresult ra = cuFuncGetAttribute(&nregs, CU_FUNC_ATTRIBUTE_NUM_REGS, (CUfunction)k); emit("cukernel_cast_get_attribute", ra == CUDA_SUCCESS ? fmt("%d", nregs) : rj(ra));
}

int main() {
  Parts P("probe_lookup");
  P.run("resolver", 30, resolver);
  P.run("null_symbol", 20, null_symbol);
  P.run("params_eager", 30, [] { param_info("EAGER"); });
  P.run("params_lazy", 30, [] { param_info("LAZY"); });
  P.print();
  return 0;
}
