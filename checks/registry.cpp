// checks/registry.cpp — the list of checks and the shared escalation helper.
#include "checks/common.hpp"

#include <chrono>
#include <sstream>

#include "attncert/deadline.hpp"

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/linalg/certified_svd.hpp"

namespace attncert::checks {

// The one instance of measure_rank per format type (checks/common.hpp declares them extern).
ATTNCERT_CHECKS_MEASURE_RANK(, binary16)
ATTNCERT_CHECKS_MEASURE_RANK(, bfloat16)
ATTNCERT_CHECKS_MEASURE_RANK(, float)
ATTNCERT_CHECKS_MEASURE_RANK(, double)
ATTNCERT_CHECKS_MEASURE_RANK(, mpfr_float)
ATTNCERT_CHECKS_MEASURE_RANK(, mpfi_float)

check_entry make_two_token();
check_entry make_identical_values();
check_entry make_causal_mask();
check_entry make_output_bound();
check_entry make_log_odds();
check_entry make_residual();
check_entry make_multi_head();
check_entry make_nearest_neighbour();
check_entry make_head_size_bottleneck();
check_entry make_rank_collapse();
check_entry make_linear_attention();
check_entry make_random_features();
check_entry make_rank_heads_tradeoff();
check_entry make_permutation_symmetry();
check_entry make_attenuated_direction();
check_entry make_contrast_injection();

const std::vector<check_entry>& registry() {
  static const std::vector<check_entry> all = {make_two_token(), make_identical_values(), make_causal_mask(),
                                               make_output_bound(), make_log_odds(), make_residual(),
                                               make_multi_head(),   make_nearest_neighbour(),
                                               make_head_size_bottleneck(), make_rank_collapse(),
                                               make_linear_attention(), make_random_features(), make_rank_heads_tradeoff(),
                                               make_permutation_symmetry(), make_attenuated_direction(),
                                               make_contrast_injection()};
  return all;
}

const check_entry* find_check(const std::string& id) {
  for (const auto& c : registry())
    if (c.id == id) return &c;
  return nullptr;
}

std::vector<const check_entry*> select_checks(const std::vector<std::string>& ids) {
  std::vector<const check_entry*> chosen;
  if (ids.empty())
    for (const auto& c : registry()) chosen.push_back(&c);
  for (const auto& id : ids) {
    const auto* c = find_check(id);
    if (!c) {
      std::string known;
      for (const auto& k : registry()) known += (known.empty() ? "" : ", ") + k.id;
      throw input_error("unknown check '" + id + "' (known: " + known + ")");
    }
    chosen.push_back(c);
  }
  return chosen;
}

certified_sign certify_sign(const std::function<mpfi_float()>& f, unsigned start, unsigned cap, bool want_positive) {
  return ziv_escalate(precision_schedule{start, cap}, [&](unsigned bits) {
           precision_guard g(bits);
           const mpfi_float x = f();
           certified_sign out;
           out.bits = g.bits();
           out.enclosure = number_traits<mpfi_float>::to_string(x, 20);
           out.answer = want_positive ? certainly_positive(x) : certainly_nonzero(x);
           const bool decided = out.answer != truth::unknown;
           return ziv_step<certified_sign>{std::move(out), decided};
         })
      .value;
}

certified_value certify_value(const std::function<mpfi_float()>& f, unsigned start, unsigned cap, int rel_width_log2) {
  return ziv_escalate(precision_schedule{start, cap}, [&](unsigned bits) {
           precision_guard g(bits);
           certified_value out;
           out.enclosure = f();
           out.bits = g.bits();
           const mpfi_float& x = out.enclosure;
           if (mpfr_zero_p(&x.backend().data()->left) && mpfr_zero_p(&x.backend().data()->right)) {
             out.exactly_zero = true;  // [0, 0]: the operations were exact on an exact zero
             return ziv_step<certified_value>{std::move(out), true};
           }
           const mpfr_float a = abs(lower_of(x)), b = abs(upper_of(x));
           const bool tight = !contains_zero(x) && mpfi_bounded_p(x.backend().data()) &&
                              mpfr_float(upper_of(x) - lower_of(x)) <= ldexp(mpfr_float(a < b ? a : b), -rel_width_log2);
           return ziv_step<certified_value>{std::move(out), tight};
         })
      .value;
}

namespace {
mpq_rational rational_of(mpfr_srcptr x) {
  mpq_rational q;
  mpfr_get_q(q.backend().data(), x);
  return q;
}
mpq_rational power_of_two(int k) {  // 2^k, exactly
  mpq_rational q(1);
  if (k >= 0) mpq_mul_2exp(q.backend().data(), q.backend().data(), static_cast<unsigned long>(k));
  else mpq_div_2exp(q.backend().data(), q.backend().data(), static_cast<unsigned long>(-k));
  return q;
}
}  // namespace

sigma_min_reference certify_formed_sigma_min(const matrix<mpq_rational>& M, unsigned start_bits, unsigned cap_bits,
                                             int tau_log2) {
  sigma_min_reference ref;
  const std::size_t k = static_cast<std::size_t>(std::min(M.rows(), M.cols()));
  if (k == 0) return ref;
  ref.formed_rank = rank(M);
  if (ref.formed_rank < k) {
    ref.exactly_zero = true;
    ref.text = "0";
    return ref;
  }
  const mpq_rational goal = power_of_two(-(tau_log2 + 2));
  start_bits = std::min(start_bits, cap_bits);
  for (unsigned bits = start_bits;; bits = std::min(cap_bits, 2 * bits)) {
    const singular_value_enclosures e = certified_singular_values(M, bits, bits, k);
    precision_guard g(e.bits);
    const mpfi_float& s = e.sigma.back();
    mpfr_srcptr left = &s.backend().data()->left, right = &s.backend().data()->right;
    ref.bits = e.bits;
    ref.positive = mpfr_sgn(left) > 0;
    ref.hi_finite = mpfr_number_p(right) != 0;
    ref.lo = mpfr_sgn(left) > 0 ? rational_of(left) : mpq_rational(0);
    ref.hi = ref.hi_finite ? rational_of(right) : mpq_rational(0);
    ref.text = interval_text(s, 17);
    const bool tight = ref.positive && ref.hi_finite && mpq_rational(ref.hi - ref.lo) <= mpq_rational(goal * ref.lo);
    if (tight || bits >= cap_bits) break;
  }
  return ref;
}

sigma_min_judgement judge_sigma_min(const sigma_min_reference& ref, const mpq_rational& measured,
                                    const mpq_rational& measured_max, std::size_t m, std::size_t n, unsigned svd_bits) {
  sigma_min_judgement jd;
  const int tau_log2 = static_cast<int>((svd_bits - 1) / 2);
  const mpq_rational eps = power_of_two(1 - static_cast<int>(svd_bits)), tau = power_of_two(-tau_log2);
  if (ref.exactly_zero) {
    const mpq_rational floor = mpq_rational(static_cast<long>(4 * std::max(m, n))) * eps * measured_max;
    jd.diverges = measured > floor;
    jd.rule = "sigma_min = 0 exactly: agrees when <= 4 max(m,n) eps sigma_1 (the SVD's backward error; eps = 2^" +
              std::to_string(1 - static_cast<int>(svd_bits)) + ")";
    return jd;
  }
  const mpq_rational lower_ok = ref.lo * (mpq_rational(1) - tau), upper_ok = ref.hi * (mpq_rational(1) + tau);
  jd.diverges = measured < lower_ok || (ref.hi_finite && measured > upper_ok);
  jd.rule = "relative 2^-" + std::to_string(tau_log2) + " (about sqrt(eps) of the SVD's arithmetic) of the certified enclosure";
  return jd;
}

}  // namespace attncert::checks

