// python/src/sampling.cpp — attncert._core's row sampler (rows=N of attncert.testing), the grade of a
// candidate against the exact values of the sampled rows only (attncert.distributed.grade: the tasks
// compute the rows, this grades them), and the part of a variant input one unit of split work reads
// (attncert.distributed: oracle::unit_ranges, the broadcasting rule of the oracle's own requests).  Thin, as core.cpp: arrays in, the library's approx_grade, JSON
// out; the GIL is released while it runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <numeric>
#include <optional>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "interrupt.hpp"
#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/grading/grading.hpp"
#include "attncert/oracle/request.hpp"
#include "attncert/report/oracle.hpp"
#include "arrays.hpp"

namespace py = pybind11;
using namespace attncert;

using python::make_rules;
using python::to_npy;

// `n` of the positions 0 .. total - 1 drawn without replacement by a partial Fisher-Yates shuffle driven by
// std::mt19937_64(seed), in the order drawn; every position, in order, when total <= n.  The sampler of
// rows=N (core.cpp's sample_rows draws positions in the list of the rows a request uses) and of
// _core.sample_rows: one function, so the two draw the same rows.
std::vector<std::size_t> sample_row_indices(std::size_t total, std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> pos(total);
  std::iota(pos.begin(), pos.end(), std::size_t{0});
  if (total <= n) return pos;
  std::mt19937_64 gen(seed);
  for (std::size_t t = 0; t < n; ++t) {  // pos[0, n) is the sample
    const std::size_t j = t + static_cast<std::size_t>(gen() % (total - t));
    std::swap(pos[t], pos[j]);
  }
  pos.resize(n);
  return pos;
}

