// tests/fuzz/oracle_variants.cxx — libFuzzer harness: the oracle's variant and layout options
// (issue 28: window, cu_seqlens, block tables, softcap, descales, ALiBi, sinks, dropout, masks,
// targets, empty-row policies), from the spec a caller fills (the CLI's flags, Python's keywords)
// through build_request and run_oracle on tiny tensors.
//
// The bytes drive the shapes (b, h_q, h_kv, n_q, n_k, d, d_v up to a few), the layout (bhsd,
// bshd, thd, paged), every option (each absent or given, with values from lists of ordinary and
// hostile choices: -1, 0, 2^63 - 1 windows, softcaps 2e308, 1e-310, "abc", cu_seqlens out of
// order, block tables with negative and out-of-range entries, descales 0 and 1e308 ...) and the
// tensor entries (small dyadic numbers, and at times huge, subnormal, NaN or Inf).  The arrays are
// what the .npy reader or the Python conversion would hand over: integer arrays hold integers of
// their dtype, float arrays binary64 numbers, FP8 arrays bytes.
//
// Finding: any crash, sanitizer report, or exception other than input_error (bad input) — a
// std::bad_alloc, a logic_error, an internal_error are all findings.  Each input is bounded:
// tensors of at most 2·4·5·6·4 entries, MPFI capped at 256 bits, threads 1, max_seconds 2.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"
#include "attncert/oracle/oracle.hpp"
#include "attncert/oracle/spec.hpp"

namespace {

using attncert::io::dtype;
using attncert::io::npy_array;

class bytes {
 public:
  bytes(const std::uint8_t* d, std::size_t n) : d_(d), n_(n) {}
  unsigned next() { return i_ < n_ ? d_[i_++] : 0u; }
  unsigned below(unsigned k) { return k == 0 ? 0 : next() % k; }
  bool flag() { return (next() & 1u) != 0; }
  template <class T, std::size_t N>
  const T& pick(const T (&choices)[N]) { return choices[below(static_cast<unsigned>(N))]; }

