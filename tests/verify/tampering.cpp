// tests/verify/tampering.cpp — the checker checks every fact a certificate states (issue
// "Architecture", item 6).  Every certificate shipped in proofs/certificates/ is loaded; for every
// leaf of its JSON (strings, numbers, booleans) and every array (its length) a tampered copy is
// made, and verify_certificate must not find it VALID — unless the field's path is one of
// verdict_irrelevant_fields() (attncert/verify/certificate.hpp, documented in proofs/README.md).
//
// Tamperings (deterministic):
//   integer        +1, -1 and x2 (x2 of 0 is -1)
//   boolean        flipped
//   word           "x" appended; a verdict becomes the other verdict
//   array          its last element dropped (an empty one gets "0"); also its first (length >= 2)
//   number string  its most significant digit changed (0 -> 1, d -> d+1, 9 -> 10), negated
//                  (0 -> -1), replaced by 0 (if not 0), and, when it is an integer or a fraction, + 1/3 (exact)
// What must be rejected:
//   every tampering of a boolean, a word, and of an integer or an array outside /claim (ranks,
//   signs, counts, indices, coefficient lists: exact facts with one right value);
//   some tampering of a number string, and of an integer or array inside /claim.  A number
//   string may be a witness or an enclosure — a sample u (any u on the same side of every zero
//   is as good), an end of an a-enclosure or of an isolating interval (a wider one is as true), a
//   bracket of sigma_1^2 — and a changed claim may be another true claim that the same evidence
//   proves (rank <= 2 where rank <= 1 was certified; an fp32 rank unchanged by a change of
//   2^-40 in the scores; a row of S0 that an entry claim does not read).  The checker is right to
//   accept those; what the test demands is that it reads and re-derives every such field: a
//   field it ignored would pass every tampering.
//
// Every field of every certificate is tampered, except in the one large certificate
// (P05-log-odds-attention-exceeds-score-rank, 215 kB, its gcd of degree ~500 makes each check
// take about a second): there the first and the last element of every array of more than
// 4 elements are tampered, which still covers every field path kind (same paths with the array
// indices collapsed) of that certificate.  The same sampling holds for the rank_heads_vote_mse
// certificates (401 binomial tails each, whose re-check takes up to a third of a second) and the
// nearest_neighbour_model_mse ones (up to 3766 weights each; a re-check evaluates the model on 200 inputs).  Set
// ATTNCERT_TAMPER_ALL=1 to tamper every field there too (minutes).
#define BOOST_TEST_MODULE verify_tampering
#include <boost/test/unit_test.hpp>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include <boost/multiprecision/gmp.hpp>

#include "attncert/verify/certificate.hpp"

using namespace attncert::verify;
using nlohmann::json;
using mpq_rational = boost::multiprecision::mpq_rational;
namespace fs = std::filesystem;

namespace {

// proofs/certificates/ (CMakeLists.txt defines ATTNCERT_CERTIFICATES_DIR); ATTNCERT_CERTIFICATES overrides it.
fs::path certificates_dir() {
  if (const char* d = std::getenv("ATTNCERT_CERTIFICATES")) return d;
  return ATTNCERT_CERTIFICATES_DIR;
}

std::vector<fs::path> certificate_files() {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(certificates_dir()))
    if (e.path().extension() == ".json") files.push_back(e.path());
  std::sort(files.begin(), files.end());
  return files;
}

json load(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return parse_certificate_text(ss.str());
}

bool looks_numeric(const std::string& s) {
  return !s.empty() && s.find_first_not_of("+-0123456789./eE") == std::string::npos && s.find_first_of("0123456789") != std::string::npos;
}

// The tampered texts of a number string (see the file comment).
std::vector<std::string> tampered_number_texts(const std::string& s) {
  std::vector<std::string> out;
  const auto first = s.find_first_of("123456789");
  if (first == std::string::npos) {  // zero
    std::string t = s;
    t[s.find('0')] = '1';
    out.push_back(t);
    out.push_back("-" + t);
  } else {
    std::string t = s;
    if (t[first] == '9') t.replace(first, 1, "10");
    else ++t[first];
    out.push_back(t);
    out.push_back(s[0] == '-' ? s.substr(1) : s[0] == '+' ? "-" + s.substr(1) : "-" + s);
    out.push_back("0");
  }
  if (s.find_first_of(".eE") == std::string::npos) {
    const mpq_rational v(s);
    out.push_back((v + mpq_rational(1, 3)).str());
  }
  return out;
}

enum class demand { every_one_rejected, some_rejected };

// The tampered values of a leaf at `pointer`, and what is demanded of them (see the file comment).
std::vector<json> tampered_values(const json& v, const std::string& pointer, demand& d) {
  std::vector<json> out;
  const bool in_claim = pointer.rfind("/claim/", 0) == 0;
  d = demand::every_one_rejected;
  if (v.is_boolean()) {
    out.push_back(!v.get<bool>());
  } else if (v.is_number_integer()) {
    const long long x = v.get<long long>();
    out.push_back(x + 1);
    out.push_back(x - 1);
    if (x != 0) out.push_back(2 * x);
    if (in_claim) d = demand::some_rejected;
  } else if (v.is_string()) {
    const std::string s = v.get<std::string>();
    if (s == "CERTIFIED") {
      out.push_back("REFUTED");
    } else if (s == "REFUTED") {
      out.push_back("CERTIFIED");
    } else if (looks_numeric(s)) {
      d = demand::some_rejected;
      for (const auto& t : tampered_number_texts(s)) out.push_back(t);
    } else {
      out.push_back(s + "x");
    }
  }
  return out;
}

