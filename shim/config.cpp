#include "shim/config.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <limits>
#include <set>

#include "vmm/chunk.h"

extern "C" char** environ;

namespace vgpumem {
namespace {

__extension__ typedef unsigned __int128 uint128;

constexpr std::string_view kPrefix = "VGPUMEM_";
constexpr std::string_view kDeviceLimitPrefix = "VGPUMEM_LIMIT_";
constexpr int kMaxDevices = 1024;
// More fraction digits than this cannot change a size by a whole byte
// (2^40 / 10^18 < 1) and would overflow the exact arithmetic below.
constexpr std::size_t kMaxFractionDigits = 18;

constexpr std::string_view kSizeForms =
    "a size in bytes with an optional unit K/M/G/T (powers of 1024, also KiB/MiB/GiB/TiB), e.g. 8GiB or 512M";
constexpr std::string_view kLimitForms =
    "a size in bytes with an optional unit K/M/G/T (powers of 1024, also KiB/MiB/GiB/TiB), e.g. 8GiB or 512M, "
    "or a percentage of device memory such as 50%";
constexpr std::string_view kLogLevelForms = "one of trace, debug, info, warn, error, critical, off";
constexpr std::string_view kPathForms = "a file path; %p is replaced by the process id, %% by %";
constexpr std::string_view kTracePathForms =
    "a file path in an existing, writable directory; %p is replaced by the process id, %% by %";
constexpr std::string_view kCountForms = "a positive integer, e.g. 1000000";
constexpr std::string_view kDriverForms = "a path or soname of the CUDA driver library, e.g. libcuda.so.1";
constexpr std::string_view kPolicyForms = "one of off, lru, auto, vdnn-all, vdnn-conv";
constexpr std::string_view kCheckForms = "one of fast, strict, torture";
constexpr std::string_view kCuptiForms = "one of auto, off";
constexpr std::string_view kVictimForms = "one of auto, lru, next-use";
constexpr std::string_view kOnOffForms = "one of on, off";
constexpr std::string_view kGraceKindForms = "one of lend, blanket";
constexpr std::string_view kLendMaxForms = "a size of at least 512 bytes with an optional unit K/M/G/T (powers of 1024), e.g. 2MiB";
constexpr std::string_view kGraceForms = "an integer from 0 (off) to 65536, e.g. 8";
constexpr std::string_view kPieceForms =
    "off, or a size that is a multiple of 2 MiB with an optional unit K/M/G/T (powers of 1024), e.g. 4MiB";
constexpr std::string_view kBlockForms =
    "auto, or a size from 2 MiB to 64 MiB that is a multiple of 2 MiB, with an optional unit K/M/G/T (powers of "
    "1024), e.g. 32MiB";
constexpr std::uint64_t kMaxGraceOperations = 65536;

// ---------------------------------------------------------------------------
// Parsing results that carry the reason for a rejection. An empty `problem`
// on failure means the accepted forms alone explain it.

template <class T>
struct Checked {
  std::optional<T> value;
  std::string problem;
};

template <class T>
Checked<T> rejected(std::string problem = {}) {
  return Checked<T>{std::nullopt, std::move(problem)};
}

// A decimal number as written: "12" or "1.5". Both parts are views into the text.
struct Decimal {
  std::string_view whole;
  std::string_view fraction;  // empty when there is no decimal point
};

std::size_t count_leading_digits(std::string_view text) {
  std::size_t n = 0;
  while (n < text.size() && text[n] >= '0' && text[n] <= '9') ++n;
  return n;
}

// Consumes a decimal number from the front of `text`. Leading zeros are
// refused ("010" could be meant as octal), except the lone zero of "0.5".
Checked<Decimal> take_decimal(std::string_view& text) {
  if (!text.empty() && (text[0] == '-' || text[0] == '+')) return rejected<Decimal>("a sign is not allowed");
  if (text.size() >= 2 && text[0] == '0' && (text[1] == 'x' || text[1] == 'X')) {
    return rejected<Decimal>("hexadecimal is not accepted");
  }
  const std::size_t whole_digits = count_leading_digits(text);
  if (whole_digits == 0) return rejected<Decimal>();
  if (whole_digits > 1 && text[0] == '0') return rejected<Decimal>("leading zeros are not allowed");
  Decimal number{text.substr(0, whole_digits), {}};
  text.remove_prefix(whole_digits);
  if (!text.empty() && text[0] == '.') {
    const std::size_t fraction_digits = count_leading_digits(text.substr(1));
    if (fraction_digits == 0) return rejected<Decimal>();
    number.fraction = text.substr(1, fraction_digits);
    text.remove_prefix(1 + fraction_digits);
  }
  if (!text.empty() && (text[0] == 'e' || text[0] == 'E')) return rejected<Decimal>("exponents are not accepted");
  return Checked<Decimal>{number, {}};
}

std::optional<std::uint64_t> parse_digits(std::string_view digits) {
  std::uint64_t value = 0;
  const auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc{} || end != digits.data() + digits.size()) return std::nullopt;
  return value;
}

// The binary shift of a unit suffix; every unit is a power of 1024.
std::optional<unsigned> unit_shift(std::string_view suffix) {
  struct Unit {
    std::string_view suffix;
    unsigned shift;
  };
  static constexpr Unit kUnits[] = {
      {"", 0},     {"B", 0},    {"K", 10},   {"k", 10},  {"Ki", 10}, {"KiB", 10}, {"M", 20},   {"m", 20},
      {"Mi", 20},  {"MiB", 20}, {"G", 30},   {"g", 30},  {"Gi", 30}, {"GiB", 30}, {"T", 40},   {"t", 40},
      {"Ti", 40},  {"TiB", 40},
  };
  for (const Unit& unit : kUnits) {
    if (unit.suffix == suffix) return unit.shift;
  }
  return std::nullopt;
}

// "GB", "kb", ...: people mean 10^9 or 2^30 by them, and a cap must not guess.
std::optional<std::string> ambiguous_unit_hint(std::string_view suffix) {
  if (suffix.size() != 2 || (suffix[1] != 'B' && suffix[1] != 'b')) return std::nullopt;
  const char letter = static_cast<char>(std::toupper(static_cast<unsigned char>(suffix[0])));
  if (std::string_view("KMGT").find(letter) == std::string_view::npos) return std::nullopt;
  return std::string(suffix) + " is ambiguous (powers of 1000 or 1024?): use " + letter + " or " + letter + "iB";
}

// whole.fraction × 2^shift, rounded down to whole bytes, or nullopt past 2^64 - 1.
std::optional<std::uint64_t> scale(const Decimal& number, unsigned shift) {
  const std::optional<std::uint64_t> whole = parse_digits(number.whole);
  if (!whole || *whole > (std::numeric_limits<std::uint64_t>::max() >> shift)) return std::nullopt;
  std::uint64_t bytes = *whole << shift;
  if (!number.fraction.empty()) {
    const std::optional<std::uint64_t> numerator = parse_digits(number.fraction);
    if (!numerator) return std::nullopt;
    uint128 denominator = 1;
    for (std::size_t i = 0; i < number.fraction.size(); ++i) denominator *= 10;
    const auto fraction_bytes = static_cast<std::uint64_t>((uint128{*numerator} << shift) / denominator);
    if (__builtin_add_overflow(bytes, fraction_bytes, &bytes)) return std::nullopt;
  }
  return bytes;
}

bool has_whitespace(std::string_view text) {
  return std::any_of(text.begin(), text.end(), [](char c) { return std::isspace(static_cast<unsigned char>(c)); });
}

Checked<std::uint64_t> check_byte_size(std::string_view text) {
  if (text.empty()) return rejected<std::uint64_t>("the value is empty");
  if (has_whitespace(text)) return rejected<std::uint64_t>("spaces are not allowed");
  std::string_view rest = text;
  const Checked<Decimal> number = take_decimal(rest);
  if (!number.value) return rejected<std::uint64_t>(number.problem);
  if (std::optional<std::string> hint = ambiguous_unit_hint(rest)) return rejected<std::uint64_t>(*hint);
  const std::optional<unsigned> shift = unit_shift(rest);
  if (!shift) return rejected<std::uint64_t>();
  if (*shift == 0 && !number.value->fraction.empty()) {
    return rejected<std::uint64_t>("a size in bytes must be whole; fractions need a unit, e.g. 1.5GiB");
  }
  if (number.value->fraction.size() > kMaxFractionDigits) {
    return rejected<std::uint64_t>("at most 18 digits after the decimal point");
  }
  const std::optional<std::uint64_t> bytes = scale(*number.value, *shift);
  if (!bytes) return rejected<std::uint64_t>("too large: more than 2^64 - 1 bytes");
  return Checked<std::uint64_t>{bytes, {}};
}

// A cap: a byte size or a percentage; zero is refused because a zero cap can only
// be a mistake (unset the variable for no cap).
Checked<std::uint64_t> check_nonzero_byte_size(std::string_view text) {
  Checked<std::uint64_t> size = check_byte_size(text);
  if (size.value && *size.value == 0) return rejected<std::uint64_t>("a zero cap makes no sense; unset the variable for no cap");
  return size;
}

Checked<double> check_percent(std::string_view text) {
  std::string_view number_text = text.substr(0, text.size() - 1);  // without the '%'
  std::string_view rest = number_text;
  const Checked<Decimal> number = take_decimal(rest);
  if (!number.value) return rejected<double>(number.problem);
  if (!rest.empty()) return rejected<double>();
  double percent = 0;
  const auto [end, error] = std::from_chars(number_text.data(), number_text.data() + number_text.size(), percent);
  if (error != std::errc{} || end != number_text.data() + number_text.size()) return rejected<double>();
  if (!(percent > 0 && percent <= 100)) return rejected<double>("a percentage must be more than 0 and at most 100");
  return Checked<double>{percent, {}};
}

// "50" or "0.5" as a cap is almost surely a share of the device written
// without its "%": the suggestion, or empty.
std::string percent_hint(std::string_view text) {
  std::string_view rest = text;
  const Checked<Decimal> number = take_decimal(rest);
  if (!number.value || !rest.empty()) return {};
  double value = 0;
  if (std::from_chars(text.data(), text.data() + text.size(), value).ec != std::errc{}) return {};
  const bool fraction = !number.value->fraction.empty();
  if (fraction ? !(value > 0 && value <= 1) : !(value >= 1 && value <= 100)) return {};
  char percent[32];
  std::snprintf(percent, sizeof percent, "%g%%", fraction ? value * 100 : value);
  return std::string("did you mean ") + percent + "?";
}

std::string with_hint(std::string problem, const std::string& hint) {
  if (hint.empty()) return problem;
  return problem.empty() ? hint : problem + "; " + hint;
}

Checked<MemoryLimit> check_memory_limit(std::string_view text) {
  if (!text.empty() && text.back() == '%' && !has_whitespace(text)) {
    const Checked<double> percent = check_percent(text);
    if (!percent.value) return rejected<MemoryLimit>(percent.problem);
    return Checked<MemoryLimit>{MemoryLimit{MemoryLimit::Kind::percent, 0, *percent.value}, {}};
  }
  const Checked<std::uint64_t> bytes = check_nonzero_byte_size(text);
  if (!bytes.value) return rejected<MemoryLimit>(with_hint(bytes.problem, percent_hint(text)));
  // Memory is mapped in whole chunks: a smaller cap refuses every allocation
  // with a bare out-of-memory error, which is never what was meant.
  if (*bytes.value < vmm::kChunkBytes) {
    return rejected<MemoryLimit>(
        with_hint("below 2 MiB, the allocation granularity, so every allocation would fail", percent_hint(text)));
  }
  return Checked<MemoryLimit>{MemoryLimit{MemoryLimit::Kind::bytes, *bytes.value, 0}, {}};
}

Checked<std::uint64_t> check_positive_count(std::string_view text) {
  std::string_view rest = text;
  const Checked<Decimal> number = take_decimal(rest);
  if (!number.value || !rest.empty() || !number.value->fraction.empty()) {
    return rejected<std::uint64_t>(number.problem);
  }
  const std::optional<std::uint64_t> count = parse_digits(number.value->whole);
  if (!count) return rejected<std::uint64_t>("too large");
  if (*count == 0) return rejected<std::uint64_t>("must be at least 1");
  return Checked<std::uint64_t>{count, {}};
}

// A count that may be 0, at most `most`.
Checked<std::uint64_t> check_count_up_to(std::string_view text, std::uint64_t most) {
  std::string_view rest = text;
  const Checked<Decimal> number = take_decimal(rest);
  if (!number.value || !rest.empty() || !number.value->fraction.empty()) {
    return rejected<std::uint64_t>(number.problem);
  }
  const std::optional<std::uint64_t> count = parse_digits(number.value->whole);
  if (!count || *count > most) return rejected<std::uint64_t>("too large");
  return Checked<std::uint64_t>{count, {}};
}

bool equals_ignoring_case(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::equal(a.begin(), a.end(), b.begin(), [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

// ---------------------------------------------------------------------------
// Trace destinations.

std::string directory_of(const std::string& path) {
  const std::size_t slash = path.rfind('/');
  if (slash == std::string::npos) return ".";
  return slash == 0 ? "/" : path.substr(0, slash);
}

std::string file_name_of(std::string_view path) {
  const std::size_t slash = path.rfind('/');
  return std::string(slash == std::string_view::npos ? path : path.substr(slash + 1));
}

// Whether a new file can be made in `directory`; errno says why not. An
// unnamed O_TMPFILE asks the file system itself, leaves nothing behind, and
// holds for root too, where access() says yes to a read-only mount;
// access() answers where the file system has no O_TMPFILE.
bool can_create_file_in(const std::string& directory) {
  const int fd = ::open(directory.c_str(), O_TMPFILE | O_WRONLY | O_CLOEXEC, 0600);
  if (fd >= 0) {
    ::close(fd);
    return true;
  }
  if (errno != EOPNOTSUPP && errno != EISDIR && errno != EINVAL) return false;
  return ::access(directory.c_str(), W_OK | X_OK) == 0;
}

// ---------------------------------------------------------------------------
// The variables. Each setter validates one value and stores it; the table is
// the single list of what the shim reads, so the unknown-name check and the
// documentation cannot drift from it.

using Verdict = std::optional<std::string>;  // nullopt: accepted; otherwise the problem (may be empty)
const Verdict kAccepted = std::nullopt;

template <class T>
Verdict store(const Checked<T>& parsed, T& field) {
  if (!parsed.value) return parsed.problem;
  field = *parsed.value;
  return kAccepted;
}

// `on` or `off`, in any case (kOnOffForms).
Verdict store_on_off(std::string_view value, bool& field) {
  if (equals_ignoring_case(value, "on")) field = true;
  else if (equals_ignoring_case(value, "off")) field = false;
  else return value.empty() ? "the value is empty" : "";
  return kAccepted;
}

Verdict require_non_empty(std::string_view value) {
  return value.empty() ? Verdict("the value is empty; unset the variable for the default") : kAccepted;
}

struct Variable {
  std::string_view name;
  std::string_view accepted;
  Verdict (*set)(Config& config, std::string_view value, int pid);
};

constexpr Variable kVariables[] = {
    {"VGPUMEM_LIMIT", kLimitForms,
     [](Config& c, std::string_view v, int) { return store(check_memory_limit(v), c.limit_all); }},
    {"VGPUMEM_POLICY", kPolicyForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       const std::optional<Policy> policy = parse_policy(v);
       if (!policy) return v.empty() ? "the value is empty" : "";
       c.policy = *policy;
       return kAccepted;
     }},
    {"VGPUMEM_CHECK", kCheckForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       const std::optional<vmm::CheckMode> mode = parse_check_mode(v);
       if (!mode) return v.empty() ? "the value is empty" : "";
       c.check = *mode;
       return kAccepted;
     }},
    {"VGPUMEM_CUPTI", kCuptiForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       const std::optional<CuptiUse> use = parse_cupti_use(v);
       if (!use) return v.empty() ? "the value is empty" : "";
       c.cupti = *use;
       return kAccepted;
     }},
    {"VGPUMEM_VICTIMS", kVictimForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       const std::optional<VictimOrder> order = parse_victim_order(v);
       if (!order) return v.empty() ? "the value is empty" : "";
       c.victims = *order;
       return kAccepted;
     }},
    {"VGPUMEM_LIBRARY_HOOKS", kOnOffForms,
     [](Config& c, std::string_view v, int) { return store_on_off(v, c.library_hooks); }},
    {"VGPUMEM_MOVER", kOnOffForms, [](Config& c, std::string_view v, int) { return store_on_off(v, c.mover); }},
    {"VGPUMEM_GRACE", kGraceKindForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       if (equals_ignoring_case(v, "lend")) c.grace = vmm::GraceKind::lend;
       else if (equals_ignoring_case(v, "blanket")) c.grace = vmm::GraceKind::blanket;
       else return v.empty() ? "the value is empty" : "";
       return kAccepted;
     }},
    {"VGPUMEM_LEND_MAX_BYTES", kLendMaxForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       std::uint64_t bytes = 0;
       if (Verdict problem = store(check_nonzero_byte_size(v), bytes)) return problem;
       if (bytes < 512) return "smaller than one 512-byte cell";
       c.lend_max_bytes = bytes;
       return kAccepted;
     }},
    {"VGPUMEM_GRACE_LAUNCHES", kGraceForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       std::uint64_t operations = 0;
       if (Verdict problem = store(check_count_up_to(v, kMaxGraceOperations), operations)) return problem;
       c.grace_operations = static_cast<std::uint32_t>(operations);
       return kAccepted;
     }},
    {"VGPUMEM_PIECE_BYTES", kPieceForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       if (equals_ignoring_case(v, "off")) {
         c.piece_bytes = 0;
         return kAccepted;
       }
       std::uint64_t bytes = 0;
       if (Verdict problem = store(check_nonzero_byte_size(v), bytes)) return problem;
       if (bytes % vmm::kChunkBytes != 0) return "not a multiple of 2 MiB, the size of the chunks pieces are made of";
       c.piece_bytes = bytes;
       return kAccepted;
     }},
    {"VGPUMEM_BLOCK_BYTES", kBlockForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       if (equals_ignoring_case(v, "auto")) {
         c.block_bytes = 0;
         return kAccepted;
       }
       std::uint64_t bytes = 0;
       if (Verdict problem = store(check_nonzero_byte_size(v), bytes)) return problem;
       if (bytes % vmm::kChunkBytes != 0) return "not a multiple of 2 MiB, the size of the chunks blocks are cut into";
       if (bytes > Config::kMaxBlockBytes) return "larger than 64 MiB, the largest block the pager makes";
       c.block_bytes = bytes;
       return kAccepted;
     }},
    {"VGPUMEM_HOST_LIMIT", kSizeForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       if (!v.empty() && v.back() == '%') return "a percentage is not accepted: host memory has no fixed total";
       std::uint64_t bytes = 0;
       if (Verdict problem = store(check_nonzero_byte_size(v), bytes)) return problem;
       c.host_limit = bytes;
       return kAccepted;
     }},
    {"VGPUMEM_LOG_LEVEL", kLogLevelForms,
     [](Config& c, std::string_view v, int) -> Verdict {
       const std::optional<LogLevel> level = parse_log_level(v);
       if (!level) return v.empty() ? "the value is empty" : "";
       c.log_level = *level;
       return kAccepted;
     }},
    {"VGPUMEM_LOG_FILE", kPathForms,
     [](Config& c, std::string_view v, int pid) {
       if (Verdict problem = require_non_empty(v)) return problem;
       c.log_file = expand_pid(v, pid);
       return kAccepted;
     }},
    {"VGPUMEM_TRACE", kTracePathForms,
     [](Config& c, std::string_view v, int pid) {
       if (Verdict problem = require_non_empty(v)) return problem;
       c.trace_path = expand_pid(v, pid);
       if (std::string problem = file_destination_problem(c.trace_path); !problem.empty()) return Verdict(problem);
       c.trace_path_pattern = std::string(v);
       return kAccepted;
     }},
    {"VGPUMEM_TRACE_MAX_EVENTS", kCountForms,
     [](Config& c, std::string_view v, int) { return store(check_positive_count(v), c.trace_max_events); }},
    {"VGPUMEM_DRIVER", kDriverForms,
     [](Config& c, std::string_view v, int) {
       if (Verdict problem = require_non_empty(v)) return problem;
       c.driver_path = std::string(v);
       return kAccepted;
     }},
};

