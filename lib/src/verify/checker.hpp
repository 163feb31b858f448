// lib/src/verify/checker.hpp — the certificate checker's private declarations (namespace
// attncert::verify::checker), shared by the files of lib/src/verify/:
//   json_fields.cpp      reading exact numbers, polynomials and matrices from the certificate
//   polynomial.cpp       exact polynomial arithmetic over ℤ and ℚ, Sturm sequences, minors of M(u)
//   enclosure.cpp        MPFI enclosures of e^{a/q} and q·log u, the range of a, signs at a point
//   polynomial_matrix.cpp  M(u) rebuilt from the claim (S0, mask, V, X)
//   rank.cpp, ratio.cpp, singular_value.cpp, output_bound.cpp, numerical_rank.cpp, rank_heads.cpp,
//   rank_heads_directions.cpp, rank_heads_context.cpp, nearest_neighbour_model.cpp
//                        one checker per claim quantity
//   certificate.cpp      the public entry points (attncert/verify/certificate.hpp)
// Only the number libraries (GMP through Boost.Multiprecision, MPFR, MPFI) and the JSON parser:
// no other attncert header (the CTest verify.independence).
#pragma once

#include <mpfi.h>
#include <mpfr.h>

#include <boost/multiprecision/gmp.hpp>
#include <cstdint>
#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <nlohmann/json.hpp>
#include <optional>
#include <stdexcept>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

