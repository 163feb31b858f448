// Tests of oracle/request.hpp: FP8 decoding (all 256 bytes of both formats against the OCP
// definitions, written here independently), the layouts (bshd, packed thd with zero-length
// sequences, paged K/V) gathered into (B, H, n, d) and the output / LSE layouts mapped back,
// descales, and the one-line errors of bad layouts.
#define BOOST_TEST_MODULE oracle_request
#include <boost/test/unit_test.hpp>
#include <cmath>
#include <cstdint>
#include <string>

#include "../support.hpp"
#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/oracle/request.hpp"

using namespace attncert;
using namespace attncert::oracle;

namespace {

// The OCP 8-bit formats from their definitions: sign, E exponent bits with bias, M mantissa bits.
// e4m3fn: bias 7, no infinities, S.1111.111 is NaN (so the largest is 1.75 * 2^8 = 448).
// e5m2: bias 15, S.11111.00 is ±inf, S.11111.{01,10,11} NaN (IEEE-like; largest 57344).
double ocp(std::uint8_t byte, int E, int M, int bias, bool ieee_special) {
  const int s = byte >> 7, e = (byte >> M) & ((1 << E) - 1), m = byte & ((1 << M) - 1);
  const double sign = s ? -1.0 : 1.0;
  if (ieee_special && e == (1 << E) - 1) return m == 0 ? sign * INFINITY : NAN;
  if (!ieee_special && e == (1 << E) - 1 && m == (1 << M) - 1) return NAN;
  if (e == 0) return sign * std::ldexp(m, 1 - bias - M);  // subnormals and zeros
  return sign * std::ldexp((1 << M) + m, e - bias - M);
}

io::npy_array arr(std::vector<std::size_t> shape, io::dtype t = io::dtype::f8) {
  io::npy_array a;
  a.type = t;
  a.shape = std::move(shape);
  std::size_t n = 1;
  for (auto s : a.shape) n *= s;
  a.values.resize(n);
  for (std::size_t e = 0; e < n; ++e) a.values[e] = static_cast<double>(e) + 0.5;  // distinct, exact
  return a;
}

template <class F>
void expect_input_error(F&& f, const std::string& problem) {
  try {
    f();
    BOOST_ERROR("no error; expected: " << problem);
  } catch (const input_error& e) {
    const std::string m = spell_fields(e.what(), cli_spelling);
    BOOST_TEST(m.find(problem) != std::string::npos, "'" << m << "' does not mention '" << problem << "'");
    BOOST_TEST(m.find('\n') == std::string::npos, m);
  }
}

}  // namespace

BOOST_AUTO_TEST_CASE(fp8_decoding_matches_the_ocp_definitions_on_every_byte) {
  std::size_t nan4 = 0, nan5 = 0, inf5 = 0;
  for (int b = 0; b < 256; ++b) {
    const auto byte = static_cast<std::uint8_t>(b);
    const double w4 = ocp(byte, 4, 3, 7, false), g4 = decode_fp8(byte, fp8_format::e4m3fn);
    const double w5 = ocp(byte, 5, 2, 15, true), g5 = decode_fp8(byte, fp8_format::e5m2);
    if (std::isnan(w4)) {
      ++nan4;
      BOOST_TEST(std::isnan(g4), "e4m3fn byte " << b);
    } else {
      BOOST_TEST((g4 == w4 && std::signbit(g4) == std::signbit(w4)), "e4m3fn byte " << b << ": " << g4 << " vs " << w4);
    }
    if (std::isnan(w5)) {
      ++nan5;
      BOOST_TEST(std::isnan(g5), "e5m2 byte " << b);
    } else {
      BOOST_TEST((g5 == w5 && std::signbit(g5) == std::signbit(w5)), "e5m2 byte " << b << ": " << g5 << " vs " << w5);
    }
    if (std::isinf(w5)) ++inf5;
  }
  BOOST_TEST(nan4 == 2u);  // 0x7f, 0xff
  BOOST_TEST(nan5 == 6u);
  BOOST_TEST(inf5 == 2u);
  BOOST_TEST(decode_fp8(0x7e, fp8_format::e4m3fn) == 448.0);
  BOOST_TEST(decode_fp8(0x01, fp8_format::e4m3fn) == std::ldexp(1.0, -9));
  BOOST_TEST(decode_fp8(0x7b, fp8_format::e5m2) == 57344.0);
  BOOST_TEST(decode_fp8(0x01, fp8_format::e5m2) == std::ldexp(1.0, -16));
  BOOST_TEST((parse_fp8_format("e4m3fn") == fp8_format::e4m3fn));
  BOOST_TEST((parse_fp8_format("e5m2") == fp8_format::e5m2));
  expect_input_error([] { (void)parse_fp8_format("e4m3"); }, "e4m3");
}