constexpr std::string_view kDeviceLimitName = "VGPUMEM_LIMIT_<i>";
constexpr std::string_view kDeviceIndexProblem = "the device index in VGPUMEM_LIMIT_<i> must be 0..1023, without leading zeros";

ConfigError invalid(std::string_view variable, std::string_view value, std::string_view accepted, std::string problem) {
  return ConfigError{std::string(variable), std::string(value), std::string(accepted),
                     ConfigError::Kind::invalid_value, std::move(problem)};
}

// ---------------------------------------------------------------------------
// Names found in the environment.

enum class NameKind { not_ours, fixed, device_limit, bad_device_index, unknown };

struct ClassifiedName {
  NameKind kind;
  int device = -1;  // NameKind::device_limit
};

bool is_fixed_variable(std::string_view name) {
  return std::any_of(std::begin(kVariables), std::end(kVariables), [&](const Variable& v) { return v.name == name; });
}

ClassifiedName classify(std::string_view name) {
  if (name.substr(0, kPrefix.size()) != kPrefix) return {NameKind::not_ours};
  if (is_fixed_variable(name)) return {NameKind::fixed};
  if (name.substr(0, kDeviceLimitPrefix.size()) != kDeviceLimitPrefix) return {NameKind::unknown};
  const std::string_view index = name.substr(kDeviceLimitPrefix.size());
  if (index.empty() || count_leading_digits(index) != index.size()) return {NameKind::unknown};
  const std::optional<std::uint64_t> device = parse_digits(index);
  if ((index.size() > 1 && index[0] == '0') || !device || *device >= kMaxDevices) return {NameKind::bad_device_index};
  return {NameKind::device_limit, static_cast<int>(*device)};
}

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t substitution = diagonal + (a[i - 1] == b[j - 1] ? 0 : 1);
      diagonal = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, substitution});
    }
  }
  return row[b.size()];
}

