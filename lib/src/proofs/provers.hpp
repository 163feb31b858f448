// lib/src/proofs/provers.hpp — private declarations of the proofs module (not installed).
//
// Data flow of `attncert certify` (attncert/proofs/claim.hpp):
//   claim JSON --claim_schema.cpp--> parsed_claim (validated once, typed)
//              --prove_<quantity>.cpp--> certify_result (verdict, summary, report, certificate)
//              --certify.cpp--> the independent checker re-checks the certificate.
// certificate_writer.cpp builds every report and certificate header and the JSON encodings
// of matrices, polynomials and the claim's objects.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <variant>

#include "attncert/proofs/rank_heads.hpp"

#include "attncert/drift/recipe.hpp"
#include "attncert/proofs/claim.hpp"
#include "attncert/rank/exact_rank.hpp"
#include "attncert/rank/family.hpp"
#include "attncert/rank/policy.hpp"

namespace attncert::proofs::detail {

// ---- claim schema (claim_schema.cpp) ----------------------------------------------------

/// Throws input_error "POINTER: why" (the message format of every malformed claim).
[[noreturn]] void fail(const std::string& pointer, const std::string& why);

/// The member `key` of the object `j`, or nullptr (also when `j` is not an object).
const nlohmann::json* find_member(const nlohmann::json& j, const std::string& key);

/// An exact rational from a JSON integer or a decimal / fraction string (tier: exact).
/// Errors: input_error at `pointer` (not a number, beyond the digit or exponent limit).
mpq_rational exact_number(const nlohmann::json& v, const std::string& pointer);

/// A matrix given inline (rows of exact numbers) or as a .npy / .json path relative to
/// `base_dir`.  Errors: input_error naming the pointer of the bad entry.
matrix<mpq_rational> read_matrix(const nlohmann::json& v, const std::string& pointer, const std::string& base_dir);

/// The one mask parser of claim files (every quantity reads "/objects/mask" through it).
/// Accepted: "none", "causal", or a matrix of booleans whose entries are true/false or 0/1
/// (true / 1 = the key is visible).  Anything else: input_error "/objects/mask: expected
/// \"none\", \"causal\" or a boolean matrix (rows of true/false or 0/1)", at the pointer of
/// the offending row or entry for a ragged row or a bad entry.  Its shape is checked against
/// the scores by the prover (mask::check_shape).
mask parse_claim_mask(const nlohmann::json& v);

/// A rank relation: "=" ("=="), "<=" ("≤"), ">=" ("≥").
enum class rank_relation { eq, le, ge };
rank_relation parse_rank_relation(const nlohmann::json& j);
const char* relation_text(rank_relation r);
bool relation_holds(rank_relation r, std::size_t lhs, std::size_t rhs);

/// A relation of a real-valued quantity with an exact value: "=", "<=", ">=" or "within"
/// (|quantity − value| <= tolerance).
struct real_relation {
  std::string text;  ///< "=", "<=", ">=", "within"
  mpq_rational value, tolerance;
  /// "TEXT VALUE", with " +- TOLERANCE" for within: "<= 1/2", "within 1/2 +- 1/10".
  std::string describe() const;
};
real_relation parse_real_relation(const nlohmann::json& relation, const nlohmann::json& value, const nlohmann::json* tolerance);

enum class quantity_kind { rank, determinant, output_value, singular_value, output_bound, numerical_rank, rank_heads_lower_bound, rank_heads_vote_mse,
                           rank_heads_full_rank_mse, rank_heads_hardmax_orthonormal, rank_heads_hardmax_directions,
                           rank_heads_context_hit_rate, rank_heads_pair_hit_probability, nearest_neighbour_model_mse };

/// A claim about one layer's object over the family S(a) = a·S0 (rank, determinant,
/// output_value, singular_value).
struct layer_claim {
  quantity_kind kind = quantity_kind::rank;
  layer_object object = layer_object::attention;
  family_input in;                ///< S0, mask, V, X and the object
  a_range range;                  ///< default: the point a = 1
  std::string range_text;         ///< "a = 1 (scores as given)", "a = 1/2", "a in (0, inf)"
  bool has_family = false;        ///< the claim has a "family" member
  std::string algebraic_point;    ///< nonempty: S = (1/sqrt(d))·QKᵀ with d not a square
  rank_relation rank_rel = rank_relation::eq;  ///< kind == rank
  std::size_t rank_value = 0;                  ///< kind == rank
  real_relation real_rel;                      ///< the other kinds
  long row = -1, col = -1;                     ///< output_value: the entry
  long index = -1;                             ///< singular_value: k of sigma_k (1-based)
};

/// An output-error bound claim (P04) at a point.
struct output_bound_claim {
  long row = 0;
  matrix<mpq_rational> S0, S_hat0, V;
  mask M = mask::none();
  mpq_rational a0 = 1;
};

/// A numerical-rank claim: the rank a recipe and a policy see, at a point.
struct numerical_rank_claim {
  std::string object;      ///< "scores", "attention" or "output"
  recipe rec;
  rank_policy policy;
  rank_relation rel = rank_relation::eq;
  std::size_t value = 0;
  mpq_rational a0 = 1;
  recipe_input in;         ///< binary64 inputs; Q = S0 and K = I when S is given
};

/// A rank–heads lower-bound claim (proofs/L4 parts D and F): every one-layer network of `heads` heads of rank
/// ≤ `rank` in dimension d (N = 2 distribution; no residual path unless `residual`) has MSE ≥ value.
struct rank_heads_claim {
  int d = 3;
  mpz_int heads = 1;
  int rank = 1;
  bool residual = false;
  int max_degree = 81;  ///< the odd truncation degree L of the bound
  mpq_rational value = 0;
};

/// A rank–heads vote claim (proofs/L4 part F): the two-layer vote construction with `heads` (odd) i.i.d. uniform
/// rank-one vote directions and one threshold head, hardmax, on the N = 2 distribution in dimension d, has MSE
/// averaged over the directions and the inputs ≤ value (`at_most`) or ≥ value.  The mean is a definite number, so
/// either side can be refuted.
struct rank_heads_vote_claim {
  int d = 3;
  long heads = 1;
  int panels = 400;  ///< the Riemann panels to start with (doubled up to 3200 while undecided)
  bool at_most = true;
  mpq_rational value = 0;
};

/// A full-rank-head claim (proofs/L4 part A): the head W_KᵀW_Q = λI, W_OᵀW_V = I on the N = 2 distribution in
/// dimension d has MSE ≤ value (`at_most`) or ≥ value.  A definite number: either side can be refuted.
struct rank_heads_full_rank_claim {
  int d = 3;
  mpq_rational lambda = 1;
  int panels = 2048;  ///< the quadrature panels to start with (doubled up to 65536 while undecided)
  bool at_most = true;
  mpq_rational value = 0;
};

/// A hardmax claim (proofs/L4 part E): every hardmax layer of `heads` rank-one heads whose query directions are
/// orthonormal (any key directions, values and outputs; no residual path) has MSE ≥ value on the N = 2 distribution
/// in dimension d — through the relaxed error ½(1 − H·M_d), exact in ℚ + ℚπ⁻².
struct rank_heads_hardmax_claim {
  int d = 3;
  int heads = 1;
  mpq_rational value = 0;
};

/// A hardmax claim with given query directions (proofs/L4 part E, "verified solve"): every hardmax layer of rank-one
/// heads whose query directions are the rows of `directions` (H × d, exact, nonzero; any key directions, values and
/// outputs; no residual path) has MSE ≥ value on the N = 2 distribution — through the relaxed error ½(1 − tr(K⁻¹B)),
/// enclosed by rank_heads::hardmax_relaxed_mse.
struct rank_heads_directions_claim {
  int d = 3;
  matrix<mpq_rational> directions;
  int max_degree = 41;  ///< the series truncation of B (the tail is enclosed)
  mpq_rational value = 0;
};

/// A context-length claim (proofs/L4 part G): on the lattice instance of rank_heads::context_counts with instance seed
/// `seed`, the exact rate at which a rank-one hardmax head from the pool of `heads` selects the nearest of the first
/// `keys` keys, over `inputs` inputs, relates to value by `relation` ("=", "<=", ">=").  Exact: CERTIFIED or REFUTED.
struct rank_heads_context_claim {
  int d = 3, keys = 2, inputs = 2, heads = 2;
  std::uint64_t seed = 0;
  std::string relation = "=";
  mpq_rational value = 0;
};

/// A pair-hit claim (proofs/L4 part G): p₂(d), the probability that a rank-one hardmax head with a uniform direction
/// selects the nearer of two uniform keys for a uniform query, is ≤ value (`at_most`) or ≥ value.  p₂(d) = A + B·π^{−k}
/// exactly, so either side can be refuted.
struct rank_heads_pair_hit_claim {
  int d = 3;
  bool at_most = true;
  mpq_rational value = 0;
};

/// A trained-model claim (proofs/L4 parts H and I): the attention-only model `model` (weights exactly binary64, in
/// the layout of rank_heads::trained_model_info) has MSE ≤ value (`at_most`) or ≥ value on the fixed test set of
/// `inputs` inputs with N = model.N keys.  The MSE on the set is a definite number: CERTIFIED or REFUTED.
struct nearest_neighbour_model_claim {
  rank_heads::trained_model_info model{};
  std::vector<double> weights;  ///< model.weights points here once the claim is in place (prove_* re-points it)
  int inputs = 200;
  bool at_most = true;
  mpq_rational value = 0;
};

/// A claim file, parsed and validated once.  `not_supported` nonempty: the claim is well
/// formed as far as it was read but asks for what the method does not cover (the prover
/// answers UNDECIDED with this reason; the rest of the claim is then not read).
struct parsed_claim {
  quantity_kind kind = quantity_kind::rank;
  std::string not_supported;
  std::variant<layer_claim, output_bound_claim, numerical_rank_claim, rank_heads_claim, rank_heads_vote_claim, rank_heads_full_rank_claim,
               rank_heads_hardmax_claim, rank_heads_directions_claim, rank_heads_context_claim, rank_heads_pair_hit_claim,
               nearest_neighbour_model_claim>
      body;
};

/// Parses and validates `claim` (matrix paths relative to `base_dir`).  Errors: input_error
/// "POINTER: why".
parsed_claim parse_claim(const nlohmann::json& claim, const std::string& base_dir);

// ---- certificate writer (certificate_writer.cpp) ---------------------------------------

/// The head of every report: tool, version and (when `with_title`) the claim's title.
nlohmann::json report_header(const nlohmann::json& claim, bool with_title = true);

/// The head of every certificate: format, tool, version, the claim section and the verdict.
nlohmann::json certificate_header(nlohmann::json claim_section, claim_verdict verdict);

/// UNDECIDED with a reason: report {tool, version, verdict, why, summary[, title]}.
certify_result undecided_result(const nlohmann::json& claim, const std::string& why);

/// Turns a partly written result into UNDECIDED: summary `summary`, report verdict and `why`
/// (the report keeps what was written, e.g. the claim text, and gets no "summary" member:
/// these reports keep the shape they have always had).
certify_result& mark_undecided(certify_result& res, const std::string& summary, const std::string& why);

nlohmann::json matrix_json(const matrix<mpq_rational>& m);
nlohmann::json poly_json(const int_poly& p);
/// The polynomials of a Sturm sequence, each as poly_json.
nlohmann::json sturm_json(const int_poly& squarefree);

/// The claim section of a layer claim's certificate: title, S0, mask, V, X, object and the
/// point / range (the quantity-specific members are added by the prover).
nlohmann::json layer_claim_json(const layer_claim& c, const nlohmann::json& claim);

// ---- polynomials over ℤ in u (polynomial.cpp) ------------------------------------------

int_poly poly_add(const int_poly& a, const int_poly& b);
int_poly poly_mul(const int_poly& a, const int_poly& b);
int_poly poly_neg(int_poly a);
/// p·c for an integer c.
int_poly poly_scale(int_poly p, const mpz_int& c);
/// The monomial u^k.
int_poly monomial(long k);

/// The statement of a layer claim as the rank prover prints it ("rank attention = 3 for a in
/// (0, inf)"); the real-valued kinds print as "det OBJECT RELATION for ..." (prove_rank.cpp).
std::string layer_claim_text(const layer_claim& c);

// ---- the provers (one file each) ---------------------------------------------------------
// Each returns the prover's verdict and certificate, not yet re-checked (certify.cpp does).

certify_result prove_rank(const layer_claim& c, const nlohmann::json& claim, unsigned max_bits);
/// Determinant and output_value claims: the quantity is a ratio P(u)/R(u) with R > 0.
certify_result prove_ratio(const layer_claim& c, const nlohmann::json& claim, unsigned max_bits);
certify_result prove_singular_value(const layer_claim& c, const nlohmann::json& claim, unsigned max_bits);
certify_result prove_output_bound(const output_bound_claim& c, const nlohmann::json& claim, unsigned max_bits);
certify_result prove_numerical_rank(const numerical_rank_claim& c, const nlohmann::json& claim);
certify_result prove_rank_heads(const rank_heads_claim& c, const nlohmann::json& claim, unsigned max_bits);
certify_result prove_rank_heads_vote(const rank_heads_vote_claim& c, const nlohmann::json& claim);
certify_result prove_rank_heads_full_rank(const rank_heads_full_rank_claim& c, const nlohmann::json& claim);
certify_result prove_rank_heads_hardmax(const rank_heads_hardmax_claim& c, const nlohmann::json& claim, unsigned max_bits);
certify_result prove_rank_heads_directions(const rank_heads_directions_claim& c, const nlohmann::json& claim);
certify_result prove_rank_heads_context(const rank_heads_context_claim& c, const nlohmann::json& claim);
certify_result prove_rank_heads_pair_hit(const rank_heads_pair_hit_claim& c, const nlohmann::json& claim, unsigned max_bits);
certify_result prove_nearest_neighbour_model(const nearest_neighbour_model_claim& c, const nlohmann::json& claim);

/// The polynomial family M(u) of a layer claim (rank/family.cpp's build_family).  Errors:
/// family_too_large passes through (the dispatcher answers UNDECIDED); any other
/// input_error is reported at "/objects".
poly_family build_claim_family(const family_input& in);

}  // namespace attncert::proofs::detail
