// python/src/core.cpp — attncert._core: the oracle (forward and backward) and its grading for the
// Python layer (python/attncert/).  Thin, as the CLI: arrays in, the library's spec, request, run and
// grades, arrays and JSON out.  Nothing is computed here.  The GIL is released while the library runs.
// Errors: the library's input_error becomes ValueError with the same one-line text as the CLI's.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "interrupt.hpp"
#include "attncert/error.hpp"
#include "attncert/memory.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/attention/empty_rows.hpp"
#include "attncert/deadline.hpp"
#include "attncert/oracle/backward.hpp"
#include "attncert/oracle/oracle.hpp"
#include "attncert/grading/grading.hpp"
#include "attncert/oracle/spec.hpp"
#include "attncert/number/precision_guard.hpp"
#include "attncert/report/oracle.hpp"
#include "arrays.hpp"

#ifdef __linux__
#include <sys/sysinfo.h>
#endif

namespace py = pybind11;
using namespace attncert;

// python/src/sampling.cpp: the row sampler of rows=N
std::vector<std::size_t> sample_row_indices(std::size_t total, std::size_t n, std::uint64_t seed);

using python::to_npy;

namespace {

std::string shape_text(const std::vector<std::size_t>& s) {
  std::string t;
  for (auto x : s) t += (t.empty() ? "" : ", ") + std::to_string(x);
  return "(" + t + ")";
}

}  // namespace