 private:
  const std::uint8_t* d_;
  std::size_t n_, i_ = 0;
};

double entry(bytes& b) {
  const unsigned k = b.next();
  if (k < 240) return (static_cast<double>(k % 33) - 16.0) / 8.0;  // small dyadic numbers, exact
  static const double special[] = {1e300, -1e300, 4.9e-324, 1e-310, 65504.0, 0.0,
                                   std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
                                   -std::numeric_limits<double>::infinity(), 1e154, -2.5, 1e-154};
  return b.pick(special);
}

npy_array floats(bytes& b, std::vector<std::size_t> shape, bool allow_nonfinite) {
  npy_array a;
  a.type = dtype::f8;
  a.shape = std::move(shape);
  std::size_t n = 1;
  for (std::size_t s : a.shape) n *= s;
  a.values.resize(n);
  for (double& x : a.values) x = entry(b);
  a.allow_nonfinite = allow_nonfinite;
  return a;
}

// Integers of int32 / int64, as the .npy reader yields them (exact doubles below 2^63).
npy_array ints(bytes& b, std::vector<std::size_t> shape, const std::vector<long long>& likely) {
  npy_array a;
  a.type = b.flag() ? dtype::i4 : dtype::i8;
  a.shape = std::move(shape);
  std::size_t n = 1;
  for (std::size_t s : a.shape) n *= s;
  static const long long odd[] = {-1, -2147483648LL, 2147483647LL, 9007199254740992LL, 4611686018427387904LL,
                                  -9223372036854775807LL - 1};
  for (std::size_t i = 0; i < n; ++i) {
    long long v = b.below(8) == 0 ? b.pick(odd) : (likely.empty() ? static_cast<long long>(b.below(8)) : likely[i % likely.size()] + (b.below(6) == 0 ? 1 : 0));
    if (a.type == dtype::i4 && (v < -2147483648LL || v > 2147483647LL)) v = -1;
    a.values.push_back(static_cast<double>(v));
  }
  return a;
}

// A bool array (true 3 times in 4) or the bytes of an FP8 tensor (uint8), as the reader yields them.
npy_array byte_array(bytes& b, std::vector<std::size_t> shape, dtype type) {
  npy_array a;
  a.type = type;
  a.shape = std::move(shape);
  std::size_t n = 1;
  for (std::size_t s : a.shape) n *= s;
  for (std::size_t i = 0; i < n; ++i)
    a.values.push_back(type == dtype::b1 ? (b.below(4) == 0 ? 0.0 : 1.0) : static_cast<double>(b.next()));
  return a;
}
npy_array bools(bytes& b, std::vector<std::size_t> shape) { return byte_array(b, std::move(shape), dtype::b1); }
npy_array fp8_bytes(bytes& b, std::vector<std::size_t> shape) { return byte_array(b, std::move(shape), dtype::u1); }

// b + 1 offsets 0 = c_0 <= c_1 <= ... <= c_b = t, usually; at times one is off by one.
std::vector<long long> offsets(bytes& b, std::size_t batch, std::size_t t) {
  std::vector<long long> c{0};
  for (std::size_t i = 1; i < batch; ++i) c.push_back(std::min<long long>(static_cast<long long>(t), c.back() + b.below(4)));
  c.push_back(static_cast<long long>(t));
  if (b.below(6) == 0) c[b.below(static_cast<unsigned>(c.size()))] += b.flag() ? 1 : -1;
  return c;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace attncert;
  bytes b(data, size);
  oracle::attention_spec s;
  const std::size_t B = 1 + b.below(2), Hkv = 1 + b.below(2), Hq = Hkv * (1 + b.below(2)), nq = b.below(5),
                    nk = b.below(6), d = 1 + b.below(4), dv = 1 + b.below(3);
  const unsigned layout = b.below(4);  // bhsd, bshd, thd, paged (bshd queries)
  const bool nonfinite = b.below(8) == 0;
  s.allow_nonfinite = nonfinite;
  const bool fp8 = b.below(8) == 0;
  auto tensor = [&](std::vector<std::size_t> shape) { return fp8 ? fp8_bytes(b, std::move(shape)) : floats(b, std::move(shape), nonfinite); };
  if (layout == 2) {
    s.layout = "thd";
    const std::size_t tq = B * nq, tk = B * nk;
    s.q = tensor({tq, Hq, d});
    s.k = tensor({tk, Hkv, d});
    s.v = tensor({tk, Hkv, dv});
    s.cu_seqlens_q = ints(b, {B + 1}, offsets(b, B, tq));
    s.cu_seqlens_k = ints(b, {B + 1}, offsets(b, B, tk));
  } else if (layout == 3) {
    s.layout = "bshd";
    const std::size_t P = 1 + b.below(3), pages = 1 + b.below(4), cols = 1 + b.below(3);
    s.q = tensor({B, nq, Hq, d});
    s.k = tensor({pages, P, Hkv, d});
    s.v = tensor({pages, P, Hkv, dv});
    std::vector<long long> likely;
    for (std::size_t i = 0; i < B * cols; ++i) likely.push_back(static_cast<long long>(i % pages));
    s.block_table = ints(b, {B, cols}, likely);
    s.page_size = b.below(10) == 0 ? 0 : P;
    if (b.flag()) {
      std::vector<long long> lens;
      for (std::size_t i = 0; i < B; ++i) lens.push_back(static_cast<long long>(b.below(static_cast<unsigned>(cols * P + 2))));
      s.seqlens_k = ints(b, {B}, lens);
    }
  } else {
    s.layout = layout == 0 ? "bhsd" : "bshd";
    s.q = tensor(layout == 0 ? std::vector<std::size_t>{B, Hq, nq, d} : std::vector<std::size_t>{B, nq, Hq, d});
    s.k = tensor(layout == 0 ? std::vector<std::size_t>{B, Hkv, nk, d} : std::vector<std::size_t>{B, nk, Hkv, d});
    s.v = tensor(layout == 0 ? std::vector<std::size_t>{B, Hkv, nk, dv} : std::vector<std::size_t>{B, nk, Hkv, dv});
    if (b.below(4) == 0) {
      std::vector<long long> lens;
      for (std::size_t i = 0; i < B; ++i) lens.push_back(static_cast<long long>(b.below(static_cast<unsigned>(nk + 2))));
      s.seqlens_k = ints(b, {B}, lens);
    }
  }
  if (fp8) {
    static const char* formats[] = {"e4m3fn", "e5m2", "e4m3", ""};
    s.qkv_format = b.pick(formats);
    static const char* descales[] = {"", "1", "0.5", "0", "-1", "1e308", "3", "0.1", "inf", "nan", "1/3"};
    s.q_descale = b.pick(descales);
    s.k_descale = b.pick(descales);
    s.v_descale = b.pick(descales);
  }
  s.causal = b.below(3) == 0;
  s.causal_bottom_right = b.below(4) == 0;
  if (b.below(5) == 0 && layout != 2) s.mask = bools(b, {B, Hq, nq, nk});
  static const char* scales[] = {"", "", "1/8", "0.125", "1e300", "1e-300", "0", "-2", "3/2^1076", "abc", "1e400", "7"};
  s.scale = b.pick(scales);
  static const char* empty[] = {"error", "zeros", "nan", "bad"};
  s.empty_rows = b.pick(empty);
  static const char* targets[] = {"binary64", "binary32", "binary16", "bfloat16", "binary8"};
  s.target = b.pick(targets);
  static const char* windows[] = {"", "", "1,0", "0,0", "-1,2", "-2,0", "9223372036854775807,9223372036854775807",
                                  "9223372036854775807,0", "3", "a,b", "1,-1", "99999999999999999999,1"};
  s.window = b.pick(windows);
  static const char* softcaps[] = {"", "", "30", "2e308", "1e400", "1e-310", "0", "-1", "abc", "1/3", "2.5"};
  s.softcap = b.pick(softcaps);
  if (b.below(4) == 0) {
    const unsigned shape = b.below(4);
    s.alibi_slopes = floats(b, shape == 0 ? std::vector<std::size_t>{Hq} : shape == 1 ? std::vector<std::size_t>{B, Hq}
                                   : shape == 2 ? std::vector<std::size_t>{Hq * B, 1} : std::vector<std::size_t>{1, 1, Hq},
                            false);
  }
  if (b.below(5) == 0) s.bias = floats(b, b.flag() ? std::vector<std::size_t>{nq, nk} : std::vector<std::size_t>{B, Hq, nq, nk + b.below(2)}, false);
  if (b.below(5) == 0) s.sink = floats(b, {b.flag() ? Hq : Hq + 1}, false);
  s.sink_off_by_one = b.below(8) == 0;
  if (b.below(5) == 0) {
    s.dropout_mask = bools(b, {B, Hq, nq, nk});
    static const char* ps[] = {"0.1", "0", "1", "0.999999", "-0.1", "", "1/3"};
    s.dropout_p = b.pick(ps);
  }
  s.want_lse = b.flag();
  static const char* bases[] = {"e", "2", "10"};
  s.lse_base = b.pick(bases);
  static const unsigned bits[] = {128, 256, 64};
  s.max_bits = b.pick(bits);
  s.threads = 1;
  s.max_seconds = 2;
  try {
    const oracle::built_request built = oracle::build_request(s);
    const oracle::oracle_result r = oracle::run_oracle(built.req);
    (void)built.olay.output_to_external(r.reference);
  } catch (const input_error&) {
  }
  return 0;
}
