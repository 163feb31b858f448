// The claim schema: a claim file is parsed and validated once, here, into a parsed_claim
// (lib/src/proofs/provers.hpp).  Format and examples: proofs/README.md.  Every error is an
// input_error "POINTER: why" naming the JSON pointer of the problem.
#include <algorithm>
#include <cmath>
#include <filesystem>

#include "attncert/error.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/io/matrix_input.hpp"
#include "attncert/number/traits.hpp"
#include "provers.hpp"

namespace attncert::proofs {

namespace {

// Builds the DOM like nlohmann's own SAX DOM parser, but keeps floats as their text.
class exact_dom : public nlohmann::json_sax<nlohmann::json> {
 public:
  nlohmann::json root;
  std::string error;
  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t, const string_t& s) override { return put(s); }
  bool string(string_t& s) override { return put(s); }
  bool binary(binary_t&) override { return false; }
  bool start_object(std::size_t) override {
    if (too_deep()) return false;
    nlohmann::json* p = place(nlohmann::json::object());
    stack_.push_back(p);
    return true;
  }
  bool key(string_t& k) override {
    key_ = k;
    return true;
  }
  bool end_object() override {
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (too_deep()) return false;
    nlohmann::json* p = place(nlohmann::json::array());
    stack_.push_back(p);
    return true;
  }
  bool end_array() override {
    stack_.pop_back();
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) override {
    error = "malformed JSON at byte " + std::to_string(pos) + ": " + one_line(std::string(ex.what()), 160);
    return false;
  }

 private:
  std::vector<nlohmann::json*> stack_;
  // Rejects a container nested deeper than io::max_json_depth before building it: the DOM
  // (copied and destroyed recursively later) stays shallow whatever the input.
  bool too_deep() {
    if (stack_.size() < io::max_json_depth) return false;
    error = "JSON nested deeper than " + std::to_string(io::max_json_depth) + " levels";
    return false;
  }
  std::string key_;
  nlohmann::json* place(nlohmann::json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    nlohmann::json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    top[key_] = std::move(v);
    return &top[key_];
  }
  bool put(nlohmann::json v) {
    place(std::move(v));
    return true;
  }
};

}  // namespace

nlohmann::json parse_claim_text(const std::string& text) {
  exact_dom d;
  const bool ok = nlohmann::json::sax_parse(io::quote_huge_number_literals(text), &d);
  if (!ok || !d.error.empty()) throw input_error(d.error.empty() ? "malformed JSON" : d.error);
  return d.root;
}