namespace {

// "4398046511104 bytes (4 TiB)"
std::string bytes_text(double bytes) {
  const char* unit[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  double x = bytes;
  while (x >= 1024 && u < 6) x /= 1024, ++u;
  char buf[96];
  std::snprintf(buf, sizeof buf, "%.0f bytes (%.3g %s)", bytes, x, unit[u]);
  return buf;
}

// RAM and swap together (0 when unknown): an allocation larger than this cannot succeed, and under
// overcommit it would succeed only to be killed while being filled.
double memory_with_swap() {
#ifdef __linux__
  struct sysinfo si {};
  if (sysinfo(&si) == 0) return (static_cast<double>(si.totalram) + static_cast<double>(si.totalswap)) * si.mem_unit;
#endif
  return 0;
}

[[noreturn]] void out_of_memory(const std::string& what, const std::vector<std::size_t>& shape, double bytes,
                                const std::string& why) {
  throw python::conversion_memory_error(what + ": out of memory converting the array of shape " + shape_text(shape) +
                                        " to binary64: " + bytes_text(bytes) + " asked for" + why);
}

}  // namespace

io::npy_array attncert::python::to_npy(const py::handle& obj, const std::string& what, bool allow_nonfinite) {
  py::array a = py::array::ensure(obj);
  if (!a) throw input_error(what + ": not an array");
  const py::dtype dt = a.dtype();
  const char kind = dt.kind();
  const auto size = static_cast<std::size_t>(dt.itemsize());
  const std::string dtype_name = py::cast<std::string>(py::str(static_cast<const py::handle&>(dt)));
  io::npy_array out;
  if (kind == 'f' && size == 2) out.type = io::dtype::f2;
  else if (kind == 'f' && size == 4) out.type = io::dtype::f4;
  else if (kind == 'f' && size == 8) out.type = io::dtype::f8;
  else if (kind == 'b') out.type = io::dtype::b1;
  else if (kind == 'u' && size == 1) out.type = io::dtype::u1;
  else if (kind == 'i' && size <= 4) out.type = io::dtype::i4;
  else if (kind == 'i' && size == 8) out.type = io::dtype::i8;
  else if (kind == 'c') throw input_error(what + ": complex values are not supported (dtype " + dtype_name + ")");
  else throw input_error(what + ": unsupported dtype " + dtype_name + " (float16/32/64, bool, int, uint8)");
  std::size_t elements = 1;
  for (py::ssize_t i = 0; i < a.ndim(); ++i) {
    const auto s = static_cast<std::size_t>(a.shape(i));
    out.shape.push_back(s);
    // capped at the limit + 1 on the way (a later 0 still makes it 0), so the product cannot overflow
    constexpr std::size_t over = io::max_npy_elements + 1;
    elements = s != 0 && elements > over / s ? over : std::min(elements * s, over);
  }
  if (elements > io::max_npy_elements)
    throw input_error(what + ": the array of shape " + shape_text(out.shape) + " has more than 2^40 elements (the .npy limit)");
  // the library's copy, and numpy's binary64 copy unless the array already is C-contiguous float64
  const bool copies = !(kind == 'f' && size == 8 && (a.flags() & py::array::c_style));
  const double bytes = 8.0 * static_cast<double>(elements) * (copies ? 2 : 1);
  const double have = memory_with_swap();
  if (have > 0 && bytes > have) out_of_memory(what, out.shape, bytes, ", more than this machine's memory (" + bytes_text(have) + " with swap)");
  using binary64_array = py::array_t<double, py::array::c_style | py::array::forcecast>;
  binary64_array d;
  try {
    d = binary64_array(py::reinterpret_borrow<py::object>(a));  // not ensure(): it would hide a MemoryError
  } catch (py::error_already_set& e) {
    if (e.matches(PyExc_MemoryError)) out_of_memory(what, out.shape, bytes, "");
    throw input_error(what + ": cannot be read as numbers");
  }
  try {
    out.values.assign(d.data(), d.data() + d.size());
  } catch (const std::bad_alloc&) {
    out_of_memory(what, out.shape, bytes, "");
  }
  if (out.type == io::dtype::i8)
    for (double x : out.values)
      if (std::fabs(x) > 0x1p53) throw input_error(what + ": int64 values beyond 2^53 are not supported");
  out.allow_nonfinite = allow_nonfinite;
  if (!allow_nonfinite)
    for (std::size_t e = 0; e < out.values.size(); ++e)
      if (!std::isfinite(out.values[e]))
        throw input_error(what + ": contains " + (std::isnan(out.values[e]) ? "NaN" : out.values[e] > 0 ? "+Inf" : "-Inf") +
                          " at flat index " + std::to_string(e));
  return out;
}

namespace {

std::optional<io::npy_array> optional_array(const py::dict& o, const char* key, const std::string& what, bool nonfinite) {
  if (!o.contains(key) || o[key].is_none()) return std::nullopt;
  return to_npy(o[key], what, nonfinite);
}

std::string text(const py::dict& o, const char* key, const std::string& def = "") {
  if (!o.contains(key) || o[key].is_none()) return def;
  return py::str(o[key]);
}

bool flag(const py::dict& o, const char* key) { return o.contains(key) && !o[key].is_none() && o[key].cast<bool>(); }

// The spec from the arrays and the options dict the Python layer built (its keys: the fields of
// oracle::attention_spec; scalar values already as exact texts).
oracle::attention_spec make_spec(const py::handle& q, const py::handle& k, const py::handle& v, const py::dict& o) {
  oracle::attention_spec s;
  s.q = to_npy(q, "q", true);
  s.k = to_npy(k, "k", true);
  s.v = to_npy(v, "v", true);
  s.layout = text(o, "layout", "bhsd");
  s.cu_seqlens_q = optional_array(o, "cu_seqlens_q", field("cu_seqlens_q"), false);
  s.cu_seqlens_k = optional_array(o, "cu_seqlens_k", field("cu_seqlens_k"), false);
  s.seqlens_k = optional_array(o, "seqlens_k", field("seqlens_k"), false);
  s.causal = flag(o, "causal");
  s.causal_bottom_right = flag(o, "causal_bottom_right");
  s.mask = optional_array(o, "mask", "mask", false);
  s.scale = text(o, "scale");
  s.empty_rows = text(o, "empty_rows", "error");
  s.target = text(o, "target", "binary64");
  s.window = text(o, "window");
  s.softcap = text(o, "softcap");
  s.alibi = text(o, "alibi", "distance");
  // the texts whose parsers' messages name no option, parsed once here to name the parameter (the
  // library parses them again in build_request, with the same functions); build_request names the
  // exact numbers (scale, softcap, dropout_p) itself
  python::named("empty_rows", [&] { return parse_empty_row_policy(s.empty_rows); });
  python::named("target", [&] { return oracle::parse_target(s.target); });
  s.alibi_slopes = optional_array(o, "alibi_slopes", field("alibi_slopes"), false);
  s.bias = optional_array(o, "bias", field("bias"), true);
  s.sink = optional_array(o, "sink", field("sink"), true);
  s.dropout_mask = optional_array(o, "dropout_mask", field("dropout_mask"), false);
  if (o.contains("sink_token_length")) s.sink_token_length = o["sink_token_length"].cast<std::size_t>();
  if (o.contains("attention_chunk")) s.attention_chunk = o["attention_chunk"].cast<std::size_t>();
  s.key_leftpad = optional_array(o, "key_leftpad", field("key_leftpad"), false);
  s.qv = optional_array(o, "qv", field("qv"), true);
  s.qkv_format = text(o, "qkv_format");
  for (const auto& [key, number, array] : {std::tuple{"q_descale", &s.q_descale, &s.q_descale_array},
                                            std::tuple{"k_descale", &s.k_descale, &s.k_descale_array},
                                            std::tuple{"v_descale", &s.v_descale, &s.v_descale_array}}) {
    if (!o.contains(key) || o[key].is_none()) continue;
    if (py::isinstance<py::str>(o[key])) *number = py::str(o[key]);
    else *array = optional_array(o, key, field(key), false);
  }
  s.dropout_p = text(o, "dropout_p");
  s.want_lse = flag(o, "want_lse");
  s.lse_base = text(o, "lse_base", "e");
  s.empty_lse = text(o, "empty_lse", "-inf");
  s.lse_target = text(o, "lse_target");
  if (o.contains("max_bits")) s.max_bits = o["max_bits"].cast<unsigned>();
  if (o.contains("threads")) s.threads = o["threads"].cast<unsigned>();
  if (o.contains("max_seconds")) s.max_seconds = o["max_seconds"].cast<double>();
  return s;
}

py::array_t<double> to_numpy(const std::vector<double>& values, const std::vector<std::size_t>& shape) {
  std::vector<py::ssize_t> sh(shape.begin(), shape.end());
  py::array_t<double> a(sh);
  std::copy(values.begin(), values.end(), a.mutable_data());
  return a;
}

}  // namespace

// The rule settings from the dict attncert.testing._rules builds (shared with python/src/sampling.cpp).
grading::rule_settings attncert::python::make_rules(const py::dict& r) {
  grading::rule_settings s;
  s.rule = grading::parse_grading_rule(text(r, "rule", "ulp"));
  if (r.contains("max_ulp") && !r["max_ulp"].is_none()) s.max_ulp = r["max_ulp"].cast<double>();
  if (r.contains("flash_k") && !r["flash_k"].is_none()) s.flash_k = r["flash_k"].cast<double>();
  if (r.contains("fudge") && !r["fudge"].is_none()) s.fudge = r["fudge"].cast<double>();
  if (r.contains("atol") && !r["atol"].is_none()) s.atol = r["atol"].cast<double>();
  if (r.contains("rtol") && !r["rtol"].is_none()) s.rtol = r["rtol"].cast<double>();
  grading::validate_rule_settings(s);
  return s;
}

using python::make_rules;

namespace {

std::vector<double> candidate_values(const py::handle& c, const std::vector<std::size_t>& shape, const std::string& what) {
  io::npy_array a = to_npy(c, what, true);
  if (a.shape != shape) throw input_error(what + ": shape " + shape_text(a.shape) + " is not the reference's " + shape_text(shape));
  if (a.type == io::dtype::b1) throw input_error(what + ": must be a float array");
  return std::move(a.values);
}

// `n` query rows of the request drawn without replacement (sample_row_indices over the rows it uses; all
// rows when there are no more than n): the rows the oracle computes; the others are not computed.
void sample_rows(oracle::oracle_request& req, std::size_t n, std::uint64_t seed) {
  std::vector<std::size_t> used;
  const std::size_t H = req.Q.H, nq = req.Q.n;
  for (std::size_t r = 0; r < req.Q.B * H * nq; ++r)
    if (req.row_used(r, r / (H * nq), r % nq)) used.push_back(r);
  if (used.size() <= n) return;
  req.row_sample.assign(req.Q.B * H * nq, 0);
  for (std::size_t p : sample_row_indices(used.size(), n, seed)) req.row_sample[used[p]] = 1;
}

// The forward oracle of one call, kept for grading candidates against its exact values.
class reference {
 public:
  reference(const py::handle& q, const py::handle& k, const py::handle& v, const py::dict& opts)
      : spec_(make_spec(q, k, v, opts)) {
    std::size_t rows = 0, block_begin = 0, block_end = 0;
    std::uint64_t seed = 0;
    const bool block = opts.contains("row_block") && !opts["row_block"].is_none();
    if (block) {
      const auto be = opts["row_block"].cast<std::pair<long long, long long>>();
      if (be.first < 0 || be.second <= be.first) throw input_error("row_block: need 0 <= begin < end");
      block_begin = static_cast<std::size_t>(be.first);
      block_end = static_cast<std::size_t>(be.second);
    }
    std::optional<std::vector<long long>> row_list;  // explicit internal rows (attncert.distributed.grade's tasks)
    if (opts.contains("row_list") && !opts["row_list"].is_none()) {
      if (block) throw input_error("row_block and row_list: give one of them");
      const auto a = py::array_t<long long, py::array::c_style | py::array::forcecast>::ensure(opts["row_list"]);
      if (!a || a.ndim() != 1) throw input_error("row_list: must be a 1-D sequence of row indices");
      row_list.emplace(a.data(), a.data() + a.size());
    }
    if (opts.contains("rows") && !opts["rows"].is_none()) {
      const long long n = opts["rows"].cast<long long>();
      if (n < 1) throw input_error("rows: must be >= 1 (got " + std::to_string(n) + ")");
      rows = static_cast<std::size_t>(n);
      seed = opts.contains("seed") ? opts["seed"].cast<std::uint64_t>() : 0;
    }
    python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt (interrupt.hpp)
    built_ = oracle::build_request(spec_);
    if (rows) sample_rows(built_.req, rows, seed);
    if (block) {  // the internal rows [begin, end) only (attncert.distributed's tasks)
      auto& req = built_.req;
      const std::size_t total = req.Q.B * req.Q.H * req.Q.n;
      if (block_end > total) throw input_error("row_block: end " + std::to_string(block_end) + " beyond the " + std::to_string(total) + " rows");
      if (req.row_sample.empty()) req.row_sample.assign(total, 1);
      for (std::size_t r = 0; r < total; ++r)
        if (r < block_begin || r >= block_end) req.row_sample[r] = 0;
    }
    if (row_list) {  // the listed internal rows only (of the sample, if any)
      auto& req = built_.req;
      const std::size_t total = req.Q.B * req.Q.H * req.Q.n;
      std::vector<std::uint8_t> listed(total, 0);
      for (const long long r : *row_list) {
        if (r < 0 || static_cast<std::size_t>(r) >= total)
          throw input_error("row_list: row " + std::to_string(r) + " is not in [0, " + std::to_string(total) + ")");
        listed[static_cast<std::size_t>(r)] = 1;
      }
      if (!req.row_sample.empty())
        for (std::size_t r = 0; r < total; ++r) listed[r] = listed[r] && req.row_sample[r];
      req.row_sample = std::move(listed);
    }
    const auto t0 = std::chrono::steady_clock::now();
    result_ = oracle::run_oracle(built_.req);
    seconds_ = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }
  py::array_t<double> output() const {
    const io::npy_array a = oracle::reference_array(result_, built_.req.target, built_.olay);
    return to_numpy(a.values, a.shape);
  }
  py::object lse() const {
    if (!result_.has_lse) return py::none();
    const io::npy_array a = oracle::lse_array(result_, built_.olay);
    return to_numpy(a.values, a.shape);
  }
  std::string target() const { return oracle::to_string(built_.req.target); }
  std::string lse_target() const { return oracle::to_string(result_.lse_target); }
  // The truth output_truth grades against, internal layout (B, H, nq, dv): |o - (hi + lo)| <= rad, and
  // reference the correctly rounded o (float64 holding target numbers); rows not computed have hi, rad and
  // reference NaN.  attncert.distributed.grade assembles its truth from the tasks' rows of these arrays.
  py::dict truth() const {
    const std::vector<std::size_t> shape{result_.B, result_.H, result_.nq, result_.dv};
    py::dict d;
    d["hi"] = to_numpy(result_.t_hi, shape);
    d["lo"] = to_numpy(result_.t_lo, shape);
    d["rad"] = to_numpy(result_.t_rad, shape);
    d["reference"] = to_numpy(result_.reference, shape);
    // 1 where the value is the empty-row policy's (decided_by::exact_policy): graded by equality, as output_truth does
    std::vector<double> policy(result_.how.size());
    for (std::size_t e = 0; e < policy.size(); ++e) policy[e] = result_.how[e] == oracle::decided_by::exact_policy;
    d["policy"] = to_numpy(policy, shape);
    return d;
  }
  // The summary counts (who decided how many elements).
  py::dict summary() const {
    py::dict d;
    d["elements"] = result_.elements;
    d["correctly_rounded"] = result_.correctly_rounded;
    d["faithful_only"] = result_.faithful_only;
    d["by_double_double"] = result_.by_double_double;
    d["rows_escalated"] = result_.rows_escalated;
    d["empty_rows"] = result_.empty_rows;
    d["ieee_nonfinite"] = result_.ieee_nonfinite;
    d["rows_not_computed"] = result_.padding_rows;
    d["undecided_rows"] = result_.undecided_rows;  // not computed within max_seconds (NaN)
    d["oracle_seconds"] = seconds_;  // run_oracle alone (the binding's overhead is the rest of the call)
    return d;
  }
  // approx_grade of a candidate output (or LSE) in the caller's layout: the report's JSON of the grade.
  // names: the caller's names of the candidate and the baseline (attncert.testing: actual, baseline), or None.
  std::string grade(const py::handle& cand, const py::object& baseline, const py::dict& rules, bool of_lse,
                    const py::object& names) const {
    const grading::rule_settings rs = make_rules(rules);
    const auto& shape = of_lse ? built_.olay.lse_shape : built_.olay.out_shape;
    const auto given = names.is_none() ? std::pair<std::string, std::string>{} : names.cast<std::pair<std::string, std::string>>();
    const std::string what = !given.first.empty() ? given.first : of_lse ? "the LSE candidate" : "the candidate";
    const std::string base_what = !given.second.empty() ? given.second : "the baseline";
    auto internal = [&](const std::vector<double>& x) {
      return of_lse ? built_.olay.lse_to_internal(x) : built_.olay.output_to_internal(x);
    };
    const std::vector<double> c = internal(candidate_values(cand, shape, what));
    std::optional<std::vector<double>> b;
    if (!baseline.is_none()) b = internal(candidate_values(baseline, shape, base_what));
    if (grading::rule_needs_baseline(rs.rule) && !b)
      throw input_error("rule " + grading::to_string(rs.rule) + " compares with a baseline: give baseline=");
    grading::truth_view t = of_lse ? grading::lse_truth(result_) : grading::output_truth(result_, built_.req.target);
    grading::candidate_grade g;
    {
      python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt (interrupt.hpp)
      g = grading::approx_grade(t, c, b ? &*b : nullptr, rs, of_lse ? "lse" : "c1");
    }
    return python::spelled(report::candidate_grade_json(g).dump());
  }
  const oracle::attention_spec& spec() const { return spec_; }
  const oracle::built_request& built() const { return built_; }

