// lib/src/oracle/request.cpp — the oracle's request: tensors and masks from .npy arrays, and
// the one validation of a request's shapes and settings.  See attncert/oracle/request.hpp.
#include "attncert/oracle/request.hpp"

#include <algorithm>
#include <cmath>
#include <limits>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/number/traits.hpp"
#include "ziv_stage.hpp"

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

tensor4 to_tensor4(const tensor& a, const std::string& what) {
  tensor4 t;
  const auto& s = a.shape;
  if (a.type == dtype::b1) throw input_error(what + ": a bool array cannot be " + what);
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

bool_mask to_bool_mask(const tensor& a, const std::string& what) {
  if (a.type != dtype::b1) throw input_error(what + ": a mask must be a bool array (true = may attend)");
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

qkv_layout parse_layout(const std::string& s) {
  if (s == "bhsd") return qkv_layout::bhsd;
  if (s == "bshd") return qkv_layout::bshd;
  if (s == "thd") return qkv_layout::thd;
  throw input_error(field("layout") + " must be bhsd, bshd or thd (got '" + s + "')");
}

std::string to_string(qkv_layout l) {
  switch (l) {
    case qkv_layout::bshd: return "bshd";
    case qkv_layout::thd: return "thd";
    default: return "bhsd";
  }
}

fp8_format parse_fp8_format(const std::string& s) {
  if (s.empty() || s == "none") return fp8_format::none;
  if (s == "e4m3fn") return fp8_format::e4m3fn;
  if (s == "e5m2") return fp8_format::e5m2;
  throw input_error(field("qkv_format") + " must be e4m3fn or e5m2 (got '" + s + "')");
}

double decode_fp8(std::uint8_t byte, fp8_format f) {
  const bool neg = byte & 0x80;
  const int e_bits = f == fp8_format::e5m2 ? 5 : 4, m_bits = 7 - e_bits;
  const int bias = f == fp8_format::e5m2 ? 15 : 7;
  const int e = (byte >> m_bits) & ((1 << e_bits) - 1);
  const int m = byte & ((1 << m_bits) - 1);
  double v = 0;
  if (f == fp8_format::e5m2 && e == 31) {
    v = m == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (f == fp8_format::e4m3fn && e == 15 && m == 7) {
    v = std::numeric_limits<double>::quiet_NaN();  // e4m3fn: no infinities, S.1111.111 is NaN
  } else if (e == 0) {
    v = std::ldexp(static_cast<double>(m), 1 - bias - m_bits);  // subnormal
  } else {
    v = std::ldexp(static_cast<double>((1 << m_bits) + m), e - bias - m_bits);
  }
  return neg ? -v : v;
}

std::vector<std::size_t> to_index_vector(const tensor& a, const std::string& what) {
  if (a.type != dtype::i4 && a.type != dtype::i8) throw input_error(what + ": must be an int32 or int64 array");
  if (a.shape.size() != 1) throw input_error(what + ": must be one-dimensional, got shape " + shape_text(a.shape));
  std::vector<std::size_t> out;
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    if (a.values[i] < 0) throw input_error(what + ": entry " + std::to_string(i) + " is negative");
    out.push_back(static_cast<std::size_t>(a.values[i]));
  }
  return out;
}

namespace {

void require_rank(const tensor& a, std::size_t rank, const std::string& what, const std::string& layout) {
  if (a.shape.size() != rank)
    throw input_error(what + ": shape " + shape_text(a.shape) + " is not " + layout);
  for (auto x : a.shape)
    if (x == 0 && rank != 3) throw input_error(what + ": empty tensor, shape " + shape_text(a.shape));
}

// (b, s, h, d) -> tensor4 (b, h, s, d)
tensor4 from_bshd(const tensor& a, const std::string& what) {
  require_rank(a, 4, what, "(b, s, h, d) (" + field("layout") + " bshd)");
  tensor4 t;
  t.B = a.shape[0];
  t.n = a.shape[1];
  t.H = a.shape[2];
  t.d = a.shape[3];
  t.values.resize(a.values.size());
  for (std::size_t b = 0; b < t.B; ++b)
    for (std::size_t i = 0; i < t.n; ++i)
      for (std::size_t h = 0; h < t.H; ++h)
        for (std::size_t l = 0; l < t.d; ++l)
          t.values[((b * t.H + h) * t.n + i) * t.d + l] = a.values[((b * t.n + i) * t.H + h) * t.d + l];
  return t;
}

void check_cu(const std::vector<std::size_t>& cu, std::size_t total, const std::string& what) {
  if (cu.size() < 2) throw input_error(what + ": needs at least 2 entries (b + 1 offsets)");
  if (cu[0] != 0) throw input_error(what + ": must start at 0 (got " + std::to_string(cu[0]) + ")");
  for (std::size_t i = 1; i < cu.size(); ++i)
    if (cu[i] < cu[i - 1])
      throw input_error(what + ": not monotone (entry " + std::to_string(i) + " = " + std::to_string(cu[i]) + " < " +
                        std::to_string(cu[i - 1]) + ")");
  if (cu.back() != total)
    throw input_error(what + ": last entry " + std::to_string(cu.back()) + " does not match the tensor's " +
                      std::to_string(total) + " tokens");
}

// packed (t, h, d) with offsets cu -> tensor4 (1, h, t, d): nothing padded (oracle_request::packed_cu_q).
tensor4 from_thd(const tensor& a, const std::vector<std::size_t>& cu, const std::string& what,
                 const std::string& cu_name) {
  if (a.shape.size() != 3) throw input_error(what + ": shape " + shape_text(a.shape) + " is not (t, h, d) (" + field("layout") + " thd)");
  if (a.shape[1] == 0 || a.shape[2] == 0) throw input_error(what + ": empty tensor, shape " + shape_text(a.shape));
  check_cu(cu, a.shape[0], cu_name);
  if (a.shape[0] == 0) throw input_error(what + ": no tokens (shape " + shape_text(a.shape) + ")");
  tensor4 t;
  t.B = 1;
  t.H = a.shape[1];
  t.n = a.shape[0];
  t.d = a.shape[2];
  t.values.resize(t.H * t.n * t.d);
  for (std::size_t i = 0; i < t.n; ++i)
    for (std::size_t h = 0; h < t.H; ++h)
      for (std::size_t l = 0; l < t.d; ++l) t.values[(h * t.n + i) * t.d + l] = a.values[(i * t.H + h) * t.d + l];
  return t;
}

// pages (p, P, h, d) with a block table (B, m) -> tensor4 (B, h, m·P, d) (n = max used[b] when
// lay.trim_pages); only keys below used[b] are read (their table entries must be in range), the
// rest is zero.
tensor4 from_pages(const tensor& a, const input_layout& lay, std::size_t B, const std::vector<std::size_t>& used,
                   const std::string& what) {
  if (a.shape.size() != 4) throw input_error(what + ": shape " + shape_text(a.shape) + " is not (pages, page_size, h, d) (paged K/V)");
  if (a.shape[1] != lay.page_size)
    throw input_error(what + ": page size " + std::to_string(a.shape[1]) + " differs from " + field("page_size") + " " +
                      std::to_string(lay.page_size));
  const std::size_t pages = a.shape[0], P = a.shape[1];
  tensor4 t;
  t.B = B;
  t.H = a.shape[2];
  t.d = a.shape[3];
  t.n = lay.table_cols * P;
  if (lay.trim_pages) t.n = std::max<std::size_t>(1, *std::max_element(used.begin(), used.end()));
  if (t.H == 0 || t.d == 0 || t.n == 0) throw input_error(what + ": empty tensor, shape " + shape_text(a.shape));
  t.values.assign(t.B * t.H * t.n * t.d, 0.0);
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t j = 0; j < used[b]; ++j) {
      const long long page = lay.block_table[b * lay.table_cols + j / P];
      if (page < 0 || static_cast<std::size_t>(page) >= pages)
        throw input_error(field("block_table") + ": entry (" + std::to_string(b) + ", " + std::to_string(j / P) + ") = " +
                          std::to_string(page) + " is out of range [0, " + std::to_string(pages) + ")");
      for (std::size_t h = 0; h < t.H; ++h)
        for (std::size_t l = 0; l < t.d; ++l)
          t.values[((b * t.H + h) * t.n + j) * t.d + l] =
              a.values[((static_cast<std::size_t>(page) * P + j % P) * t.H + h) * t.d + l];
    }
  return t;
}

void check_descale(const descale& ds, std::size_t B, std::size_t Hkv, const std::string& what) {
  if (!ds.values.empty() && ds.values.size() != 1 && ds.values.size() != B * Hkv)
    throw input_error(what + ": " + std::to_string(ds.values.size()) + " factors, expected 1 or b·h_kv = " +
                      std::to_string(B * Hkv));
  for (double v : ds.values)
    if (!std::isfinite(v) || !(v > 0)) throw input_error(what + ": every descale factor must be finite and > 0");
}

// FP8 bytes -> exact values times the descale of (b, kv head); products checked exact.  Packed
// (cu non-empty): token i of the (1, h, t, d) tensor takes the descale of its sequence.
void decode_tensor(tensor4& t, fp8_format f, const descale& ds, std::size_t group, const std::vector<std::size_t>& cu,
                   const std::string& what) {
  for (std::size_t b = 0; b < t.B; ++b)
    for (std::size_t h = 0; h < t.H; ++h) {
      std::size_t seq = b;  // the sequence of the token being decoded
      double* p = t.values.data() + (b * t.H + h) * t.n * t.d;
      for (std::size_t e = 0; e < t.n * t.d; ++e) {
        if (!cu.empty()) seq = static_cast<std::size_t>(std::upper_bound(cu.begin(), cu.end(), e / t.d) - cu.begin()) - 1;
        const double s = ds.values.empty()       ? 1.0
                         : ds.values.size() == 1 ? ds.values[0]
                                                 : ds.values[seq * (t.H / group) + h / group];
        const double x = decode_fp8(static_cast<std::uint8_t>(p[e]), f);
        const double y = x * s;
        if (std::isfinite(y) && std::fma(x, s, -y) != 0.0)
          throw input_error(what + ": an FP8 value times the descale " + std::to_string(s) +
                            " is not exactly representable in binary64 (give the descale as a float32 value)");
        p[e] = y;
      }
    }
}

void check_uint8(const tensor& a, const std::string& what, bool fp8) {
  if (fp8 && a.type != dtype::u1) throw input_error(what + ": " + field("qkv_format") + " needs uint8 arrays (the FP8 bytes)");
  if (!fp8 && a.type == dtype::u1) throw input_error(what + ": a uint8 array needs " + field("qkv_format") + " e4m3fn|e5m2");
}

}  // namespace

void set_qkv(oracle_request& req, const tensor& q, const tensor& k, const tensor& v,
             const input_layout& lay) {
  const bool fp8 = lay.fp8 != fp8_format::none;
  check_uint8(q, field("q"), fp8);
  check_uint8(k, field("k"), fp8);
  check_uint8(v, field("v"), fp8);
  if (lay.layout == qkv_layout::thd) {
    if (lay.paged) throw input_error(field("block_table") + " is not supported with " + field("layout") + " thd (use bshd or bhsd queries)");
    if (lay.cu_seqlens_q.empty() || lay.cu_seqlens_k.empty())
      throw input_error(field("layout") + " thd needs " + field("cu_seqlens_q") + " and " + field("cu_seqlens_k"));
    if (lay.cu_seqlens_q.size() != lay.cu_seqlens_k.size())
      throw input_error(field("cu_seqlens_q") + " and " + field("cu_seqlens_k") + " describe different batch sizes (" +
                        std::to_string(lay.cu_seqlens_q.size() - 1) + " vs " + std::to_string(lay.cu_seqlens_k.size() - 1) + ")");
    req.Q = from_thd(q, lay.cu_seqlens_q, field("q"), field("cu_seqlens_q"));
    req.K = from_thd(k, lay.cu_seqlens_k, field("k"), field("cu_seqlens_k"));
    req.V = from_thd(v, lay.cu_seqlens_k, field("v"), field("cu_seqlens_k"));
    req.packed_cu_q = lay.cu_seqlens_q;
    req.packed_cu_k = lay.cu_seqlens_k;
    if (!lay.seqlens_k.empty()) throw input_error(field("seqlens_k") + " is not used with " + field("layout") + " thd (the key lengths come from " + field("cu_seqlens_k") + ")");
  } else {
    if (!lay.cu_seqlens_q.empty() || !lay.cu_seqlens_k.empty())
      throw input_error(field("cu_seqlens_q") + " / " + field("cu_seqlens_k") + " need " + field("layout") + " thd");
    if (lay.layout == qkv_layout::bshd) req.Q = from_bshd(q, field("q"));
    else req.Q = to_tensor4(q, field("q"));
    if (lay.paged) {
      if (lay.page_size == 0) throw input_error(field("page_size") + " must be >= 1");
      if (lay.table_rows != req.Q.B)
        throw input_error(field("block_table") + " has " + std::to_string(lay.table_rows) + " rows, the batch has " +
                          std::to_string(req.Q.B));
      std::vector<std::size_t> used(req.Q.B, lay.table_cols * lay.page_size);
      if (!lay.seqlens_k.empty()) {
        if (lay.seqlens_k.size() != req.Q.B)
          throw input_error(field("seqlens_k") + ": " + std::to_string(lay.seqlens_k.size()) + " lengths for a batch of " +
                            std::to_string(req.Q.B));
        for (std::size_t b = 0; b < used.size(); ++b) {
          if (lay.seqlens_k[b] > used[b])
            throw input_error(field("seqlens_k") + ": sequence " + std::to_string(b) + " has " + std::to_string(lay.seqlens_k[b]) +
                              " keys, more than the block table holds (" + std::to_string(used[b]) + ")");
          used[b] = lay.seqlens_k[b];
        }
      }
      req.K = from_pages(k, lay, req.Q.B, used, field("k"));
      req.V = from_pages(v, lay, req.Q.B, used, field("v"));
    } else {
      if (q.shape.size() != k.shape.size() || q.shape.size() != v.shape.size())
        throw input_error("Q, K and V must have the same number of dimensions (got " + std::to_string(q.shape.size()) +
                          ", " + std::to_string(k.shape.size()) + ", " + std::to_string(v.shape.size()) + ")");
      if (lay.layout == qkv_layout::bshd) {
        req.K = from_bshd(k, field("k"));
        req.V = from_bshd(v, field("v"));
      } else {
        req.K = to_tensor4(k, field("k"));
        req.V = to_tensor4(v, field("v"));
      }
    }
    req.seqlens_k = lay.seqlens_k;
  }
  if (fp8) {
    if (req.K.H == 0 || req.Q.H % req.K.H != 0)
      throw input_error("h_q = " + std::to_string(req.Q.H) + " is not a multiple of h_kv = " + std::to_string(req.K.H));
    const std::size_t group = req.Q.H / req.K.H;
    check_descale(lay.q_descale, req.sequences(), req.K.H, field("q_descale"));
    check_descale(lay.k_descale, req.sequences(), req.K.H, field("k_descale"));
    check_descale(lay.v_descale, req.sequences(), req.K.H, field("v_descale"));
    decode_tensor(req.Q, lay.fp8, lay.q_descale, group, req.packed_cu_q, field("q"));
    decode_tensor(req.K, lay.fp8, lay.k_descale, 1, req.packed_cu_k, field("k"));
    decode_tensor(req.V, lay.fp8, lay.v_descale, 1, req.packed_cu_k, field("v"));
  } else if (!lay.q_descale.values.empty() || !lay.k_descale.values.empty() || !lay.v_descale.values.empty()) {
    throw input_error(field("q_descale") + " / " + field("k_descale") + " / " + field("v_descale") + " need " + field("qkv_format"));
  }
}

std::size_t output_layout::output_row(std::size_t r) const {
  if (!row_map.empty()) return row_map[r];
  const std::size_t i = r % nq, h = (r / nq) % H, b = r / (nq * H);
  switch (layout) {
    case qkv_layout::bshd: return (b * nq + i) * H + h;
    case qkv_layout::thd:
      if (cu_q[b] + i >= cu_q[b + 1]) return none;
      return (cu_q[b] + i) * H + h;
    default: return r;
  }
}

std::size_t output_layout::lse_index(std::size_t r) const {
  if (layout != qkv_layout::thd) return r;
  const std::size_t i = r % nq, h = (r / nq) % H, b = r / (nq * H);
  if (cu_q[b] + i >= cu_q[b + 1]) return none;
  return h * total_q + cu_q[b] + i;
}

std::vector<double> output_layout::output_to_external(const std::vector<double>& internal) const {
  std::vector<double> out(!row_map.empty() ? external_rows * dv
                          : layout == qkv_layout::thd ? total_q * H * dv
                                                      : internal.size(),
                          0.0);
  for (std::size_t r = 0; r < B * H * nq; ++r) {
    const std::size_t x = output_row(r);
    if (x == none) continue;
    std::copy(internal.begin() + static_cast<std::ptrdiff_t>(r * dv), internal.begin() + static_cast<std::ptrdiff_t>((r + 1) * dv),
              out.begin() + static_cast<std::ptrdiff_t>(x * dv));
  }
  return out;
}

std::vector<double> output_layout::output_to_internal(const std::vector<double>& external) const {
  std::vector<double> in(B * H * nq * dv, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t r = 0; r < B * H * nq; ++r) {
    const std::size_t x = output_row(r);
    if (x == none) continue;
    std::copy(external.begin() + static_cast<std::ptrdiff_t>(x * dv), external.begin() + static_cast<std::ptrdiff_t>((x + 1) * dv),
              in.begin() + static_cast<std::ptrdiff_t>(r * dv));
  }
  return in;
}

std::vector<double> output_layout::lse_to_external(const std::vector<double>& internal) const {
  std::vector<double> out(layout == qkv_layout::thd ? total_q * H : internal.size(), 0.0);
  for (std::size_t r = 0; r < B * H * nq; ++r) {
    const std::size_t x = lse_index(r);
    if (x != none) out[x] = internal[r];
  }
  return out;
}

std::vector<double> output_layout::lse_to_internal(const std::vector<double>& external) const {
  std::vector<double> in(B * H * nq, std::numeric_limits<double>::quiet_NaN());
  for (std::size_t r = 0; r < B * H * nq; ++r) {
    const std::size_t x = lse_index(r);
    if (x != none) in[r] = external[x];
  }
  return in;
}

output_layout make_output_layout(const oracle_request& req, const input_layout& lay, const std::vector<std::size_t>& q_shape) {
  output_layout o;
  o.layout = lay.layout;
  o.B = req.Q.B;
  o.H = req.Q.H;
  o.nq = req.Q.n;
  o.dv = req.V.d;
  switch (lay.layout) {
    case qkv_layout::thd:  // packed internally too (1, H, t): one run of t tokens
      o.total_q = q_shape[0];
      o.cu_q = {0, o.total_q};
      o.out_shape = {o.total_q, o.H, o.dv};
      o.lse_shape = {o.H, o.total_q};
      break;
    case qkv_layout::bshd:
      o.out_shape = {o.B, o.nq, o.H, o.dv};
      o.lse_shape = {o.B, o.H, o.nq};
      break;
    default:
      o.out_shape.assign(q_shape.begin(), q_shape.end() - 1);
      o.out_shape.push_back(o.dv);
      o.lse_shape.assign(q_shape.begin(), q_shape.end() - 1);
      break;
  }
  return o;
}

std::vector<std::size_t> output_shape(const tensor& q, const tensor& v) {
  std::vector<std::size_t> s(q.shape.begin(), q.shape.end() - 1);
  s.push_back(v.shape.back());
  return s;
}

void check_candidate_array(const tensor& c, const std::vector<std::size_t>& out_shape, const std::string& file) {
  if (c.shape != out_shape) {
    std::string s;
    for (auto x : out_shape) s += (s.empty() ? "" : ", ") + std::to_string(x);
    std::string got;
    for (auto x : c.shape) got += (got.empty() ? "" : ", ") + std::to_string(x);
    throw input_error(file + ": shape (" + got + ") does not match the expected shape (" + s + ")");
  }
  if (c.type == dtype::b1) throw input_error(file + ": a candidate must be a float array");
}

void check_attention_array(const tensor& a, const tensor& q, const tensor& k,
                           const std::string& file) {
  std::vector<std::size_t> want(q.shape.begin(), q.shape.end() - 1);
  want.push_back(k.shape[k.shape.size() - 2]);
  if (a.shape != want) throw input_error(file + ": attention candidate shape must be (…, n_q, n_k)");
}

tensor target_array(const std::vector<double>& values, target_format t, const std::vector<std::size_t>& shape) {
  tensor ref;
  ref.type = t == target_format::binary64 ? dtype::f8 : t == target_format::binary16 ? dtype::f2 : dtype::f4;
  ref.shape = shape;
  ref.values = values;
  ref.allow_nonfinite = true;
  return ref;
}

tensor reference_array(const oracle_result& r, target_format t, const std::vector<std::size_t>& shape) {
  return target_array(r.reference, t, shape);
}

namespace {

// Paged dK / dV: internal row (b, h, j) -> external row (T[b, j / P]·P + j % P)·H + h for the keys
// sequence b uses (j < seqlens_k[b], or the whole block table).
void map_pages(const oracle_request& req, const input_layout& lay, const std::vector<std::size_t>& shape,
               output_layout& o) {
  const std::size_t P = lay.page_size, H = o.H, n = o.nq;
  o.external_rows = shape.at(0) * shape.at(1) * H;
  o.row_map.assign(o.B * H * n, output_layout::none);
  std::vector<std::uint8_t> taken(o.external_rows, 0);
  for (std::size_t b = 0; b < o.B; ++b) {
    const std::size_t used = req.seqlens_k.empty() ? lay.table_cols * P : req.seqlens_k[b];
    for (std::size_t j = 0; j < used; ++j) {
      const auto page = static_cast<std::size_t>(lay.block_table[b * lay.table_cols + j / P]);  // checked by set_qkv
      for (std::size_t h = 0; h < H; ++h) {
        const std::size_t x = (page * P + j % P) * H + h;
        if (taken[x])
          throw input_error(field("block_table") + ": page " + std::to_string(page) + " slot " + std::to_string(j % P) +
                            " is used twice (sequence " + std::to_string(b) +
                            " among them); the backward pass does not sum gradients over shared pages yet");
        taken[x] = 1;
        o.row_map[(b * H + h) * n + j] = x;
      }
    }
  }
}

}  // namespace

output_layout make_gradient_layout(const oracle_request& req, const input_layout& lay, gradient_of which,
                                   const std::vector<std::size_t>& shape) {
  output_layout o;
  o.layout = lay.layout;
  o.B = req.Q.B;
  o.H = which == gradient_of::q ? req.Q.H : req.K.H;
  o.nq = which == gradient_of::q ? req.Q.n : req.K.n;
  o.dv = which == gradient_of::v ? req.V.d : req.Q.d;
  o.out_shape = shape;
  if (lay.layout == qkv_layout::thd) {  // packed internally too (1, H, t)
    o.total_q = shape[0];
    o.cu_q = {0, o.total_q};
  }
  if (which != gradient_of::q && lay.paged) map_pages(req, lay, shape, o);
  return o;
}

namespace {

void check_broadcast(std::size_t m, std::size_t full, const std::string& what, const char* dim) {
  if (m != 1 && m != full)
    throw input_error(what + " does not broadcast: its " + dim + " dimension is " + std::to_string(m) +
                      ", expected 1 or " + std::to_string(full));
}

// Packed sequences (oracle_request::packed_cu_q): offsets from 0, monotone, ending at the tokens given.
void validate_packed(const oracle_request& req) {
  const auto& cq = req.packed_cu_q;
  const auto& ck = req.packed_cu_k;
  if (cq.size() != ck.size() || cq.size() < 2)
    throw input_error("packed sequences: " + std::to_string(cq.size()) + " query and " + std::to_string(ck.size()) +
                      " key offsets (S + 1 each, S >= 1)");
  if (req.Q.B != 1 || req.K.B != 1 || req.V.B != 1) throw input_error("packed sequences: Q, K and V hold one batch of tokens");
  if (cq.front() != 0 || ck.front() != 0 || cq.back() != req.Q.n || ck.back() != req.K.n)
    throw input_error("packed sequences: the offsets must run from 0 to the tokens given (" + std::to_string(req.Q.n) +
                      " queries, " + std::to_string(req.K.n) + " keys)");
  for (std::size_t s = 1; s < cq.size(); ++s)
    if (cq[s] < cq[s - 1] || ck[s] < ck[s - 1]) throw input_error("packed sequences: the offsets are not monotone");
  if (!req.seqlens_q.empty() || !req.seqlens_k.empty())
    throw input_error("packed sequences take their lengths from the offsets, not from sequence lengths");
  if (req.M.nk != 0 || req.variant.has_bias || req.variant.has_dropout)
    throw input_error("packed sequences (" + field("layout") + " thd): no explicit mask, bias or dropout mask");
}

void validate_lengths(const oracle_request& req) {
  const auto& Q = req.Q;
  const auto& K = req.K;
  if (req.packed() || !req.packed_cu_k.empty()) return validate_packed(req);
  if (!req.seqlens_q.empty() && req.seqlens_q.size() != Q.B)
    throw input_error("query sequence lengths: " + std::to_string(req.seqlens_q.size()) + " given for a batch of " +
                      std::to_string(Q.B));
  if (!req.seqlens_k.empty() && req.seqlens_k.size() != Q.B)
    throw input_error("key sequence lengths: " + std::to_string(req.seqlens_k.size()) + " given for a batch of " +
                      std::to_string(Q.B));
  for (std::size_t b = 0; b < req.seqlens_q.size(); ++b)
    if (req.seqlens_q[b] > Q.n)
      throw input_error("query sequence " + std::to_string(b) + " has length " + std::to_string(req.seqlens_q[b]) +
                        " > " + std::to_string(Q.n));
  for (std::size_t b = 0; b < req.seqlens_k.size(); ++b)
    if (req.seqlens_k[b] > K.n)
      throw input_error(field("seqlens_k") + ": sequence " + std::to_string(b) + " has " + std::to_string(req.seqlens_k[b]) +
                        " keys, more than the " + std::to_string(K.n) + " given");
}

void validate_variant(const oracle_request& req) {
  const auto& v = req.variant;
  const std::size_t B = req.sequences(), H = req.Q.H, nq = req.Q.n, nk = req.K.n;
  if (v.window_left < -1 || v.window_right < -1)
    throw input_error(field("window") + ": each side must be >= -1 (-1 = unbounded), got " + std::to_string(v.window_left) + "," +
                      std::to_string(v.window_right));
  if (!v.alibi_slopes.empty() && v.alibi_slopes.size() != H && v.alibi_slopes.size() != B * H)
    throw input_error(field("alibi_slopes") + ": " + std::to_string(v.alibi_slopes.size()) + " slopes, expected h_q = " +
                      std::to_string(H) + " or b·h_q = " + std::to_string(B * H));
  if (v.alibi_key_position && v.alibi_slopes.empty())
    throw input_error(field("alibi") + " flash2 needs " + field("alibi_slopes"));
  if (v.alibi_key_position && req.mask != mask_kind::causal && !v.causal_bottom_right)
    throw input_error(field("alibi") + " flash2 is FlashAttention 2's causal form (+slope j): it needs a causal mask "
                      "(without one the kernel adds the distance form, " + field("alibi") + " distance)");
  if (v.chunk > (std::size_t{1} << 62)) throw input_error(field("attention_chunk") + " must be at most 2^62 (0: no chunks)");
  if (v.sink_tokens > (std::size_t{1} << 62)) throw input_error(field("sink_token_length") + " must be at most 2^62");
  if (!v.key_leftpad.empty()) {
    if (req.packed())
      throw input_error(field("key_leftpad") + " is not used with " + field("layout") + " thd (" + field("cu_seqlens_k") + " gives each sequence's keys)");
    if (v.key_leftpad.size() != B)
      throw input_error(field("key_leftpad") + ": " + std::to_string(v.key_leftpad.size()) + " offsets for a batch of " + std::to_string(B));
    for (std::size_t b = 0; b < B; ++b)
      if (v.key_leftpad[b] > req.seq_k(b))
        throw input_error(field("key_leftpad") + ": sequence " + std::to_string(b) + " starts at key " + std::to_string(v.key_leftpad[b]) +
                          ", past its " + std::to_string(req.seq_k(b)) + " keys");
    if (v.alibi_key_position)
      throw input_error(field("alibi") + " flash2 is not defined with " + field("key_leftpad") + " (use " + field("alibi") + " distance)");
  }
  if (!v.sink.empty() && v.sink.size() != H)
    throw input_error(field("sink") + ": " + std::to_string(v.sink.size()) + " logits, expected one per query head (" +
                      std::to_string(H) + ")");
  if (v.has_bias) {
    const auto& b = v.bias;
    check_broadcast(b.mb, B, field("bias"), "batch");
    check_broadcast(b.mh, H, field("bias"), "head");
    check_broadcast(b.mq, nq, field("bias"), "query");
    check_broadcast(b.mk, nk, field("bias"), "key");
    if (b.values.size() != b.mb * b.mh * b.mq * b.mk) throw input_error(field("bias") + ": values do not match its shape");
  }
  if (v.has_dropout) {
    const auto& m = v.dropout_keep;
    if (m.nq != nq || m.nk != nk || (m.mb != 1 && m.mb != B) || (m.mh != 1 && m.mh != H))
      throw input_error(field("dropout_mask") + ": shape (" + std::to_string(m.mb) + ", " + std::to_string(m.mh) + ", " +
                        std::to_string(m.nq) + ", " + std::to_string(m.nk) + ") does not match (b, h_q, n_q, n_k) = (" +
                        std::to_string(B) + ", " + std::to_string(H) + ", " + std::to_string(nq) + ", " +
                        std::to_string(nk) + ")");
    if (m.allowed.size() != m.mb * m.mh * m.nq * m.nk) throw input_error(field("dropout_mask") + ": values do not match its shape");
  }
}

// The exact numbers of a request (build_request refuses them first, quoting the caller's text).
void check_exact_numbers(const oracle_request& req) {
  auto too_large = [](const mpq_rational& x) {
    return mpz_sizeinbase(mpq_numref(x.backend().data()), 2) > 4000 || mpz_sizeinbase(mpq_denref(x.backend().data()), 2) > 4000;
  };
  if (!req.scale.inv_sqrt_d && too_large(req.scale.rational))
    throw input_error(field("scale") + " is too large or too small (more than 4000 bits)");
  if (const auto& C = req.variant.softcap) {
    if (!(*C > 0)) throw input_error(field("softcap") + " must be > 0 (got " + C->str() + ")");
    if (too_large(*C)) throw input_error(field("softcap") + " is too large or too small (more than 4000 bits)");
  }
  const mpq_rational& P = req.variant.dropout_p;
  if (req.variant.has_dropout && (!(P >= 0) || !(P < 1)))
    throw input_error(field("dropout_p") + " must be in [0, 1) (got " + P.str() + ")");
}

}  // namespace

tensor reference_array(const oracle_result& r, target_format t, const output_layout& lay) {
  tensor ref = reference_array(r, t, lay.out_shape);
  ref.values = lay.output_to_external(r.reference);
  return ref;
}

tensor lse_array(const oracle_result& r, const output_layout& lay) {
  tensor a = reference_array(r, r.lse_target, lay.lse_shape);
  a.values = lay.lse_to_external(r.lse_reference);
  return a;
}

std::vector<double> to_alibi_slopes(const tensor& a, const std::string& what) {
  if (a.type == dtype::b1 || a.type == dtype::u1) throw input_error(what + ": slopes must be a float array");
  if (a.shape.size() != 1 && a.shape.size() != 2)
    throw input_error(what + ": shape " + shape_text(a.shape) + " is not (h_q,) or (b, h_q)");
  return a.values;
}

score_bias to_score_bias(const tensor& a, const std::string& what) {
  if (a.type == dtype::b1 || a.type == dtype::u1) throw input_error(what + ": a bias must be a float array");
  if (a.shape.empty() || a.shape.size() > 4)
    throw input_error(what + ": shape " + shape_text(a.shape) + " does not broadcast to (b, h_q, n_q, n_k)");
  std::vector<std::size_t> s(4 - a.shape.size(), 1);
  s.insert(s.end(), a.shape.begin(), a.shape.end());
  score_bias b;
  b.mb = s[0];
  b.mh = s[1];
  b.mq = s[2];
  b.mk = s[3];
  b.values = a.values;
  return b;
}

std::vector<std::pair<std::size_t, std::size_t>> unit_ranges(const std::string& what, const std::vector<std::size_t>& shape,
                                                             std::size_t B, std::size_t H, std::size_t b, std::size_t h0,
                                                             std::size_t h1) {
  if (b >= B || h0 >= h1 || h1 > H) throw input_error("unit_ranges: batch " + std::to_string(b) + ", heads [" + std::to_string(h0) +
                                                      ", " + std::to_string(h1) + ") outside " + std::to_string(B) + " x " + std::to_string(H));
  const std::string name = field(what);
  // The roles of the dimensions, right-aligned: 'b' batch, 'h' query head, '*' any (kept whole).
  std::string roles;
  if (what == "bias" || what == "mask" || what == "dropout_mask") {
    if (shape.empty() || shape.size() > 4)
      throw input_error(name + ": shape " + shape_text(shape) + " does not broadcast to (b, h_q, n_q, n_k)");
    roles = std::string("bh**").substr(4 - shape.size());
  } else if (what == "alibi_slopes") {
    if (shape.size() != 1 && shape.size() != 2) throw input_error(name + ": shape " + shape_text(shape) + " is not (h_q,) or (b, h_q)");
    roles = shape.size() == 1 ? "h" : "bh";
  } else if (what == "sink" || what == "seqlens_k" || what == "key_leftpad") {
    if (shape.size() != 1) throw input_error(name + ": shape " + shape_text(shape) + (what == "sink" ? " is not (h_q,)" : " is not (b,)"));
    roles = what == "sink" ? "h" : "b";
  } else {
    throw input_error("unit_ranges: no per-unit input named '" + one_line(what, 60) + "'");
  }
  std::vector<std::pair<std::size_t, std::size_t>> out;
  for (std::size_t i = 0; i < shape.size(); ++i) {
    const std::size_t m = shape[i];
    const char role = roles[i];
    if ((what == "seqlens_k" || what == "key_leftpad") && m != B)  // one per batch: no broadcasting
      throw input_error(name + ": " + std::to_string(m) + " lengths for a batch of " + std::to_string(B));
    if (role == '*' || m == 1) {
      out.emplace_back(0, m);
      continue;
    }
    check_broadcast(m, role == 'b' ? B : H, name, role == 'b' ? "batch" : "head");
    out.push_back(role == 'b' ? std::pair<std::size_t, std::size_t>{b, b + 1} : std::pair<std::size_t, std::size_t>{h0, h1});
  }
  return out;
}

bool_mask to_keep_mask(const tensor& a, const std::string& what) {
  if (a.type != dtype::b1 && a.type != dtype::u1)
    throw input_error(what + ": a dropout keep-mask must be a bool (or uint8 0/1) array");
  if (a.shape.empty() || a.shape.size() > 4)
    throw input_error(what + ": shape " + shape_text(a.shape) + " is not (b, h_q, n_q, n_k)");
  std::vector<std::size_t> s(4 - a.shape.size(), 1);
  s.insert(s.end(), a.shape.begin(), a.shape.end());
  bool_mask m;
  m.mb = s[0];
  m.mh = s[1];
  m.nq = s[2];
  m.nk = s[3];
  m.allowed.resize(a.values.size());
  for (std::size_t i = 0; i < a.values.size(); ++i) {
    if (a.values[i] != 0 && a.values[i] != 1) throw input_error(what + ": entries must be 0 or 1");
    m.allowed[i] = a.values[i] != 0;
  }
  return m;
}

descale parse_descale(const std::string& text, const std::string& what) {
  mpq_rational x;
  try {
    x = number_traits<mpq_rational>::from_string(text);
  } catch (const input_error& e) {
    throw input_error(what + ": " + e.what());
  }
  const double v = static_cast<double>(x);
  if (!std::isfinite(v) || mpq_rational(v) != x)
    throw input_error(what + " '" + one_line(text) + "' is not exactly representable in binary64 (give it as a .npy float32 value)");
  if (!(v > 0)) throw input_error(what + ": every descale factor must be finite and > 0");
  return descale{{v}};
}

descale descale_from_array(const tensor& a, const std::string& what) {
  if (a.type == dtype::b1 || a.type == dtype::u1) throw input_error(what + ": must be a float array");
  if (a.shape.size() > 2) throw input_error(what + ": shape " + shape_text(a.shape) + " is not (), (1,) or (b, h_kv)");
  for (double v : a.values)
    if (!std::isfinite(v) || !(v > 0)) throw input_error(what + ": every descale factor must be finite and > 0");
  return descale{a.values};
}

void validate_request(const oracle_request& req) {
  check_tensor(req.Q, "Q");
  check_tensor(req.K, "K");
  check_tensor(req.V, "V");
  check_exact_numbers(req);
  if (!req.row_sample.empty() && req.row_sample.size() != req.Q.B * req.Q.H * req.Q.n)
    throw input_error("a row sample needs one flag per query row (" + std::to_string(req.Q.B * req.Q.H * req.Q.n) + "), got " +
                      std::to_string(req.row_sample.size()));
  const auto& Q = req.Q;
  const auto& K = req.K;
  const auto& V = req.V;
  if (K.B != Q.B || V.B != Q.B) throw input_error("Q, K and V must have the same batch dimension");
  if (V.H != K.H) throw input_error("K and V must have the same number of heads");
  if (Q.H % K.H != 0)
    throw input_error("h_q = " + std::to_string(Q.H) + " is not a multiple of h_kv = " + std::to_string(K.H) +
                      " (grouped-query attention needs h_q = g·h_kv)");
  if (K.d != Q.d)
    throw input_error("Q and K differ in feature dimension (" + std::to_string(Q.d) + " vs " + std::to_string(K.d) + ")");
  if (V.n != K.n)
    throw input_error("K and V differ in sequence length (" + std::to_string(K.n) + " vs " + std::to_string(V.n) + ")");
  if (req.max_bits < internal::first_mpfi_bits || req.max_bits > internal::cap_limit)
    throw input_error("precision cap " + std::to_string(req.max_bits) + " bits is out of range [" +
                      std::to_string(internal::first_mpfi_bits) + ", " + std::to_string(internal::cap_limit) +
                      "] (precision too low?)");
  if (req.mask == mask_kind::explicit_mask || req.M.nk != 0) {
    const auto& M = req.M;
    if (M.nq != Q.n || M.nk != K.n)
      throw input_error("mask shape (..., " + std::to_string(M.nq) + ", " + std::to_string(M.nk) +
                        ") does not match (n_q, n_k) = (" + std::to_string(Q.n) + ", " + std::to_string(K.n) + ")");
    if ((M.mb != 1 && M.mb != Q.B) || (M.mh != 1 && M.mh != Q.H))
      throw input_error("mask leading dimensions must be 1 or equal to the batch and head dimensions");
    if (M.allowed.size() != M.mb * M.mh * M.nq * M.nk) throw input_error("mask values do not match its shape");
  }
  validate_lengths(req);
  validate_variant(req);
  // NaN/Inf inputs are judged per row (only values an allowed score uses count: P14).
}

}  // namespace attncert::oracle