namespace detail {

void fail(const std::string& pointer, const std::string& why) { throw input_error(pointer + ": " + why); }

const nlohmann::json* find_member(const nlohmann::json& j, const std::string& key) {
  auto it = j.find(key);
  return it == j.end() ? nullptr : &*it;
}

mpq_rational exact_number(const nlohmann::json& v, const std::string& pointer) {
  if (v.is_number_integer()) return mpq_rational(v.dump());
  if (v.is_string()) {
    try {
      return number_traits<mpq_rational>::from_string(v.get<std::string>());
    } catch (const std::exception& e) {
      fail(pointer, std::string("not a number: ") + e.what());  // e.g. beyond the digit or exponent limit
    }
  }
  if (v.is_number_float()) fail(pointer, "internal: float not preserved as text");
  fail(pointer, "not a number");
}

matrix<mpq_rational> read_matrix(const nlohmann::json& v, const std::string& pointer, const std::string& base_dir) {
  if (v.is_string()) {
    std::filesystem::path p(v.get<std::string>());
    if (p.is_relative()) p = std::filesystem::path(base_dir) / p;
    try {
      return io::read_exact_matrix(p.string(), pointer);
    } catch (const input_error& e) {
      throw input_error(e.what());
    }
  }
  if (!v.is_array() || v.empty()) fail(pointer, "expected a non-empty 2-D array or a .npy/.json path");
  const std::size_t cols = v[0].is_array() ? v[0].size() : 0;
  if (cols == 0) fail(pointer + "/0", "expected a non-empty row");
  matrix<mpq_rational> m(static_cast<Eigen::Index>(v.size()), static_cast<Eigen::Index>(cols));
  for (std::size_t i = 0; i < v.size(); ++i) {
    const std::string row_pointer = pointer + "/" + std::to_string(i);
    if (!v[i].is_array()) fail(row_pointer, "expected a row (array)");
    if (v[i].size() != cols)
      fail(row_pointer, "row has " + std::to_string(v[i].size()) + " entries, row 0 has " + std::to_string(cols));
    for (std::size_t j = 0; j < cols; ++j)
      m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = exact_number(v[i][j], row_pointer + "/" + std::to_string(j));
  }
  return m;
}

mask parse_claim_mask(const nlohmann::json& v) {
  static const std::string forms = "expected \"none\", \"causal\" or a boolean matrix (rows of true/false or 0/1)";
  if (v.is_string() && v.get<std::string>() == "none") return mask::none();
  if (v.is_string() && v.get<std::string>() == "causal") return mask::causal();
  if (!v.is_array()) fail("/objects/mask", forms);
  const Eigen::Index cols = v.empty() || !v[0].is_array() ? 0 : static_cast<Eigen::Index>(v[0].size());
  io::bool_matrix allowed(static_cast<Eigen::Index>(v.size()), cols);
  for (std::size_t i = 0; i < v.size(); ++i) {
    const nlohmann::json& row = v[i];
    const std::string row_pointer = "/objects/mask/" + std::to_string(i);
    if (!row.is_array() || static_cast<Eigen::Index>(row.size()) != cols) fail(row_pointer, "ragged or not a row; " + forms);
    for (std::size_t j = 0; j < row.size(); ++j) {
      const nlohmann::json& e = row[j];
      bool visible = false;
      if (e.is_boolean()) visible = e.get<bool>();
      else if (e.is_number_integer() && (e.get<long long>() == 0 || e.get<long long>() == 1)) visible = e.get<long long>() == 1;
      else fail(row_pointer + "/" + std::to_string(j), "not true/false or 0/1; " + forms);
      allowed(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = visible;
    }
  }
  return mask::from_matrix(allowed);
}

rank_relation parse_rank_relation(const nlohmann::json& j) {
  if (!j.is_string()) fail("/relation", "expected one of \"=\", \"<=\", \">=\"");
  const std::string s = j.get<std::string>();
  if (s == "=" || s == "==") return rank_relation::eq;
  if (s == "<=" || s == "≤") return rank_relation::le;
  if (s == ">=" || s == "≥") return rank_relation::ge;
  if (s == "within") fail("/relation", "'within' applies to real-valued quantities, not to ranks");
  fail("/relation", "unknown relation '" + s + "' (expected =, <=, >=)");
}

const char* relation_text(rank_relation r) { return r == rank_relation::eq ? "=" : r == rank_relation::le ? "<=" : ">="; }

bool relation_holds(rank_relation r, std::size_t lhs, std::size_t rhs) {
  return r == rank_relation::eq ? lhs == rhs : r == rank_relation::le ? lhs <= rhs : lhs >= rhs;
}

std::string real_relation::describe() const {
  return text + " " + value.str() + (text == "within" ? " +- " + tolerance.str() : std::string());
}

real_relation parse_real_relation(const nlohmann::json& relation, const nlohmann::json& value, const nlohmann::json* tolerance) {
  real_relation r;
  if (!relation.is_string()) fail("/relation", "expected one of \"=\", \"<=\", \">=\", \"within\"");
  r.text = relation.get<std::string>();
  if (r.text == "==") r.text = "=";
  if (r.text == "≤") r.text = "<=";
  if (r.text == "≥") r.text = ">=";
  if (r.text != "=" && r.text != "<=" && r.text != ">=" && r.text != "within") fail("/relation", "unknown relation '" + r.text + "'");
  r.value = exact_number(value, "/value");
  if (r.text == "within") {
    if (!tolerance) fail("/tolerance", "missing (required by \"within\")");
    r.tolerance = exact_number(*tolerance, "/tolerance");
    if (r.tolerance < 0) fail("/tolerance", "must be >= 0");
  } else if (tolerance) {
    fail("/tolerance", "only with \"within\"");
  }
  return r;
}

namespace {

// Every member of `j` (at `pointer`) is one of `known`; else fail(pointer/key, why).
void only_members(const nlohmann::json& j, const std::string& pointer, const std::vector<std::string>& known, const std::string& why) {
  for (auto it = j.begin(); it != j.end(); ++it)
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) fail(pointer + "/" + it.key(), why);
}

long non_negative_index(const nlohmann::json& quantity, const std::string& key) {
  const auto* j = find_member(quantity, key);
  if (!j || !j->is_number_integer() || j->get<long>() < 0) fail("/quantity/" + key, "expected a non-negative integer (0-based)");
  return j->get<long>();
}

std::size_t rank_value(const nlohmann::json& value) {
  if (!value.is_number_integer() || value.get<long long>() < 0) fail("/value", "expected a non-negative integer rank");
  return value.get<std::size_t>();
}

// The point {"at": a} of an output_bound / numerical_rank claim's family (the caller has
// handled "range").
mpq_rational family_point(const nlohmann::json& family) {
  const auto* at = find_member(family, "at");
  if (!at) fail("/family", "expected {\"at\": a}");
  return exact_number(*at, "/family/at");
}

// ---- layer claims: rank, determinant, output_value, singular_value ----------------------

void read_quantity_members(const nlohmann::json& quantity, layer_claim& c) {
  if (c.kind == quantity_kind::singular_value) {
    const auto* ij = find_member(quantity, "index");
    if (!ij || !ij->is_number_integer() || ij->get<long>() < 1) fail("/quantity/index", "expected k >= 1 (sigma_1 is the largest)");
    c.index = ij->get<long>();
  }
  if (c.kind == quantity_kind::output_value) {
    const auto* rj = find_member(quantity, "row");
    const auto* cj = find_member(quantity, "col");
    if (!rj || !rj->is_number_integer() || rj->get<long>() < 0) fail("/quantity/row", "expected a non-negative integer (0-based)");
    if (!cj || !cj->is_number_integer() || cj->get<long>() < 0) fail("/quantity/col", "expected a non-negative integer (0-based)");
    c.row = rj->get<long>();
    c.col = cj->get<long>();
  }
  const nlohmann::json* obj = find_member(quantity, "object");
  if (!obj || !obj->is_string()) fail("/quantity/object", "missing: scores, attention, output or residual");
  try {
    c.object = parse_layer_object(obj->get<std::string>());
  } catch (const input_error& e) {
    fail("/quantity/object", e.what());
  }
}

void read_relation(const nlohmann::json& claim, layer_claim& c) {
  const nlohmann::json* relation = find_member(claim, "relation");
  if (!relation) fail("/relation", "missing");
  const nlohmann::json* value = find_member(claim, "value");
  if (!value) fail("/value", "missing");
  if (c.kind != quantity_kind::rank) {
    c.real_rel = parse_real_relation(*relation, *value, find_member(claim, "tolerance"));
    return;
  }
  if (find_member(claim, "tolerance")) fail("/tolerance", "applies to real-valued quantities (determinant), not to ranks");
  c.rank_rel = parse_rank_relation(*relation);
  c.rank_value = rank_value(*value);
}

// S0 from S, or from Q Kᵀ times the scale (default 1/sqrt(d): exact when d is a square,
// else recorded as the algebraic point).
void read_scores(const nlohmann::json& objects, const std::string& base_dir, layer_claim& c) {
  const nlohmann::json* S = find_member(objects, "S");
  const nlohmann::json* Q = find_member(objects, "Q");
  const nlohmann::json* K = find_member(objects, "K");
  const nlohmann::json* scale = find_member(objects, "scale");
  if (S && (Q || K)) fail("/objects", "give either S or Q and K, not both");
  if (S) {
    if (scale) fail("/objects/scale", "applies to Q, K only (S is used as given)");
    c.in.S0 = read_matrix(*S, "/objects/S", base_dir);
  } else if (Q && K) {
    const matrix<mpq_rational> q = read_matrix(*Q, "/objects/Q", base_dir), k = read_matrix(*K, "/objects/K", base_dir);
    if (q.cols() != k.cols()) fail("/objects/K", "Q and K must have the same number of columns");
    c.in.S0 = q * k.transpose();
    if (!scale || (scale->is_string() && (scale->get<std::string>() == "1/sqrt(d)"))) {
      const long d = static_cast<long>(q.cols());
      const long r = std::lround(std::sqrt(static_cast<double>(d)));
      if (r * r == d) c.in.S0 /= mpq_rational(r);
      else c.algebraic_point = "1/sqrt(" + std::to_string(d) + ")";
    } else {
      c.in.S0 *= exact_number(*scale, "/objects/scale");
    }
  } else {
    fail("/objects", "missing scores: give S, or Q and K");
  }
}

void read_layer_objects(const nlohmann::json& objects, const std::string& base_dir, layer_claim& c) {
  for (auto it = objects.begin(); it != objects.end(); ++it) {
    static const std::vector<std::string> known = {"S", "Q", "K", "scale", "mask", "V", "X"};
    if (it.key() == "heads")
      fail("/objects/heads", "multi-head objects are not supported yet by attncert certify (one layer: S or Q, K; mask; V; X)");
    if (std::find(known.begin(), known.end(), it.key()) == known.end()) fail("/objects/" + it.key(), "unknown object");
  }
  read_scores(objects, base_dir, c);
  if (const auto* m = find_member(objects, "mask")) c.in.M = parse_claim_mask(*m);
  if (const auto* v = find_member(objects, "V")) c.in.V = read_matrix(*v, "/objects/V", base_dir);
  if (const auto* x = find_member(objects, "X")) c.in.X = read_matrix(*x, "/objects/X", base_dir);
  c.in.object = c.object;
}

void read_layer_family(const nlohmann::json& claim, layer_claim& c) {
  c.range.lo = c.range.hi = mpq_rational(1);
  c.range.lo_open = c.range.hi_open = false;  // default: the scores as given (a = 1)
  c.range_text = "a = 1 (scores as given)";
  const auto* family = find_member(claim, "family");
  c.has_family = family != nullptr;
  if (!family) return;
  if (!family->is_object()) fail("/family", "expected {\"range\": \"(0, inf)\"} or {\"at\": \"0\"}");
  if (const auto* sc = find_member(*family, "scores"); sc && (!sc->is_string() || sc->get<std::string>() != "a*S"))
    fail("/family/scores", "only the family a*S (S from the objects) is supported");
  const auto* range = find_member(*family, "range");
  const auto* at = find_member(*family, "at");
  if ((range != nullptr) == (at != nullptr)) fail("/family", "give exactly one of range, at");
  if (range) {
    if (!range->is_string()) fail("/family/range", "expected a string such as \"(0, inf)\"");
    try {
      c.range = parse_a_range(range->get<std::string>());
    } catch (const input_error& e) {
      fail("/family/range", e.what());
    }
  } else {
    c.range.lo = c.range.hi = exact_number(*at, "/family/at");
  }
  c.range_text = c.range.is_point() ? "a = " + rational_string(*c.range.lo) : "a in " + c.range.describe();
}

layer_claim parse_layer_claim(const nlohmann::json& claim, quantity_kind kind, const std::string& base_dir) {
  layer_claim c;
  c.kind = kind;
  read_quantity_members(claim["quantity"], c);
  read_relation(claim, c);
  read_layer_objects(claim["objects"], base_dir, c);
  read_layer_family(claim, c);
  return c;
}

// ---- output_bound ----------------------------------------------------------------------

// Reads S, S_hat and V with their shapes, the row and the mask (a matrix mask is not part of
// the output_bound certificate format).
void read_output_bound_objects(const nlohmann::json& objects, const std::string& base_dir, output_bound_claim& c) {
  only_members(objects, "/objects", {"S", "S_hat", "V", "mask"}, "output_bound takes S, S_hat, V and an optional mask");
  const auto* S = find_member(objects, "S");
  const auto* S_hat = find_member(objects, "S_hat");
  const auto* V = find_member(objects, "V");
  if (!S) fail("/objects/S", "missing");
  if (!S_hat) fail("/objects/S_hat", "missing (the approximate scores)");
  if (!V) fail("/objects/V", "missing");
  c.S0 = read_matrix(*S, "/objects/S", base_dir);
  c.S_hat0 = read_matrix(*S_hat, "/objects/S_hat", base_dir);
  c.V = read_matrix(*V, "/objects/V", base_dir);
  if (c.S_hat0.rows() != c.S0.rows() || c.S_hat0.cols() != c.S0.cols()) fail("/objects/S_hat", "must have the shape of S");
  if (c.V.rows() != c.S0.cols()) fail("/objects/V", "needs one row per key");
  if (c.row >= c.S0.rows()) fail("/quantity/row", "outside the matrix");
  if (const auto* m = find_member(objects, "mask")) {
    c.M = parse_claim_mask(*m);
    if (c.M.type() == mask::kind::explicit_matrix) fail("/objects/mask", "output_bound claims take \"none\" or \"causal\" (no mask matrix yet)");
  }
}

parsed_claim parse_output_bound_claim(const nlohmann::json& claim, const std::string& base_dir) {
  parsed_claim p;
  p.kind = quantity_kind::output_bound;
  output_bound_claim c;
  only_members(claim["quantity"], "/quantity", {"kind", "row"}, "unknown key (output_bound takes row)");
  c.row = non_negative_index(claim["quantity"], "row");
  const auto* relation = find_member(claim, "relation");
  if (!relation || !relation->is_string() || (relation->get<std::string>() != "<=" && relation->get<std::string>() != "≤"))
    fail("/relation", "output_bound claims are '<=' (the error is at most the bound)");
  const auto* value = find_member(claim, "value");
  if (!value || !value->is_string() || value->get<std::string>() != "bound")
    fail("/value", "for output_bound the value is \"bound\": ||A_hat_i - A_i||_1 * max_j ||v_j||_2");
  if (find_member(claim, "tolerance")) fail("/tolerance", "not used by output_bound");
  read_output_bound_objects(claim["objects"], base_dir, c);
  if (const auto* family = find_member(claim, "family")) {
    if (find_member(*family, "range"))
      p.not_supported = "output_bound claims over a parameter range are not supported yet; give a point (\"at\")";
    else
      c.a0 = family_point(*family);
  }
  p.body = std::move(c);
  return p;
}

// ---- numerical_rank --------------------------------------------------------------------

bool binary64_exact(const mpq_rational& x, double& out) {
  out = x.convert_to<double>();
  return std::isfinite(out) && mpq_rational(out) == x;
}

matrix<double> binary64_matrix(const matrix<mpq_rational>& m, const std::string& pointer) {
  matrix<double> d(m.rows(), m.cols());
  for (Eigen::Index i = 0; i < m.rows(); ++i)
    for (Eigen::Index j = 0; j < m.cols(); ++j)
      if (!binary64_exact(m(i, j), d(i, j)))
        fail(pointer + "/" + std::to_string(i) + "/" + std::to_string(j), "numerical_rank needs inputs that are binary64 numbers");
  return d;
}

void read_numerical_rank_quantity(const nlohmann::json& quantity, numerical_rank_claim& c) {
  only_members(quantity, "/quantity", {"kind", "object", "recipe", "policy"}, "unknown key (numerical_rank takes object, recipe, policy)");
  const auto* object = find_member(quantity, "object");
  if (!object || !object->is_string()) fail("/quantity/object", "missing: scores, attention or output");
  c.object = object->get<std::string>();
  if (c.object != "scores" && c.object != "attention" && c.object != "output") fail("/quantity/object", "a recipe forms scores, attention or output");
  const auto* recipe_name = find_member(quantity, "recipe");
  if (!recipe_name || !recipe_name->is_string()) fail("/quantity/recipe", "missing, e.g. \"fp32\"");
  try {
    c.rec = parse_recipe(recipe_name->get<std::string>());
  } catch (const input_error& e) {
    fail("/quantity/recipe", e.what());
  }
  if (c.rec.type == recipe::kind::mpfr) fail("/quantity/recipe", "mpfrN recipes are not supported yet by numerical_rank claims");
  const auto* policy = find_member(quantity, "policy");
  if (!policy || !policy->is_string()) fail("/quantity/policy", "missing, e.g. \"numpy\"");
  try {
    c.policy = rank_policy::parse(policy->get<std::string>());
  } catch (const input_error& e) {
    fail("/quantity/policy", e.what());
  }
}

// The binary64 inputs Q, K (Q = S0, K = I when S is given: exact in every accumulation
// format), the scale times the point, the mask and V.
void read_numerical_rank_objects(const nlohmann::json& objects, const std::string& base_dir, numerical_rank_claim& c) {
  recipe_input& in = c.in;
  mpq_rational scale = 1;
  if (const auto* S = find_member(objects, "S")) {
    if (find_member(objects, "Q") || find_member(objects, "K") || find_member(objects, "scale")) fail("/objects", "give either S or Q, K (and scale)");
    in.Q = binary64_matrix(read_matrix(*S, "/objects/S", base_dir), "/objects/S");
    in.K = matrix<double>::Identity(in.Q.cols(), in.Q.cols());
  } else {
    const auto* Q = find_member(objects, "Q");
    const auto* K = find_member(objects, "K");
    if (!Q || !K) fail("/objects", "missing scores: give S, or Q and K");
    in.Q = binary64_matrix(read_matrix(*Q, "/objects/Q", base_dir), "/objects/Q");
    in.K = binary64_matrix(read_matrix(*K, "/objects/K", base_dir), "/objects/K");
    if (in.Q.cols() != in.K.cols()) fail("/objects/K", "Q and K must have the same number of columns");
    const auto* sc = find_member(objects, "scale");
    if (!sc) fail("/objects/scale", "numerical_rank needs an explicit rational scale (1/sqrt(d) is not a binary64 number in general)");
    scale = exact_number(*sc, "/objects/scale");
  }
  if (!binary64_exact(mpq_rational(c.a0 * scale), in.scale)) fail("/family/at", "a times the scale must be a binary64 number");
  if (const auto* m = find_member(objects, "mask")) {
    in.M = parse_claim_mask(*m);
    if (in.M.type() == mask::kind::explicit_matrix) fail("/objects/mask", "numerical_rank claims take \"none\" or \"causal\" (no mask matrix yet)");
  }
  if (c.object == "output") {
    const auto* V = find_member(objects, "V");
    if (!V) fail("/objects/V", "the output needs values V");
    in.V = binary64_matrix(read_matrix(*V, "/objects/V", base_dir), "/objects/V");
    if (in.V->rows() != in.K.rows()) fail("/objects/V", "needs one row per key");
  }
  in.object = c.object == "scores" ? layer_object::scores : c.object == "attention" ? layer_object::attention : layer_object::output;
}

parsed_claim parse_numerical_rank_claim(const nlohmann::json& claim, const std::string& base_dir) {
  parsed_claim p;
  p.kind = quantity_kind::numerical_rank;
  numerical_rank_claim c;
  read_numerical_rank_quantity(claim["quantity"], c);
  const auto* relation = find_member(claim, "relation");
  if (!relation) fail("/relation", "missing");
  c.rel = parse_rank_relation(*relation);
  const auto* value = find_member(claim, "value");
  if (!value) fail("/value", "expected a non-negative integer rank");
  c.value = rank_value(*value);
  if (find_member(claim, "tolerance")) fail("/tolerance", "not used by numerical_rank");
  const nlohmann::json& objects = claim["objects"];
  only_members(objects, "/objects", {"S", "Q", "K", "scale", "mask", "V"}, "numerical_rank takes S or Q, K (and scale), mask, V");
  if (const auto* family = find_member(claim, "family")) {
    if (find_member(*family, "range")) {
      p.not_supported = "numerical-rank claims over a parameter range are not decided by certify; sweep them "
                        "with attncert drift (divergence intervals with bisected ends)";
      p.body = std::move(c);
      return p;
    }
    c.a0 = family_point(*family);
  }
  read_numerical_rank_objects(objects, base_dir, c);
  p.body = std::move(c);
  return p;
}

// ---- rank_heads_lower_bound ---------------------------------------------------------------
// {"quantity": {"kind": "rank_heads_lower_bound", "d": 8, "heads": 256, "rank": 1, "residual": false,
//  "max_degree": 81}, "relation": ">=", "value": "0.09"}: no objects (the distribution is fixed by d).

int bounded_int(const nlohmann::json& q, const std::string& key, int lo, int hi, int fallback, const std::string& what) {
  const auto* j = find_member(q, key);
  if (!j) {
    if (fallback < lo) fail("/quantity/" + key, "missing: " + what);
    return fallback;
  }
  if (!j->is_number_integer() || j->get<long long>() < lo || j->get<long long>() > hi)
    fail("/quantity/" + key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]: " + what);
  return static_cast<int>(j->get<long long>());
}

parsed_claim parse_rank_heads_claim(const nlohmann::json& claim) {
  parsed_claim p;
  p.kind = quantity_kind::rank_heads_lower_bound;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by rank_heads_lower_bound (it takes no objects, family or tolerance: the N = 2 distribution is fixed by d)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "d", "heads", "rank", "residual", "max_degree"},
               "unknown key (rank_heads_lower_bound takes d, heads, rank, residual, max_degree)");
  rank_heads_claim c;
  c.d = bounded_int(q, "d", 3, 64, 0, "the dimension of the sphere's ambient space");
  const auto* h = find_member(q, "heads");
  if (!h) fail("/quantity/heads", "missing: the number of heads (an integer >= 1)");
  const mpq_rational hv = exact_number(*h, "/quantity/heads");
  if (denominator(hv) != 1 || hv < 1 || hv > mpq_rational(mpz_int(("1" + std::string(30, '0')).c_str())))
    fail("/quantity/heads", "expected an integer in [1, 10^30]");
  c.heads = numerator(hv);
  c.rank = bounded_int(q, "rank", 1, 64, 1, "the rank of every head's query-key map");
  if (const auto* r = find_member(q, "residual")) {
    if (!r->is_boolean()) fail("/quantity/residual", "expected true or false");
    c.residual = r->get<bool>();
  }
  if (c.residual && c.rank != 1) fail("/quantity/residual", "the bound with a residual path is for rank-one heads (rank 1)");
  c.max_degree = bounded_int(q, "max_degree", 1, 401, 81, "the odd truncation degree of the bound");
  if (c.max_degree % 2 == 0) fail("/quantity/max_degree", "expected an odd degree (even degrees carry no energy)");
  const auto* rel = find_member(claim, "relation");
  if (!rel || !rel->is_string()) fail("/relation", "missing: rank_heads_lower_bound claims are '>='");
  const std::string r = rel->get<std::string>();
  if (r != ">=" && r != "≥")
    fail("/relation", "rank_heads_lower_bound claims are '>=' (a lower bound over every network; the minimum itself is not computed)");
  const auto* v = find_member(claim, "value");
  if (!v) fail("/value", "missing: the claimed lower bound of the MSE (an exact number)");
  c.value = exact_number(*v, "/value");
  p.body = std::move(c);
  return p;
}

