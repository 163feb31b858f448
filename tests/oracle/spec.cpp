// Tests of oracle/spec.hpp: a call as its user describes it (arrays + the options' texts) into one
// validated request — every option lands in its field, every refusal is one line naming the CLI's
// option, and the request runs to the same bits as one built by hand with set_qkv.
#define BOOST_TEST_MODULE oracle_spec
#include "attncert/number/traits.hpp"
#include "attncert/oracle/spec.hpp"

#include <boost/test/unit_test.hpp>
#include <random>
#include <string>

#include "../support.hpp"
#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"

using namespace attncert;
using namespace attncert::oracle;

namespace {

io::npy_array arr(std::vector<std::size_t> shape, std::vector<double> values, io::dtype t = io::dtype::f8) {
  io::npy_array a;
  a.type = t;
  a.shape = std::move(shape);
  a.values = std::move(values);
  return a;
}

io::npy_array randn(std::vector<std::size_t> shape, std::mt19937_64& rng) {
  std::size_t n = 1;
  for (auto s : shape) n *= s;
  std::normal_distribution<double> N(0, 1);
  std::vector<double> v(n);
  for (auto& x : v) x = N(rng);
  return arr(std::move(shape), std::move(v));
}

attention_spec small(std::mt19937_64& rng) {
  attention_spec s;
  s.q = randn({1, 2, 5, 4}, rng);
  s.k = randn({1, 2, 7, 4}, rng);
  s.v = randn({1, 2, 7, 3}, rng);
  return s;
}

}  // namespace

BOOST_AUTO_TEST_CASE(options_land_in_their_fields) {
  auto rng = make_rng(1);
  attention_spec s = small(rng);
  s.causal_bottom_right = true;
  s.window = "3,-1";
  s.softcap = "30";
  s.alibi_slopes = arr({2}, {0.5, 0.25});
  s.sink = arr({2}, {0.0, -1.0});
  s.scale = "1/8";
  s.target = "bf16";
  s.want_lse = true;
  s.lse_base = "2";
  s.empty_rows = "zeros";
  s.threads = 1;
  const built_request b = build_request(s);
  BOOST_TEST(b.req.variant.causal_bottom_right);
  BOOST_TEST((b.req.mask == mask_kind::none));
  BOOST_TEST(b.req.variant.window_left == 3);
  BOOST_TEST(b.req.variant.window_right == -1);
  BOOST_TEST((b.req.variant.softcap && *b.req.variant.softcap == 30));
  BOOST_TEST(b.req.variant.alibi_slopes == std::vector<double>({0.5, 0.25}));
  BOOST_TEST(b.req.variant.sink == std::vector<double>({0.0, -1.0}));
  BOOST_TEST(!b.req.scale.inv_sqrt_d);
  BOOST_TEST(b.req.scale.rational == attncert::mpq_rational(1, 8));
  BOOST_TEST((b.req.target == target_format::bfloat16));
  BOOST_TEST(b.req.lse.want);
  BOOST_TEST(b.req.lse.base2);
  BOOST_TEST((b.req.lse.target == target_format::binary32));  // default for a non-binary64 target
  BOOST_TEST((b.req.empty_rows == empty_row_policy::zeros));
  BOOST_TEST(b.olay.out_shape == std::vector<std::size_t>({1, 2, 5, 3}));
  BOOST_TEST(b.olay.lse_shape == std::vector<std::size_t>({1, 2, 5}));
  BOOST_TEST(gradient_layouts(s, b).size() == 3u);

  attention_spec t = small(rng);
  t.want_lse = true;
  BOOST_TEST((build_request(t).req.lse.target == target_format::binary64));  // binary64 target: binary64 LSE
  t.lse_target = "fp16";
  BOOST_TEST((build_request(t).req.lse.target == target_format::binary16));
  t.causal = true;
  t.sink_off_by_one = true;
  const built_request c = build_request(t);
  BOOST_TEST((c.req.mask == mask_kind::causal));
  BOOST_TEST(c.req.variant.sink == std::vector<double>({0.0, 0.0}));
  t.layout = "bshd";
  t.q = randn({1, 5, 2, 4}, rng);
  t.k = randn({1, 7, 2, 4}, rng);
  t.v = randn({1, 7, 2, 3}, rng);
  BOOST_TEST(build_request(t).olay.out_shape == std::vector<std::size_t>({1, 5, 2, 3}));
}