 private:
  oracle::attention_spec spec_;
  oracle::built_request built_;
  oracle::oracle_result result_;
  double seconds_ = 0;
};

const char* gradient_names[] = {"dq", "dk", "dv", "dbias", "dsink"};

// The backward's cotangents dO (and dLSE) of a call, checked against its output's (and LSE's) shape, in
// the internal layout.
oracle::backward_inputs cotangents(const oracle::built_request& built, const io::npy_array& d,
                                   const std::optional<io::npy_array>& dl) {
  oracle::check_candidate_array(d, built.olay.out_shape, "do");
  oracle::backward_inputs gi;
  gi.dO = built.olay.output_to_internal(d.values);
  if (dl) {
    oracle::check_candidate_array(*dl, built.olay.lse_shape, "dlse");
    gi.dLSE = built.olay.lse_to_internal(dl->values);
  }
  return gi;
}

// The certified backward of one call for given cotangents, kept for grading a kernel's gradients.
class gradients {
 public:
  gradients(const py::handle& q, const py::handle& k, const py::handle& v, const py::handle& dout, const py::object& dlse,
            const py::dict& opts)
      : spec_(make_spec(q, k, v, opts)) {
    if (!dlse.is_none()) spec_.want_lse = true;
    io::npy_array d = to_npy(dout, "do", true);
    std::optional<io::npy_array> dl;
    if (!dlse.is_none()) dl = to_npy(dlse, "dlse", true);
    python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt (interrupt.hpp)
    built_ = oracle::build_request(spec_);
    glay_ = oracle::gradient_layouts(spec_, built_);
    result_ = oracle::run_oracle_backward(built_.req, cotangents(built_, d, dl));
  }
  // The gradient `name` in the caller's layout (dq, dk, dv as Q, K, V; dbias as the bias; dsink (h_q,)), or None.
  py::object get(const std::string& name) const {
    const int i = index(name);
    if (i == 3 && !result_.has_dbias) return py::none();
    if (i == 4 && !result_.has_dsink) return py::none();
    const auto shape = external_shape(i);
    const oracle::gradient_tensor& g = tensor(i);
    const std::vector<double> v = i < 3 ? glay_[i].output_to_external(g.reference) : g.reference;
    return to_numpy(v, shape);
  }
  std::string target() const { return oracle::to_string(built_.req.target); }
  py::dict summary() const {
    py::dict d;
    d["elements"] = result_.elements;
    d["correctly_rounded"] = result_.correctly_rounded;
    d["faithful_only"] = result_.faithful_only;
    d["exact_zeros"] = result_.exact_zeros;
    d["double_double"] = result_.double_double;
    d["keys_escalated"] = result_.keys_escalated;
    d["rows_escalated"] = result_.rows_escalated;
    d["units_escalated"] = result_.units_escalated;
    return d;
  }
  // approx_grade of a kernel's gradient `name` with the per-gradient settings of the rule.
  std::string grade(const std::string& name, const py::handle& cand, const py::object& baseline, const py::dict& rules) const {
    const int i = index(name);
    if ((i == 3 && !result_.has_dbias) || (i == 4 && !result_.has_dsink))
      throw input_error(name + ": this call has no " + (i == 3 ? "bias" : "sink"));
    grading::rule_settings rs = make_rules(rules);
    const auto kind = static_cast<grading::gradient_kind>(i);
    rs = grading::gradient_rule_settings(rs, kind, rules.contains("flash_k") && !rules["flash_k"].is_none(),
                                        rules.contains("fudge") && !rules["fudge"].is_none());
    const auto shape = external_shape(i);
    auto internal = [&](std::vector<double> x) { return i < 3 ? glay_[i].output_to_internal(x) : x; };
    const std::vector<double> c = internal(candidate_values(cand, shape, name));
    std::optional<std::vector<double>> b;
    if (!baseline.is_none()) b = internal(candidate_values(baseline, shape, "the baseline's " + name));
    if (grading::rule_needs_baseline(rs.rule) && !b)
      throw input_error("rule " + grading::to_string(rs.rule) + " compares with a baseline: give baseline=");
    grading::truth_view t = grading::gradient_truth(tensor(i), result_.target, name);
    if (i < 3) grading::skip_absent_rows(t, glay_[i]);
    grading::candidate_grade g;
    {
      python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt (interrupt.hpp)
      g = grading::approx_grade(t, c, b ? &*b : nullptr, rs, name);
    }
    nlohmann::json j = report::candidate_grade_json(g);
    j["settings"] = {{"flash_k", rs.flash_k}, {"fudge", rs.fudge}};
    return python::spelled(j.dump());
  }

