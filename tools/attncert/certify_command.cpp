// tools/attncert/certify_command.cpp — `attncert certify` and `attncert verify-certificate`.
// Thin: read files, call lib/ (proofs/claim.hpp, verify/certificate.hpp), write.
#include "certify_command.hpp"

#include <filesystem>
#include <iostream>
#include <sstream>

#include "attncert/deadline.hpp"
#include "attncert/error.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/verify/certificate.hpp"
#include "attncert/proofs/claim.hpp"
#include "attncert/proofs/spec.hpp"
#include "cli_common.hpp"
#include "cli_options.hpp"

namespace attncert::cli {

namespace {

struct certify_args {
  std::string claim, certificate, out_format = "text", out_path;
  unsigned max_precision = 4096;
  double max_seconds = 60;
};
struct verify_args {
  std::string certificate, out_format = "text", out_path;
  unsigned max_precision = 8192;
  double max_seconds = 0;
};

int run_certify(const certify_args& a) {
  proofs::certify_spec spec;
  spec.max_precision = a.max_precision;
  spec.max_seconds = a.max_seconds;
  spec.claim_text = io::read_file_bounded(a.claim);
  spec.base_dir = std::filesystem::path(a.claim).parent_path().string();
  const proofs::certify_request req = proofs::build_certify_request(spec);
  const nlohmann::json& claim = req.claim;
  const proofs::certify_result r = proofs::certify(req);
  command_output out;
  const std::string keep = a.certificate.empty() ? "attncert-disagreement.json" : a.certificate + ".disagreement.json";
  if (r.disagreement) {
    // keep everything for a bug report: the JSON report holds the claim's verdict, the
    // prover's verdict, the rejected certificate and the checker's notes
    nlohmann::json bug = r.report;
    bug["claim_file"] = a.claim;
    bug["claim"] = claim;
    out.files.stage_file(keep, spell_fields(bug.dump(1), cli_spelling) + "\n");
  }
  if (!a.certificate.empty() && !r.certificate.is_null() && !r.disagreement)
    out.files.stage_file(a.certificate, r.certificate.dump(1) + "\n");
  if (a.out_format == "json") out.report(a.out_path, r.report.dump(2) + "\n");
  else if (a.certificate.empty()) out.report(a.out_path, r.summary);
  else
    out.report(a.out_path, r.summary + (r.certificate.is_null() ? "  no certificate (undecided)\n"
                                                                 : "  certificate: " + a.certificate + "\n"));
  out.commit();
  if (r.disagreement)
    std::cerr << "attncert: internal disagreement: the independent checker rejects the prover's certificate; verdict UNDECIDED; "
                 "claim, certificate and both outputs kept in '" << keep << "' for a bug report\n";
  return r.exit_code();
}

int run_verify(const verify_args& a) {
  proofs::verify_spec spec;
  spec.certificate = a.certificate;
  spec.max_precision = a.max_precision;
  spec.max_seconds = a.max_seconds;
  deadline_scope budget(a.max_seconds);  // one budget for the command: reading, then checking
  spec.certificate_text = io::read_file_bounded(a.certificate);
  const proofs::verify_request req = proofs::build_verify_request(spec);
  const verify::verification v = proofs::verify(req);
  command_output out;
  out.report(a.out_path, a.out_format == "json" ? proofs::verification_json(req, v).dump(2) + "\n" : proofs::verification_text(req, v));
  out.commit();
  if (v.result == verify::verification::status::malformed)
    std::cerr << "attncert: " << (v.notes.empty() ? "malformed" : one_line(v.notes.back(), 4096)) << "\n";
  return v.exit_code();
}

}  // namespace

std::function<int()> add_certify_commands(CLI::App& app) {
  auto ca = std::make_shared<certify_args>();
  auto va = std::make_shared<verify_args>();
  auto* c = app.add_subcommand("certify", "Certify a claim file: CERTIFIED (exit 0), REFUTED (1), UNDECIDED (3); malformed claim: 2.");
  c->footer(
      "Claim files: see proofs/README.md.  Quantities: rank (scores, attention, output, residual), determinant,\n"
      "output_value, singular_value (at a point), output_bound (at a point), numerical_rank (at a point),\n"
      "rank_heads_lower_bound (every one-layer network of H heads of rank <= r in dimension d has MSE >= value on\n"
      "the N = 2 nearest-neighbour task), rank_heads_vote_mse (the two-layer vote construction of H rank-one\n"
      "heads has mean MSE <= or >= value over random directions), rank_heads_full_rank_mse (one full-rank\n"
      "head lambda*I has MSE <= or >= value), rank_heads_hardmax_orthonormal (every hardmax layer of H <= d\n"
      "rank-one heads with orthonormal query directions has MSE >= value), rank_heads_hardmax_directions\n"
      "(the same for the query directions listed in the claim, up to 256 rows of d exact numbers, e.g. the ones\n"
      "`attncert check rank-heads-tradeoff` prints for its optimized heads), rank_heads_context_hit_rate (the\n"
      "exact rate at which a rank-one head picks the nearest of N keys on a seeded lattice instance: =, <=, >=)\n"
      "rank_heads_pair_hit_probability (the same probability for N = 2 keys on the sphere, exact in closed\n"
      "form) and nearest_neighbour_model_mse (an attention-only model's MSE on the fixed nearest-neighbour test\n"
      "set, weights inline or as a .npy path; proofs/L4-rank-heads-tradeoff.md parts H and I).\n"
      "Parameter families S(a) = a*S0 are decided by exact root isolation (proofs/P09-parameter-families.md).\n"
      "Every CERTIFIED or REFUTED is re-checked by the independent checker (as verify-certificate) before it is\n"
      "printed; if the checker rejects the certificate the verdict is UNDECIDED (internal disagreement, exit 3)\n"
      "and everything is kept in\n"
      "FILE.disagreement.json (or ./attncert-disagreement.json) for a bug report.  The JSON report gives the\n"
      "checking time (certificate_check.seconds).\n"
      "Example:\n"
      "  attncert certify proofs/claims/P01-two-token-attention-full-rank.json --certificate out.cert.json\n"
      "  attncert certify proofs/claims/L4-rank-one-heads-lower-bound.json\n" +
      exit_codes_text({{exit_ok, "CERTIFIED"},
                       {exit_failed, "REFUTED"},
                       {exit_undecided, "UNDECIDED (incl. the time limit and an internal disagreement)"}}));
  c->add_option("claim", ca->claim, "Claim file (JSON)")->required();
  c->add_option("--certificate", ca->certificate, "Write the certificate to FILE (atomically)")->check(writable_file());
  add_max_precision_option(c, ca->max_precision, 64, 1u << 20, "Cap (bits) of the enclosures of e^{a/q} at range ends");
  c->add_option("--max-seconds", ca->max_seconds,
                "Wall-clock budget, in [0, 1e7] (0: none), of the prover and of the checker's re-check of its certificate;\n"
                "past it the verdict is UNDECIDED")
      ->check(cli::seconds_budget())
      ->capture_default_str();
  add_format_option(c, ca->out_format, {"text", "json"});
  add_out_option(c, ca->out_path);
  auto* v = app.add_subcommand("verify-certificate",
                               "Re-check a certificate independently: exit 0 valid, 1 invalid, 2 malformed, 3 cannot check within "
                               "--max-precision or --max-seconds.");
  v->add_option("certificate", va->certificate, "Certificate (JSON)")->required();
  v->footer(exit_codes_text({{exit_ok, "VALID"},
                              {exit_failed, "INVALID"},
                              {exit_undecided, "cannot check within --max-precision or --max-seconds (UNCHECKED)"}}) +
            "\n  (a MALFORMED certificate is bad input: exit 2)");
  add_max_precision_option(v, va->max_precision, 64, 1u << 22, "Cap (bits) of the checker's enclosures of e^{a/q}");
  v->add_option("--max-seconds", va->max_seconds,
                "Wall-clock budget of the check, in [0, 1e7] (0: none): past it the checker stops at its next poll and the\n"
                "certificate is UNCHECKED (exit 3; it may be valid: nothing is concluded)")
      ->check(cli::seconds_budget())
      ->capture_default_str();
  add_format_option(v, va->out_format, {"text", "json"});
  add_out_option(v, va->out_path);
  return [c, v, ca, va]() -> int {
    if (*c) return run_certify(*ca);
    if (*v) return run_verify(*va);
    return -1;
  };
}

}  // namespace attncert::cli
