// python/src/commands.cpp — attncert._core's rank, certify and check: the library's analyses with the
// CLI's JSON reports (report/rank.hpp, proofs/claim.hpp, report/writers.hpp) returned as text; the
// Python layer wraps them in typed result objects.  Nothing is computed here; the GIL is released
// while the library runs.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <functional>
#include <filesystem>
#include <sstream>
#include <string>

#include "child.hpp"
#include "interrupt.hpp"
#include "attncert/error.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/linalg/matrix.hpp"
#include "attncert/proofs/claim.hpp"
#include "attncert/proofs/spec.hpp"
#include "attncert/audit/audit.hpp"
#include "attncert/drift/runs.hpp"
#include "attncert/drift/spec.hpp"
#include "attncert/drift/sweep.hpp"
#include "attncert/rank/analyse_rank.hpp"
#include "attncert/rank/spec.hpp"
#include "attncert/report/audit.hpp"
#include "attncert/report/drift.hpp"
#include "attncert/report/rank.hpp"
#include "attncert/report/writers.hpp"
#include "checks/common.hpp"
#include "checks/spec.hpp"
#include "arrays.hpp"

namespace py = pybind11;
using namespace attncert;

namespace {

// A 2-D float/int array as an exact rational matrix (every binary64 value is a rational), read by the
// binding's one conversion (arrays.hpp: complex, unsupported dtypes, int64 beyond 2^53 refused).
// Checked here (the GIL held); build_rank_request makes the rationals (in the computation's process).
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

std::string rank_json(const py::dict& o) {
  rank_spec s;
  s.name_parse_errors = true;  // "formats=: unknown format 'fp7'"
  // scores, q, k, v, x as arrays: made exact by build_rank_request, in the child (the long part at n = 10^4)
  rank_matrix_input* arrays[5] = {&s.scores, &s.q, &s.k, &s.v, &s.x};
  const char* keys[5] = {"scores", "q", "k", "v", "x"};
  for (int t = 0; t < 5; ++t) {
    if (!o.contains(keys[t]) || o[keys[t]].is_none()) continue;
    arrays[t]->array = checked_matrix(o[keys[t]], keys[t]);
    s.inputs[keys[t]] = {{"array", "numpy"}, {"shape", {arrays[t]->array->shape[0], arrays[t]->array->shape[1]}}};
  }
  s.scale = o.contains("scale") && !o["scale"].is_none() ? std::string(py::str(o["scale"])) : "";
  s.mask = o.contains("mask_kind") ? std::string(py::str(o["mask_kind"])) : "none";
  if (s.mask == "matrix" && o.contains("mask")) {  // else build_rank_request names the missing matrix
    const io::npy_array b = python::to_npy(o["mask"], "mask", false);
    if (b.shape.size() != 2) throw input_error("mask: must be a 2-D boolean array");
    const auto rows = static_cast<Eigen::Index>(b.shape[0]), cols = static_cast<Eigen::Index>(b.shape[1]);
    Eigen::Matrix<bool, Eigen::Dynamic, Eigen::Dynamic> mb(rows, cols);
    for (Eigen::Index i = 0; i < rows; ++i)
      for (Eigen::Index j = 0; j < cols; ++j) mb(i, j) = b.values[static_cast<std::size_t>(i * cols + j)] != 0;
    s.mask_matrix = std::move(mb);
    s.inputs["mask"] = {{"array", "numpy"}, {"shape", {b.shape[0], b.shape[1]}}};
  }
  s.object = std::string(py::str(o["object"]));
  s.formats = std::string(py::str(o["formats"]));
  s.policies = std::string(py::str(o["policies"]));
  s.max_precision = o["max_bits"].cast<unsigned>();
  s.seed = o["seed"].cast<std::uint64_t>();
  s.formats_explicit = o["formats_explicit"].cast<bool>();
  s.max_seconds = o["max_seconds"].cast<double>();
  s.sigma_rel_width = o["sigma_rel_width"].cast<double>();
  s.deflate_max_k = o["deflate_max_k"].cast<long long>();
  s.deflate_seconds = o["deflate_seconds"].cast<double>();
  if (o.contains("threads")) s.threads = o["threads"].cast<long long>();  // rank_spec checks [1, 256]
  // In a child process: Ctrl-C stops it at once, inside an Eigen/LAPACK SVD or a FLINT elimination too (child.hpp).
  // The request is built there (its errors come back as input_error): making the arrays exact is long at n = 10^4.
  return python::spelled(python::run_in_child(
      [&] { return report::to_json(analyse_rank(build_rank_request(s)), "attncert.rank (python)").dump(); }));
}

// certify(claim): the claim as JSON text (a dict dumped by the caller, numbers kept exact by
// parse_claim_text) or a file path; relative matrix paths resolve against `base_dir`.
std::string certify_json(const std::string& claim_text, const std::string& base_dir, unsigned max_bits, double max_seconds) {
  proofs::certify_spec spec;
  spec.claim_text = claim_text;
  spec.base_dir = base_dir;
  spec.max_precision = max_bits;
  spec.max_seconds = max_seconds;
  const proofs::certify_request req = proofs::build_certify_request(spec);
  return python::spelled(python::run_in_child([&] {  // Ctrl-C stops it at once (child.hpp)
    const proofs::certify_result r = proofs::certify(req);
    nlohmann::json out = r.report;
    out["summary_text"] = r.summary;
    out["certificate"] = r.certificate;
    out["disagreement"] = r.disagreement;
    return out.dump();
  }));
}

std::string read_claim_file(const std::string& path) { return io::read_file_bounded(path); }

std::pair<std::string, std::string> check_json(const std::vector<std::string>& ids, const std::string& formats,
                                               const std::string& policies, std::uint64_t seed, unsigned certify_bits,
                                               unsigned certify_max_bits, double max_seconds) {
  checks::check_spec spec;
  spec.ids = ids;
  spec.formats = formats;
  spec.policies = policies;
  spec.seed = seed;
  spec.certify_bits = certify_bits;
  spec.certify_max_bits = certify_max_bits;
  spec.max_seconds = max_seconds;
  spec.name_parse_errors = true;
  const checks::check_run run = checks::build_check_run(spec);
  // In a child process (child.hpp): the JSON report's length, a newline, the report, the text report.
  const std::string both = python::run_in_child([&] {
    report::document doc;
    doc.version = ATTNCERT_VERSION;
    doc.command = "attncert.check (python)";
    doc.checks = checks::run_checks(run.chosen, run.settings);  // within max_seconds; the rest are not-computed rows
    std::ostringstream os;
    report::write_text(os, doc);
    const std::string json = report::to_json(doc).dump();
    return std::to_string(json.size()) + "\n" + json + os.str();
  });
  const std::size_t nl = both.find('\n');
  const std::size_t n = std::stoul(both.substr(0, nl));
  return {python::spelled(both.substr(nl + 1, n)), python::spelled(both.substr(nl + 1 + n))};
}

// The drift request of the options the Python layer built (attncert.analysis.drift).
drift_request drift_request_of(const py::dict& o) {
  drift_spec s;
  s.name_parse_errors = true;
  s.family = std::string(py::str(o["family"]));
  s.from = o["start"].cast<double>();
  s.to = o["stop"].cast<double>();
  s.points = o["points"].cast<long long>();
  s.log = o["log"].cast<bool>();
  s.recipes = std::string(py::str(o["recipes"]));
  s.policies = std::string(py::str(o["policies"]));
  s.object = o["object"].is_none() ? "" : std::string(py::str(o["object"]));
  s.seed = o["seed"].cast<std::uint64_t>();
  s.resolution = o["resolution"].cast<double>();
  if (o.contains("max_seconds")) s.max_seconds = o["max_seconds"].cast<double>();
  s.enclosures = o["enclosures"].cast<bool>();
  s.max_precision = o["max_bits"].cast<unsigned>();
  if (o.contains("grid") && !o["grid"].is_none()) s.grid = o["grid"].cast<std::vector<double>>();
  if (o.contains("n") && !o["n"].is_none()) s.n = o["n"].cast<long long>();
  if (o.contains("d") && !o["d"].is_none()) s.d = o["d"].cast<long long>();
  return build_drift_request(s);
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

std::vector<double> drift_grid_py(const py::dict& o) { return drift_grid(drift_request_of(o)); }

// The caller's diagnostics (name, callable) added to the request: each called with the GIL on every formed
// matrix, as a NumPy array.
void add_diagnostics(drift_request& r, const py::list& diagnostics) {
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
}

// The sweep of the options with the caller's diagnostics, as `render` returns it.  Without diagnostics in a
// child process that Ctrl-C stops at once (child.hpp); with them in-process, so that they run in the
// caller's interpreter (their side effects kept).
template <class Render>
std::string run_drift_py(const py::dict& o, const py::list& diagnostics, Render&& render) {
  drift_request r = drift_request_of(o);
  add_diagnostics(r, diagnostics);
  auto sweep = [&r, &render] { return render(r, run_drift(r)); };
  if (r.diagnostics.empty()) return python::spelled(python::run_in_child(sweep));
  python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt at the next poll (interrupt.hpp)
  return python::spelled(sweep());
}

std::string drift_report(const drift_request& r, const drift_result& res, const std::string& command) {
  std::ostringstream os;
  report::drift_write_options wo;
  wo.per_point = true;
  report::write_drift_json(os, r, res, command, wo);
  return os.str();
}

std::string drift_json_py(const py::dict& o, const py::list& diagnostics) {
  return run_drift_py(o, diagnostics, [](const drift_request& r, const drift_result& res) {
    return drift_report(r, res, "attncert.drift (python)");
  });
}

// One run of a sweep split into runs (attncert.distributed.drift's task): its result, as wire text.
std::string drift_run_py(const py::dict& o, const py::list& diagnostics) {
  return run_drift_py(o, diagnostics, [](const drift_request&, const drift_result& res) { return drift_result_wire(res); });
}

// The runs' results (wire texts; None: a run not computed) merged into the whole sweep's report
// (drift/runs.hpp); `o` states the whole sweep, `diagnostic_names` the diagnostics the runs measured.
std::string drift_merge_py(const py::dict& o, const std::vector<std::string>& diagnostic_names, const py::list& runs,
                           const std::string& command) {
  drift_request r = drift_request_of(o);
  for (const auto& name : diagnostic_names) r.diagnostics.push_back({name, nullptr});  // named, not called
  std::vector<std::optional<drift_result>> results;
  for (const auto item : runs)
    results.push_back(item.is_none() ? std::nullopt : std::optional<drift_result>(drift_result_from_wire(item.cast<std::string>())));
  return python::spelled(drift_report(r, merge_drift_runs(r, results), command));
}

// The audit of captured calls (dicts of attncert.capture's records: name, kind, dtype, scale, mask_kind and
// the arrays q, k, v, allowed, bias, weights, output, w_o, b_o, residual) under the spec's JSON text: the JSON
// report.  In a child process that Ctrl-C stops at once (child.hpp), as rank's; with progress, the child
// writes one line per head to standard error (a tty's line, rewritten in place).
std::string audit_py(const py::list& calls, const std::string& spec_text, bool is_default, const std::string& registered_sha256,
                     bool progress, double budget_seconds) {
  audit::audit_spec spec = audit::parse_audit_spec(spec_text);
  spec.is_default = is_default;
  if (!registered_sha256.empty()) audit::check_registered(spec, {registered_sha256, "", "registered="});
  std::vector<audit::captured_call> cs;
  for (const auto item : calls) {
    const py::dict d = item.cast<py::dict>();
    audit::captured_call c;
    c.name = d["name"].cast<std::string>();
    c.kind = d["kind"].cast<std::string>();
    c.dtype = d["dtype"].cast<std::string>();
    c.scale = d["scale"].cast<std::string>();
    c.mask_kind = d["mask_kind"].cast<std::string>();
    c.q = python::to_npy(d["q"], "q", false);
    c.k = python::to_npy(d["k"], "k", false);
    c.v = python::to_npy(d["v"], "v", false);
    const std::pair<const char*, std::optional<tensor>*> optional_arrays[] = {
        {"allowed", &c.allowed}, {"bias", &c.bias},  {"weights", &c.weights},   {"output", &c.output},
        {"w_o", &c.w_o},         {"b_o", &c.b_o},    {"residual", &c.residual}};
    for (const auto& [key, slot] : optional_arrays)
      if (d.contains(key) && !d[key].is_none()) *slot = python::to_npy(d[key], key, false);
    cs.push_back(std::move(c));
  }
  return python::spelled(python::run_in_child([&] {
    std::function<void(const std::string&)> show;
    if (progress)
      show = [](const std::string& line) {
        std::fprintf(stderr, "\r\033[Kattncert.audit: %s", line.c_str());
        std::fflush(stderr);
      };
    audit::audit_spec run = spec;  // a distributed task's share of the budget; the report keeps the spec as given
    if (budget_seconds >= 0) run.max_seconds = budget_seconds;
    audit::audit_result r = audit::run_audit(run, cs, show);
    r.spec = spec;
    if (progress) {
      std::fprintf(stderr, "\r\033[K");
      std::fflush(stderr);
    }
    return report::audit_json(r, "attncert.audit (python)").dump(2);
  }));
}

// The spec checked (and against the registered SHA-256) before anything runs.
void audit_check_spec_py(const std::string& spec_text, const std::string& registered_sha256) {
  const audit::audit_spec spec = audit::parse_audit_spec(spec_text);
  if (!registered_sha256.empty()) audit::check_registered(spec, {registered_sha256, "", "registered="});
}

// The Markdown or HTML page of an audit's JSON report.
std::string audit_render_py(const std::string& json_text, const std::string& what) {
  const auto j = nlohmann::ordered_json::parse(json_text);
  if (what == "md") return report::audit_markdown(j);
  if (what == "html") return report::audit_html(j);
  throw std::invalid_argument("audit_render: md or html");
}

// One report of the audits of parts of a capture (attncert.distributed), in the parts' order.
std::string audit_merge_py(const std::vector<std::string>& parts, const std::string& command) {
  std::vector<nlohmann::ordered_json> js;
  for (const auto& p : parts) js.push_back(nlohmann::ordered_json::parse(p));
  return report::merge_audit_json(js, command).dump(2);
}

std::string default_audit_spec_py() { return audit::default_audit_spec_text(); }

}  // namespace

void attncert::python::exact_number(const std::string& text) { (void)number_traits<mpq_rational>::from_string(text); }

void bind_analysis(py::module_& m) {
  m.def("rank_json", &rank_json, py::arg("options"), "attncert rank's JSON report for the arrays and options given");
  m.def("certify_json", &certify_json, py::arg("claim_text"), py::arg("base_dir"), py::arg("max_bits"), py::arg("max_seconds"),
        "attncert certify's JSON report (with summary_text, certificate, disagreement)");
  m.def("drift_json", &drift_json_py, py::arg("options"), py::arg("diagnostics"),
        "attncert drift's JSON report, with the caller's diagnostics measured next to the policies");
  m.def("drift_run", &drift_run_py, py::arg("options"), py::arg("diagnostics"),
        "one run of a sweep split into runs (options' grid: the run's points): its result as wire text");
  m.def("drift_merge", &drift_merge_py, py::arg("options"), py::arg("diagnostic_names"), py::arg("runs"), py::arg("command"),
        "the JSON report of the whole sweep (options) from its runs' wire texts (None: a run not computed)");
  m.def("audit", &audit_py, py::arg("calls"), py::arg("spec_text"), py::arg("is_default"), py::arg("registered_sha256") = "",
        py::arg("progress") = false, py::arg("budget_seconds") = -1.0,
        "the audit of captured calls under the spec (JSON text): the JSON report");
  m.def("audit_check_spec", &audit_check_spec_py, py::arg("spec_text"), py::arg("registered_sha256") = "",
        "the spec parsed and checked against the registered SHA-256 (ValueError)");
  m.def("audit_render", &audit_render_py, py::arg("json_text"), py::arg("what"), "an audit report as Markdown (md) or HTML (html)");
  m.def("audit_merge", &audit_merge_py, py::arg("parts"), py::arg("command"), "one audit report of the reports of parts of a capture");
  m.def("default_audit_spec", &default_audit_spec_py, "the default audit spec's JSON text");
  m.def("drift_grid", &drift_grid_py, py::arg("options"), "the grid points of a drift sweep");
  m.def("read_claim_file", &read_claim_file, py::arg("path"));
  m.def("check_report", &check_json, py::arg("ids"), py::arg("formats"), py::arg("policies"), py::arg("seed"),
        py::arg("certify_bits"), py::arg("certify_max_bits"), py::arg("max_seconds"),
        "attncert check's report: (JSON text, the text report)");
}
