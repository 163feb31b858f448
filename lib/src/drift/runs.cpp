// lib/src/drift/runs.cpp — a drift sweep split into runs: the wire form of a run's result and the merge.
#include "attncert/drift/runs.hpp"

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>

#include "attncert/error.hpp"

namespace attncert {

namespace {

using json = nlohmann::json;

// A binary64 as a hexadecimal float ("0x1.8p+1", "inf", "-inf", "nan"): strtod reads it back exactly.
json hex(double x) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%a", x);
  return buf;
}

double unhex(const json& j) {
  const std::string s = j.get<std::string>();
  char* end = nullptr;
  errno = 0;
  const double x = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size()) throw input_error("drift run: not a hexadecimal float: '" + one_line(s, 60) + "'");
  return x;
}

json hexes(const std::vector<double>& xs) {
  json a = json::array();
  for (double x : xs) a.push_back(hex(x));
  return a;
}

std::vector<double> unhexes(const json& j) {
  std::vector<double> xs;
  for (const auto& x : j) xs.push_back(unhex(x));
  return xs;
}

json bools(const std::vector<bool>& bs) {
  json a = json::array();
  for (bool b : bs) a.push_back(b);
  return a;
}

std::vector<bool> unbools(const json& j) {
  std::vector<bool> bs;
  for (const auto& b : j) bs.push_back(b.get<bool>());
  return bs;
}

json measurement_wire(const recipe_measurement& m) {
  return {{"formed", m.formed},
          {"failure", m.failure},
          {"ranks", m.ranks},
          {"diverges_by_policy", bools(m.diverges_by_policy)},
          {"sigma", hexes({m.sigma_min, m.sigma_max, m.condition_number})},
          {"sigma_min_text", m.sigma_min_text},
          {"svd", m.svd},
          {"diagnostic_ranks", m.diagnostic_ranks},
          {"diagnostic_diverges", bools(m.diagnostic_diverges)},
          {"diverges", m.diverges}};
}

recipe_measurement measurement_of(const json& j) {
  recipe_measurement m;
  m.formed = j.at("formed").get<bool>();
  m.failure = j.at("failure").get<std::string>();
  m.ranks = j.at("ranks").get<std::vector<std::size_t>>();
  m.diverges_by_policy = unbools(j.at("diverges_by_policy"));
  const std::vector<double> s = unhexes(j.at("sigma"));
  if (s.size() != 3) throw input_error("drift run: a measurement's sigma holds 3 numbers");
  m.sigma_min = s[0];
  m.sigma_max = s[1];
  m.condition_number = s[2];
  m.sigma_min_text = j.at("sigma_min_text").get<std::string>();
  m.svd = j.at("svd").get<std::string>();
  m.diagnostic_ranks = j.at("diagnostic_ranks").get<std::vector<std::size_t>>();
  m.diagnostic_diverges = unbools(j.at("diagnostic_diverges"));
  m.diverges = j.at("diverges").get<bool>();
  return m;
}

json point_wire(const drift_point& p) {
  json recipes = json::array();
  for (const auto& m : p.recipes) recipes.push_back(measurement_wire(m));
  return {{"a", hex(p.a)},
          {"exact", {p.exact.lo, p.exact.hi, p.exact.closed_form}},
          {"enclosure", {p.smin_lo, p.smin_hi, p.cond_lo, p.cond_hi}},
          {"enclosure_d", hexes({p.smin_lo_d, p.smin_hi_d})},
          {"enclosure_bits", p.enclosure_bits},
          {"recipes", recipes},
          {"diverges", p.diverges}};
}

drift_point point_of(const json& j) {
  drift_point p;
  p.a = unhex(j.at("a"));
  const json& ex = j.at("exact");
  p.exact.lo = ex.at(0).get<std::size_t>();
  p.exact.hi = ex.at(1).get<std::size_t>();
  p.exact.closed_form = ex.at(2).get<bool>();
  const json& en = j.at("enclosure");
  p.smin_lo = en.at(0).get<std::string>();
  p.smin_hi = en.at(1).get<std::string>();
  p.cond_lo = en.at(2).get<std::string>();
  p.cond_hi = en.at(3).get<std::string>();
  const json& ed = j.at("enclosure_d");
  p.smin_lo_d = unhex(ed.at(0));
  p.smin_hi_d = unhex(ed.at(1));
  p.enclosure_bits = j.at("enclosure_bits").get<unsigned>();
  for (const auto& m : j.at("recipes")) p.recipes.push_back(measurement_of(m));
  p.diverges = j.at("diverges").get<bool>();
  return p;
}

// The index of `a` among the planned grid's points from index k on, or planned.size() when it is not there.
std::size_t find_from(const std::vector<double>& planned, std::size_t k, double a) {
  while (k < planned.size() && planned[k] < a) ++k;
  return k < planned.size() && planned[k] == a ? k : planned.size();
}

// The planned points missing from `got` (a strictly increasing subsequence of `planned`), as runs.
std::vector<grid_gap> gaps(const std::vector<double>& planned, const std::vector<double>& got) {
  std::vector<grid_gap> out;
  std::size_t g = 0;
  bool in_gap = false;  // was the previous planned point missing?
  for (double a : planned) {
    const bool have = g < got.size() && got[g] == a;
    if (have) {
      ++g;
    } else if (in_gap) {
      out.back().last = a;
      ++out.back().points;
    } else {
      out.push_back({a, a, 1});
    }
    in_gap = !have;
  }
  return out;
}

}  // namespace