// The relation '<=' (true) or '>=' (false) and the exact value of a claim on an enclosed quantity (the vote's mean MSE,
// the full-rank head's MSE): either side can be decided.
bool parse_bound_relation(const nlohmann::json& claim, const std::string& kind, const std::string& noun, mpq_rational& value) {
  const auto* rel = find_member(claim, "relation");
  if (!rel || !rel->is_string()) fail("/relation", "missing: " + kind + " claims are '<=' or '>='");
  const std::string r = rel->get<std::string>();
  bool at_most = true;
  if (r == "<=" || r == "≤") at_most = true;
  else if (r == ">=" || r == "≥") at_most = false;
  else fail("/relation", kind + " claims are '<=' or '>=' (the " + noun + " is enclosed, not computed exactly)");
  const auto* v = find_member(claim, "value");
  if (!v) fail("/value", "missing: the claimed bound of the " + noun + " (an exact number)");
  value = exact_number(*v, "/value");
  return at_most;
}

// ---- rank_heads_vote_mse -------------------------------------------------------------------
// {"quantity": {"kind": "rank_heads_vote_mse", "d": 8, "heads": 15, "panels": 400}, "relation": "<=", "value": "0.3"}

parsed_claim parse_rank_heads_vote_claim(const nlohmann::json& claim) {
  parsed_claim p;
  p.kind = quantity_kind::rank_heads_vote_mse;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by rank_heads_vote_mse (it takes no objects, family or tolerance: the N = 2 distribution is fixed by d)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "d", "heads", "panels"}, "unknown key (rank_heads_vote_mse takes d, heads, panels)");
  rank_heads_vote_claim c;
  c.d = bounded_int(q, "d", 3, 64, 0, "the dimension of the sphere's ambient space");
  c.heads = bounded_int(q, "heads", 1, 65535, 0, "the number of vote heads (odd; the threshold head comes on top)");
  if (c.heads % 2 == 0) fail("/quantity/heads", "expected an odd number of vote heads (an even tally can tie)");
  c.panels = bounded_int(q, "panels", 1, 3200, 400, "the Riemann panels to start with");
  c.at_most = parse_bound_relation(claim, "rank_heads_vote_mse", "mean MSE", c.value);
  p.body = std::move(c);
  return p;
}