std::string suggestion_for(std::string_view unknown) {
  std::string_view best;
  std::size_t best_distance = 3;  // farther than this is not a typo
  for (std::string_view known : known_variables()) {
    const std::size_t distance = edit_distance(unknown, known);
    if (distance < best_distance) {
      best = known;
      best_distance = distance;
    }
  }
  return best.empty() ? std::string() : "did you mean " + std::string(best) + "?";
}

std::string known_list() {
  std::string list = "known: ";
  for (std::string_view name : known_variables()) {
    if (list.size() > 7) list += ", ";
    list += name;
  }
  return list;
}

std::string value_of(const std::function<const char*(const char*)>& getenv_fn, std::string_view name) {
  const char* value = getenv_fn(std::string(name).c_str());
  return value ? std::string(value) : std::string();
}

// Shows the value on one line whatever it holds.
std::string quoted(std::string_view value) {
  std::string out = "\"";
  for (const char c : value) {
    const auto byte = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (byte < 0x20 || byte == 0x7f) {
      char escape[5];
      std::snprintf(escape, sizeof escape, "\\x%02x", byte);
      out += escape;
    } else {
      out += c;
    }
  }
  return out + "\"";
}

}  // namespace

// ---------------------------------------------------------------------------

std::uint64_t MemoryLimit::resolve(std::uint64_t device_total) const {
  switch (kind) {
    case Kind::bytes:
      return bytes;
    case Kind::percent:
      return static_cast<std::uint64_t>(std::floor(static_cast<long double>(device_total) * percent / 100));
    case Kind::none:
      break;
  }
  return std::numeric_limits<std::uint64_t>::max();
}

