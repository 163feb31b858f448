// lib/src/report/audit.cpp — renderings of an audit.
#include "attncert/report/audit.hpp"

#include <map>
#include <sstream>

#include "attncert/error.hpp"
#include "attncert/report/rank.hpp"

namespace attncert::report {

namespace {

using ojson = nlohmann::ordered_json;

ojson object_json(const rank_analysis& a) {
  const nlohmann::json full = to_json(a, "");
  ojson o;
  o["exact_rank"] = full["exact_rank"];
  o["singular_values"] = full["singular_values"];
  o["singular_values_decided"] = full["singular_values_decided"];
  o["numerical_ranks"] = full["numerical"];
  o["shape"] = {a.rows, a.cols};
  o["mask"] = a.mask;
  o["partial"] = a.partial;
  if (!a.notes.empty()) o["notes"] = a.notes;
  return o;
}

ojson spec_json(const audit::audit_spec& s) {
  ojson j;
  j["objects"] = s.objects;
  j["formats"] = s.formats;
  if (s.formats.empty()) j["formats_used"] = "each call's dtype and binary64";
  j["policies"] = s.policies;
  j["allowable_output_error"] = s.allowable_output_error;
  j["allowable_output_error_norm"] = "max_i ||((A_model - A) V)_i||_2 / max_j ||v_j||_2, bounded through article §11 by max_i ||A_model,i - A_i||_1";
  if (s.target_contrast.between.empty()) j["target_contrast"] = nullptr;
  else
    j["target_contrast"] = {{s.target_contrast.between, {s.target_contrast.first, s.target_contrast.second}},
                            {"margin", s.target_contrast.margin},
                            {"measured_on", "each head's output: A V (exact, enclosed) and A_model V (the model's weights, exact values)"}};
  j["fixed_at"] = s.fixed_at;
  j["bypass"] = s.bypass;
  j["max_precision"] = s.max_precision;
  j["max_seconds"] = s.max_seconds;
  return j;
}

std::map<std::string, std::size_t> outcome_counts(const audit::audit_result& r) {
  std::map<std::string, std::size_t> n;
  for (const auto& c : r.calls)
    for (const auto& h : c.heads_results) ++n[audit::to_string(h.result)];
  return n;
}

// One head: its objects, value scale, output error, contrast and outcome.
ojson head_json(const audit::head_result& h, const audit::audit_spec& spec) {
  ojson hj;
  hj["batch"] = h.batch;
  hj["head"] = h.head;
  hj["kv_head"] = h.kv_head;
  ojson objs = ojson::object();
  for (const auto& o : h.objects) objs[o.object] = object_json(o.analysis);
  hj["objects"] = objs;
  hj["value_scale"] = {{"lo", h.value_scale_lo}, {"hi", h.value_scale_hi}};
  if (h.attention_l1_error_hi.empty())
    hj["output_error"] = {{"computed", false}, {"why", "the model's attention weights were not captured"}};
  else
    hj["output_error"] = {{"computed", true},
                          {"attention_l1_hi", h.attention_l1_error_hi},
                          {"bound_hi", h.output_error_bound_hi},
                          {"relative", {{"lo", h.output_error_rel_lo}, {"hi", h.output_error_rel_hi}}},
                          {"allowance_relative", spec.allowable_output_error}};
  if (!h.contrast_exact_lo.empty()) {
    ojson cj;
    cj["exact"] = {{"lo", h.contrast_exact_lo}, {"hi", h.contrast_exact_hi}};
    if (h.contrast_model_lo.empty()) cj["model"] = nullptr;
    else cj["model"] = {{"lo", h.contrast_model_lo}, {"hi", h.contrast_model_hi}};
    cj["margin"] = spec.target_contrast.margin;
    if (!h.contrast_gain_lo.empty()) {  // §5: the contrast's gain through A and float32's numerical-rank threshold
      cj["gain"] = {{"lo", h.contrast_gain_lo}, {"hi", h.contrast_gain_hi}};
      cj["float32_rank_threshold"] = h.contrast_float32;
    }
    hj["target_contrast"] = cj;
  }
  hj["outcome"] = audit::to_string(h.result);
  hj["why"] = h.why;
  return hj;
}

// The multi-head object of one batch.
ojson multi_head_json(const audit::multi_head_result& m) {
  ojson mj;
  mj["batch"] = m.batch;
  mj["computed"] = m.why.empty();
  if (!m.why.empty()) {
    mj["why"] = m.why;
  } else {
    mj["object"] = "concat_h(A_h V_h) W_O^T (without b_O)";
    mj["exact_rank"] = {{"lo", m.exact.lo}, {"hi", m.exact.hi}, {"lo_witness", m.exact.lo_witness}, {"hi_witness", m.exact.hi_witness}};
    ojson sv = ojson::array();
    for (const auto& [lo, hi] : m.singular_values) sv.push_back({{"lo", lo}, {"hi", hi}});
    mj["singular_values"] = sv;
    ojson nr = ojson::array();
    for (const auto& e : m.numerical)
      nr.push_back({{"format", e.format}, {"policy", e.policy}, {"rank", e.rank}, {"diverges", e.diverges},
                    {"of", "the model's output minus b_O"}});
    mj["numerical_ranks"] = nr;
  }
  return mj;
}

// The residual object of one batch.
ojson residual_json(const audit::residual_result& x) {
  ojson xj;
  xj["batch"] = x.batch;
  xj["computed"] = x.why.empty();
  if (!x.why.empty()) {
    xj["why"] = x.why;
  } else {
    xj["object"] = "X + concat_h(A_h V_h) W_O^T + b_O (X: the residual stream, the enclosing layer's input)";
    xj["exact_rank"] = {{"lo", x.exact.lo}, {"hi", x.exact.hi}, {"lo_witness", x.exact.lo_witness}, {"hi_witness", x.exact.hi_witness}};
    if (x.x_rank >= 0) xj["residual_stream_exact_rank"] = x.x_rank;
    else xj["residual_stream_exact_rank"] = nullptr;
    ojson sv = ojson::array();
    for (const auto& [lo, hi] : x.singular_values) sv.push_back({{"lo", lo}, {"hi", hi}});
    xj["singular_values"] = sv;
    ojson nr = ojson::array();
    for (const auto& e : x.numerical)
      nr.push_back({{"format", e.format}, {"policy", e.policy}, {"rank", e.rank}, {"diverges", e.diverges}, {"of", "X + the model's output"}});
    xj["numerical_ranks"] = nr;
  }
  return xj;
}

}  // namespace

nlohmann::ordered_json audit_json(const audit::audit_result& r, const std::string& command) {
  ojson j;
  j["tool"] = "attncert";
  j["version"] = ATTNCERT_VERSION;
  j["command"] = command;
  j["spec"] = spec_json(r.spec);
  j["spec_text"] = r.spec.text;
  j["spec_sha256"] = r.spec.sha256;
  j["spec_is_default"] = r.spec.is_default;
  ojson controls = ojson::array();
  for (const auto& c : r.controls)
    controls.push_back({{"name", c.name}, {"object", c.object}, {"statement", c.statement}, {"expected", c.expected},
                        {"exact_rank", {{"lo", c.analysis.exact.lo}, {"hi", c.analysis.exact.hi}}}, {"passed", c.passed}});
  j["controls"] = controls;
  ojson layers = ojson::array();
  for (const auto& c : r.calls) {
    ojson l;
    l["name"] = c.name;
    l["kind"] = c.kind;
    l["dtype"] = c.dtype;
    l["scale"] = c.scale;
    l["mask_kind"] = c.mask_kind;
    l["shape"] = {{"batch", c.batch}, {"heads", c.heads}, {"kv_heads", c.kv_heads}, {"n_q", c.n_q}, {"n_k", c.n_k},
                  {"head_dim", c.head_dim}, {"value_dim", c.value_dim}};
    l["notes"] = c.notes;
    ojson heads = ojson::array();
    for (const auto& h : c.heads_results) heads.push_back(head_json(h, r.spec));
    l["heads"] = heads;
    ojson mh = ojson::array();
    for (const auto& m : c.multi_head) mh.push_back(multi_head_json(m));
    l["multi_head"] = mh;
    ojson res = ojson::array();
    for (const auto& x : c.residual) res.push_back(residual_json(x));
    l["residual"] = res;
    layers.push_back(l);
  }
  j["layers"] = layers;
  j["partial"] = r.partial;
  j["notes"] = r.notes;
  ojson counts = ojson::object();
  for (const auto& [k, v] : outcome_counts(r)) counts[k] = v;
  std::size_t passed = 0;
  for (const auto& c : r.controls) passed += c.passed ? 1 : 0;
  j["summary"] = {{"outcomes", counts}, {"controls", r.controls.size()}, {"controls_passed", passed}};
  return j;
}

namespace {
std::string range_md(const ojson& e) {
  const auto lo = e["lo"].get<std::size_t>(), hi = e["hi"].get<std::size_t>();
  return lo == hi ? std::to_string(lo) : "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}
}  // namespace

std::string audit_markdown(const nlohmann::ordered_json& j) {
  std::ostringstream os;
  os << "# attncert audit\n\n`" << j["command"].get<std::string>() << "` (attncert " << j["version"].get<std::string>() << ")\n\n";
  const std::string text = j["spec_text"].get<std::string>();
  os << "## Criteria, fixed before the measurements\n\nspec SHA-256 `" << j["spec_sha256"].get<std::string>() << "`"
     << (j["spec_is_default"].get<bool>() ? " (the default spec: no criteria were given)" : "") << "\n\n```json\n" << text
     << (text.empty() || text.back() != '\n' ? "\n" : "") << "```\n\n";
  os << "## Negative controls\n\n| control | object | expected rank | certified rank | passed |\n|---|---|---|---|---|\n";
  for (const auto& c : j["controls"])
    os << "| " << c["name"].get<std::string>() << " | " << c["object"].get<std::string>() << " | " << c["expected"].get<std::size_t>() << " | ["
       << c["exact_rank"]["lo"].get<std::size_t>() << ", " << c["exact_rank"]["hi"].get<std::size_t>() << "] | " << (c["passed"].get<bool>() ? "yes" : "NO")
       << " |\n";
  for (const auto& l : j["layers"]) {
    os << "\n## " << l["name"].get<std::string>() << " (" << l["kind"].get<std::string>() << ", " << l["dtype"].get<std::string>() << ", mask "
       << l["mask_kind"].get<std::string>() << ")\n\n";
    for (const auto& n : l["notes"]) os << "- " << n.get<std::string>() << "\n";
    if (!l["notes"].empty()) os << "\n";
    if (l["heads"].empty()) {
      os << "No head of this call was audited.\n";
      continue;
    }
    os << "| batch | head | exact rank (";
    bool first = true;
    for (const auto& [name, ob] : l["heads"][0]["objects"].items()) {
      os << (first ? "" : ", ") << name;
      first = false;
    }
    os << ") | max ‖v‖₂ ≤ | output error / max‖v‖₂ | outcome |\n|---|---|---|---|---|---|\n";
    for (const auto& h : l["heads"]) {
      os << "| " << h["batch"].get<std::size_t>() << " | " << h["head"].get<std::size_t>() << " | ";
      first = true;
      for (const auto& [name, ob] : h["objects"].items()) {
        os << (first ? "" : ", ") << range_md(ob["exact_rank"]);
        first = false;
      }
      const ojson& e = h["output_error"];
      os << " | " << h["value_scale"]["hi"].get<std::string>() << " | "
         << (e["computed"].get<bool>() ? "[" + e["relative"]["lo"].get<std::string>() + ", " + e["relative"]["hi"].get<std::string>() + "]"
                                       : std::string("weights not captured"))
         << " | " << h["outcome"].get<std::string>() << " |\n";
    }
  }
  for (const auto& l : j["layers"])
    for (const char* key : {"multi_head", "residual"}) {
      bool first = true;
      for (const auto& m : l[key]) {
        if (first)
          os << "\n### " << l["name"].get<std::string>() << (std::string(key) == "multi_head" ? ": multi-head object concat_h(A_h V_h) W_O^T\n\n"
                                                                                              : ": residual object X + concat_h(A_h V_h) W_O^T + b_O\n\n");
        first = false;
        os << "- batch " << m["batch"].get<std::size_t>() << ": ";
        if (!m["computed"].get<bool>()) {
          os << "not computed: " << m["why"].get<std::string>() << "\n";
          continue;
        }
        os << "exact rank " << range_md(m["exact_rank"]);
        if (m.contains("residual_stream_exact_rank") && !m["residual_stream_exact_rank"].is_null())
          os << " (the residual stream X alone: " << m["residual_stream_exact_rank"].get<long>() << ")";
        for (const auto& e : m["numerical_ranks"])
          os << "; " << e["of"].get<std::string>() << ": " << e["rank"].get<std::size_t>() << " (" << e["format"].get<std::string>() << ", "
             << e["policy"].get<std::string>() << ")";
        os << "\n";
      }
    }
  const ojson& tc = j["spec"]["target_contrast"];
  if (!tc.is_null()) {
    os << "\n## Target contrast (" << tc.dump() << ")\n\nThe gain is ‖A_p − A_q‖₂/√2, the contrast's gain through the exact attention (§5); "
          "float32 says whether a float32 numerical rank (NumPy's threshold) discards the directions that carry it "
          "(proofs/L6).\n\n| layer | batch | head | exact A V | model A_model V | gain | float32 |\n|---|---|---|---|---|---|---|\n";
    for (const auto& l : j["layers"])
      for (const auto& h : l["heads"])
        if (h.contains("target_contrast")) {
          const ojson& c = h["target_contrast"];
          os << "| " << l["name"].get<std::string>() << " | " << h["batch"].get<std::size_t>() << " | " << h["head"].get<std::size_t>() << " | ["
             << c["exact"]["lo"].get<std::string>() << ", " << c["exact"]["hi"].get<std::string>() << "] | "
             << (c["model"].is_null() ? std::string("not measured")
                                      : "[" + c["model"]["lo"].get<std::string>() + ", " + c["model"]["hi"].get<std::string>() + "]")
             << " | "
             << (c.contains("gain") ? "[" + c["gain"]["lo"].get<std::string>() + ", " + c["gain"]["hi"].get<std::string>() + "] | " +
                                          c["float32_rank_threshold"].get<std::string>()
                                    : std::string("— | —"))
             << " |\n";
        }
  }
  os << "\n## Outcomes\n\n";
  for (const auto& [k, v] : j["summary"]["outcomes"].items()) os << "- " << k << ": " << v.get<std::size_t>() << "\n";
  if (j["partial"].get<bool>()) os << "\nPARTIAL: stopped at the budget; the heads not computed are named above.\n";
  return os.str();
}

nlohmann::ordered_json merge_audit_json(const std::vector<nlohmann::ordered_json>& parts, const std::string& command) {
  if (parts.empty()) throw internal_error("merge_audit_json: no part");
  ojson out = parts.front();
  out["command"] = command;
  ojson layers = ojson::array();
  bool partial = false;
  ojson notes = ojson::array();
  std::map<std::string, std::size_t> counts;
  for (const auto& p : parts) {
    if (p["spec_sha256"] != out["spec_sha256"] || p["spec_text"] != out["spec_text"])
      throw internal_error("merge_audit_json: the parts were audited under different specs");
    if (p["controls"] != out["controls"]) throw internal_error("merge_audit_json: the parts' negative controls differ");
    for (const auto& l : p["layers"]) {
      layers.push_back(l);
      for (const auto& h : l["heads"]) ++counts[h["outcome"].get<std::string>()];
    }
    partial = partial || p["partial"].get<bool>();
    for (const auto& n : p["notes"]) notes.push_back(n);
  }
  out["layers"] = layers;
  out["partial"] = partial;
  out["notes"] = notes;
  ojson c = ojson::object();
  for (const auto& [k, v] : counts) c[k] = v;
  out["summary"]["outcomes"] = c;
  return out;
}

}  // namespace attncert::report