BOOST_AUTO_TEST_CASE(fp8_inputs_are_decoded_and_descaled_exactly) {
  // Q, K, V as uint8 (1, 2, 3, 2) with h_kv = 2, per-(b, h_kv) descales for K, a scalar for Q.
  io::npy_array q = arr({1, 2, 3, 2}, io::dtype::u1), k = q, v = q;
  for (std::size_t e = 0; e < q.values.size(); ++e) {
    q.values[e] = static_cast<double>((e * 37 + 5) % 120);  // finite e4m3fn bytes
    k.values[e] = static_cast<double>((e * 53 + 9) % 120 + 128);
    v.values[e] = static_cast<double>((e * 11 + 1) % 120);
  }
  input_layout lay;
  lay.fp8 = fp8_format::e4m3fn;
  lay.q_descale.values = {0.25};
  lay.k_descale.values = {0.5, 3.0};
  oracle_request req;
  set_qkv(req, q, k, v, lay);
  for (std::size_t e = 0; e < q.values.size(); ++e) {
    const std::size_t h = e / 6;
    BOOST_TEST(req.Q.values[e] == 0.25 * decode_fp8(static_cast<std::uint8_t>(q.values[e]), fp8_format::e4m3fn));
    BOOST_TEST(req.K.values[e] == (h == 0 ? 0.5 : 3.0) * decode_fp8(static_cast<std::uint8_t>(k.values[e]), fp8_format::e4m3fn));
    BOOST_TEST(req.V.values[e] == decode_fp8(static_cast<std::uint8_t>(v.values[e]), fp8_format::e4m3fn));
  }
  // uint8 without a format, a descale <= 0, a descale of the wrong shape.
  expect_input_error([&] { oracle_request r; set_qkv(r, q, k, v, {}); }, "--qkv-format");
  input_layout bad = lay;
  bad.k_descale.values = {0.0};
  expect_input_error([&] { oracle_request r; set_qkv(r, q, k, v, bad); }, "descale");
  bad = lay;
  bad.k_descale.values = {1.0, 2.0, 3.0};
  expect_input_error([&] { oracle_request r; set_qkv(r, q, k, v, bad); }, "descale");
  expect_input_error([] { (void)parse_descale("0.1", "--q-descale"); }, "--q-descale");  // not exact in binary64
  BOOST_TEST(parse_descale("0.375", "--q-descale").values == std::vector<double>{0.375});
}

BOOST_AUTO_TEST_CASE(bshd_is_the_transpose_of_bhsd_and_maps_back) {
  const std::size_t B = 2, S = 3, H = 4, D = 5;
  const io::npy_array q = arr({B, S, H, D});
  input_layout lay;
  lay.layout = qkv_layout::bshd;
  oracle_request req;
  set_qkv(req, q, q, q, lay);
  BOOST_TEST((req.Q.B == B && req.Q.H == H && req.Q.n == S && req.Q.d == D));
  for (std::size_t b = 0; b < B; ++b)
    for (std::size_t s = 0; s < S; ++s)
      for (std::size_t h = 0; h < H; ++h)
        for (std::size_t d = 0; d < D; ++d)
          BOOST_TEST(req.Q.row(b, h, s)[d] == q.values[((b * S + s) * H + h) * D + d]);
  const output_layout ol = make_output_layout(req, lay, q.shape);
  BOOST_TEST(ol.out_shape == (std::vector<std::size_t>{B, S, H, D}));
  BOOST_TEST(ol.output_to_external(req.Q.values) == q.values);  // d_v = d here: the output is laid out like Q
  BOOST_TEST(ol.output_to_internal(q.values) == req.Q.values);
}