BOOST_AUTO_TEST_CASE(the_request_runs_as_one_built_by_hand) {
  auto rng = make_rng(2);
  attention_spec s = small(rng);
  s.causal = true;
  s.threads = 1;
  const oracle_result a = run_oracle(build_request(s).req);
  oracle_request r;
  set_qkv(r, s.q, s.k, s.v);
  r.mask = mask_kind::causal;
  r.threads = 1;
  const oracle_result b = run_oracle(r);
  BOOST_TEST(a.reference == b.reference);
  BOOST_TEST(a.elements == b.elements);
}

BOOST_AUTO_TEST_CASE(refusals_are_one_line_naming_the_option) {
  auto rng = make_rng(3);
  auto refuse = [&](auto&& change, const std::string& expect) {
    attention_spec s = small(rng);
    change(s);
    const std::string e = input_error_of([&] { build_request(s); });
    BOOST_TEST_CONTEXT(expect) {
      BOOST_TEST(e.find(expect) != std::string::npos, e);
      BOOST_TEST(e.find('\n') == std::string::npos);
    }
  };
  refuse([](attention_spec& s) { s.window = "2"; }, "--window must be LEFT,RIGHT");
  refuse([](attention_spec& s) { s.window = "2,-3"; }, "--window: each side must be >= -1");
  refuse([](attention_spec& s) { s.window = "a,1"; }, "--window must be LEFT,RIGHT");
  refuse([](attention_spec& s) { s.sink = arr({2}, {0, 0}), s.sink_off_by_one = true; }, "give --sink or --sink-off-by-one");
  refuse([](attention_spec& s) { s.sink = arr({1, 2}, {0, 0}); }, "--sink: must be one-dimensional");
  refuse([](attention_spec& s) { s.dropout_p = "0.5"; }, "dropout needs both --dropout-mask and --dropout-p");
  refuse([](attention_spec& s) { s.dropout_mask = arr({5, 7}, std::vector<double>(35, 1), io::dtype::b1); },
         "dropout needs both");
  refuse([](attention_spec& s) { s.want_lse = true, s.lse_base = "10"; }, "--lse-base must be e or 2");
  refuse([](attention_spec& s) { s.want_lse = true, s.empty_lse = "zero"; }, "--empty-lse must be -inf, +inf, 0 or nan");
  refuse([](attention_spec& s) { s.attention_chunk = (std::size_t{1} << 62) + 1; }, "--attention-chunk must be at most 2^62");
  refuse([](attention_spec& s) { s.key_leftpad = arr({2}, {0, 1}, io::dtype::i8); }, "--key-leftpad: 2 offsets for a batch of 1");
  refuse([](attention_spec& s) { s.key_leftpad = arr({1, 1}, {0}, io::dtype::i8); }, "--key-leftpad: must be one-dimensional");
  refuse([](attention_spec& s) { s.key_leftpad = arr({1}, {99}, io::dtype::i8); }, "past its");
  refuse([](attention_spec& s) { s.qv = arr({1, 1}, {0}); }, "--qv: shape (1, 1) is not q's");
  refuse([](attention_spec& s) { s.page_size = 4; }, "paged K/V needs both --block-table and --page-size");
  refuse([](attention_spec& s) { s.block_table = arr({1, 2}, {0, 1}, io::dtype::i4); }, "paged K/V needs both");
  refuse([](attention_spec& s) { s.layout = "nope"; }, "nope");
  refuse([](attention_spec& s) { s.target = "fp8"; }, "fp8");
  refuse([](attention_spec& s) { s.empty_rows = "maybe"; }, "maybe");
  refuse([](attention_spec& s) { s.v = arr({1, 2, 6, 3}, std::vector<double>(36, 0)); }, "sequence length");
  auto thd = [](attention_spec& s) {  // one packed sequence of 5 tokens
    s.layout = "thd";
    s.q = arr({5, 2, 4}, std::vector<double>(40, 0));
    s.k = arr({5, 2, 4}, std::vector<double>(40, 0));
    s.v = arr({5, 2, 3}, std::vector<double>(30, 0));
    s.cu_seqlens_q = s.cu_seqlens_k = arr({2}, {0, 5}, io::dtype::i4);
  };
  refuse(
      [&](attention_spec& s) {
        thd(s);
        s.mask = arr({5, 5}, std::vector<double>(25, 1), io::dtype::b1);
      },
      "--mask is not supported with --layout thd");
  refuse(
      [&](attention_spec& s) {
        thd(s);
        s.bias = arr({5, 5}, std::vector<double>(25, 0));
      },
      "--bias and --dropout-mask are not supported with --layout thd");
}

