#include "attncert/report/rank.hpp"

#include "attncert/field.hpp"
#include "attncert/number/decimal.hpp"
#include "attncert/rank/numerical.hpp"

namespace attncert::report {

namespace {

nlohmann::json settings_json(const rank_analysis& a) {
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : a.formats) fs.push_back(f.name);
  nlohmann::json ps = nlohmann::json::array();
  for (const auto& p : a.policies) ps.push_back({{"name", p.name()}, {"rule", p.formula()}});
  return {{"object", to_string(a.object)},
          {"shape", {a.rows, a.cols}},
          {"mask", a.mask},
          {"scale", a.scale},
          {"algebraic_factor", a.algebraic_factor},
          {"formats", fs},
          {"policies", ps},
          {"policy_epsilon", "eps = 2^(1-p) of the format the matrix was formed in"},
          {"svd_of_16_bit_formats", svd_label(parse_format("binary16"))},
          {"singular_value_bits", {{"start", a.start_bits}, {"max", a.max_bits}}},
          {"seed", a.seed}};
}

std::string rank_text(const rank_interval& e) {
  return e.exact() ? std::to_string(e.lo) : "[" + std::to_string(e.lo) + ", " + std::to_string(e.hi) + "]";
}

}  // namespace

nlohmann::json to_json(const rank_analysis& a, const std::string& command) {
  nlohmann::json svs = nlohmann::json::array();
  for (const auto& s : a.singular_values.sigma) {
    // Ends rounded outward (decimal.hpp): the printed [lo, hi] still contains the exact σ.
    const auto [lo, hi] = outward_decimal(s, 20);
    svs.push_back({{"lo", lo}, {"hi", hi}});
  }
  nlohmann::json numerical = nlohmann::json::array();
  for (const auto& n : a.numerical)
    numerical.push_back({{"format", n.format}, {"policy", n.policy}, {"rank", n.rank}, {"threshold", n.threshold},
                         {"diverges", n.diverges}, {"exact_count", {{"lo", n.exact_lo}, {"hi", n.exact_hi}}}});
  const rank_interval& ex = a.exact;
  nlohmann::json j;
  j["tool"] = "attncert";
  j["version"] = ATTNCERT_VERSION;
  j["command"] = command;
  j["inputs"] = a.inputs;
  j["settings"] = settings_json(a);
  j["exact_rank"] = {{"lo", ex.lo}, {"hi", ex.hi}, {"lo_witness", ex.lo_witness}, {"hi_witness", ex.hi_witness}};
  j["singular_values"] = svs;
  j["singular_values_bits"] = a.singular_values.bits;
  j["singular_values_certified_positive"] = a.singular_values.certified_positive;
  j["singular_values_method"] = a.singular_value_method;
  j["singular_values_decided"] = a.singular_values_decided;
  j["singular_values_max_relative_width"] = a.singular_value_max_rel_width;
  nlohmann::json stages = nlohmann::json::object();
  for (const auto& [name, sec] : a.stage_seconds) stages[name] = sec;
  j["seconds"] = stages;
  j["notes"] = a.notes;
  j["partial"] = a.partial;
  j["numerical"] = numerical;
  j["summary"] = {{"exact", ex.exact()}, {"rank_lo", ex.lo}, {"rank_hi", ex.hi}, {"measurements", a.numerical.size()},
                  {"divergences", a.divergences}, {"singular_values_certified_positive", a.singular_values.certified_positive},
                  {"partial", a.partial}};
  return j;
}

void write_rank_text(std::ostream& os, const rank_analysis& a) {
  const rank_interval& e = a.exact;
  os << "attncert " << ATTNCERT_VERSION << " — rank of the " << to_string(a.object) << " (" << a.rows << "x" << a.cols
     << ", mask " << a.mask << ")\n";
  if (e.exact()) os << "exact rank: " << e.lo << "\n";
  else os << "exact rank: in [" << e.lo << ", " << e.hi << "] (UNDECIDED between these)\n";
  os << "  rank >= " << e.lo << ": " << e.lo_witness << "\n";
  os << "  rank <= " << e.hi << ": " << e.hi_witness << "\n";
  const auto& sv = a.singular_values;
  if (a.singular_value_method == "binary64")
    os << "certified singular values (binary64 LAPACK SVD + residual bound, proofs/P16; ";
  else if (a.singular_value_method == "binary64+deflated")
    os << "certified singular values (binary64 LAPACK SVD + residual bound, the smallest escalated on a deflated subspace "
          "up to "
       << sv.bits << " bits, proofs/P16; ";
  else if (a.singular_value_method == "mpfi")
    os << "certified singular values (MPFI, " << sv.bits << " bits; ";
  else
    os << "certified singular values (not computed; ";
  os << sv.certified_positive << " of " << sv.sigma.size() << " certified > 0";
  if (sv.certified_positive > 0) os << ", relative width <= " << a.singular_value_max_rel_width;
  os << (a.singular_values_decided ? "" : "; UNDECIDED for the question asked") << "):\n";
  // Up to 12 lines: the largest six and the smallest six when there are more (the smallest are
  // the ones a rank question turns on).
  const std::size_t count = sv.sigma.size();
  for (std::size_t k = 0; k < count; ++k) {
    if (count > 12 && k == 6) {
      os << "  ... (" << count - 12 << " more in " << field("format") << " json)\n";
      k = count - 6;
    }
    const auto [lo, hi] = outward_decimal(sv.sigma[k], 20);
    os << "  s" << k + 1 << " in [" << lo << ", " << hi << "]\n";
  }
  os << "numerical rank (matrix formed in each format; * = outside the exact rank; [exact: the exact singular values "
        "the same rule counts]):\n";
  std::string current;
  for (const auto& n : a.numerical) {
    if (n.format != current) {
      if (!current.empty()) os << "\n";
      os << "  " << n.format << std::string(n.format.size() < 10 ? 10 - n.format.size() : 1, ' ');
      current = n.format;
    }
    os << "  " << n.policy << " " << n.rank << (n.diverges ? "*" : "") << " [exact " << n.exact_lo;
    if (n.exact_hi != n.exact_lo) os << "-" << n.exact_hi;
    os << "]";
  }
  if (!current.empty()) os << "\n";
  for (const auto& n : a.notes) os << "note: " << n << "\n";
  if (a.partial) os << "PARTIAL: stopped at " << field("max_seconds") << "; the parts noted above were not computed\n";
  os << "summary: exact rank " << rank_text(e) << "; " << a.divergences << " of " << a.numerical.size()
     << " numerical measurements diverge\n";
}

}  // namespace attncert::report