const MemoryLimit& Config::limit_for(int device) const {
  const auto it = limit_device.find(device);
  return it != limit_device.end() ? it->second : limit_all;
}

bool Config::any_limit() const {
  return limit_all.is_set() ||
         std::any_of(limit_device.begin(), limit_device.end(), [](const auto& entry) { return entry.second.is_set(); });
}

std::string ConfigError::message() const {
  const std::string setting = variable + "=" + quoted(value);
  if (kind == Kind::unknown_variable) {
    std::string line = "vgpumem: unknown variable " + setting;
    if (!problem.empty()) line += " (" + problem + ")";
    return line + "; " + accepted;
  }
  std::string line = "vgpumem: invalid " + setting + ": ";
  if (!problem.empty()) line += problem + "; ";
  return line + "expected " + accepted;
}

const std::vector<std::string_view>& known_variables() {
  static const std::vector<std::string_view> names = [] {
    std::vector<std::string_view> list;
    for (const Variable& variable : kVariables) {
      list.push_back(variable.name);
      if (variable.name == "VGPUMEM_LIMIT") list.push_back(kDeviceLimitName);
    }
    return list;
  }();
  return names;
}

ConfigResult parse_config(const std::function<const char*(const char*)>& getenv_fn,
                          const std::vector<std::string>& names, int pid) {
  const auto fail = [](ConfigError error) { return ConfigResult{std::nullopt, std::move(error)}; };
  // Sorted so that, of several mistakes, the same one is always reported.
  const std::set<std::string_view> sorted_names(names.begin(), names.end());

  std::map<int, std::string_view> device_limit_names;
  for (std::string_view name : sorted_names) {
    const ClassifiedName classified = classify(name);
    switch (classified.kind) {
      case NameKind::unknown:
        return fail(ConfigError{std::string(name), value_of(getenv_fn, name), known_list(),
                                ConfigError::Kind::unknown_variable, suggestion_for(name)});
      case NameKind::bad_device_index:
        return fail(invalid(name, value_of(getenv_fn, name), kLimitForms, std::string(kDeviceIndexProblem)));
      case NameKind::device_limit:
        device_limit_names.emplace(classified.device, name);
        break;
      case NameKind::fixed:
      case NameKind::not_ours:
        break;
    }
  }

  Config config;
  bool policy_given = false, pieces_given = false;
  for (const Variable& variable : kVariables) {
    const char* value = getenv_fn(std::string(variable.name).c_str());
    if (value == nullptr) continue;
    if (Verdict problem = variable.set(config, value, pid)) {
      return fail(invalid(variable.name, value, variable.accepted, std::move(*problem)));
    }
    policy_given |= variable.name == "VGPUMEM_POLICY";
    pieces_given |= variable.name == "VGPUMEM_PIECE_BYTES";
  }

  for (const auto& [device, name] : device_limit_names) {
    const std::string value = value_of(getenv_fn, name);
    const Checked<MemoryLimit> limit = check_memory_limit(value);
    if (!limit.value) return fail(invalid(name, value, kLimitForms, limit.problem));
    config.limit_device[device] = *limit.value;
  }

  if (!policy_given) config.policy = config.any_limit() ? Policy::automatic : Policy::off;
  if (!pieces_given) config.piece_bytes = config.policy == Policy::automatic ? Config::kDefaultPieceBytes : 0;
  return ConfigResult{std::move(config), std::nullopt};
}