BOOST_AUTO_TEST_CASE(errors_name_the_field_and_each_front_end_spells_it) {
  // The library names the spec's field (field.hpp), never a command-line option: the CLI spells it
  // --softcap, Python softcap=.
  auto rng = make_rng(4);
  const auto python = [](std::string_view n) { return std::string(n) + "="; };
  const auto raw = [&](auto&& change) {
    attention_spec s = small(rng);
    change(s);
    try {
      build_request(s);
    } catch (const input_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  std::string m = raw([](attention_spec& s) { s.softcap = "-1"; });
  BOOST_TEST(m.find("--") == std::string::npos, m);
  BOOST_TEST(spell_fields(m, cli_spelling) == "--softcap must be > 0 (got '-1')");
  BOOST_TEST(spell_fields(m, python) == "softcap= must be > 0 (got '-1')");
  m = raw([](attention_spec& s) { s.softcap = "abc"; });
  BOOST_TEST(spell_fields(m, cli_spelling) == "--softcap: not a decimal number: 'abc'");
  m = raw([](attention_spec& s) { s.dropout_mask = arr({5, 7}, std::vector<double>(35, 1), io::dtype::b1), s.dropout_p = "1"; });
  BOOST_TEST(spell_fields(m, python) == "dropout_p= must be in [0, 1) (got '1')");
  m = raw([](attention_spec& s) { s.scale = "1e99999"; });
  BOOST_TEST(spell_fields(m, cli_spelling) == "--scale '1e99999' is too large or too small (more than 4000 bits)");
}

BOOST_AUTO_TEST_CASE(a_request_built_by_hand_is_checked_the_same) {
  // The request holds exact rationals, not texts: validate_request refuses what build_request would.
  auto rng = make_rng(5);
  oracle_request r = build_request(small(rng)).req;
  const auto spelled = [&](const oracle_request& x) { return input_error_of([&] { validate_request(x); }); };
  oracle_request x = r;
  x.variant.softcap = mpq_rational(-1, 2);
  BOOST_TEST(spelled(x) == "--softcap must be > 0 (got -1/2)");
  x = r;
  x.variant.has_dropout = true;
  x.variant.dropout_keep = bool_mask{1, 1, r.Q.n, r.K.n, std::vector<std::uint8_t>(r.Q.n * r.K.n, 1)};
  x.variant.dropout_p = 1;
  BOOST_TEST(spelled(x) == "--dropout-p must be in [0, 1) (got 1)");
  x.variant.dropout_p = mpq_rational(1, 4);
  BOOST_TEST(spelled(x) == "");
  x = r;
  x.scale.inv_sqrt_d = false;
  x.scale.rational = number_traits<mpq_rational>::from_string("1e-2000");
  BOOST_TEST(spelled(x) == "--scale is too large or too small (more than 4000 bits)");
}
