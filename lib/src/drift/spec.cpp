// lib/src/drift/spec.cpp — a drift sweep as its caller states it, into one validated drift_request.
#include "attncert/drift/spec.hpp"

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/named_field.hpp"
#include "attncert/number/precision_guard.hpp"

namespace attncert {

drift_request build_drift_request(const drift_spec& s) {
  drift_request r;
  const bool name_it = s.name_parse_errors;
  r.family = named_field("family", name_it, [&] { return parse_drift_family(s.family); });
  if (s.param != "a")
    throw input_error("unknown " + field("param") + " '" + one_line(s.param, 4096) + "' (the swept parameter is the score scale a)");
  r.from = s.from;
  r.to = s.to;
  if (s.points < 2 || s.points > 10000000) throw input_error(field("points") + " must be in [2, 10000000]");
  r.points = static_cast<std::size_t>(s.points);
  r.log = s.log;
  r.recipes = named_field("recipes", name_it, [&] { return parse_recipes(s.recipes); });
  r.policies = named_field("policies", name_it, [&] { return parse_policies(s.policies); });
  if (s.object.empty()) r.object = r.family == drift_family::identical_values ? layer_object::output : layer_object::attention;
  else if (s.object == "attention") r.object = layer_object::attention;
  else if (s.object == "output") r.object = layer_object::output;
  else throw input_error("unknown " + field("object") + " '" + one_line(s.object, 4096) + "' (expected attention or output)");
  r.seed = s.seed;
  auto size = [](const char* name, const std::optional<long long>& value) -> long {  // 0: the family's
    if (!value) return 0;
    if (*value < 1 || *value > drift_max_n)
      throw input_error(field(name) + " must be in [1, " + std::to_string(drift_max_n) + "] (got " + std::to_string(*value) + ")");
    return static_cast<long>(*value);
  };
  r.n = size("n", s.n);
  r.d = size("d", s.d);
  r.resolution = s.resolution;
  if (!(s.max_seconds >= 0) || s.max_seconds > 1e7)
    throw input_error(field("max_seconds") + " must be in [0, 1e7] (0: no limit), got " + std::to_string(s.max_seconds));
  r.max_seconds = s.max_seconds;
  r.enclosures = s.enclosures;
  if (s.max_precision < 128 || s.max_precision > max_precision_bits)
    throw input_error(field("max_precision") + " must be in [128, " + std::to_string(max_precision_bits) + "], got " +
                      std::to_string(s.max_precision));
  r.max_bits = s.max_precision;
  r.grid = s.grid;
  validate(r);
  return r;
}

}  // namespace attncert
