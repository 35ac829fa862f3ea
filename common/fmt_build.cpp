// fmt's compiled part, built once here. Every file of the project includes
// fmt as a normal (not header-only) library, which keeps each compile light;
// the out-of-line definitions those headers declare come from this file, so
// libvgpumem.so still carries fmt inside itself (hidden, like the rest of
// vgpumem_common) and needs no libfmt on the user's machine.
#include <fmt/format-inl.h>

FMT_BEGIN_NAMESPACE
namespace detail {

// format.h declares these instantiations extern when fmt is not header-only.
template FMT_API auto thousands_sep_impl<char>(locale_ref) -> thousands_sep_result<char>;
template FMT_API auto thousands_sep_impl<wchar_t>(locale_ref) -> thousands_sep_result<wchar_t>;
template FMT_API auto decimal_point_impl(locale_ref) -> char;
template FMT_API auto decimal_point_impl(locale_ref) -> wchar_t;

}  // namespace detail
FMT_END_NAMESPACE