ConfigResult parse_process_config() {
  std::vector<std::string> names;
  for (char** entry = environ; entry != nullptr && *entry != nullptr; ++entry) {
    const std::string_view variable(*entry);
    const std::string_view name = variable.substr(0, variable.find('='));
    // Only our names matter; skipping the rest keeps this cheap in big environments.
    if (name.substr(0, kPrefix.size()) == kPrefix) names.emplace_back(name);
  }
  return parse_config([](const char* name) { return ::getenv(name); }, names, static_cast<int>(::getpid()));
}

std::optional<MemoryLimit> parse_memory_limit(std::string_view text) { return check_memory_limit(text).value; }

std::optional<MemoryLimit> parse_memory_limit(std::string_view text, std::string* problem) {
  Checked<MemoryLimit> limit = check_memory_limit(text);
  if (!limit.value) *problem = std::move(limit.problem);
  return limit.value;
}

std::optional<std::uint64_t> parse_byte_size(std::string_view text) { return check_byte_size(text).value; }

std::optional<LogLevel> parse_log_level(std::string_view text) {
  static constexpr LogLevel kLevels[] = {LogLevel::trace, LogLevel::debug,    LogLevel::info, LogLevel::warn,
                                         LogLevel::error, LogLevel::critical, LogLevel::off};
  if (equals_ignoring_case(text, "warning")) return LogLevel::warn;
  for (const LogLevel level : kLevels) {
    if (equals_ignoring_case(text, to_string(level))) return level;
  }
  return std::nullopt;
}