 private:
  static int index(const std::string& name) {
    for (int i = 0; i < 5; ++i)
      if (name == gradient_names[i]) return i;
    throw input_error("unknown gradient '" + name + "' (dq, dk, dv, dbias, dsink)");
  }
  const oracle::gradient_tensor& tensor(int i) const {
    switch (i) {
      case 0: return result_.dq;
      case 1: return result_.dk;
      case 2: return result_.dv;
      case 3: return result_.dbias;
      default: return result_.dsink;
    }
  }
  std::vector<std::size_t> external_shape(int i) const {
    switch (i) {
      case 0: return spec_.q.shape;
      case 1: return spec_.k.shape;
      case 2: return spec_.v.shape;
      case 3: return spec_.bias->shape;
      default: return {built_.req.Q.H};
    }
  }
  oracle::attention_spec spec_;
  oracle::built_request built_;
  std::vector<oracle::output_layout> glay_;
  oracle::backward_result result_;
};

// The backward of the internal rows [begin, end) of one call (attncert.distributed's row-block tasks):
// the block's dq rows and the enclosures of its partial dK (unscaled) and dV sums, as a dict of arrays.
py::dict backward_block(const py::handle& q, const py::handle& k, const py::handle& v, const py::handle& dout,
                        const py::object& dlse, const py::dict& opts, std::pair<long long, long long> rows) {
  oracle::attention_spec spec = make_spec(q, k, v, opts);
  if (!dlse.is_none()) spec.want_lse = true;
  if (rows.first < 0 || rows.second <= rows.first) throw input_error("row_block: need 0 <= begin < end");
  io::npy_array d = to_npy(dout, "do", true);
  std::optional<io::npy_array> dl;
  if (!dlse.is_none()) dl = to_npy(dlse, "dlse", true);
  oracle::backward_block_result r;
  {
    python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt (interrupt.hpp)
    const oracle::built_request built = oracle::build_request(spec);
    r = oracle::run_oracle_backward_block(built.req, cotangents(built, d, dl), static_cast<std::size_t>(rows.first),
                                          static_cast<std::size_t>(rows.second));
  }
  py::dict out;
  out["complete"] = r.complete;
  out["declined"] = r.declined;
  out["target"] = oracle::to_string(r.target);
  out["scale"] = py::make_tuple(r.scale_hi, r.scale_lo, r.scale_rad);
  out["dq"] = to_numpy(r.dq, {r.dq.size()});
  for (const auto& [name, p] : {std::pair<const char*, const oracle::partial_sums*>{"dk", &r.dk}, {"dv", &r.dv}})
    out[name] = py::make_tuple(to_numpy(p->hi, {p->hi.size()}), to_numpy(p->lo, {p->lo.size()}),
                               to_numpy(p->rad, {p->rad.size()}));
  return out;
}

// dK (with the scale) or dV from the blocks' partial sums: (reference, decided) arrays.
py::tuple reduce_blocks(const py::list& parts, const py::object& scale, const std::string& target) {
  std::vector<oracle::partial_sums> ps;
  for (const py::handle& t : parts) {
    const py::tuple x = t.cast<py::tuple>();
    if (x.size() != 3) throw input_error("reduce_backward_blocks: each part is (hi, lo, rad)");
    auto values = [](const py::handle& h) {  // a float64 array's values, without a Python object per element
      const auto a = py::array_t<double, py::array::c_style | py::array::forcecast>::ensure(h);
      if (!a) throw input_error("reduce_backward_blocks: each part is (hi, lo, rad) float64 arrays");
      return std::vector<double>(a.data(), a.data() + a.size());
    };
    oracle::partial_sums p;
    p.hi = values(x[0]);
    p.lo = values(x[1]);
    p.rad = values(x[2]);
    ps.push_back(std::move(p));
  }
  std::vector<const oracle::partial_sums*> ptr;
  for (const auto& p : ps) ptr.push_back(&p);
  double sc[3] = {0, 0, 0};
  const bool has_scale = !scale.is_none();
  if (has_scale) {
    const auto t = scale.cast<std::tuple<double, double, double>>();
    sc[0] = std::get<0>(t);
    sc[1] = std::get<1>(t);
    sc[2] = std::get<2>(t);
  }
  oracle::reduced_gradient r;
  {
    python::interruptible_nogil nogil;  // Ctrl-C: KeyboardInterrupt (interrupt.hpp)
    r = oracle::reduce_backward_blocks(ptr, has_scale ? sc : nullptr, oracle::parse_target(target));
  }
  std::vector<double> decided(r.decided.begin(), r.decided.end());
  return py::make_tuple(to_numpy(r.reference, {r.reference.size()}), to_numpy(decided, {decided.size()}));
}

// A thread that must wait for another thread's precision guards (number/precision_guard.hpp)
// lets the GIL go meanwhile: the thread holding the lock may need it for a Python callback
// (drift's diagnostics), and waiting with the GIL would deadlock the two.
void wait_for_precision_lock(std::recursive_mutex& m) {
  if (PyGILState_Check()) {
    py::gil_scoped_release nogil;
    m.lock();
  } else {
    m.lock();
  }
}

}  // namespace

void bind_analysis(py::module_& m);  // python/src/commands.cpp
void bind_sampling(py::module_& m);  // python/src/sampling.cpp

PYBIND11_MODULE(_core, m) {
  m.doc() = "attncert's C++ core: the certified attention oracle (forward, backward) and its grading rules";
  m.attr("version") = ATTNCERT_VERSION;
  attncert::install_allocation_failure_handlers();  // GMP/FLINT out of memory: MemoryError, not an abort
  attncert::set_precision_wait_hook(&wait_for_precision_lock);
  static py::exception<input_error> input_exc(m, "InputError", PyExc_ValueError);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const interrupted&) {
      PyErr_SetNone(PyExc_KeyboardInterrupt);  // Ctrl-C seen by a poll inside the core (interrupt.hpp)
    } catch (const time_limit_reached& e) {
      PyErr_SetString(PyExc_TimeoutError, python::spelled(e.what()).c_str());  // past max_seconds (deadline.hpp): nothing returned
    } catch (const input_error& e) {
      PyErr_SetString(input_exc.ptr(), python::spelled(e.what()).c_str());  // fields named as keywords (field.hpp)
    } catch (const python::conversion_memory_error& e) {
      PyErr_SetString(PyExc_MemoryError, e.what());
    } catch (const internal_error& e) {
      PyErr_SetString(PyExc_RuntimeError, (std::string("attncert internal error: ") + e.what()).c_str());
    }
  });
  py::class_<reference>(m, "Reference")
      .def(py::init<const py::handle&, const py::handle&, const py::handle&, const py::dict&>(), py::arg("q"), py::arg("k"),
           py::arg("v"), py::arg("options"))
      .def("output", &reference::output, "The correctly rounded output (float64 holding target-format values), caller's layout")
      .def("lse", &reference::lse, "The correctly rounded LSE (float64 holding lse_target values), or None")
      .def_property_readonly("target", &reference::target)
      .def_property_readonly("lse_target", &reference::lse_target)
      .def("truth", &reference::truth, "The output's enclosures {hi, lo, rad, reference}, internal layout (B, H, nq, dv)")
      .def("summary", &reference::summary)
      .def("grade", &reference::grade, py::arg("candidate"), py::arg("baseline"), py::arg("rules"), py::arg("of_lse") = false,
           py::arg("names") = py::none(),
           "The grade of a candidate (JSON text): errors from the exact values and the rule's verdict");
  py::class_<gradients>(m, "Gradients")
      .def(py::init<const py::handle&, const py::handle&, const py::handle&, const py::handle&, const py::object&,
                    const py::dict&>(),
           py::arg("q"), py::arg("k"), py::arg("v"), py::arg("do"), py::arg("dlse"), py::arg("options"))
      .def("get", &gradients::get, py::arg("name"))
      .def_property_readonly("target", &gradients::target)
      .def("summary", &gradients::summary)
      .def("grade", &gradients::grade, py::arg("name"), py::arg("candidate"), py::arg("baseline"), py::arg("rules"));
  m.def("backward_block", &backward_block, py::arg("q"), py::arg("k"), py::arg("v"), py::arg("do"), py::arg("dlse"),
        py::arg("options"), py::arg("row_block"),
        "The backward of the internal query rows [begin, end): their dq and the partial sums of dK (unscaled) and dV");
  m.def("reduce_backward_blocks", &reduce_blocks, py::arg("parts"), py::arg("scale"), py::arg("target"),
        "dK (scale given) or dV from the blocks' partial sums (hi, lo, rad): (reference, decided)");
  bind_analysis(m);
  bind_sampling(m);
}
