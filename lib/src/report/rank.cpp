#include "attncert/report/rank.hpp"

#include <cmath>
#include <sstream>

#include "attncert/attention/heads.hpp"
#include "attncert/linalg/certified_svd.hpp"
#include "attncert/linalg/spectra.hpp"
#include "attncert/number/decimal.hpp"

namespace attncert {

namespace {

bool perfect_square(Eigen::Index d, long& root) {
  root = static_cast<long>(std::llround(std::sqrt(static_cast<double>(d))));
  return root * root == d;
}

// The scores divided by the algebraic factor c (c = 1 or 1/√d): exact rationals.
matrix<mpq_rational> base_scores(const rank_request& r, std::string& factor) {
  factor = "1";
  if (r.S) return *r.S;
  const matrix<mpq_rational> QK = multiply(*r.Q, transpose(*r.K));
  if (r.inv_sqrt_d) {
    long root = 0;
    if (perfect_square(r.Q->cols(), root)) return QK * mpq_rational(1, root);
    factor = "1/sqrt(" + std::to_string(r.Q->cols()) + ")";
    return QK;
  }
  return QK * (r.scale ? *r.scale : mpq_rational(1));
}

// The object formed in T from the same exact inputs, every operation in T.
template <class T>
matrix<T> form_object(const rank_request& r) {
  matrix<T> S;
  if (r.S) {
    S = from_rational_matrix<T>(*r.S);
  } else {
    const matrix<T> Q = from_rational_matrix<T>(*r.Q), K = from_rational_matrix<T>(*r.K);
    T s = T(1);
    if (r.inv_sqrt_d) s = default_scale<T>(Q.cols());
    else if (r.scale) s = from_rational<T>(*r.scale);
    S = scores(Q, K, s);
  }
  if (r.object == layer_object::scores) return S;
  const matrix<T> A = masked_softmax(S, r.M);
  if (r.object == layer_object::attention) return A;
  const matrix<T> AV = multiply(A, from_rational_matrix<T>(*r.V));
  if (r.object == layer_object::output) return AV;
  return residual(from_rational_matrix<T>(*r.X), AV);
}

template <class T>
std::string dec(const T& x) {
  std::ostringstream os;
  os.precision(17);
  os << static_cast<double>(x);
  return os.str();
}

}  // namespace

nlohmann::json rank_report(const rank_request& req, const std::string& command) {
  // ---- validate shapes --------------------------------------------------------------
  if (!req.S && !(req.Q && req.K)) throw input_error("give either --scores or both --q and --k");
  if (req.Q && req.K && req.Q->cols() != req.K->cols())
    throw input_error("Q has " + std::to_string(req.Q->cols()) + " columns but K has " + std::to_string(req.K->cols()));
  const Eigen::Index nq = req.S ? req.S->rows() : req.Q->rows(), nk = req.S ? req.S->cols() : req.K->rows();
  req.M.check_shape(nq, nk);
  if ((req.object == layer_object::output || req.object == layer_object::residual) && !req.V)
    throw input_error(std::string("--object ") + to_string(req.object) + " needs --v");
  if (req.V && req.V->rows() != nk)
    throw input_error("V has " + std::to_string(req.V->rows()) + " rows but there are " + std::to_string(nk) + " keys");
  if (req.object == layer_object::residual) {
    if (!req.X) throw input_error("--object residual needs --x");
    if (req.X->rows() != nq || req.X->cols() != req.V->cols())
      throw input_error("X must have shape (" + std::to_string(nq) + ", " + std::to_string(req.V->cols()) + ")");
  }
  for (Eigen::Index i = 0; i < nq; ++i) {
    bool any = false;
    for (Eigen::Index j = 0; j < nk && !any; ++j) any = req.M.allows(i, j);
    if (!any && req.object != layer_object::scores)
      throw input_error("row " + std::to_string(i) + " is fully masked: softmax is undefined");
  }

  // ---- exact rank (transcendence method) ---------------------------------------------
  std::string factor;
  const matrix<mpq_rational> B = base_scores(req, factor);
  rank_options opt;
  opt.seed = req.seed;
  const rank_interval ex = layer_rank(B, req.M, req.object, req.V, req.X, opt);

  // ---- certified singular values (enclosures), escalating ---------------------------
  singular_value_enclosures sv;
  for (unsigned bits = req.start_bits;; bits = std::min(bits * 2, req.max_bits)) {
    precision_guard g(bits);
    sv = certified_singular_values(form_object<mpfi_float>(req));
    if (sv.certified_positive >= ex.lo || bits >= req.max_bits) break;
  }

  // ---- numerical ranks per format × policy -------------------------------------------
  nlohmann::json numerical = nlohmann::json::array();
  std::size_t divergences = 0;
  for (const auto& f : req.formats) {
    with_format(f, [&]<class T>() {
      if constexpr (tier_of<T> == tier::approx) {
        const matrix<T> Mt = form_object<T>(req);
        auto record = [&](const auto& sigma) {
          for (const auto& p : req.policies) {
            const std::size_t r = p.rank(sigma, Mt.rows(), Mt.cols(), f);
            const bool div = r < ex.lo || r > ex.hi;
            divergences += div;
            numerical.push_back({{"format", f.name},
                                 {"policy", p.name()},
                                 {"rank", r},
                                 {"threshold", sigma.empty() ? std::string("0") : number_traits<typename std::decay_t<decltype(sigma)>::value_type>::to_string(p.threshold(sigma[0], Mt.rows(), Mt.cols(), f), 17)},
                                 {"diverges", div}});
          }
        };
        if constexpr (std::is_same_v<T, double> || std::is_same_v<T, float> || std::is_same_v<T, mpfr_float>) {
          record(approx_singular_values(Mt));
        } else {
          matrix<float> F(Mt.rows(), Mt.cols());
          for (Eigen::Index i = 0; i < Mt.rows(); ++i)
            for (Eigen::Index j = 0; j < Mt.cols(); ++j) F(i, j) = static_cast<float>(Mt(i, j));
          record(approx_singular_values(F));
        }
      } else {
        throw input_error("format '" + f.name + "' is an enclosure format: numerical ranks need binary16, bfloat16, binary32, binary64 or mpfrN");
      }
    });
  }

  nlohmann::json svs = nlohmann::json::array();
  for (const auto& s : sv.sigma) {
    // Ends rounded outward (decimal.hpp): the printed [lo, hi] still contains the exact σ.
    const auto [lo, hi] = outward_decimal(s, 20);
    svs.push_back({{"lo", lo}, {"hi", hi}});
  }
  nlohmann::json fs = nlohmann::json::array();
  for (const auto& f : req.formats) fs.push_back(f.name);
  nlohmann::json ps = nlohmann::json::array();
  for (const auto& p : req.policies) ps.push_back({{"name", p.name()}, {"rule", p.formula()}});
  const Eigen::Index rows = req.object == layer_object::scores || req.object == layer_object::attention ? nq : nq;
  const Eigen::Index cols = req.object == layer_object::scores || req.object == layer_object::attention ? nk : req.V->cols();
  nlohmann::json j;
  j["tool"] = "attncert";
  j["version"] = ATTNCERT_VERSION;
  j["command"] = command;
  j["inputs"] = req.inputs;
  j["settings"] = {{"object", to_string(req.object)},
                   {"shape", {rows, cols}},
                   {"mask", req.M.describe()},
                   {"scale", req.S ? std::string("scores given") : req.inv_sqrt_d ? std::string("1/sqrt(d)") : (req.scale ? req.scale->str() : std::string("1"))},
                   {"algebraic_factor", factor},
                   {"formats", fs},
                   {"policies", ps},
                   {"policy_epsilon", "eps = 2^(1-p) of the format the matrix was formed in"},
                   {"svd_of_16_bit_formats", "binary32"},
                   {"singular_value_bits", {{"start", req.start_bits}, {"max", req.max_bits}}},
                   {"seed", req.seed}};
  j["exact_rank"] = {{"lo", ex.lo}, {"hi", ex.hi}, {"lo_witness", ex.lo_witness}, {"hi_witness", ex.hi_witness}};
  j["singular_values"] = svs;
  j["singular_values_bits"] = sv.bits;
  j["singular_values_certified_positive"] = sv.certified_positive;
  j["numerical"] = numerical;
  j["summary"] = {{"exact", ex.exact()}, {"rank_lo", ex.lo}, {"rank_hi", ex.hi}, {"measurements", numerical.size()},
                  {"divergences", divergences}};
  return j;
}

void write_rank_text(std::ostream& os, const nlohmann::json& j) {
  const auto& s = j["settings"];
  const auto& e = j["exact_rank"];
  os << "attncert " << j["version"].get<std::string>() << " — rank of the " << s["object"].get<std::string>() << " ("
     << s["shape"][0] << "x" << s["shape"][1] << ", mask " << s["mask"].get<std::string>() << ")\n";
  if (e["lo"] == e["hi"]) os << "exact rank: " << e["lo"] << "\n";
  else os << "exact rank: in [" << e["lo"] << ", " << e["hi"] << "] (UNDECIDED between these)\n";
  os << "  rank >= " << e["lo"] << ": " << e["lo_witness"].get<std::string>() << "\n";
  os << "  rank <= " << e["hi"] << ": " << e["hi_witness"].get<std::string>() << "\n";
  os << "certified singular values (MPFI, " << j["singular_values_bits"] << " bits; "
     << j["singular_values_certified_positive"] << " certified > 0):\n";
  std::size_t k = 0;
  for (const auto& sv : j["singular_values"]) {
    if (++k > 12) {
      os << "  ... (" << j["singular_values"].size() - 12 << " more in --format json)\n";
      break;
    }
    os << "  s" << k << " in [" << sv["lo"].get<std::string>() << ", " << sv["hi"].get<std::string>() << "]\n";
  }
  os << "numerical rank (matrix formed in each format; * = outside the exact rank):\n";
  std::string current;
  for (const auto& n : j["numerical"]) {
    const std::string f = n["format"].get<std::string>();
    if (f != current) {
      if (!current.empty()) os << "\n";
      os << "  " << f << std::string(f.size() < 10 ? 10 - f.size() : 1, ' ');
      current = f;
    }
    os << "  " << n["policy"].get<std::string>() << " " << n["rank"] << (n["diverges"].get<bool>() ? "*" : "");
  }
  if (!current.empty()) os << "\n";
  os << "summary: exact rank " << (e["lo"] == e["hi"] ? e["lo"].dump() : "[" + e["lo"].dump() + ", " + e["hi"].dump() + "]") << "; "
     << j["summary"]["divergences"] << " of " << j["summary"]["measurements"] << " numerical measurements diverge\n";
}

}  // namespace attncert
