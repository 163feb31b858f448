// tests/report/drift.cpp — the renderings of `attncert drift` (report/drift.hpp): the default
// report carries the intervals, settings and summary and no per-point data; with per_point
// the JSON's columnar table, the CSV rows and the text lines carry the typed result's numbers
// exactly (binary64 values read back bit for bit).
#define BOOST_TEST_MODULE report_drift
#include "attncert/report/drift.hpp"

#include <boost/test/unit_test.hpp>
#include <sstream>

using namespace attncert;
using namespace attncert::report;

namespace {

drift_request request() {
  drift_request r;
  r.family = drift_family::two_token;
  r.from = 1e-18;
  r.to = 1;
  r.points = 9;
  r.log = true;
  r.recipes = parse_recipes("fp16,fp64,mpfr128");
  r.policies = parse_policies("numpy,absolute:1e-6");
  return r;
}

std::vector<std::string> split_csv(const std::string& line) {
  std::vector<std::string> out;
  std::string cur;
  for (char ch : line) {
    if (ch == ',') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  out.push_back(cur);
  return out;
}

std::size_t count_lines_starting(const std::string& text, const std::string& prefix) {
  std::istringstream in(text);
  std::size_t n = 0;
  for (std::string line; std::getline(in, line);) n += line.rfind(prefix, 0) == 0;
  return n;
}

}  // namespace

// Default: every non-per-point key, the intervals first in text and CSV, no per-point data.
BOOST_AUTO_TEST_CASE(default_report_has_no_points) {
  const drift_request r = request();
  const drift_result res = run_drift(r);
  std::ostringstream js, txt, csv;
  write_drift_json(js, r, res, "test");
  const nlohmann::json j = nlohmann::json::parse(js.str());
  for (const char* k : {"tool", "version", "command", "inputs", "settings", "divergence", "summary"})
    BOOST_TEST(j.contains(k), k);
  BOOST_TEST(!j.contains("points"));
  BOOST_TEST(js.str() == drift_json(r, res, "test").dump(2) + "\n");
  BOOST_TEST(j["summary"]["points"].get<std::size_t>() == 9u);
  write_drift_text(txt, r, res);
  BOOST_TEST(count_lines_starting(txt.str(), "a = ") == 0u);
  BOOST_TEST(count_lines_starting(txt.str(), "summary: 9 points") == 1u);
  BOOST_TEST(txt.str().find("divergence intervals") != std::string::npos);
  write_drift_csv(csv, r, res);
  BOOST_TEST(count_lines_starting(csv.str(), "point,") == 0u);
  BOOST_TEST(count_lines_starting(csv.str(), "divergence,") == j["summary"]["intervals"].get<std::size_t>());
}

// per_point: the JSON columns hold the typed result; the CSV rows the same numbers as the
// JSON columns (and the typed result); one text line per point.
BOOST_AUTO_TEST_CASE(per_point_columns_and_rows_round_trip) {
  const drift_request r = request();
  const drift_result res = run_drift(r);
  const drift_write_options pp{true};
  std::ostringstream js, csv, txt;
  write_drift_json(js, r, res, "test", pp);
  const nlohmann::json j = nlohmann::json::parse(js.str());
  const auto& P = j["points"];
  BOOST_TEST_REQUIRE(P["a"].size() == res.points.size());
  BOOST_TEST(P["recipes"].size() == 3u);
  for (std::size_t i = 0; i < res.points.size(); ++i) {
    const auto& p = res.points[i];
    BOOST_TEST(P["a"][i].get<double>() == p.a);
    BOOST_TEST(P["exact_rank_lo"][i].get<std::size_t>() == p.exact.lo);
    BOOST_TEST(P["sigma_min_enclosure_lo"][i].get<std::string>() == p.smin_lo);
    BOOST_TEST(P["condition_number_enclosure_hi"][i].get<std::string>() == p.cond_hi);
    BOOST_TEST(P["diverges"][i].get<bool>() == p.diverges);
    for (std::size_t ri = 0; ri < 3; ++ri) {
      const auto& m = p.recipes[ri];
      const auto& R = P["recipes"][ri];
      BOOST_TEST(R["formed"][i].get<bool>() == m.formed);
      BOOST_TEST(R["diverges"][i].get<bool>() == m.diverges);
      for (std::size_t pi = 0; pi < r.policies.size(); ++pi)
        BOOST_TEST(R["numerical_rank"][r.policies[pi].name()][i].get<std::size_t>() == m.ranks[pi]);
      if (m.sigma_min_text.empty()) BOOST_TEST(R["sigma_min"][i].get<double>() == m.sigma_min);
      else BOOST_TEST(R["sigma_min"][i].get<std::string>() == m.sigma_min_text);
    }
  }
  BOOST_TEST(P["recipes"][0]["svd"] == "binary32");  // fp16: the SVD in binary32 (rank/numerical.hpp)

  write_drift_csv(csv, r, res, pp);
  std::istringstream in(csv.str());
  std::string line;
  std::getline(in, line);
  const auto header = split_csv(line);
  BOOST_TEST(header.size() == 16u);
  std::size_t point_rows = 0, interval_rows = 0;
  bool point_seen = false;
  while (std::getline(in, line)) {
    const auto f = split_csv(line);
    BOOST_TEST_REQUIRE(f.size() == header.size());
    if (f[0] == "point") {
      point_seen = true;
      const double a = std::strtod(f[1].c_str(), nullptr);
      std::size_t i = 0;
      while (i < P["a"].size() && P["a"][i].get<double>() != a) ++i;
      BOOST_TEST_REQUIRE(i < P["a"].size());
      BOOST_TEST(std::stoul(f[2]) == P["exact_rank_lo"][i].get<std::size_t>());
      BOOST_TEST(f[4] == P["sigma_min_enclosure_lo"][i].get<std::string>());
      const nlohmann::json* m = nullptr;
      for (const auto& q : P["recipes"])
        if (q["recipe"] == f[8]) m = &q;
      BOOST_TEST_REQUIRE(m != nullptr);
      BOOST_TEST(std::stoul(f[10]) == (*m)["numerical_rank"][f[9]][i].get<std::size_t>());
      if ((*m)["sigma_min"][i].is_string()) BOOST_TEST(f[11] == (*m)["sigma_min"][i].get<std::string>());
      else BOOST_TEST(std::strtod(f[11].c_str(), nullptr) == (*m)["sigma_min"][i].get<double>());
      BOOST_TEST((f[13] == "true") == (*m)["diverges"][i].get<bool>());
      ++point_rows;
    } else {
      BOOST_TEST(f[0] == "divergence");
      BOOST_TEST(!point_seen);  // the intervals come first
      bool found = false;
      for (const auto& d : j["divergence"])
        if (d["recipe"] == f[8] && d["policy"] == f[9])
          for (const auto& iv : d["intervals"])
            found = found || (iv[0].get<double>() == std::strtod(f[14].c_str(), nullptr) &&
                              iv[1].get<double>() == std::strtod(f[15].c_str(), nullptr));
      BOOST_TEST(found);
      ++interval_rows;
    }
  }
  BOOST_TEST(point_rows == 9u * 3u * 2u);
  BOOST_TEST(interval_rows == j["summary"]["intervals"].get<std::size_t>());
  BOOST_TEST(interval_rows > 0u);

  write_drift_text(txt, r, res, pp);
  BOOST_TEST(count_lines_starting(txt.str(), "a = ") == 9u);
  BOOST_TEST(txt.str().find("summary: 9 points") < txt.str().find("a = "));
}
