// checks/spec.cpp — a check run as its caller states it, into the chosen checks and their settings.
#include "checks/spec.hpp"

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/named_field.hpp"
#include "attncert/number/precision_guard.hpp"

namespace attncert::checks {

check_run build_check_run(const check_spec& s) {
  check_run c;
  const bool name_it = s.name_parse_errors;
  c.chosen = named_field("ids", name_it, [&] { return select_checks(s.ids); });
  run_settings& rs = c.settings;
  rs.formats = named_field("formats", name_it, [&] { return parse_formats(s.formats); });
  rs.policies = named_field("policies", name_it, [&] { return parse_policies(s.policies); });
  rs.seed = s.seed;
  if (s.certify_bits < min_precision_bits || s.certify_bits > s.certify_max_bits || s.certify_max_bits > max_precision_bits)
    throw input_error(field("certify_bits") + " must satisfy " + std::to_string(min_precision_bits) +
                      " <= certify-bits <= certify-max-bits <= " + std::to_string(max_precision_bits));
  rs.certify_bits = s.certify_bits;
  rs.certify_max_bits = s.certify_max_bits;
  if (!(s.max_seconds >= 0) || s.max_seconds > 1e7)
    throw input_error(field("max_seconds") + " must be in [0, 1e7] (0: no limit)");
  rs.max_seconds = s.max_seconds;
  return c;
}

}  // namespace attncert::checks
