// lib/src/oracle/spec.cpp — an oracle call as its user describes it, into one validated request.
#include "attncert/oracle/spec.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <tuple>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/number/traits.hpp"

namespace attncert::oracle {

namespace {

// An exact number a caller gave as text (a scale, a softcap, a dropout probability): errors name the field.
mpq_rational exact_field(const std::string& text, const char* name) {
  try {
    return number_traits<mpq_rational>::from_string(text);
  } catch (const input_error& e) {
    throw input_error(field(name) + ": " + e.what());
  }
}

// A scale or softcap whose numerator or denominator has more than 4000 bits (1e99999) is refused:
// the MPFI stage works at a few thousand bits at most.
bool too_large(const mpq_rational& x) {
  return mpz_sizeinbase(mpq_numref(x.backend().data()), 2) > 4000 || mpz_sizeinbase(mpq_denref(x.backend().data()), 2) > 4000;
}

// The layout options: offsets, lengths, block table, FP8 format and descales.
input_layout make_input_layout(const attention_spec& s) {
  input_layout lay;
  lay.layout = parse_layout(s.layout);
  if (s.cu_seqlens_q) lay.cu_seqlens_q = to_index_vector(*s.cu_seqlens_q, field("cu_seqlens_q"));
  if (s.cu_seqlens_k) lay.cu_seqlens_k = to_index_vector(*s.cu_seqlens_k, field("cu_seqlens_k"));
  if (s.seqlens_k) lay.seqlens_k = to_index_vector(*s.seqlens_k, field("seqlens_k"));
  if (s.block_table || s.page_size != 0) {
    if (!s.block_table || s.page_size == 0) throw input_error("paged K/V needs both " + field("block_table") + " and " + field("page_size") + " >= 1");
    const tensor& t = *s.block_table;
    if ((t.type != dtype::i4 && t.type != dtype::i8) || t.shape.size() != 2)
      throw input_error(field("block_table") + ": must be a 2-D int32/int64 array (b, max_pages)");
    lay.paged = true;
    lay.page_size = s.page_size;
    lay.table_rows = t.shape[0];
    lay.table_cols = t.shape[1];
    for (double x : t.values) lay.block_table.push_back(static_cast<long long>(x));  // int32/int64 read exactly: < 2^63
    lay.trim_pages = s.seqlens_k.has_value() && !s.bias && !s.mask && !s.dropout_mask;
  }
  lay.fp8 = parse_fp8_format(s.qkv_format);
  const std::tuple<const std::string&, const std::optional<tensor>&, descale&, const char*> descales[] = {
      {s.q_descale, s.q_descale_array, lay.q_descale, "q_descale"},
      {s.k_descale, s.k_descale_array, lay.k_descale, "k_descale"},
      {s.v_descale, s.v_descale_array, lay.v_descale, "v_descale"}};
  for (const auto& [text, array, out, name] : descales) {
    if (!text.empty() && array) throw input_error(field(name) + ": give a number or an array, not both");
    if (!text.empty()) out = parse_descale(text, field(name));
    if (array) out = descale_from_array(*array, field(name));
  }
  return lay;
}

// The score modifiers, sink, dropout and LSE (shapes are checked by the converters).
void set_variant(const attention_spec& s, oracle_request& req) {
  attention_variant& v = req.variant;
  if (!s.window.empty()) parse_window(s.window, v);
  if (!s.softcap.empty()) {
    const mpq_rational C = exact_field(s.softcap, "softcap");
    if (!(C > 0)) throw input_error(field("softcap") + " must be > 0 (got '" + one_line(s.softcap) + "')");
    if (too_large(C)) throw input_error(field("softcap") + " '" + one_line(s.softcap) + "' is too large or too small (more than 4000 bits)");
    v.softcap = C;
  }
  if (s.alibi_slopes) {
    // The shape, not the element count: (2, 1) holds b·h_q = 2 slopes for b = 1, h_q = 2 but is
    // (b = 2, h_q = 1).
    const auto& sh = s.alibi_slopes->shape;
    const bool per_head = sh.size() == 1 && sh[0] == req.Q.H;
    const bool per_batch_head = sh.size() == 2 && sh[0] == req.sequences() && sh[1] == req.Q.H;
    std::string shape = "(";
    for (std::size_t i = 0; i < sh.size(); ++i) shape += (i ? ", " : "") + std::to_string(sh[i]);
    shape += sh.size() == 1 ? ",)" : ")";
    if (!per_head && !per_batch_head)
      throw input_error(field("alibi_slopes") + ": shape " + shape + " is neither (h_q,) = (" + std::to_string(req.Q.H) +
                        ",) nor (b, h_q) = (" + std::to_string(req.sequences()) + ", " + std::to_string(req.Q.H) + ")");
    v.alibi_slopes = to_alibi_slopes(*s.alibi_slopes, field("alibi_slopes"));
  }
  if (s.alibi == "flash2") v.alibi_key_position = true;
  else if (s.alibi != "distance") throw input_error(field("alibi") + " must be distance or flash2 (got '" + one_line(s.alibi) + "')");
  if (s.bias) {
    v.has_bias = true;
    v.bias = to_score_bias(*s.bias, field("bias"));
  }
  if (s.sink && s.sink_off_by_one) throw input_error("give " + field("sink") + " or " + field("sink_off_by_one") + ", not both");
  if (s.sink) {
    if (s.sink->shape.size() != 1) throw input_error(field("sink") + ": must be one-dimensional (h_q,)");
    v.sink = s.sink->values;
  }
  if (s.sink_off_by_one) v.sink.assign(req.Q.H, 0.0);
  v.sink_tokens = s.sink_token_length;
  v.chunk = s.attention_chunk;
  if (s.key_leftpad) {
    if (s.key_leftpad->shape.size() != 1) throw input_error(field("key_leftpad") + ": must be one-dimensional (b,)");
    v.key_leftpad = to_index_vector(*s.key_leftpad, field("key_leftpad"));
  }
  if (s.dropout_mask.has_value() != !s.dropout_p.empty())
    throw input_error("dropout needs both " + field("dropout_mask") + " and " + field("dropout_p"));
  if (s.dropout_mask) {
    v.has_dropout = true;
    v.dropout_keep = to_keep_mask(*s.dropout_mask, field("dropout_mask"));
    v.dropout_p = exact_field(s.dropout_p, "dropout_p");
    if (!(v.dropout_p >= 0) || !(v.dropout_p < 1))
      throw input_error(field("dropout_p") + " must be in [0, 1) (got '" + one_line(s.dropout_p) + "')");
  }
  if (s.want_lse) {
    req.lse.want = true;
    if (s.lse_base != "e" && s.lse_base != "2") throw input_error(field("lse_base") + " must be e or 2 (got '" + s.lse_base + "')");
    req.lse.empty_value = parse_empty_lse(s.empty_lse);
    req.lse.base2 = s.lse_base == "2";
    req.lse.target = !s.lse_target.empty()                 ? parse_target(s.lse_target)
                     : req.target == target_format::binary64 ? target_format::binary64
                                                             : target_format::binary32;
  }
}

}  // namespace

double parse_empty_lse(const std::string& text) {
  constexpr double inf = std::numeric_limits<double>::infinity();
  if (text == "-inf") return -inf;
  if (text == "+inf" || text == "inf") return inf;
  if (text == "0") return 0.0;
  if (text == "nan" || text == "NaN") return std::numeric_limits<double>::quiet_NaN();
  throw input_error(field("empty_lse") + " must be -inf, +inf, 0 or nan (got '" + one_line(text) + "')");
}

std::string empty_lse_text(double v) {
  return std::isnan(v) ? "nan" : v == 0 ? "0" : v > 0 ? "+inf" : "-inf";
}

void parse_window(const std::string& w, attention_variant& v) {
  const auto comma = w.find(',');
  auto parse_side = [&](const std::string& t) {
    std::size_t used = 0;
    long long x = 0;
    try {
      x = std::stoll(t, &used);
    } catch (const std::exception&) {
      used = 0;
    }
    if (t.empty() || used != t.size()) throw input_error(field("window") + " must be LEFT,RIGHT with integers >= -1 (got '" + w + "')");
    if (x < -1) throw input_error(field("window") + ": each side must be >= -1 (-1 = unbounded), got '" + w + "'");
    return x;
  };
  if (comma == std::string::npos) throw input_error(field("window") + " must be LEFT,RIGHT with integers >= -1 (got '" + w + "')");
  v.window_left = parse_side(w.substr(0, comma));
  v.window_right = parse_side(w.substr(comma + 1));
}

namespace {

std::string shape_text(const std::vector<std::size_t>& sh) {
  std::string t = "(";
  for (std::size_t i = 0; i < sh.size(); ++i) t += (i ? ", " : "") + std::to_string(sh[i]);
  return t + (sh.size() == 1 ? ",)" : ")");
}

// a and b side by side along their last axis (their other dimensions equal): exact.
tensor concat_last(const tensor& a, const tensor& b) {
  tensor c;
  c.type = a.type == b.type ? a.type : dtype::f8;
  c.allow_nonfinite = a.allow_nonfinite || b.allow_nonfinite;
  c.shape = a.shape;
  const std::size_t da = a.shape.back(), db = b.shape.back(), rows = da ? a.values.size() / da : 0;
  c.shape.back() = da + db;
  c.values.reserve(a.values.size() + b.values.size());
  for (std::size_t r = 0; r < rows; ++r) {
    c.values.insert(c.values.end(), a.values.begin() + static_cast<std::ptrdiff_t>(r * da), a.values.begin() + static_cast<std::ptrdiff_t>((r + 1) * da));
    c.values.insert(c.values.end(), b.values.begin() + static_cast<std::ptrdiff_t>(r * db), b.values.begin() + static_cast<std::ptrdiff_t>((r + 1) * db));
  }
  return c;
}

// FlashAttention 3's qv: scale·(q·k + qv·v) is the attention of Q' = [q | qv] and K' = [k | v] (d' = d + d_v, so the
// default scale 1/sqrt(d') is FlashAttention's 1/sqrt(d + d_v)), the same V: set_qkv with the joined arrays.
void set_qkv_with_qv(oracle_request& req, const attention_spec& s, const input_layout& lay) {
  const tensor& qv = *s.qv;
  if (lay.fp8 != fp8_format::none) throw input_error(field("qv") + " is not supported with FP8 inputs (" + field("qkv_format") + ")");
  if (s.q.shape.empty() || s.k.shape.empty() || s.v.shape.empty() || s.q.shape.size() != qv.shape.size() ||
      s.k.shape.size() != s.v.shape.size())
    throw input_error(field("qv") + ": shape " + shape_text(qv.shape) + " is not q's " + shape_text(s.q.shape) + " with v's feature size");
  std::vector<std::size_t> want = s.q.shape;
  want.back() = s.v.shape.back();
  if (qv.shape != want)
    throw input_error(field("qv") + ": shape " + shape_text(qv.shape) + ", expected q's leading dimensions and v's feature size " + shape_text(want));
  if (!std::equal(s.k.shape.begin(), s.k.shape.end() - 1, s.v.shape.begin()))
    throw input_error(field("qv") + " needs k and v with the same keys: k " + shape_text(s.k.shape) + ", v " + shape_text(s.v.shape));
  set_qkv(req, concat_last(s.q, qv), concat_last(s.k, s.v), s.v, lay);
}

}  // namespace

built_request build_request(const attention_spec& s) {
  built_request b;
  b.lay = make_input_layout(s);
  oracle_request& req = b.req;
  if (s.qv) set_qkv_with_qv(req, s, b.lay);
  else set_qkv(req, s.q, s.k, s.v, b.lay);
  if (s.causal) req.mask = mask_kind::causal;
  if (s.causal_bottom_right) req.variant.causal_bottom_right = true;
  if (s.mask) {
    if (b.lay.layout == qkv_layout::thd) throw input_error(field("mask") + " is not supported with " + field("layout") + " thd");
    if (req.mask == mask_kind::none) req.mask = mask_kind::explicit_mask;
    req.M = to_bool_mask(*s.mask, s.mask_name);
  }
  if (b.lay.layout == qkv_layout::thd && (s.bias || s.dropout_mask))
    throw input_error(field("bias") + " and " + field("dropout_mask") + " are not supported with " + field("layout") + " thd (use bhsd/bshd with " + field("seqlens_k") + ")");
  if (!s.scale.empty()) {
    req.scale.inv_sqrt_d = false;
    req.scale.rational = exact_field(s.scale, "scale");
    if (too_large(req.scale.rational))
      throw input_error(field("scale") + " '" + one_line(s.scale) + "' is too large or too small (more than 4000 bits)");
  }
  req.empty_rows = parse_empty_row_policy(s.empty_rows);
  req.target = parse_target(s.target);
  set_variant(s, req);
  req.max_bits = s.max_bits;
  req.threads = s.threads;
  if (!(s.max_seconds >= 0) || s.max_seconds > 1e7)
    throw input_error(field("max_seconds") + " must be in [0, 1e7] (0: no limit), got " + std::to_string(s.max_seconds));
  req.max_seconds = s.max_seconds;
  req.allow_nonfinite = s.allow_nonfinite;
  validate_request(req);
  b.olay = make_output_layout(req, b.lay, s.q.shape);
  return b;
}

std::vector<output_layout> gradient_layouts(const attention_spec& s, const built_request& b) {
  if (s.qv) throw input_error(field("qv") + " has no backward here (FlashAttention's backward takes no qv): the gradients are not computed");
  return {make_gradient_layout(b.req, b.lay, gradient_of::q, s.q.shape),
          make_gradient_layout(b.req, b.lay, gradient_of::k, s.k.shape),
          make_gradient_layout(b.req, b.lay, gradient_of::v, s.v.shape)};
}

}  // namespace attncert::oracle