namespace attncert::checks {
report::check_report run_check(const check_entry& c, const run_settings& rs) {
  report::check_report rep = c.run(rs);
  rep.id = c.id;
  rep.title = c.title;
  rep.section = c.section;
  rep.proof = c.proof;
  rep.error_model = c.error_model;
  return rep;
}

namespace {
report::check_report not_computed(const check_entry& c, const std::string& why) {
  report::check_report rep;
  rep.id = c.id;
  rep.title = c.title;
  rep.section = c.section;
  rep.proof = c.proof;
  rep.error_model = c.error_model;
  rep.not_computed = true;
  report::claim_row row;
  row.claim = "not-computed";
  row.statement = "every claim of this check";
  row.instance = "-";
  row.format = "-";
  row.tier = "-";
  row.result = verdict::undecided;
  row.note = why;
  rep.claims.push_back(row);
  return rep;
}
}  // namespace

std::vector<report::check_report> run_checks(const std::vector<const check_entry*>& chosen, const run_settings& rs,
                                             const std::function<void(std::size_t)>& on_start) {
  deadline_scope budget(rs.max_seconds);
  const auto t0 = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    std::ostringstream os;
    os.precision(3);
    os << std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    return os.str();
  };
  std::vector<report::check_report> out;
  for (std::size_t k = 0; k < chosen.size(); ++k) {
    check_interrupt();
    if (on_start) on_start(k);
    if (deadline_passed()) {
      out.push_back(not_computed(*chosen[k], "not started: the budget (" + field("max_seconds") + ") had passed at " + elapsed() + " s"));
      continue;
    }
    try {
      out.push_back(run_check(*chosen[k], rs));
    } catch (const time_limit_reached&) {
      out.push_back(not_computed(*chosen[k], "stopped at " + elapsed() + " s: the budget (" + field("max_seconds") +
                                                  ") passed while it ran"));
    }
  }
  return out;
}
}  // namespace attncert::checks
