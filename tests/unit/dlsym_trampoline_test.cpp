// The dlsym trampoline (interpose/dlsym_trampoline.S) alone, linked into this
// test program with stand-ins for the shim's two decision functions: it must
// never jump to a NULL glibc dlsym, and when asked to, it must ask glibc on
// the caller's behalf (returning through a `ret` in the caller's object) and
// hand glibc's answer to the decision. This program's dlsym *is* the
// trampoline, for every dlsym call in the process.
#include <dlfcn.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>

#define UNINSTRUMENTED __attribute__((no_sanitize("address", "undefined", "thread")))

// A `ret` instruction in this program: the gadget the stand-in hands out.
asm(R"(
    .text
    .globl  trampoline_test_ret_gadget
    .type   trampoline_test_ret_gadget, @function
trampoline_test_ret_gadget:
    ret
    .size   trampoline_test_ret_gadget, .-trampoline_test_ret_gadget
)");

extern "C" {
void trampoline_test_ret_gadget();

void* vgpumem_glibc_dlsym = nullptr;

// What the stand-in intercept does with the next names it sees.
bool g_glibc_missing = false;   // glibc's dlsym "cannot be found"
const char* g_ask_for = nullptr;  // ask glibc for the caller for this name
void* g_decided_from = nullptr;   // what vgpumem_dlsym_decide was given

UNINSTRUMENTED void* vgpumem_dlsym_intercept(void*, const char* name, const void*, const void** gadget) {
  if (g_glibc_missing) {
    vgpumem_glibc_dlsym = nullptr;
    if (g_ask_for == nullptr) return nullptr;
    *gadget = reinterpret_cast<const void*>(&trampoline_test_ret_gadget);
    return reinterpret_cast<void*>(1);
  }
  if (vgpumem_glibc_dlsym == nullptr) {
    vgpumem_glibc_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34");
    if (vgpumem_glibc_dlsym == nullptr) vgpumem_glibc_dlsym = dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5");
  }
  if (g_ask_for != nullptr && name != nullptr && std::strcmp(name, g_ask_for) == 0) {
    *gadget = reinterpret_cast<const void*>(&trampoline_test_ret_gadget);
    return reinterpret_cast<void*>(1);
  }
  return nullptr;
}

UNINSTRUMENTED void* vgpumem_dlsym_decide(void* found, const char*) {
  g_decided_from = found;
  return found;
}
}

namespace {

void* glibc_answer(void* handle, const char* name) {
  auto glibc = reinterpret_cast<void* (*)(void*, const char*)>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.34"));
  if (glibc == nullptr) glibc = reinterpret_cast<void* (*)(void*, const char*)>(dlvsym(RTLD_NEXT, "dlsym", "GLIBC_2.2.5"));
  return glibc(handle, name);
}

TEST(DlsymTrampoline, PassesLookUpsToGlibc) {
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "printf"), glibc_answer(RTLD_DEFAULT, "printf"));
  EXPECT_EQ(dlsym(RTLD_DEFAULT, "no_such_function_anywhere"), nullptr);
}

// glibc's dlsym unknown: the answer is NULL, not a jump to address 0.
TEST(DlsymTrampoline, NeverJumpsToANullDlsym) {
  g_glibc_missing = true;
  void* answer = dlsym(RTLD_DEFAULT, "printf");
  g_glibc_missing = false;
  EXPECT_EQ(answer, nullptr);
  EXPECT_NE(dlsym(RTLD_DEFAULT, "printf"), nullptr) << "found again once glibc's dlsym is known";
}

// Asked for the caller: glibc answers through the gadget, the decision gets
// glibc's answer, and the caller gets the decision's.
TEST(DlsymTrampoline, AsksGlibcOnTheCallersBehalfThenDecides) {
  g_ask_for = "puts";
  g_decided_from = nullptr;
  void* answer = dlsym(RTLD_DEFAULT, "puts");
  g_ask_for = nullptr;
  EXPECT_EQ(g_decided_from, glibc_answer(RTLD_DEFAULT, "puts"));
  EXPECT_EQ(answer, g_decided_from);
  // RTLD_NEXT relative to this program: libc's puts.
  g_ask_for = "puts";
  answer = dlsym(RTLD_NEXT, "puts");
  g_ask_for = nullptr;
  EXPECT_EQ(answer, glibc_answer(RTLD_DEFAULT, "puts"));
}

TEST(DlsymTrampoline, AskingWithoutGlibcAnswersNull) {
  g_glibc_missing = true;
  g_ask_for = "puts";
  g_decided_from = nullptr;
  void* answer = dlsym(RTLD_DEFAULT, "puts");
  g_ask_for = nullptr;
  g_glibc_missing = false;
  EXPECT_EQ(answer, nullptr);
  EXPECT_EQ(g_decided_from, nullptr) << "nothing to decide from";
}

}  // namespace