BOOST_AUTO_TEST_CASE(packed_varlen_with_zero_length_sequences_round_trips) {
  // Three sequences of 2, 0 and 3 queries; keys 1, 2, 0 (an empty key set: every row is empty).
  const std::size_t H = 2, D = 3;
  const io::npy_array q = arr({5, H, D}), k = arr({3, H, D});
  input_layout lay;
  lay.layout = qkv_layout::thd;
  lay.cu_seqlens_q = {0, 2, 2, 5};
  lay.cu_seqlens_k = {0, 1, 3, 3};
  oracle_request req;
  set_qkv(req, q, k, k, lay);
  // Packed, nothing padded (memory O(total tokens)): Q (1, H, 5, D), K (1, H, 3, D), the offsets kept.
  BOOST_TEST((req.Q.B == 1u && req.Q.H == H && req.Q.n == 5u && req.K.n == 3u));
  BOOST_TEST(req.packed());
  BOOST_TEST(req.sequences() == 3u);
  BOOST_TEST(req.seqlens_q.empty());
  BOOST_TEST(req.seq_q(0) == 2u);
  BOOST_TEST(req.seq_q(1) == 0u);
  BOOST_TEST(req.seq_q(2) == 3u);
  BOOST_TEST(req.seq_k(0) == 1u);
  BOOST_TEST(req.seq_k(1) == 2u);
  BOOST_TEST(req.seq_k(2) == 0u);
  // Token t at internal row (0, h, t).
  for (std::size_t t = 0; t < 5; ++t)
    for (std::size_t h = 0; h < H; ++h)
      for (std::size_t d = 0; d < D; ++d) BOOST_TEST(req.Q.row(0, h, t)[d] == q.values[(t * H + h) * D + d]);
  BOOST_TEST(req.K.values.size() == 3 * H * D);
  const output_layout ol = make_output_layout(req, lay, q.shape);
  BOOST_TEST(ol.out_shape == (std::vector<std::size_t>{5, H, D}));
  BOOST_TEST(ol.lse_shape == (std::vector<std::size_t>{H, 5}));  // FlashAttention's varlen LSE: (h, total_q)
  // Every external row comes from exactly one internal row; no padding.
  std::vector<int> hits(5 * H, 0);
  std::size_t padding = 0;
  for (std::size_t r = 0; r < req.Q.B * H * req.Q.n; ++r) {
    const std::size_t o = ol.output_row(r);
    if (o == output_layout::none) ++padding;
    else ++hits.at(o);
  }
  BOOST_TEST(padding == 0u);
  for (int x : hits) BOOST_TEST(x == 1);
  const std::vector<double> ext = arr({5, H, D}).values;
  BOOST_TEST(ol.output_to_external(ol.output_to_internal(ext)) == ext);
  std::vector<double> lse_ext(H * 5);
  for (std::size_t e = 0; e < lse_ext.size(); ++e) lse_ext[e] = 0.25 * static_cast<double>(e);
  BOOST_TEST(ol.lse_to_external(ol.lse_to_internal(lse_ext)) == lse_ext);

  // Bad offsets: not from 0, decreasing, not ending at the token count, b differs between Q and K.
  auto with = [&](std::vector<std::size_t> cq, std::vector<std::size_t> ck) {
    input_layout l = lay;
    l.cu_seqlens_q = std::move(cq);
    l.cu_seqlens_k = std::move(ck);
    oracle_request r;
    set_qkv(r, q, k, k, l);
  };
  expect_input_error([&] { with({1, 2, 2, 5}, {0, 1, 3, 3}); }, "cu-seqlens-q");
  expect_input_error([&] { with({0, 3, 2, 5}, {0, 1, 3, 3}); }, "cu-seqlens-q");
  expect_input_error([&] { with({0, 2, 2, 4}, {0, 1, 3, 3}); }, "cu-seqlens-q");
  expect_input_error([&] { with({0, 2, 5}, {0, 1, 3, 3}); }, "cu-seqlens");
  expect_input_error([&] { with({0, 2, 2, 5}, {0, 1, 3, 4}); }, "cu-seqlens-k");
}

BOOST_AUTO_TEST_CASE(paged_kv_is_gathered_through_the_block_table) {
  // 4 pages of 2 rows, h_kv = 1, d = 2; sequence 0 uses pages [3, 1], sequence 1 pages [0, 2].
  const io::npy_array q = arr({2, 1, 3, 2}), kp = arr({4, 2, 1, 2});
  input_layout lay;
  lay.paged = true;
  lay.page_size = 2;
  lay.table_rows = 2;
  lay.table_cols = 2;
  lay.block_table = {3, 1, 0, 2};
  oracle_request req;
  set_qkv(req, q, kp, kp, lay);
  BOOST_TEST((req.K.B == 2u && req.K.H == 1u && req.K.n == 4u && req.K.d == 2u));
  for (std::size_t b = 0; b < 2; ++b)
    for (std::size_t j = 0; j < 4; ++j) {
      const auto page = static_cast<std::size_t>(lay.block_table[b * 2 + j / 2]);
      for (std::size_t d = 0; d < 2; ++d) BOOST_TEST(req.K.row(b, 0, j)[d] == kp.values[(page * 2 + j % 2) * 2 + d]);
    }
  input_layout bad = lay;
  bad.block_table = {3, 4, 0, 2};
  expect_input_error([&] { oracle_request r; set_qkv(r, q, kp, kp, bad); }, "block");
  bad.block_table = {3, -1, 0, 2};
  expect_input_error([&] { oracle_request r; set_qkv(r, q, kp, kp, bad); }, "block");
}

BOOST_AUTO_TEST_CASE(variant_arrays_broadcast_or_are_rejected) {
  // A (1, h, 1, n_k) bias broadcasts over batch and queries, right-aligned like PyTorch.
  const score_bias b = to_score_bias(arr({2, 1, 5}), "--bias");
  (void)b;
  expect_input_error([] { (void)to_alibi_slopes(arr({2, 3, 4}), "--alibi-slopes"); }, "--alibi-slopes");
  expect_input_error([] { (void)to_score_bias(arr({1, 1, 1, 2, 3}), "--bias"); }, "--bias");
  io::npy_array keep = arr({2, 3}, io::dtype::u1);
  for (auto& x : keep.values) x = 1;
  keep.values[4] = 2;  // not 0/1
  expect_input_error([&] { (void)to_keep_mask(keep, "--dropout-mask"); }, "--dropout-mask");
  io::npy_array idx = arr({3}, io::dtype::i8);
  idx.values = {0, 4, -1};
  expect_input_error([&] { (void)to_index_vector(idx, "--seqlens-k"); }, "--seqlens-k");
  idx.values = {0, 4, 7};
  BOOST_TEST(to_index_vector(idx, "--seqlens-k") == (std::vector<std::size_t>{0, 4, 7}));
}