// ---- rank_heads_full_rank_mse ----------------------------------------------------------------
// {"quantity": {"kind": "rank_heads_full_rank_mse", "d": 8, "lambda": "100", "panels": 2048}, "relation": "<=", "value": "0.02"}

parsed_claim parse_rank_heads_full_rank_claim(const nlohmann::json& claim) {
  parsed_claim p;
  p.kind = quantity_kind::rank_heads_full_rank_mse;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by rank_heads_full_rank_mse (it takes no objects, family or tolerance: the N = 2 distribution is fixed by d)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "d", "lambda", "panels"}, "unknown key (rank_heads_full_rank_mse takes d, lambda, panels)");
  rank_heads_full_rank_claim c;
  c.d = bounded_int(q, "d", 3, 64, 0, "the dimension of the sphere's ambient space");
  const auto* l = find_member(q, "lambda");
  if (!l) fail("/quantity/lambda", "missing: the head's scale (W_K^T W_Q = lambda I), an exact number > 0");
  c.lambda = exact_number(*l, "/quantity/lambda");
  if (c.lambda <= 0 || c.lambda > mpq_rational(mpz_int(("1" + std::string(30, '0')).c_str())))
    fail("/quantity/lambda", "expected 0 < lambda <= 10^30");
  c.panels = bounded_int(q, "panels", 1, 65536, 2048, "the quadrature panels to start with");
  c.at_most = parse_bound_relation(claim, "rank_heads_full_rank_mse", "MSE", c.value);
  p.body = std::move(c);
  return p;
}