std::string_view to_string(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return "trace";
    case LogLevel::debug: return "debug";
    case LogLevel::info: return "info";
    case LogLevel::warn: return "warn";
    case LogLevel::error: return "error";
    case LogLevel::critical: return "critical";
    case LogLevel::off: return "off";
  }
  return "?";
}

std::optional<CuptiUse> parse_cupti_use(std::string_view text) {
  for (const CuptiUse use : {CuptiUse::automatic, CuptiUse::off}) {
    if (equals_ignoring_case(text, to_string(use))) return use;
  }
  return std::nullopt;
}

std::string_view to_string(CuptiUse use) { return use == CuptiUse::off ? "off" : "auto"; }

std::optional<VictimOrder> parse_victim_order(std::string_view text) {
  for (const VictimOrder order : {VictimOrder::automatic, VictimOrder::lru, VictimOrder::next_use}) {
    if (equals_ignoring_case(text, to_string(order))) return order;
  }
  return std::nullopt;
}

std::string_view to_string(VictimOrder order) {
  switch (order) {
    case VictimOrder::automatic: return "auto";
    case VictimOrder::lru: return "lru";
    case VictimOrder::next_use: return "next-use";
  }
  return "?";
}

bool orders_victims_by_next_use(const Config& config) {
  const bool learned =
      config.policy == Policy::automatic || config.policy == Policy::vdnn_all || config.policy == Policy::vdnn_conv;
  switch (config.victims) {
    case VictimOrder::automatic: return config.policy == Policy::automatic;
    case VictimOrder::lru: return false;
    case VictimOrder::next_use: return learned;
  }
  return false;
}

