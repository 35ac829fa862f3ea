#include "interpose/hook_table.h"

#include <array>

namespace vgpumem::interpose {
namespace {

constexpr std::array<HookEntry, kHookCount> kEntries{{
#define VGPUMEM_HOOK(symbol, pfn, base, version, flavour) \
  HookEntry{#symbol, #base, version, Flavour::flavour},
#include "interpose/hooked_functions.def"
#undef VGPUMEM_HOOK
}};

constexpr bool ends_with(std::string_view text, std::string_view suffix) {
  return text.size() >= suffix.size() && text.substr(text.size() - suffix.size()) == suffix;
}

// The table's invariants, checked when the library is compiled.
constexpr bool flavours_match_names() {
  for (const HookEntry& entry : kEntries) {
    const bool per_thread_name = ends_with(entry.symbol, "_ptsz") || ends_with(entry.symbol, "_ptds");
    if (per_thread_name != (entry.flavour == Flavour::per_thread)) return false;
  }
  return true;
}
// Stops at the first difference: the pairwise check stays well inside the
// compilers' constant-evaluation step limits (string_view's strlen of both
// sides for every pair does not, with Clang, past about 115 entries).
constexpr bool same_symbol(const char* a, const char* b) {
  while (*a != '\0' && *a == *b) {
    ++a;
    ++b;
  }
  return *a == *b;
}
constexpr bool symbols_unique() {
  for (std::size_t i = 0; i < kEntries.size(); ++i) {
    for (std::size_t j = i + 1; j < kEntries.size(); ++j) {
      if (same_symbol(kEntries[i].symbol, kEntries[j].symbol)) return false;
    }
  }
  return true;
}
constexpr bool symbols_extend_base_names() {
  for (const HookEntry& entry : kEntries) {
    if (!std::string_view(entry.symbol).starts_with(entry.base_name) || !is_driver_name(entry.symbol)) return false;
  }
  return true;
}
static_assert(flavours_match_names(), "per_thread entries, and only they, must be the _ptsz/_ptds symbols");
static_assert(symbols_unique(), "a symbol is listed twice in hooked_functions.def");
static_assert(symbols_extend_base_names(), "every symbol must be its base name plus a variant suffix");

}  // namespace

void* hook_address(HookId id) {
  switch (id) {
#define VGPUMEM_HOOK(symbol, pfn, base, version, flavour) \
  case HookId::symbol:                                     \
    return reinterpret_cast<void*>(&::symbol);
#include "interpose/hooked_functions.def"
#undef VGPUMEM_HOOK
    case HookId::count_:
      break;
  }
  return nullptr;
}

const HookEntry& hook_entry(HookId id) { return kEntries[static_cast<std::size_t>(id)]; }

const HookEntry* find_hook_by_symbol(std::string_view symbol) {
  // Called only from dlsym for driver names: a linear scan over ~70 entries
  // is cheaper than building anything at load time.
  for (const HookEntry& entry : kEntries) {
    if (symbol == entry.symbol) return &entry;
  }
  return nullptr;
}

}  // namespace vgpumem::interpose