namespace attncert::verify::checker {

// ---- exact numbers and polynomials ------------------------------------------------------
using Z = boost::multiprecision::number<boost::multiprecision::gmp_int, boost::multiprecision::et_off>;       // ℤ
using Q = boost::multiprecision::number<boost::multiprecision::gmp_rational, boost::multiprecision::et_off>;  // ℚ
using zpoly = std::vector<Z>;              // a polynomial in ℤ[u], low → high, no trailing zeros
using qpoly = std::vector<Q>;              // a polynomial in ℚ[u]
using qmatrix = std::vector<std::vector<Q>>;  // a rational matrix, row-major

// ---- the three ways a check ends (besides success) --------------------------------------
struct malformed : std::runtime_error {  // not a certificate (status malformed)
  using std::runtime_error::runtime_error;
};
struct invalid : std::runtime_error {  // a stated fact is false (status invalid)
  using std::runtime_error::runtime_error;
};
struct beyond_cap : std::runtime_error {  // may be valid, but checking needs more than the precision cap
  using std::runtime_error::runtime_error;
};

/// The caller asked the checker to stop (verify_options::stop returned true): status unchecked.
/// Not a std::runtime_error, so that no handler for malformed input can take it for one.
struct stopped : std::exception {
  const char* what() const noexcept override { return "stopped by the caller"; }
};

/// Throws invalid(what) unless ok.
void check(bool ok, const std::string& what);

// ---- certificate.cpp: the caller's stop hook ----------------------------------------------
/// Sets this thread's stop hook (verify_options::stop; null or empty: none) and returns the
/// previous one.  (A function, not an extern thread_local: see exchange_precision_cap.)
const std::function<bool()>* exchange_stop_hook(const std::function<bool()>* hook);
/// Asks the stop hook; throws stopped when it returns true.  Called in every loop whose length
/// a certificate controls (Euclid, Sturm sequences, Horner evaluations, products of large
/// polynomials, Laplace expansion, minor enumeration, MPFI escalation, Faddeev–LeVerrier): between
/// two polls there is one step of such a loop, e.g. one MPFI exponential at the precision cap.
void poll();

/// Receives one line of what was checked (verification::notes).
using note_fn = std::function<void(const std::string&)>;

// ---- json_fields.cpp: reading the certificate -------------------------------------------
constexpr std::size_t max_depth = 64;  // JSON nesting depth (parse_certificate_text)

/// `s` for a one-line message: control characters escaped, cut after 80 characters.
std::string shown(const std::string& s);
/// [+-]?digits (at most 2^26 digits); malformed otherwise.
Z parse_integer(const std::string& s, const std::string& where, bool sign_allowed = true);
/// "p", "-p", "p/q" (q > 0) or a decimal "d.ddde±x" (README "Limits on input"); malformed otherwise.
Q parse_rational(const std::string& s, const std::string& where);
/// The member `key` of the object j; malformed when missing.
const nlohmann::json& field(const nlohmann::json& j, const std::string& key, const std::string& where);
/// An exact number: a string parse_rational reads, or a JSON integer.
Q exact_number(const nlohmann::json& j, const std::string& where);
/// A non-empty, rectangular matrix of exact numbers.
qmatrix rational_matrix(const nlohmann::json& j, const std::string& where);
/// A coefficient list of integers (low → high) without a trailing zero.
zpoly integer_polynomial(const nlohmann::json& j, const std::string& where);
/// A strictly increasing list of indices in [0, bound).
std::vector<long> index_list(const nlohmann::json& j, const std::string& where, long bound);
/// The member `key` of j, a string; malformed when missing or not a string.
std::string text_field(const nlohmann::json& j, const std::string& key, const std::string& where);

/// An integer field: a JSON integer within T's range, else malformed.  (nlohmann's get<long>()
/// on a JSON float such as 1.8e105 is an undefined conversion: found by fuzz_verify.)
template <typename T>
T integer(const nlohmann::json& j, const std::string& where) {
  if (j.is_number_unsigned()) {
    const std::uint64_t v = j.get<std::uint64_t>();
    if (v > static_cast<std::uint64_t>(std::numeric_limits<T>::max())) throw malformed(where + ": integer out of range");
    return static_cast<T>(v);
  }
  if (j.is_number_integer()) {
    const std::int64_t v = j.get<std::int64_t>();
    if constexpr (std::is_unsigned_v<T>) {
      if (v < 0 || static_cast<std::uint64_t>(v) > static_cast<std::uint64_t>(std::numeric_limits<T>::max()))
        throw malformed(where + ": integer out of range");
    } else {
      if (v < static_cast<std::int64_t>(std::numeric_limits<T>::min()) || v > static_cast<std::int64_t>(std::numeric_limits<T>::max()))
        throw malformed(where + ": integer out of range");
    }
    return static_cast<T>(v);
  }
  throw malformed(where + ": expected an integer");
}

// ---- polynomial.cpp: exact polynomial arithmetic ----------------------------------------
void trim(zpoly& p);
void trim(qpoly& p);
zpoly add(const zpoly& a, const zpoly& b);
zpoly mul(const zpoly& a, const zpoly& b);
zpoly neg(zpoly a);
Q evaluate(const zpoly& p, const Q& x);
int sign_of(const Q& v);
qpoly to_rational(const zpoly& p);
/// Primitive integer polynomial with the same sign pattern as p (p divided by a positive number).
zpoly primitive_same_sign(const qpoly& p);
/// Primitive, positive leading coefficient.
zpoly normalized(const qpoly& p);
/// a / b when b divides a exactly (else invalid: an internal inconsistency).
qpoly exact_quotient(qpoly a, const qpoly& b);
/// gcd(a, b), normalized (Euclid over ℚ).
zpoly primitive_gcd(const zpoly& a, const zpoly& b);
/// p / gcd(p, p'), normalized.
zpoly squarefree_part(const zpoly& p);
/// The Sturm sequence of p (each term a positive rescaling of the classical one).
std::vector<zpoly> sturm_sequence(const zpoly& p);
/// Number of roots of the squarefree p in (lo, hi) — lo, hi not roots; hi empty = +∞ (Sturm).
int roots_between(const zpoly& p, const Q& lo, const std::optional<Q>& hi);
/// Calls f with every increasing k-subset of {0, ..., n-1}.
void for_each_subset(long n, long k, const std::function<void(const std::vector<long>&)>& f);

// ---- polynomial_matrix.cpp: M(u), rebuilt from the claim ---------------------------------
/// M(u): a rows x cols matrix of polynomials in ℤ[u], u = e^{a/q}.
struct polynomial_matrix {
  long rows = 0, cols = 0;
  std::vector<zpoly> entries;  // row-major
  Z q = 1;
  const zpoly& at(long i, long j) const { return entries[static_cast<std::size_t>(i * cols + j)]; }
};

/// The determinant of the minor (rows, cols) of M(u), by Laplace expansion (k ≤ 8).
zpoly minor_of(const polynomial_matrix& F, const std::vector<long>& rows, const std::vector<long>& cols);

/// The claim's matrix as the checker rebuilds it: object = D(u)^-1 M(u) / value_scale for
/// attention, output and residual (row_sums = D_i(u)); the integer matrix of S0 for scores.
struct rebuilt_claim {
  polynomial_matrix M;
  std::string object;          // scores, attention, output or residual
  bool scores = false;
  std::vector<zpoly> row_sums;  // D_i(u): row sums of the row-normalized exponentials (not scores)
  Z value_scale = 1;            // the integer scale of V (and X for the residual) in M
};
/// Rebuilds M(u) from /claim (S0, mask, object, V, X) and checks the stated /q.
rebuilt_claim rebuild_claim_matrix(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);

// ---- enclosure.cpp: MPFI enclosures, the range of a, signs at a point ----------------------
/// The precision cap of the current verify_certificate call (MPFI enclosures of e^{a/q}).
/// Sets this thread's precision cap and returns the previous one.  (A function, not an extern
/// thread_local: GCC 12 with UBSan miscompiles a cross-unit extern thread_local access into a
/// store through a null pointer.)
unsigned exchange_precision_cap(unsigned bits);
unsigned precision_cap();
std::string precision_cap_text();

/// Rational [l, h] ∋ e^{a/q} (MPFI at `bits`); beyond_cap when |a/q| > 10^4.
std::pair<Q, Q> exp_enclosure(const Q& a, const Z& q, unsigned bits);
/// Does the stated enclosure [alo, ahi] contain q·log u for every u in [ulo, uhi]?
bool encloses_q_log(const Q& alo, const Q& ahi, const Q& ulo, const Q& uhi, const Z& q);
/// Is e^{a/q} < x (true) or > x (false)?  a ≠ 0 rational: e^{a/q} is transcendental, never x.
bool exp_below(const Q& a, const Z& q, const Q& x);
/// The sign of H at the claim's point a0 equals its sign at the sample s (else invalid or beyond_cap).
void check_sign_at_point(const zpoly& H, const Q& a0, const Q& s, const Z& q, const std::string& where);

/// A range of a: (lo, hi), [lo, hi], ends possibly infinite.
struct range_t {
  std::optional<Q> lo, hi;
  bool lo_open = true, hi_open = true;
  bool contains(const Q& a) const {
    if (lo && (a < *lo || (lo_open && a == *lo))) return false;
    if (hi && (a > *hi || (hi_open && a == *hi))) return false;
    return true;
  }
};
range_t parse_range(const std::string& text);

/// The image of a range of a under u = e^{a/q}, as seen by the zeros of a squarefree g:
/// rational cuts low < high (high empty = +∞) with no zero of g between a cut and the true end,
/// and the number of zeros of g with u = e^{a/q}, a in the range (u = 1, a = 0, counted when
/// g(1) = 0 and 0 is in the range).
struct range_image {
  Q low = 0;
  std::optional<Q> high;
  bool one_is_root = false;  // g(1) = 0
  int zeros = 0;
};
/// `zeros_name` names the zeros in the beyond-cap message ("roots of g", "zeros").
range_image image_of_range(const range_t& R, const zpoly& g, const Z& q, const std::string& zeros_name);

// ---- one checker per claim quantity ---------------------------------------------------------
/// Rank certificates: generic rank (upper and lower bound), drops in the range, verdict.
void verify_rank(const nlohmann::json& cert, const nlohmann::json& claim, const rebuilt_claim& rc, const note_fn& note);
/// Determinant and output-value certificates: a quantity P(u)/R(u), R > 0 for u > 0.
void verify_ratio(const nlohmann::json& cert, const nlohmann::json& claim, const rebuilt_claim& rc, const note_fn& note);
/// Singular-value certificates at a point.
void verify_singular_value(const nlohmann::json& cert, const nlohmann::json& claim, const rebuilt_claim& rc, const note_fn& note);
/// Output-bound certificates (P04).
void verify_output_bound(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// Numerical-rank certificates (a recipe's formed matrix, a threshold policy).
void verify_numerical_rank(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);

/// Rank–heads lower-bound certificates (proofs/L4 parts D and F; rank_heads.cpp).
void verify_rank_heads(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// Vote-construction mean-MSE certificates (proofs/L4 part F; rank_heads.cpp).
void verify_rank_heads_vote(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// Full-rank-head MSE certificates (proofs/L4 part A; rank_heads.cpp).
void verify_rank_heads_full_rank(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// Orthonormal hardmax heads' relaxed-error certificates (proofs/L4 part E; rank_heads.cpp).
void verify_rank_heads_hardmax(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// Hardmax heads' relaxed-error certificates for given query directions (proofs/L4 part E; rank_heads_directions.cpp).
void verify_rank_heads_directions(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// Exact hit-rate certificates of the context-length lattice instance (proofs/L4 part G; rank_heads_context.cpp).
void verify_rank_heads_context(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// Closed-form p₂(d) certificates, the pair-hit probability of a rank-one hardmax head (proofs/L4 part G; rank_heads_context.cpp).
void verify_rank_heads_pair_hit(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);
/// The MSE of an attention-only model on the fixed nearest-neighbour test set (proofs/L4 parts H and I;
/// nearest_neighbour_model.cpp).
void verify_nearest_neighbour_model(const nlohmann::json& cert, const nlohmann::json& claim, const note_fn& note);

// ---- rank_heads.cpp helpers shared with rank_heads_directions.cpp ---------------------------
/// N(d, ℓ), the dimension of the degree-ℓ spherical harmonics on S^{d−1} (exact).
Z dimension(long d, long l);
/// E_ℓ for odd ℓ, exact: the energy itself for odd d, its coefficient of π⁻² for even d (E_ℓ = this·π⁻²).
Q energy(long d, long l);
/// M_d = a + b·π⁻² (exact a, b), the arcsin moment (4/π²) E[arcsin(t)²], from the Fourier expansion of cos^{d−2}.
void arcsin_moment_fourier(long d, Q& a, Q& b);
/// n MPFI intervals at one precision, with their lifetime (rank_heads_directions.cpp, nearest_neighbour_model.cpp).
class interval_pool {
 public:
  interval_pool(std::size_t n, mpfr_prec_t bits) : v_(n) {
    for (__mpfi_struct& x : v_) mpfi_init2(&x, bits);
  }
  ~interval_pool() {
    for (__mpfi_struct& x : v_) mpfi_clear(&x);
  }
  interval_pool(const interval_pool&) = delete;
  interval_pool& operator=(const interval_pool&) = delete;
  template <class I>
  mpfi_ptr operator[](I k) {
    return &v_[static_cast<std::size_t>(k)];
  }

 private:
  std::vector<__mpfi_struct> v_;
};
/// SplitMix64 (Steele, Lea, Flood), the generator of the instances of proofs/L4 parts G and H: state += 0x9E3779B97F4A7C15,
/// z = state, z = (z ^ z>>30)·0xBF58476D1CE4E5B9, z = (z ^ z>>27)·0x94D049BB133111EB, next = z ^ z>>31.
struct splitmix64 {
  std::uint64_t state;
  std::uint64_t next() {
    state += 0x9E3779B97F4A7C15ULL;
    std::uint64_t z = state;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
    return z ^ (z >> 31);
  }
};
/// An integer point z of the ball 0 < |z|² ≤ 4096² in dimension d ≤ 8 (parts G and H).
struct lattice_point {
  std::array<long, 8> z{};
  long norm2 = 0;
};
/// Draws d coordinates ((next() >> 32) mod 8193) − 4096, the whole point again unless 0 < |z|² ≤ 4096²
/// (rank_heads_context.cpp).
void draw_lattice_point(splitmix64& g, long d, lattice_point& p);
/// An MPFI interval with its lifetime.
struct iv {
  mpfi_t x;
  explicit iv(mpfr_prec_t bits) { mpfi_init2(x, bits); }
  ~iv() { mpfi_clear(x); }
  iv(const iv&) = delete;
  iv& operator=(const iv&) = delete;
};
/// v ≤ lower(x), exactly (a rational against an MPFR end).
bool q_le_left(const Q& v, const mpfi_t x);
/// v ≥ upper(x), exactly.
bool q_ge_right(const Q& v, const mpfi_t x);

/// The stated /verdict must be the re-derived one (ok: CERTIFIED, else REFUTED); notes it.
void check_verdict(const nlohmann::json& cert, bool ok, const note_fn& note);

}  // namespace attncert::verify::checker
