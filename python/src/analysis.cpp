// python/src/analysis.cpp — attncert._core's rank, certify and check: the library's analyses with the
// CLI's JSON reports (report/rank.hpp, proofs/claim.hpp, report/writers.hpp) returned as text; the
// Python layer wraps them in typed result objects.  Nothing is computed here; the GIL is released
// while the library runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <sstream>
#include <string>

#include "child.hpp"
#include "interrupt.hpp"
#include "attncert/error.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/proofs/claim.hpp"
#include "attncert/drift/sweep.hpp"
#include "attncert/rank/analysis.hpp"
#include "attncert/report/drift.hpp"
#include "attncert/report/rank.hpp"
#include "attncert/report/writers.hpp"
#include "checks/common.hpp"
#include "arrays.hpp"

namespace py = pybind11;
using namespace attncert;

namespace {

// A 2-D float/int array as an exact rational matrix (every binary64 value is a rational), read by the
// binding's one conversion (arrays.hpp: complex, unsupported dtypes, int64 beyond 2^53 refused).
// Checked here (the GIL held); exact_values makes the rationals (in the computation's process).
io::npy_array checked_matrix(const py::handle& obj, const std::string& what) {
  io::npy_array a = python::to_npy(obj, what, true);
  if (a.shape.size() != 2) throw input_error(what + ": must be a 2-D array, got " + std::to_string(a.shape.size()) + " dimensions");
  if (a.values.empty())  // as the command line's matrix reader
    throw input_error(what + ": empty matrix (shape (" + std::to_string(a.shape[0]) + ", " + std::to_string(a.shape[1]) + "))");
  const std::size_t cols = a.shape[1];
  for (std::size_t e = 0; e < a.values.size(); ++e)
    if (!std::isfinite(a.values[e]))
      throw input_error(what + ": contains NaN or Inf at (" + std::to_string(e / cols) + ", " + std::to_string(e % cols) + ")");
  return a;
}

matrix<mpq_rational> exact_values(const io::npy_array& a) {
  const auto rows = static_cast<Eigen::Index>(a.shape[0]), cols = static_cast<Eigen::Index>(a.shape[1]);
  matrix<double> m(rows, cols);
  for (Eigen::Index i = 0; i < rows; ++i)
    for (Eigen::Index j = 0; j < cols; ++j) m(i, j) = a.values[static_cast<std::size_t>(i * cols + j)];
  return from_double_matrix<mpq_rational>(m);
}

std::string rank_json(const py::dict& o) {
  rank_request req;
  nlohmann::json inputs;
  std::optional<io::npy_array> arrays[5];  // scores, q, k, v, x: made exact in the child (the long part at n = 10^4)
  const char* keys[5] = {"scores", "q", "k", "v", "x"};
  for (int t = 0; t < 5; ++t) {
    if (!o.contains(keys[t]) || o[keys[t]].is_none()) continue;
    arrays[t] = checked_matrix(o[keys[t]], keys[t]);
    inputs[keys[t]] = {{"array", "numpy"}, {"shape", {arrays[t]->shape[0], arrays[t]->shape[1]}}};
  }
  const bool has_s = arrays[0].has_value(), has_q = arrays[1].has_value(), has_k = arrays[2].has_value();
  if (has_s && (has_q || has_k)) throw input_error("give either --scores or --q/--k, not both");
  if (!has_s && !(has_q && has_k)) throw input_error("give --scores S, or --q Q and --k K");
  const std::string scale = o.contains("scale") && !o["scale"].is_none() ? std::string(py::str(o["scale"])) : "";
  if (!scale.empty() && has_s) throw input_error("--scale applies to --q/--k (scores given with --scores are used as they are)");
  if (!has_s) {
    if (scale.empty()) req.inv_sqrt_d = true;
    else req.scale = python::named("scale", [&] { return number_traits<mpq_rational>::from_string(scale); });
  }
  const std::string mask = o.contains("mask_kind") ? std::string(py::str(o["mask_kind"])) : "none";
  if (mask == "causal") req.M = mask::causal();
  else if (mask == "matrix") {
    const io::npy_array b = python::to_npy(o["mask"], "mask", false);
    if (b.shape.size() != 2) throw input_error("mask: must be a 2-D boolean array");
    const auto rows = static_cast<Eigen::Index>(b.shape[0]), cols = static_cast<Eigen::Index>(b.shape[1]);
    matrix<bool> mb(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) mb(i, j) = b.values[static_cast<std::size_t>(i * cols + j)] != 0;
    req.M = mask::from_matrix(mb);
    inputs["mask"] = {{"array", "numpy"}, {"shape", {b.shape[0], b.shape[1]}}};
  } else if (mask != "none") {
    throw input_error("mask: None, 'causal' or a boolean array");
  }
  req.object = python::named("object", [&] { return parse_layer_object(std::string(py::str(o["object"]))); });
  req.formats = python::named("formats", [&] { return parse_formats(std::string(py::str(o["formats"]))); });
  req.policies = python::named("policies", [&] { return parse_policies(std::string(py::str(o["policies"]))); });
  req.max_bits = o["max_bits"].cast<unsigned>();
  req.seed = o["seed"].cast<std::uint64_t>();
  req.formats_explicit = o["formats_explicit"].cast<bool>();
  req.max_seconds = o["max_seconds"].cast<double>();
  req.sigma_rel_width = o["sigma_rel_width"].cast<double>();
  if (!(req.max_seconds >= 0) || !(req.sigma_rel_width >= 0)) throw input_error("max_seconds and sigma_rel_width must be >= 0");
  const long dk = o["deflate_max_k"].cast<long>();
  req.deflation_seconds = o["deflate_seconds"].cast<double>();
  if (dk < 0 || dk > 4096 || !(req.deflation_seconds >= 0))
    throw input_error("deflate_max_k must be in [0, 4096] and deflate_seconds >= 0");
  req.deflation_max_k = static_cast<std::size_t>(dk);
  req.inputs = inputs;
  // In a child process: Ctrl-C stops it at once, inside an Eigen/LAPACK SVD or a FLINT elimination too (child.hpp).
  return python::run_in_child([&] {
    std::optional<matrix<mpq_rational>>* fields[5] = {&req.S, &req.Q, &req.K, &req.V, &req.X};
    for (int t = 0; t < 5; ++t)
      if (arrays[t]) *fields[t] = exact_values(*arrays[t]);
    return to_json(analyse_rank(req), "attncert.rank (python)").dump();
  });
}

// certify(claim): the claim as JSON text (a dict dumped by the caller, numbers kept exact by
// parse_claim_text) or a file path; relative matrix paths resolve against `base_dir`.
std::string certify_json(const std::string& claim_text, const std::string& base_dir, unsigned max_bits, double max_seconds) {
  if (!(max_seconds >= 0) || max_seconds > 1e7) throw input_error("--max-seconds must be in [0, 1e7] (0: no limit)");
  const nlohmann::json claim = proofs::parse_claim_text(claim_text);
  return python::run_in_child([&] {  // Ctrl-C stops it at once (child.hpp)
    const proofs::certify_result r = proofs::certify(claim, base_dir.empty() ? "." : base_dir, max_bits, max_seconds);
    nlohmann::json out = r.report;
    out["summary_text"] = r.summary;
    out["certificate"] = r.certificate;
    out["disagreement"] = r.disagreement;
    return out.dump();
  });
}

std::string read_claim_file(const std::string& path) { return io::read_file_bounded(path); }

std::pair<std::string, std::string> check_json(const std::vector<std::string>& ids, const std::string& formats,
                                               const std::string& policies, std::uint64_t seed, unsigned certify_bits,
                                               unsigned certify_max_bits, double max_seconds) {
  const std::vector<const checks::check_entry*> chosen = python::named("ids", [&] { return checks::select_checks(ids); });
  checks::run_settings rs;
  rs.formats = python::named("formats", [&] { return parse_formats(formats); });
  rs.policies = python::named("policies", [&] { return parse_policies(policies); });
  rs.seed = seed;
  if (certify_bits < min_precision_bits || certify_bits > certify_max_bits || certify_max_bits > max_precision_bits)
    throw input_error("--certify-bits must satisfy " + std::to_string(min_precision_bits) +
                      " <= certify-bits <= certify-max-bits <= " + std::to_string(max_precision_bits));
  rs.certify_bits = certify_bits;
  rs.certify_max_bits = certify_max_bits;
  if (!(max_seconds >= 0) || max_seconds > 1e7) throw input_error("max_seconds must be in [0, 1e7] (0: no limit)");
  rs.max_seconds = max_seconds;
  // In a child process (child.hpp): the JSON report's length, a newline, the report, the text report.
  const std::string both = python::run_in_child([&] {
    report::document doc;
    doc.version = ATTNCERT_VERSION;
    doc.command = "attncert.check (python)";
    doc.checks = checks::run_checks(chosen, rs);  // within max_seconds; the rest are not-computed rows
    std::ostringstream os;
    report::write_text(os, doc);
    const std::string json = report::to_json(doc).dump();
    return std::to_string(json.size()) + "\n" + json + os.str();
  });
  const std::size_t nl = both.find('\n');
  const std::size_t n = std::stoul(both.substr(0, nl));
  return {both.substr(nl + 1, n), both.substr(nl + 1 + n)};
}

// attncert drift's JSON report; `diagnostics` holds (name, callable) pairs: the caller's rank functions,
// called (with the GIL) on each formed matrix as a float64 NumPy array.
// The drift request of the options the Python layer built (attncert.analysis.drift).
drift_request drift_request_of(const py::dict& o) {
  drift_request r;
  r.family = python::named("family", [&] { return parse_drift_family(std::string(py::str(o["family"]))); });
  r.from = o["start"].cast<double>();
  r.to = o["stop"].cast<double>();
  const long long points = o["points"].cast<long long>();
  if (points < 2) throw input_error("--points must be >= 2");
  r.points = static_cast<std::size_t>(points);
  r.log = o["log"].cast<bool>();
  r.recipes = python::named("recipes", [&] { return parse_recipes(std::string(py::str(o["recipes"]))); });
  r.policies = python::named("policies", [&] { return parse_policies(std::string(py::str(o["policies"]))); });
  const std::string object = o["object"].is_none() ? "" : std::string(py::str(o["object"]));
  if (object.empty()) r.object = r.family == drift_family::identical_values ? layer_object::output : layer_object::attention;
  else if (object == "attention") r.object = layer_object::attention;
  else if (object == "output") r.object = layer_object::output;
  else throw input_error("unknown --object '" + object + "' (expected attention or output)");
  r.seed = o["seed"].cast<std::uint64_t>();
  r.resolution = o["resolution"].cast<double>();
  if (o.contains("max_seconds")) r.max_seconds = o["max_seconds"].cast<double>();
  r.enclosures = o["enclosures"].cast<bool>();
  r.max_bits = o["max_bits"].cast<unsigned>();
  if (o.contains("grid") && !o["grid"].is_none()) r.grid = o["grid"].cast<std::vector<double>>();
  for (const char* key : {"n", "d"})
    if (o.contains(key) && !o[key].is_none()) {
      const long long v = o[key].cast<long long>();
      if (v < 1 || v > drift_max_n)
        throw input_error(std::string("--") + key + " must be in [1, " + std::to_string(drift_max_n) + "] (got " +
                          std::to_string(v) + ")");
      (key[0] == 'n' ? r.n : r.d) = static_cast<long>(v);
    }
  return r;
}

// What a caller's diagnostic returned, as a rank of an m x n matrix: an int (Python's, or a NumPy integer; a
// bool is not one) in [0, min(m, n)].  Anything else is an error that names the diagnostic and the value:
// TypeError for another type (2.9, "2", True, a 0-d array), ValueError for an int out of range.  Called
// with the GIL held.
std::size_t diagnostic_rank(const py::object& k, const std::string& name, std::size_t rows, std::size_t cols) {
  const std::size_t max_rank = std::min(rows, cols);
  const std::string shown = one_line(py::str(py::repr(k)).cast<std::string>(), 60) + " (" +
                            one_line(py::str(py::type::of(k).attr("__name__")).cast<std::string>(), 40) + ")";
  const std::string who = "diagnostic '" + one_line(name, 60) + "' returned " + shown;
  const py::object integer = py::module_::import("numpy").attr("integer");
  if (PyBool_Check(k.ptr()) || !(PyLong_Check(k.ptr()) || py::isinstance(k, integer)))
    throw py::type_error(who + ": a rank is an int in [0, min(m, n)] = [0, " + std::to_string(max_rank) + "]");
  const py::int_ v(k);  // exact: an int, or a NumPy integer's value
  int overflow = 0;
  const long long x = PyLong_AsLongLongAndOverflow(v.ptr(), &overflow);
  if (overflow != 0 || x < 0 || static_cast<unsigned long long>(x) > max_rank)
    throw input_error(who + ": the rank of a " + std::to_string(rows) + " x " + std::to_string(cols) + " matrix is in [0, " +
                      std::to_string(max_rank) + "]");
  return static_cast<std::size_t>(x);
}

std::vector<double> drift_grid_py(const py::dict& o) {
  drift_request r = drift_request_of(o);
  validate(r);
  return drift_grid(r);
}

std::string drift_json_py(const py::dict& o, const py::list& diagnostics) {
  drift_request r = drift_request_of(o);
  for (const auto item : diagnostics) {
    const auto pair = item.cast<py::tuple>();
    PyObject* fn = pair[1].ptr();  // kept alive by `diagnostics` for the whole call
    const std::string name = pair[0].cast<std::string>();
    r.diagnostics.push_back({name, [fn, name](const matrix<double>& M, const recipe& rc) -> std::size_t {
                               py::gil_scoped_acquire gil;
                               py::array_t<double> a({static_cast<py::ssize_t>(M.rows()), static_cast<py::ssize_t>(M.cols())});
                               for (Eigen::Index i = 0; i < M.rows(); ++i)
                                 for (Eigen::Index j = 0; j < M.cols(); ++j) a.mutable_at(i, j) = M(i, j);
                               // the array in the dtype of the recipe's result, as the caller's pipeline holds it
                               // (exact: the values are numbers of that format); the 16-bit formats as float32,
                               // as NumPy's and PyTorch's SVDs need them upcast; mpfrN as float64 (rounded)
                               const std::string& f = rc.result.name;
                               py::object arr = a;
                               if (f == "binary32" || f == "binary16" || f == "bfloat16") arr = a.attr("astype")("float32");
                               const py::object k = py::reinterpret_borrow<py::object>(fn)(arr);
                               return diagnostic_rank(k, name, static_cast<std::size_t>(M.rows()), static_cast<std::size_t>(M.cols()));
                             }});
  }
  validate(r);
  auto sweep = [&r] {
    const drift_result res = run_drift(r);
    std::ostringstream os;
    drift_write_options wo;
    wo.per_point = true;
    write_drift_json(os, r, res, "attncert.drift (python)", wo);
    return os.str();
  };
  // Without the caller's diagnostics, in a child process that Ctrl-C stops at once (child.hpp); with
  // them in-process, so that they run in the caller's interpreter (their side effects kept).
  if (r.diagnostics.empty()) return python::run_in_child(sweep);
  python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt at the next poll (interrupt.hpp)
  return sweep();
}

}  // namespace

void attncert::python::exact_number(const std::string& text) { (void)number_traits<mpq_rational>::from_string(text); }

void bind_analysis(py::module_& m) {
  m.def("rank_json", &rank_json, py::arg("options"), "attncert rank's JSON report for the arrays and options given");
  m.def("certify_json", &certify_json, py::arg("claim_text"), py::arg("base_dir"), py::arg("max_bits"), py::arg("max_seconds"),
        "attncert certify's JSON report (with summary_text, certificate, disagreement)");
  m.def("drift_json", &drift_json_py, py::arg("options"), py::arg("diagnostics"),
        "attncert drift's JSON report, with the caller's diagnostics measured next to the policies");
  m.def("drift_grid", &drift_grid_py, py::arg("options"), "the grid points of a drift sweep");
  m.def("read_claim_file", &read_claim_file, py::arg("path"));
  m.def("check_report", &check_json, py::arg("ids"), py::arg("formats"), py::arg("policies"), py::arg("seed"),
        py::arg("certify_bits"), py::arg("certify_max_bits"), py::arg("max_seconds"),
        "attncert check's report: (JSON text, the text report)");
}