std::string drift_result_wire(const drift_result& r) {
  json points = json::array();
  for (const auto& p : r.points) points.push_back(point_wire(p));
  json divergence = json::array();
  for (const auto& d : r.divergence) {
    json iv = json::array();
    for (const auto& [lo, hi] : d.intervals) iv.push_back({hex(lo), hex(hi)});
    divergence.push_back({{"recipe", d.recipe}, {"policy", d.policy}, {"intervals", iv}, {"evaluations", d.bisection_evaluations}});
  }
  json gaps_j = json::array();
  for (const auto& g : r.not_computed) gaps_j.push_back({hex(g.first), hex(g.last), g.points});
  const json j = {{"wire", "attncert drift run 1"},
                  {"grid", hexes(r.grid)},
                  {"points", points},
                  {"partial", r.partial},
                  {"points_planned", r.points_planned},
                  {"bisection_stopped", r.bisection_stopped},
                  {"not_computed", gaps_j},
                  {"divergence", divergence}};
  return j.dump();
}

drift_result drift_result_from_wire(const std::string& text) {
  try {
    const json j = json::parse(text);
    if (j.at("wire") != "attncert drift run 1") throw input_error("drift run: not a drift run's wire text");
    drift_result r;
    r.grid = unhexes(j.at("grid"));
    for (const auto& p : j.at("points")) r.points.push_back(point_of(p));
    if (r.points.size() != r.grid.size()) throw input_error("drift run: its grid and its points differ in number");
    r.partial = j.at("partial").get<bool>();
    r.points_planned = j.at("points_planned").get<std::size_t>();
    r.bisection_stopped = j.at("bisection_stopped").get<bool>();
    for (const auto& g : j.at("not_computed"))
      r.not_computed.push_back({unhex(g.at(0)), unhex(g.at(1)), g.at(2).get<std::size_t>()});
    for (const auto& d : j.at("divergence")) {
      drift_intervals di;
      di.recipe = d.at("recipe").get<std::string>();
      di.policy = d.at("policy").get<std::string>();
      for (const auto& iv : d.at("intervals")) di.intervals.emplace_back(unhex(iv.at(0)), unhex(iv.at(1)));
      di.bisection_evaluations = d.at("evaluations").get<std::size_t>();
      r.divergence.push_back(std::move(di));
    }
    return r;
  } catch (const json::exception& e) {
    throw input_error(std::string("drift run: malformed wire text: ") + one_line(e.what(), 200));
  }
}

drift_result merge_drift_runs(const drift_request& whole, const std::vector<std::optional<drift_result>>& runs) {
  drift_request planned_req = whole;
  planned_req.grid.clear();
  const std::vector<double> planned = drift_grid(planned_req);
  drift_result m;
  m.points_planned = planned.size();
  for (const auto& rc : whole.recipes) {  // the divergence entries of the whole sweep, as run_drift orders them
    for (const auto& p : whole.policies) m.divergence.push_back({rc.name, p.name(), {}, 0});
    for (const auto& d : whole.diagnostics) m.divergence.push_back({rc.name, "diagnostic:" + d.name, {}, 0});
  }
  bool first = true;
  std::size_t at = 0;  // index in `planned` of the next point a run may add
  for (const auto& run : runs) {
    if (!run || run->points.empty()) continue;
    first = false;
    if (run->divergence.size() != m.divergence.size())
      throw input_error("drift runs: a run's recipes and policies are not the sweep's");
    // the run's first point is the last point merged when the run before it ended there (a shared end point)
    const bool shared = !m.grid.empty() && run->grid.front() == m.grid.back();
    for (std::size_t i = shared ? 1 : 0; i < run->grid.size(); ++i) {
      const std::size_t k = find_from(planned, at, run->grid[i]);
      if (k == planned.size())
        throw input_error("drift runs: a = " + hex(run->grid[i]).get<std::string>() +
                          " is not a planned grid point after the points merged before it (runs out of order?)");
      if (run->points[i].recipes.size() != whole.recipes.size())
        throw input_error("drift runs: a run's recipes and policies are not the sweep's");
      m.grid.push_back(run->grid[i]);
      m.points.push_back(run->points[i]);
      at = k + 1;
    }
    const double start = run->grid.front();
    for (std::size_t d = 0; d < m.divergence.size(); ++d) {
      const drift_intervals& rd = run->divergence[d];
      drift_intervals& md = m.divergence[d];
      if (rd.recipe != md.recipe || rd.policy != md.policy) throw input_error("drift runs: a run's recipes and policies are not the sweep's");
      md.bisection_evaluations += rd.bisection_evaluations;
      for (const auto& [lo, hi] : rd.intervals) {
        if (shared && lo == start && !md.intervals.empty() && md.intervals.back().second == start)
          md.intervals.back().second = hi;  // an interval through the shared point
        else
          md.intervals.emplace_back(lo, hi);
      }
    }
    // a run stopped early did not bisect the switch between its last point and the next run's first
    m.bisection_stopped = m.bisection_stopped || run->bisection_stopped || run->partial;
  }
  if (first) throw input_error("drift runs: no run computed a grid point");
  m.not_computed = gaps(planned, m.grid);
  m.partial = !m.not_computed.empty();
  return m;
}

}  // namespace attncert