std::optional<Policy> parse_policy(std::string_view text) {
  for (const Policy policy : {Policy::off, Policy::lru, Policy::automatic, Policy::vdnn_all, Policy::vdnn_conv}) {
    if (equals_ignoring_case(text, to_string(policy))) return policy;
  }
  return std::nullopt;
}

std::string_view to_string(Policy policy) {
  switch (policy) {
    case Policy::off: return "off";
    case Policy::lru: return "lru";
    case Policy::automatic: return "auto";
    case Policy::vdnn_all: return "vdnn-all";
    case Policy::vdnn_conv: return "vdnn-conv";
  }
  return "?";
}

std::optional<vmm::CheckMode> parse_check_mode(std::string_view text) {
  for (const vmm::CheckMode mode : {vmm::CheckMode::fast, vmm::CheckMode::strict, vmm::CheckMode::torture}) {
    if (equals_ignoring_case(text, to_string(mode))) return mode;
  }
  return std::nullopt;
}

std::string_view to_string(vmm::CheckMode mode) {
  switch (mode) {
    case vmm::CheckMode::fast: return "fast";
    case vmm::CheckMode::strict: return "strict";
    case vmm::CheckMode::torture: return "torture";
  }
  return "?";
}

std::string file_destination_problem(const std::string& path) {
  struct stat status {};
  if (::stat(path.c_str(), &status) == 0 && S_ISDIR(status.st_mode)) return "it is a directory; name a file in it";
  const std::string directory = directory_of(path);
  if (::stat(directory.c_str(), &status) != 0) {
    return "its directory " + directory + (errno == ENOENT ? " does not exist (none is created)" : ": " + std::string(std::strerror(errno)));
  }
  if (!S_ISDIR(status.st_mode)) return directory + " is not a directory";
  if (!can_create_file_in(directory)) return "cannot create a file in " + directory + ": " + std::strerror(errno);
  return {};
}

std::string fallback_trace_path(std::string_view path, int pid, const char* tmpdir) {
  std::string fallback = tmpdir != nullptr && *tmpdir != '\0' ? tmpdir : "/tmp";
  if (fallback.back() != '/') fallback += '/';
  fallback += file_name_of(path);
  fallback += '.';
  fallback += std::to_string(pid);
  return fallback;
}

std::string expand_pid(std::string_view path, int pid) {
  std::string out;
  out.reserve(path.size() + 8);
  for (std::size_t i = 0; i < path.size(); ++i) {
    const bool directive = path[i] == '%' && i + 1 < path.size();
    if (directive && path[i + 1] == 'p') {
      out += std::to_string(pid);
      ++i;
    } else if (directive && path[i + 1] == '%') {
      out += '%';
      ++i;
    } else {
      out += path[i];  // any other '%' is kept as written
    }
  }
  return out;
}

}  // namespace vgpumem