// The '>=' relation and value of the hardmax claims (a lower bound over every such layer; the least error is not computed).
mpq_rational parse_hardmax_lower_bound(const nlohmann::json& claim, const std::string& kind) {
  const auto* rel = find_member(claim, "relation");
  if (!rel || !rel->is_string()) fail("/relation", "missing: " + kind + " claims are '>='");
  const std::string r = rel->get<std::string>();
  if (r != ">=" && r != "≥") fail("/relation", kind + " claims are '>=' (a lower bound over every such layer; the least error is not computed)");
  const auto* v = find_member(claim, "value");
  if (!v) fail("/value", "missing: the claimed lower bound of the MSE (an exact number)");
  return exact_number(*v, "/value");
}

// ---- rank_heads_hardmax_orthonormal ----------------------------------------------------------
// {"quantity": {"kind": "rank_heads_hardmax_orthonormal", "d": 8, "heads": 8}, "relation": ">=", "value": "0.1"}

parsed_claim parse_rank_heads_hardmax_claim(const nlohmann::json& claim) {
  parsed_claim p;
  p.kind = quantity_kind::rank_heads_hardmax_orthonormal;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by rank_heads_hardmax_orthonormal (it takes no objects, family or tolerance: the N = 2 distribution is fixed by d)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "d", "heads"}, "unknown key (rank_heads_hardmax_orthonormal takes d, heads)");
  rank_heads_hardmax_claim c;
  c.d = bounded_int(q, "d", 3, 64, 0, "the dimension of the sphere's ambient space");
  c.heads = bounded_int(q, "heads", 1, 64, 0, "the number of heads, at most d (their query directions are orthonormal)");
  if (c.heads > c.d) fail("/quantity/heads", "at most d heads can have orthonormal query directions");
  c.value = parse_hardmax_lower_bound(claim, "rank_heads_hardmax_orthonormal");
  p.body = std::move(c);
  return p;
}

