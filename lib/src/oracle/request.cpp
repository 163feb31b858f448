// lib/src/oracle/request.cpp — the oracle's request: tensors and masks from .npy arrays, and
// the one validation of a request's shapes and settings.  See attncert/oracle/request.hpp.
#include "attncert/oracle/request.hpp"

#include <algorithm>
#include <cmath>

#include "attncert/error.hpp"
#include "internal.hpp"

namespace attncert::oracle {

namespace {

std::string shape_text(const std::vector<std::size_t>& s) {
  std::string t = "(";
  for (std::size_t i = 0; i < s.size(); ++i) t += (i ? ", " : "") + std::to_string(s[i]);
  return t + (s.size() == 1 ? ",)" : ")");
}

void check_tensor(const tensor4& t, const char* name) {
  if (t.n == 0 || t.d == 0 || t.B == 0 || t.H == 0)
    throw input_error(std::string(name) + " is empty (shape has a zero dimension)");
  if (t.values.size() != t.B * t.H * t.n * t.d) throw input_error(std::string(name) + ": values do not match the shape");
}

}  // namespace

tensor4 to_tensor4(const io::npy_array& a, const std::string& what) {
  tensor4 t;
  const auto& s = a.shape;
  if (a.type == io::dtype::b1) throw input_error(what + ": a bool array cannot be " + what);
  if (s.size() == 2) {
    t.n = s[0];
    t.d = s[1];
  } else if (s.size() == 3) {
    t.H = s[0];
    t.n = s[1];
    t.d = s[2];
  } else if (s.size() == 4) {
    t.B = s[0];
    t.H = s[1];
    t.n = s[2];
    t.d = s[3];
  } else {
    throw input_error(what + ": shape " + shape_text(s) + " is not (n, d), (h, n, d) or (b, h, n, d)");
  }
  if (t.B == 0 || t.H == 0 || t.n == 0 || t.d == 0) throw input_error(what + ": empty tensor, shape " + shape_text(s));
  t.values = a.values;
  return t;
}

bool_mask to_bool_mask(const io::npy_array& a, const std::string& what) {
  if (a.type != io::dtype::b1) throw input_error(what + ": a mask must be a bool array (true = may attend)");
  const auto& s = a.shape;
  bool_mask m;
  if (s.size() == 2) {
    m.nq = s[0];
    m.nk = s[1];
  } else if (s.size() == 3) {
    m.mh = s[0];
    m.nq = s[1];
    m.nk = s[2];
  } else if (s.size() == 4) {
    m.mb = s[0];
    m.mh = s[1];
    m.nq = s[2];
    m.nk = s[3];
  } else {
    throw input_error(what + ": mask shape " + shape_text(s) + " is not (n_q, n_k), (h, n_q, n_k) or (b, h, n_q, n_k)");
  }
  if (m.mb == 0 || m.mh == 0 || m.nq == 0 || m.nk == 0) throw input_error(what + ": empty mask, shape " + shape_text(s));
  m.allowed.resize(a.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i) m.allowed[i] = a.values[i] != 0;
  return m;
}

void set_qkv(oracle_request& req, const io::npy_array& q, const io::npy_array& k, const io::npy_array& v) {
  if (q.shape.size() != k.shape.size() || q.shape.size() != v.shape.size())
    throw input_error("Q, K and V must have the same number of dimensions (got " + std::to_string(q.shape.size()) + ", " +
                      std::to_string(k.shape.size()) + ", " + std::to_string(v.shape.size()) + ")");
  req.Q = to_tensor4(q, "--q");
  req.K = to_tensor4(k, "--k");
  req.V = to_tensor4(v, "--v");
}

std::vector<std::size_t> output_shape(const io::npy_array& q, const io::npy_array& v) {
  std::vector<std::size_t> s(q.shape.begin(), q.shape.end() - 1);
  s.push_back(v.shape.back());
  return s;
}

void check_candidate_array(const io::npy_array& c, const std::vector<std::size_t>& out_shape, const std::string& file) {
  if (c.shape != out_shape) {
    std::string s;
    for (auto x : out_shape) s += (s.empty() ? "" : ", ") + std::to_string(x);
    throw input_error(file + ": candidate shape does not match the output shape (" + s + ")");
  }
  if (c.type == io::dtype::b1) throw input_error(file + ": a candidate must be a float array");
}

void check_attention_array(const io::npy_array& a, const io::npy_array& q, const io::npy_array& k,
                           const std::string& file) {
  std::vector<std::size_t> want(q.shape.begin(), q.shape.end() - 1);
  want.push_back(k.shape[k.shape.size() - 2]);
  if (a.shape != want) throw input_error(file + ": attention candidate shape must be (…, n_q, n_k)");
}

io::npy_array reference_array(const oracle_result& r, target_format t, const std::vector<std::size_t>& shape) {
  io::npy_array ref;
  ref.type = t == target_format::binary64 ? io::dtype::f8 : t == target_format::binary16 ? io::dtype::f2 : io::dtype::f4;
  ref.shape = shape;
  ref.values = r.reference;
  ref.allow_nonfinite = true;
  return ref;
}

void validate_request(const oracle_request& req) {
  check_tensor(req.Q, "Q");
  check_tensor(req.K, "K");
  check_tensor(req.V, "V");
  const auto& Q = req.Q;
  const auto& K = req.K;
  const auto& V = req.V;
  if (K.B != Q.B || K.H != Q.H || V.B != Q.B || V.H != Q.H)
    throw input_error("Q, K and V must have the same batch and head dimensions");
  if (K.d != Q.d)
    throw input_error("Q and K differ in feature dimension (" + std::to_string(Q.d) + " vs " + std::to_string(K.d) + ")");
  if (V.n != K.n)
    throw input_error("K and V differ in sequence length (" + std::to_string(K.n) + " vs " + std::to_string(V.n) + ")");
  if (req.max_bits < internal::first_mpfi_bits || req.max_bits > internal::cap_limit)
    throw input_error("precision cap " + std::to_string(req.max_bits) + " bits is out of range [" +
                      std::to_string(internal::first_mpfi_bits) + ", " + std::to_string(internal::cap_limit) +
                      "] (precision too low?)");
  if (req.mask == mask_kind::explicit_mask) {
    const auto& M = req.M;
    if (M.nq != Q.n || M.nk != K.n)
      throw input_error("mask shape (..., " + std::to_string(M.nq) + ", " + std::to_string(M.nk) +
                        ") does not match (n_q, n_k) = (" + std::to_string(Q.n) + ", " + std::to_string(K.n) + ")");
    if ((M.mb != 1 && M.mb != Q.B) || (M.mh != 1 && M.mh != Q.H))
      throw input_error("mask leading dimensions must be 1 or equal to the batch and head dimensions");
    if (M.allowed.size() != M.mb * M.mh * M.nq * M.nk) throw input_error("mask values do not match its shape");
  }
  auto finite_all = [](const std::vector<double>& v) {
    return std::all_of(v.begin(), v.end(), [](double x) { return std::isfinite(x); });
  };
  const bool all_finite = finite_all(Q.values) && finite_all(K.values) && finite_all(V.values);
  if (!all_finite && !req.allow_nonfinite)
    throw input_error("an input contains NaN or Inf (use --allow-nonfinite for IEEE semantics on the affected rows)");
}

}  // namespace attncert::oracle
