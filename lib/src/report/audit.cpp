// lib/src/report/audit.cpp — renderings of an audit.
#include "attncert/report/audit.hpp"

#include <map>
#include <sstream>

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
  j["target_contrast"] = s.target_contrast;
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
    for (const auto& h : c.heads_results) {
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
                              {"allowance_relative", r.spec.allowable_output_error}};
      hj["outcome"] = audit::to_string(h.result);
      hj["why"] = h.why;
      heads.push_back(hj);
    }
    l["heads"] = heads;
    ojson mh = ojson::array();
    for (const auto& m : c.multi_head) {
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
      mh.push_back(mj);
    }
    l["multi_head"] = mh;
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

std::string audit_markdown(const audit::audit_result& r, const std::string& command) {
  std::ostringstream os;
  os << "# attncert audit\n\n`" << command << "` (attncert " << ATTNCERT_VERSION << ")\n\n";
  os << "## Criteria, fixed before the measurements\n\nspec SHA-256 `" << r.spec.sha256 << "`"
     << (r.spec.is_default ? " (the default spec: no criteria were given)" : "") << "\n\n```json\n" << r.spec.text
     << (r.spec.text.empty() || r.spec.text.back() != '\n' ? "\n" : "") << "```\n\n";
  os << "## Negative controls\n\n| control | object | expected rank | certified rank | passed |\n|---|---|---|---|---|\n";
  for (const auto& c : r.controls)
    os << "| " << c.name << " | " << c.object << " | " << c.expected << " | [" << c.analysis.exact.lo << ", " << c.analysis.exact.hi
       << "] | " << (c.passed ? "yes" : "NO") << " |\n";
  for (const auto& c : r.calls) {
    os << "\n## " << c.name << " (" << c.kind << ", " << c.dtype << ", mask " << c.mask_kind << ")\n\n";
    for (const auto& n : c.notes) os << "- " << n << "\n";
    if (!c.notes.empty()) os << "\n";
    if (c.heads_results.empty()) {
      os << "No head of this call was audited.\n";
      continue;
    }
    os << "| batch | head | exact rank (";
    for (std::size_t k = 0; k < (c.heads_results.empty() ? 0 : c.heads_results[0].objects.size()); ++k)
      os << (k ? ", " : "") << c.heads_results[0].objects[k].object;
    os << ") | max ‖v‖₂ ≤ | output error / max‖v‖₂ | outcome |\n|---|---|---|---|---|---|\n";
    for (const auto& h : c.heads_results) {
      os << "| " << h.batch << " | " << h.head << " | ";
      for (std::size_t k = 0; k < h.objects.size(); ++k) {
        const auto& e = h.objects[k].analysis.exact;
        os << (k ? ", " : "") << (e.exact() ? std::to_string(e.lo) : "[" + std::to_string(e.lo) + ", " + std::to_string(e.hi) + "]");
      }
      os << " | " << h.value_scale_hi << " | " << (h.output_error_rel_hi.empty() ? "weights not captured" : "[" + h.output_error_rel_lo + ", " + h.output_error_rel_hi + "]") << " | "
         << audit::to_string(h.result) << " |\n";
    }
  }
  for (const auto& c : r.calls)
    for (const auto& m : c.multi_head) {
      if (&m == &c.multi_head.front()) os << "\n### " << c.name << ": multi-head object concat_h(A_h V_h) W_O^T\n\n";
      os << "- batch " << m.batch << ": ";
      if (!m.why.empty()) {
        os << "not computed: " << m.why << "\n";
        continue;
      }
      os << "exact rank " << (m.exact.exact() ? std::to_string(m.exact.lo) : "[" + std::to_string(m.exact.lo) + ", " + std::to_string(m.exact.hi) + "]");
      for (const auto& e : m.numerical) os << "; the model's output: " << e.rank << " (" << e.format << ", " << e.policy << ")";
      os << "\n";
    }
  os << "\n## Outcomes\n\n";
  for (const auto& [k, v] : outcome_counts(r)) os << "- " << k << ": " << v << "\n";
  if (r.partial) os << "\nPARTIAL: stopped at the budget; the heads not computed are named above.\n";
  return os.str();
}

}  // namespace attncert::report