// ---- rank_heads_hardmax_directions ------------------------------------------------------------
// {"quantity": {"kind": "rank_heads_hardmax_directions", "d": 3, "directions": [[1, 0, 0], ["1/2", "0.5", 0]]},
//  "relation": ">=", "value": "0.2"}

parsed_claim parse_rank_heads_directions_claim(const nlohmann::json& claim) {
  parsed_claim p;
  p.kind = quantity_kind::rank_heads_hardmax_directions;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by rank_heads_hardmax_directions (it takes no objects, family or tolerance: the N = 2 distribution is fixed by d)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "d", "directions", "max_degree"},
               "unknown key (rank_heads_hardmax_directions takes d, directions, max_degree)");
  rank_heads_directions_claim c;
  c.d = bounded_int(q, "d", 3, 64, 0, "the dimension of the sphere's ambient space");
  c.max_degree = bounded_int(q, "max_degree", 1, 201, 41, "the degree at which the series of B is cut (its tail is enclosed)");
  if (c.max_degree % 2 == 0) fail("/quantity/max_degree", "expected an odd degree (the even energies are 0)");
  const auto* dirs = find_member(q, "directions");
  if (!dirs || !dirs->is_array() || dirs->empty())
    fail("/quantity/directions", "missing: the heads' query directions, an array of H rows of d exact numbers");
  if (dirs->size() > 256) fail("/quantity/directions", "at most 256 directions (" + std::to_string(dirs->size()) + " given)");
  c.directions = matrix<mpq_rational>(static_cast<Eigen::Index>(dirs->size()), c.d);
  for (std::size_t i = 0; i < dirs->size(); ++i) {
    const std::string row = "/quantity/directions/" + std::to_string(i);
    const nlohmann::json& r = (*dirs)[i];
    if (!r.is_array() || r.size() != static_cast<std::size_t>(c.d))
      fail(row, "expected an array of d = " + std::to_string(c.d) + " exact numbers");
    bool nonzero = false;
    for (std::size_t j = 0; j < r.size(); ++j) {
      const mpq_rational x = exact_number(r[j], row + "/" + std::to_string(j));
      nonzero = nonzero || x != 0;
      c.directions(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = x;
    }
    if (!nonzero) fail(row, "a query direction must be nonzero");
  }
  c.value = parse_hardmax_lower_bound(claim, "rank_heads_hardmax_directions");
  p.body = std::move(c);
  return p;
}

// ---- rank_heads_context_hit_rate ---------------------------------------------------------------
// {"quantity": {"kind": "rank_heads_context_hit_rate", "d": 8, "keys": 16, "inputs": 1000, "heads": 255, "seed": "3229547720"},
//  "relation": "<=", "value": "0.2"}