namespace {

// The internal rows attncert.testing's rows=n, seed draws from a bhsd request of `total` query rows
// without seqlens (every row used): sorted, as int64.
py::array_t<std::int64_t> sample_rows_py(long long total, long long n, std::uint64_t seed) {
  if (total < 1) throw input_error("sample_rows: total must be >= 1 (got " + std::to_string(total) + ")");
  if (n < 1) throw input_error("rows: must be >= 1 (got " + std::to_string(n) + ")");
  std::vector<std::size_t> p = sample_row_indices(static_cast<std::size_t>(total), static_cast<std::size_t>(n), seed);
  std::sort(p.begin(), p.end());
  py::array_t<std::int64_t> a(static_cast<py::ssize_t>(p.size()));
  std::copy(p.begin(), p.end(), a.mutable_data());
  return a;
}

// The values of `obj` as binary64, checked to be a float array of shape (rows, dv).
std::vector<double> rows_of(const py::handle& obj, std::size_t rows, std::size_t dv, const std::string& what) {
  io::npy_array a = to_npy(obj, what, true);
  if (a.type == io::dtype::b1) throw input_error(what + ": must be a float array");
  if (a.shape != std::vector<std::size_t>{rows, dv}) {
    std::string s;
    for (auto x : a.shape) s += (s.empty() ? "" : ", ") + std::to_string(x);
    throw input_error(what + ": shape (" + s + ") is not the graded rows' (" + std::to_string(rows) + ", " +
                      std::to_string(dv) + ")");
  }
  return std::move(a.values);
}

// The grade of a candidate output of shape (B, H, nq, dv) (bhsd, internal layout) of which only the internal
// rows `rows` (r = (b·H + h)·nq + i, strictly increasing) were computed, as the JSON Reference.grade gives
// for the same candidate when its oracle computed those rows and no others (rows=N of attncert.testing).
// truth: {hi, lo, rad, reference}, each (len(rows), dv), those rows of Reference.truth(); candidate (and
// baseline): the same rows of the caller's arrays; target: the oracle's target.
//
// Why it is the same grade: approx_grade visits the elements in order and skips every element without an
// enclosed truth, which the rows an oracle does not compute are (run_oracle fills them as padding: NaN),
// whatever the candidate holds there.  Grading the listed rows alone, in increasing order, thus visits the
// same elements in the same order: every count, sum and maximum (and the first element reaching it) is the
// same.  What depends on the rows left out is put back: their elements count in `elements` and `skipped`,
// and the indices, which approx_grade gives as (0, 0, p, k) for the p-th listed row, become (b, h, i, k).
// Those are all the fields of candidate_grade (grading.hpp) that depend on the tensor's shape.
std::string grade_rows(const py::handle& cand, const py::object& baseline, const py::dict& truth, const py::handle& rows_obj,
                       const std::vector<std::size_t>& shape, const std::string& target, const py::dict& rules) {
  if (shape.size() != 4) throw input_error("grade_rows: shape must be (B, H, nq, dv)");
  const std::size_t H = shape[1], nq = shape[2], dv = shape[3], total = shape[0] * H * nq;
  const auto ra = py::array_t<long long, py::array::c_style | py::array::forcecast>::ensure(rows_obj);
  if (!ra || ra.ndim() != 1) throw input_error("grade_rows: rows must be a 1-D sequence of row indices");
  std::vector<std::size_t> rows;
  for (py::ssize_t p = 0; p < ra.size(); ++p) {
    const long long r = ra.data()[p];
    if (r < 0 || static_cast<std::size_t>(r) >= total || (!rows.empty() && static_cast<std::size_t>(r) <= rows.back()))
      throw input_error("grade_rows: rows must increase strictly within [0, " + std::to_string(total) + ") (row " +
                        std::to_string(r) + " at position " + std::to_string(p) + ")");
    rows.push_back(static_cast<std::size_t>(r));
  }
  const std::size_t n = rows.size();
  std::vector<double> t[4];
  const char* names[4] = {"hi", "lo", "rad", "reference"};
  for (int q = 0; q < 4; ++q) {
    if (!truth.contains(names[q])) throw input_error(std::string("grade_rows: the truth has no ") + names[q]);
    t[q] = rows_of(truth[names[q]], n, dv, std::string("the truth's ") + names[q]);
  }
  const grading::rule_settings rs = make_rules(rules);
  const std::vector<double> c = rows_of(cand, n, dv, "the candidate");
  std::optional<std::vector<double>> b;
  if (!baseline.is_none()) b = rows_of(baseline, n, dv, "the baseline");
  if (grading::rule_needs_baseline(rs.rule) && !b)
    throw input_error("rule " + grading::to_string(rs.rule) + " compares with a baseline: give baseline=");
  // which elements hold the empty-row policy's exact value (truth["policy"], 1 or 0; absent: none)
  std::vector<oracle::decided_by> how;
  if (truth.contains("policy")) {
    const std::vector<double> p = rows_of(truth["policy"], n, dv, "the truth's policy");
    how.reserve(p.size());
    for (double x : p) how.push_back(x != 0 ? oracle::decided_by::exact_policy : oracle::decided_by::mpfi);
  }
  grading::truth_view v;  // as output_truth builds it, over the listed rows
  v.hi = &t[0];
  v.lo = &t[1];
  v.rad = &t[2];
  v.reference = &t[3];
  v.target = oracle::parse_target(target);
  v.shape = {1, 1, n, dv};
  v.rank = 4;
  v.what = "output";
  v.index_order = "b,h,i,k";
  if (!how.empty()) {
    v.how = &how;
    v.policy_field = "empty_rows";
  }
  grading::candidate_grade g;
  {
    python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt (interrupt.hpp)
    g = grading::approx_grade(v, c, b ? &*b : nullptr, rs, "c1");
  }
  auto place = [&](std::array<std::size_t, 4>& ix) {
    const std::size_t r = rows[ix[2]];
    ix = {r / (H * nq), (r / nq) % H, r % nq, ix[3]};
  };
  if (g.has_worst) place(g.worst);
  if (g.compared) place(g.worst_abs);
  if (g.has_worst_rel) place(g.worst_rel);
  if (g.rule.has_at) place(g.rule.at);
  if (g.policy_mismatch) place(g.policy_worst);
  g.elements = total * dv;
  g.skipped += (total - n) * dv;
  return python::spelled(report::candidate_grade_json(g).dump());
}

}  // namespace

void bind_sampling(py::module_& m) {
  m.def("sample_rows", &sample_rows_py, py::arg("total"), py::arg("n"), py::arg("seed"),
        "The internal rows rows=n, seed computes out of `total` (bhsd, every row used), sorted");
  m.def("grade_rows", &grade_rows, py::arg("candidate"), py::arg("baseline"), py::arg("truth"), py::arg("rows"),
        py::arg("shape"), py::arg("target"), py::arg("rules"),
        "The grade (JSON text) of a candidate of which only the internal rows `rows` were computed");
  m.def("unit_ranges", &oracle::unit_ranges, py::arg("what"), py::arg("shape"), py::arg("B"), py::arg("H"), py::arg("b"),
        py::arg("h0"), py::arg("h1"),
        "What batch b and query heads [h0, h1) read of the variant input `what` of shape `shape`: [begin, end) per dimension");
}
