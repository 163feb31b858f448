// The independent certificate checker: see attncert/verify/certificate.hpp.  This file holds
// the public entry points; each claim quantity has its own checker (checker.hpp lists the files).
// Deliberately self-contained: no attncert header other than verify/'s own, no FLINT.
#include "attncert/verify/certificate.hpp"

#include <algorithm>
#include <stdexcept>

#include "checker.hpp"

namespace attncert::verify {

namespace checker {

namespace {
thread_local const std::function<bool()>* stop_hook = nullptr;
}  // namespace
const std::function<bool()>* exchange_stop_hook(const std::function<bool()>* hook) {
  const std::function<bool()>* old = stop_hook;
  stop_hook = hook;
  return old;
}
void poll() {
  if (stop_hook && *stop_hook && (*stop_hook)()) throw stopped();
}

void check_verdict(const nlohmann::json& cert, bool ok, const note_fn& note) {
  const std::string verdict = ok ? "CERTIFIED" : "REFUTED";
  check(field(cert, "verdict", "").get<std::string>() == verdict, "/verdict: the re-derived verdict is " + verdict);
  note("verdict re-derived: " + verdict);
}

namespace {

// Every claim quantity to its checker; throws malformed / invalid / beyond_cap.
void verify_by_quantity(const nlohmann::json& cert, const note_fn& note) {
  if (!cert.is_object() || cert.value("format", "") != "attncert-certificate/1") throw malformed("/format: expected \"attncert-certificate/1\"");
  const nlohmann::json& cl = field(cert, "claim", "");
  if (cl.is_object() && cl.value("quantity", "") == "output_bound") return verify_output_bound(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "numerical_rank") return verify_numerical_rank(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "rank_heads_lower_bound") return verify_rank_heads(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "rank_heads_vote_mse") return verify_rank_heads_vote(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "rank_heads_full_rank_mse") return verify_rank_heads_full_rank(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "rank_heads_hardmax_orthonormal") return verify_rank_heads_hardmax(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "rank_heads_hardmax_directions") return verify_rank_heads_directions(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "rank_heads_context_hit_rate") return verify_rank_heads_context(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "rank_heads_pair_hit_probability") return verify_rank_heads_pair_hit(cert, cl, note);
  if (cl.is_object() && cl.value("quantity", "") == "nearest_neighbour_model_mse") return verify_nearest_neighbour_model(cert, cl, note);
  const rebuilt_claim rc = rebuild_claim_matrix(cert, cl, note);
  const std::string quantity = cl.value("quantity", "rank");
  if (quantity == "determinant" || quantity == "output_value") {
    if (rc.scores) throw malformed("/claim/object: no determinant or value certificates for scores");
    return verify_ratio(cert, cl, rc, note);
  }
  if (quantity == "singular_value") {
    if (rc.scores) throw malformed("/claim/object: no singular-value certificates for scores");
    return verify_singular_value(cert, cl, rc, note);
  }
  if (quantity != "rank") throw malformed("/claim/quantity: rank, determinant, output_value or singular_value");
  verify_rank(cert, cl, rc, note);
}

}  // namespace

}  // namespace checker

const std::vector<irrelevant_field>& verdict_irrelevant_fields() {
  // Keep in step with proofs/README.md ("Fields that do not enter the verdict").
  static const std::vector<irrelevant_field> fields = {
      {"/tool", "", "", "the name of the program that wrote the certificate: provenance, not a fact about the claim"},
      {"/version", "", "", "the version of that program: provenance, not a fact about the claim"},
      {"/claim/title", "", "", "the claim file's human-readable title, copied for the reader"},
      {"/counterexample/why", "", "", "a sentence explaining the counterexample to the reader; the counterexample itself (a, rank) is checked"},
      {"/claim/S0/#/#", "", "masked", "a score the claim's mask removes: the softmax never reads it (it must still be an exact number)"},
      {"/claim/S_hat0/#/#", "output_bound", "masked", "a score the claim's mask removes: the softmax never reads it (it must still be an exact number)"},
      {"/claim/S0/#/#", "output_bound", "other_rows",
       "a row other than /claim/row: the claim bounds the error of one row, which reads only that row's scores"},
      {"/claim/S_hat0/#/#", "output_bound", "other_rows",
       "a row other than /claim/row: the claim bounds the error of one row, which reads only that row's scores"},
      {"/rank_heads_vote/precision_bits", "rank_heads_vote_mse", "",
       "the working precision of the enclosures: the checker re-derives every binomial tail and both sums at it, and an "
       "enclosure at any other precision is as true (the stated ones must still meet the re-derived ones)"},
      {"/claim/point", "numerical_rank", "",
       "a label: the recipe forms the matrix from Q, K and scale, and scale already includes a (scale = a s); the certificate does "
       "not state s, so a cannot be re-derived (it must still be an exact number)"},
  };
  return fields;
}

namespace {

// "/claim/S0/1/2" -> "/claim/S0/#/#", and the indices {1, 2}.
std::string path_kind(const std::string& pointer, std::vector<long>& indices) {
  std::string kind;
  std::size_t i = 0;
  while (i < pointer.size()) {
    const std::size_t next = pointer.find('/', i + 1);
    const std::string token = pointer.substr(i + 1, next == std::string::npos ? std::string::npos : next - i - 1);
    if (!token.empty() && token.size() < 10 && token.find_first_not_of("0123456789") == std::string::npos) {
      kind += "/#";
      indices.push_back(std::stol(token));
    } else {
      kind += "/" + token;
    }
    if (next == std::string::npos) break;
    i = next;
  }
  return kind;
}

// Is entry (i, j) of the scores removed by the claim's mask ("causal", or 0 in a 0/1 matrix)?
bool masked_out(const nlohmann::json& claim, long i, long j) {
  if (!claim.contains("mask") || claim.value("object", "") == "scores") return false;
  const nlohmann::json& mk = claim["mask"];
  if (mk.is_string()) return mk.get<std::string>() == "causal" && j > i;
  if (mk.is_array() && i < static_cast<long>(mk.size()) && mk[static_cast<std::size_t>(i)].is_array() &&
      j < static_cast<long>(mk[static_cast<std::size_t>(i)].size()))
    return mk[static_cast<std::size_t>(i)][static_cast<std::size_t>(j)] == 0;
  return false;
}

}  // namespace

bool verdict_irrelevant(const nlohmann::json& cert, const std::string& pointer) {
  if (!cert.is_object() || !cert.contains("claim") || !cert["claim"].is_object()) return false;
  const nlohmann::json& claim = cert["claim"];
  const std::string quantity = claim.contains("quantity") && claim["quantity"].is_string() ? claim["quantity"].get<std::string>() : "rank";
  std::vector<long> idx;
  const std::string kind = path_kind(pointer, idx);
  for (const auto& f : verdict_irrelevant_fields()) {
    if (f.path != kind || (!f.quantity.empty() && f.quantity != quantity)) continue;
    if (f.when.empty()) return true;
    if (idx.size() != 2) continue;
    if (f.when == "masked" && masked_out(claim, idx[0], idx[1])) return true;
    if (f.when == "other_rows" && claim.contains("row") && claim["row"].is_number_integer() && claim["row"].get<long>() != idx[0]) return true;
  }
  return false;
}

nlohmann::json parse_certificate_text(const std::string& text) {
  using checker::max_depth;
  // nlohmann's parser is iterative; the depth check keeps every later (recursive) copy,
  // comparison or dump of the document shallow.
  const auto depth_check = [](int depth, nlohmann::json::parse_event_t ev, nlohmann::json&) {
    if ((ev == nlohmann::json::parse_event_t::object_start || ev == nlohmann::json::parse_event_t::array_start) &&
        depth >= static_cast<int>(max_depth))
      throw std::invalid_argument("malformed certificate: JSON nested deeper than " + std::to_string(max_depth) + " levels");
    return true;
  };
  try {
    return nlohmann::json::parse(text, depth_check);
  } catch (const nlohmann::json::exception& e) {
    throw std::invalid_argument("malformed JSON: " + checker::shown(std::string(e.what()).substr(0, 160)));
  }
}

verification verify_certificate(const nlohmann::json& cert, const verify_options& options) {
  verification out;
  struct cap_scope {  // the cap of this call, restored afterwards
    unsigned saved;
    explicit cap_scope(unsigned b) : saved(checker::exchange_precision_cap(std::max(64u, b))) {}
    ~cap_scope() { checker::exchange_precision_cap(saved); }
  } cap_guard(options.max_precision_bits);
  struct stop_scope {  // the caller's stop hook for this call, restored afterwards
    const std::function<bool()>* saved;
    explicit stop_scope(const std::function<bool()>* h) : saved(checker::exchange_stop_hook(h)) {}
    ~stop_scope() { checker::exchange_stop_hook(saved); }
  } stop_guard(options.stop ? &options.stop : nullptr);
  try {
    checker::poll();
    checker::verify_by_quantity(cert, [&](const std::string& s) { out.notes.push_back(s); });
    out.result = verification::status::valid;
  } catch (const checker::stopped&) {  // first: the caller's stop is never a verdict on the certificate
    out.result = verification::status::unchecked;
    out.stopped = true;
    out.notes.push_back("not checked within the caller's budget: stopped before every stated fact was re-derived; "
                        "the certificate may be valid, nothing is concluded");
  } catch (const checker::malformed& e) {
    out.result = verification::status::malformed;
    out.notes.push_back(e.what());
  } catch (const checker::invalid& e) {
    out.result = verification::status::invalid;
    out.notes.push_back(e.what());
  } catch (const checker::beyond_cap& e) {
    out.result = verification::status::unchecked;
    out.notes.push_back(std::string("cannot check within the cap: ") + e.what());
  } catch (const nlohmann::json::exception& e) {
    out.result = verification::status::malformed;
    out.notes.push_back(std::string("malformed certificate: ") + e.what());
  } catch (const std::runtime_error& e) {  // e.g. Boost rejecting a number's text
    out.result = verification::status::malformed;
    out.notes.push_back(std::string("malformed certificate: ") + e.what());
  }
  return out;
}

}  // namespace attncert::verify