parsed_claim parse_rank_heads_context_claim(const nlohmann::json& claim) {
  parsed_claim p;
  p.kind = quantity_kind::rank_heads_context_hit_rate;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by rank_heads_context_hit_rate (it takes no objects, family or tolerance: the instance is fixed by its seed)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "d", "keys", "inputs", "heads", "seed"},
               "unknown key (rank_heads_context_hit_rate takes d, keys, inputs, heads, seed)");
  rank_heads_context_claim c;
  c.d = bounded_int(q, "d", 2, 8, 0, "the dimension of the lattice points");
  c.keys = bounded_int(q, "keys", 2, 16, 0, "the number of keys N: 2, 4, 8 or 16");
  if (c.keys != 2 && c.keys != 4 && c.keys != 8 && c.keys != 16) fail("/quantity/keys", "expected 2, 4, 8 or 16 (the instance's key sets)");
  c.inputs = bounded_int(q, "inputs", 2, 10000, 0, "the number of inputs (a query and 16 keys each)");
  c.heads = bounded_int(q, "heads", 2, 4095, 0, "the number of rank-one heads in the pool");
  const auto* seed = find_member(q, "seed");
  if (!seed) fail("/quantity/seed", "missing: the instance seed S (an integer in [0, 2^64), as a JSON integer or a decimal string)");
  const mpz_int S = seed->is_number_unsigned() ? mpz_int(seed->get<std::uint64_t>())
                    : seed->is_number_integer() ? mpz_int(seed->get<std::int64_t>())
                    : seed->is_string() && !seed->get<std::string>().empty() &&
                              seed->get<std::string>().find_first_not_of("0123456789") == std::string::npos &&
                              seed->get<std::string>().size() <= 20
                        ? mpz_int(seed->get<std::string>().c_str())
                        : mpz_int(-1);
  if (S < 0 || S >= (mpz_int(1) << 64)) fail("/quantity/seed", "expected an integer in [0, 2^64) (a JSON integer or a decimal string)");
  c.seed = S.convert_to<std::uint64_t>();
  const auto* rel = find_member(claim, "relation");
  if (!rel || !rel->is_string()) fail("/relation", "missing: rank_heads_context_hit_rate claims are '=', '<=' or '>='");
  const std::string r = rel->get<std::string>();
  if (r == "=" || r == "<=" || r == ">=") c.relation = r;
  else if (r == "≤") c.relation = "<=";
  else if (r == "≥") c.relation = ">=";
  else fail("/relation", "rank_heads_context_hit_rate claims are '=', '<=' or '>=' (the rate is an exact rational)");
  const auto* v = find_member(claim, "value");
  if (!v) fail("/value", "missing: the claimed rate (an exact number)");
  c.value = exact_number(*v, "/value");
  p.body = std::move(c);
  return p;
}

// ---- rank_heads_pair_hit_probability -------------------------------------------------------------
// {"quantity": {"kind": "rank_heads_pair_hit_probability", "d": 8}, "relation": ">=", "value": "0.6"}

parsed_claim parse_rank_heads_pair_hit_claim(const nlohmann::json& claim) {
  parsed_claim p;
  p.kind = quantity_kind::rank_heads_pair_hit_probability;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by rank_heads_pair_hit_probability (it takes no objects, family or tolerance: the distribution is fixed by d)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "d"}, "unknown key (rank_heads_pair_hit_probability takes d)");
  rank_heads_pair_hit_claim c;
  c.d = bounded_int(q, "d", 3, 64, 0, "the dimension of the sphere's ambient space");
  c.at_most = parse_bound_relation(claim, "rank_heads_pair_hit_probability", "probability", c.value);
  p.body = std::move(c);
  return p;
}

// ---- nearest_neighbour_model_mse ---------------------------------------------------------------
// {"quantity": {"kind": "nearest_neighbour_model_mse", "keys": 4, "inputs": 200,
//               "model": {"width": 9, "heads": 8, "rank": 1, "layers": 2, "encoding": "none", "weights": [...] or "w.npy"}},
//  "relation": "<=", "value": "0.4"}

parsed_claim parse_nearest_neighbour_model_claim(const nlohmann::json& claim, const std::string& base_dir) {
  parsed_claim p;
  p.kind = quantity_kind::nearest_neighbour_model_mse;
  only_members(claim, "", {"title", "statement", "source", "quantity", "relation", "value"},
               "not used by nearest_neighbour_model_mse (the model is under /quantity/model; the test set is fixed by keys and inputs)");
  const nlohmann::json& q = claim["quantity"];
  only_members(q, "/quantity", {"kind", "keys", "inputs", "model"}, "unknown key (nearest_neighbour_model_mse takes keys, inputs, model)");
  nearest_neighbour_model_claim c;
  auto& m = c.model;
  m.N = bounded_int(q, "keys", 2, 16, 0, "the number of keys N of the test set");
  c.inputs = bounded_int(q, "inputs", 1, 1000, 200, "the number of test inputs (the fixed set of proofs/L4 part H)");
  const auto* model = find_member(q, "model");
  if (!model || !model->is_object()) fail("/quantity/model", "missing: {width, heads, rank, layers, encoding, weights}");
  only_members(*model, "/quantity/model", {"width", "heads", "rank", "layers", "encoding", "weights"},
               "unknown key (a model has width, heads, rank, layers, encoding, weights)");
  const auto* enc = find_member(*model, "encoding");
  const std::string e = enc && enc->is_string() ? enc->get<std::string>() : std::string(enc ? "?" : "none");
  if (e == "none") m.encoding = rank_heads::trained_encoding::none;
  else if (e == "additive") m.encoding = rank_heads::trained_encoding::additive;
  else if (e == "concatenated") m.encoding = rank_heads::trained_encoding::concatenated;
  else fail("/quantity/model/encoding", "expected \"none\", \"additive\" or \"concatenated\"");
  auto model_int = [&](const std::string& key, int lo, int hi, const std::string& what) {
    const auto* j = find_member(*model, key);
    if (!j || !j->is_number_integer() || j->get<long long>() < lo || j->get<long long>() > hi)
      fail("/quantity/model/" + key, "expected an integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]: " + what);
    return static_cast<int>(j->get<long long>());
  };
  const int D = m.encoding == rank_heads::trained_encoding::none ? 9 : 10 + m.N;
  m.width = model_int("width", D, D, "the token width: 9 (content, query flag) without positions, 10 + N with them");
  m.H = model_int("heads", 1, 16, "heads per layer");
  m.r = model_int("rank", 1, D, "the rank r of every head (Wq, Wk are width x r)");
  m.layers = model_int("layers", 1, 4, "attention layers");
  const long count = (m.encoding == rank_heads::trained_encoding::none ? 0L : static_cast<long>(m.N + 1) * D) +
                     static_cast<long>(m.layers) * m.H * (2L * D * m.r + static_cast<long>(D) * D) + 8L * D;
  const auto* w = find_member(*model, "weights");
  if (!w) fail("/quantity/model/weights", "missing: " + std::to_string(count) + " exact numbers, or a .npy/.json path");
  const matrix<mpq_rational> W = read_matrix(w->is_array() ? nlohmann::json::array({*w}) : *w, "/quantity/model/weights", base_dir);
  if (W.size() != count)
    fail("/quantity/model/weights", "expected " + std::to_string(count) + " weights (positions if any, then per layer and head Wq, Wk, Wv, then Wr), got " +
                                        std::to_string(W.size()));
  c.weights.resize(static_cast<std::size_t>(count));
  for (Eigen::Index i = 0; i < W.rows(); ++i)
    for (Eigen::Index j = 0; j < W.cols(); ++j) {
      const mpq_rational& x = W(i, j);
      const double v = x.convert_to<double>();
      if (!std::isfinite(v) || mpq_rational(v) != x)
        fail("/quantity/model/weights/" + std::to_string(i * W.cols() + j), "not exactly a binary64 number (the model is evaluated in binary64 intervals)");
      c.weights[static_cast<std::size_t>(i * W.cols() + j)] = v;
    }
  if (m.encoding != rank_heads::trained_encoding::none)
    for (int row = 0; row <= m.N; ++row)
      for (int col = 0; col < D; ++col) {
        const bool on = m.encoding == rank_heads::trained_encoding::additive ? col < 8 : col > 8;
        if (!on && c.weights[static_cast<std::size_t>(row * D + col)] != 0)
          fail("/quantity/model/weights/" + std::to_string(row * D + col),
               "a position off its support (" + e + " positions live in " + (e == "additive" ? "columns 0-7" : "columns 9 and up") + ")");
      }
  c.at_most = parse_bound_relation(claim, "nearest_neighbour_model_mse", "MSE", c.value);
  p.body = std::move(c);
  return p;
}