struct tampering {
  std::string pointer, how;
  json certificate;
};

// Every tampered copy of one field (one leaf, or one array's length), and what is demanded.
struct field_tamperings {
  std::string pointer;
  demand what = demand::every_one_rejected;
  std::vector<tampering> copies;
};

// The tamperings of every field of `root` (a subset of array elements when `sample_arrays`).
void tamper_all(const json& root, const json& node, const std::string& pointer, bool sample_arrays,
                const std::function<void(const field_tamperings&)>& each) {
  if (node.is_object()) {
    for (auto it = node.begin(); it != node.end(); ++it) tamper_all(root, it.value(), pointer + "/" + it.key(), sample_arrays, each);
    return;
  }
  if (node.is_array()) {
    field_tamperings f{pointer, pointer.rfind("/claim/", 0) == 0 ? demand::some_rejected : demand::every_one_rejected, {}};
    json t = root;
    auto& a = t[json::json_pointer(pointer)];
    if (a.empty()) a.push_back("0");
    else a.erase(a.size() - 1);
    f.copies.push_back({pointer, "array length " + std::to_string(node.size()) + " -> " + std::to_string(a.size()) + " (last dropped)", t});
    if (node.size() >= 2) {
      json t2 = root;
      t2[json::json_pointer(pointer)].erase(0);
      f.copies.push_back({pointer, "array length " + std::to_string(node.size()) + " -> " + std::to_string(node.size() - 1) + " (first dropped)", t2});
    }
    each(f);
    for (std::size_t k = 0; k < node.size(); ++k) {
      if (sample_arrays && node.size() > 4 && k != 0 && k + 1 != node.size()) continue;
      tamper_all(root, node[k], pointer + "/" + std::to_string(k), sample_arrays, each);
    }
    return;
  }
  field_tamperings f{pointer, demand::every_one_rejected, {}};
  for (const json& v : tampered_values(node, pointer, f.what)) {
    json t = root;
    t[json::json_pointer(pointer)] = v;
    f.copies.push_back({pointer, node.dump() + " -> " + v.dump(), t});
  }
  each(f);
}

}  // namespace

BOOST_AUTO_TEST_CASE(verdict_irrelevant_fields_are_documented) {
  BOOST_TEST(!verdict_irrelevant_fields().empty());
  for (const auto& f : verdict_irrelevant_fields()) {
    BOOST_TEST(!f.path.empty());
    BOOST_TEST(f.path.front() == '/');
    BOOST_TEST(!f.reason.empty(), f.path);
  }
}

BOOST_AUTO_TEST_CASE(every_stated_fact_is_checked) {
  const auto files = certificate_files();
  BOOST_TEST_REQUIRE(files.size() >= 20u, "certificates in " << certificates_dir());
  const bool all = std::getenv("ATTNCERT_TAMPER_ALL") != nullptr;
  // ATTNCERT_TAMPER_DUMP=FILE: every tampering's status and notes (to compare checker versions)
  std::ofstream dump;
  if (const char* d = std::getenv("ATTNCERT_TAMPER_DUMP")) dump.open(d);
  std::size_t checked = 0, skipped = 0;
  for (const auto& file : files) {
    const json cert = load(file);
    const std::string name = file.filename().string();
    BOOST_TEST_REQUIRE(verify_certificate(cert).exit_code() == 0, name << " is not valid as shipped");
    const bool sample = !all && (name.rfind("P05-log-odds-attention-exceeds-score-rank", 0) == 0 ||
                                 (cert.contains("rank_heads_vote") && cert["rank_heads_vote"].is_object()) ||
                                 (cert.contains("nearest_neighbour_model") && cert["nearest_neighbour_model"].is_object()));
    tamper_all(cert, cert, "", sample, [&](const field_tamperings& f) {
      std::vector<std::string> accepted;
      for (const tampering& t : f.copies) {
        const verification v = verify_certificate(t.certificate);
        if (dump.is_open()) {
          dump << name << " " << t.pointer << " " << t.how << " -> " << v.exit_code() << "\n";
          for (const auto& n : v.notes) dump << "  " << n << "\n";
        }
        if (v.exit_code() == 0) accepted.push_back(t.how);
      }
      if (verdict_irrelevant(cert, f.pointer)) {
        ++skipped;
        return;
      }
      ++checked;
      const bool ok = f.what == demand::every_one_rejected ? accepted.empty() : accepted.size() < f.copies.size();
      std::string list;
      for (const auto& a : accepted) list += " [" + a + "]";
      BOOST_TEST(ok, name << " " << f.pointer << ": still VALID after" << list
                          << (f.what == demand::some_rejected ? " (every tampering of this number accepted)" : ""));
    });
  }
  BOOST_TEST_MESSAGE(checked << " fields tampered, " << skipped << " verdict-irrelevant fields skipped");
}
