// lib/src/rank/spec.cpp — a rank call as its caller states it, into one validated rank_request.
#include "attncert/rank/spec.hpp"

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/named_field.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/number/traits.hpp"

namespace attncert {

namespace {

// The exact matrix of one input.
matrix<mpq_rational> load(const rank_matrix_input& in, const char* name) {
  if (in.exact) return *in.exact;
  const tensor& a = *in.array;
  if (a.shape.size() != 2)
    throw input_error(field(name) + ": must be a 2-D array, got " + std::to_string(a.shape.size()) + " dimensions");
  const auto rows = static_cast<Eigen::Index>(a.shape[0]), cols = static_cast<Eigen::Index>(a.shape[1]);
  matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = a.values[static_cast<std::size_t>(i * cols + j)];
  return from_double_matrix<mpq_rational>(m);
}

bool scale_is_default(const std::string& scale) { return scale.empty() || scale == "default" || scale == "1/sqrt(d)"; }

}  // namespace

rank_request build_rank_request(const rank_spec& s) {
  rank_request req;
  nlohmann::json inputs = s.inputs.is_object() ? s.inputs : nlohmann::json::object();
  const bool has_s = s.scores.given(), has_q = s.q.given(), has_k = s.k.given();
  if (has_s && (has_q || has_k))
    throw input_error("give either " + field("scores") + " or " + field("q") + "/" + field("k") + ", not both");
  if (has_s) req.S = load(s.scores, "scores");
  else if (has_q && has_k) {
    req.Q = load(s.q, "q");
    req.K = load(s.k, "k");
  } else {
    throw input_error("give " + field("scores") + " S, or " + field("q") + " Q and " + field("k") + " K");
  }
  if (!s.scale.empty() && req.S)
    throw input_error(field("scale") + " applies to " + field("q") + "/" + field("k") + " (scores given with " + field("scores") +
                      " are used as they are)");
  if (!req.S) {
    if (scale_is_default(s.scale)) req.inv_sqrt_d = true;
    else
      try {
        req.scale = number_traits<mpq_rational>::from_string(s.scale);
      } catch (const input_error& e) {
        throw input_error(field("scale") + ": " + e.what());
      }
  }
  if (s.v.given()) req.V = load(s.v, "v");
  if (s.x.given()) req.X = load(s.x, "x");
  if (s.mask == "none") req.M = mask::none();
  else if (s.mask == "causal") req.M = mask::causal();
  else if (s.mask == "matrix" && s.mask_matrix) req.M = mask::from_matrix(*s.mask_matrix);
  else {
    throw input_error(field("mask") + ": none, causal or a boolean matrix (got '" + one_line(s.mask, 40) + "')");
  }
  const bool name_it = s.name_parse_errors;
  req.object = named_field("object", name_it, [&] { return parse_layer_object(s.object); });
  req.formats = named_field("formats", name_it, [&] { return parse_formats(s.formats); });
  req.policies = named_field("policies", name_it, [&] { return parse_policies(s.policies); });
  if (s.max_precision < 128 || s.max_precision > max_precision_bits)
    throw input_error(field("max_precision") + " must be in [128, " + std::to_string(max_precision_bits) + "], got " +
                      std::to_string(s.max_precision));
  req.max_bits = s.max_precision;
  req.seed = s.seed;
  req.inputs = inputs;
  req.formats_explicit = s.formats_explicit;
  if (!(s.max_seconds >= 0) || s.max_seconds > 1e7)
    throw input_error(field("max_seconds") + " must be in [0, 1e7] (0: no limit), got " + std::to_string(s.max_seconds));
  req.max_seconds = s.max_seconds;
  if (!(s.sigma_rel_width >= 0))
    throw input_error(field("sigma_rel_width") + " must be >= 0, got " + std::to_string(s.sigma_rel_width));
  req.sigma_rel_width = s.sigma_rel_width;
  if (s.deflate_max_k < 0 || s.deflate_max_k > 4096)
    throw input_error(field("deflate_max_k") + " must be in [0, 4096], got " + std::to_string(s.deflate_max_k));
  req.deflation_max_k = static_cast<std::size_t>(s.deflate_max_k);
  if (!(s.deflate_seconds >= 0))
    throw input_error(field("deflate_seconds") + " must be >= 0 (0: no budget), got " + std::to_string(s.deflate_seconds));
  req.deflation_seconds = s.deflate_seconds;
  if (s.threads < 1 || s.threads > 256)
    throw input_error(field("threads") + " must be in [1, 256], got " + std::to_string(s.threads));
  req.threads = static_cast<unsigned>(s.threads);
  validate(req);  // shapes, mask, the object's inputs: as analyse_rank checks them
  return req;
}

}  // namespace attncert