// ---- the claim's frame: top-level members, objects, quantity kind -----------------------

quantity_kind parse_kind(const nlohmann::json& claim) {
  if (!claim.is_object()) fail("", "a claim is a JSON object");
  only_members(claim, "", {"title", "statement", "source", "objects", "family", "quantity", "relation", "value", "tolerance"}, "unknown key");
  if (const auto* q = find_member(claim, "quantity"); q && q->is_object())
    if (const auto* k = find_member(*q, "kind"); k && k->is_string()) {
      if (k->get<std::string>() == "rank_heads_lower_bound") return quantity_kind::rank_heads_lower_bound;
      if (k->get<std::string>() == "rank_heads_vote_mse") return quantity_kind::rank_heads_vote_mse;
      if (k->get<std::string>() == "rank_heads_full_rank_mse") return quantity_kind::rank_heads_full_rank_mse;
      if (k->get<std::string>() == "rank_heads_hardmax_orthonormal") return quantity_kind::rank_heads_hardmax_orthonormal;
      if (k->get<std::string>() == "rank_heads_hardmax_directions") return quantity_kind::rank_heads_hardmax_directions;
      if (k->get<std::string>() == "rank_heads_context_hit_rate") return quantity_kind::rank_heads_context_hit_rate;
      if (k->get<std::string>() == "rank_heads_pair_hit_probability") return quantity_kind::rank_heads_pair_hit_probability;
      if (k->get<std::string>() == "nearest_neighbour_model_mse") return quantity_kind::nearest_neighbour_model_mse;
    }
  const nlohmann::json* objects = find_member(claim, "objects");
  if (!objects || !objects->is_object()) fail("/objects", "missing object with the matrices");
  const nlohmann::json* quantity = find_member(claim, "quantity");
  if (!quantity || !quantity->is_object()) fail("/quantity", "missing, e.g. {\"kind\": \"rank\", \"object\": \"attention\"}");
  const nlohmann::json* kind = find_member(*quantity, "kind");
  if (!kind || !kind->is_string()) fail("/quantity/kind", "missing");
  const std::string k = kind->get<std::string>();
  if (k == "rank") return quantity_kind::rank;
  if (k == "determinant") return quantity_kind::determinant;
  if (k == "output_value") return quantity_kind::output_value;
  if (k == "singular_value") return quantity_kind::singular_value;
  if (k == "output_bound") return quantity_kind::output_bound;
  if (k == "numerical_rank") return quantity_kind::numerical_rank;
  fail("/quantity/kind", "unknown quantity '" + k + "' (supported: rank, determinant, output_value, singular_value, output_bound, numerical_rank, "
                                  "rank_heads_lower_bound, rank_heads_vote_mse, rank_heads_full_rank_mse, "
                                  "rank_heads_hardmax_orthonormal, rank_heads_hardmax_directions, rank_heads_context_hit_rate, "
                                  "rank_heads_pair_hit_probability, nearest_neighbour_model_mse)");
}

}  // namespace

parsed_claim parse_claim(const nlohmann::json& claim, const std::string& base_dir) {
  const quantity_kind kind = parse_kind(claim);
  if (kind == quantity_kind::output_bound) return parse_output_bound_claim(claim, base_dir);
  if (kind == quantity_kind::numerical_rank) return parse_numerical_rank_claim(claim, base_dir);
  if (kind == quantity_kind::rank_heads_lower_bound) return parse_rank_heads_claim(claim);
  if (kind == quantity_kind::rank_heads_vote_mse) return parse_rank_heads_vote_claim(claim);
  if (kind == quantity_kind::rank_heads_full_rank_mse) return parse_rank_heads_full_rank_claim(claim);
  if (kind == quantity_kind::rank_heads_hardmax_orthonormal) return parse_rank_heads_hardmax_claim(claim);
  if (kind == quantity_kind::rank_heads_hardmax_directions) return parse_rank_heads_directions_claim(claim);
  if (kind == quantity_kind::rank_heads_context_hit_rate) return parse_rank_heads_context_claim(claim);
  if (kind == quantity_kind::rank_heads_pair_hit_probability) return parse_rank_heads_pair_hit_claim(claim);
  if (kind == quantity_kind::nearest_neighbour_model_mse) return parse_nearest_neighbour_model_claim(claim, base_dir);
  parsed_claim p;
  p.kind = kind;
  p.body = parse_layer_claim(claim, kind, base_dir);
  return p;
}

}  // namespace detail
}  // namespace attncert::proofs
