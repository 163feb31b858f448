// Tests of attncert/io/npy.hpp and lib/src/io/npy.cpp.
//
// Hand-built files follow NEP 1: "\x93NUMPY", major, minor, header length (uint16 LE in
// 1.0, uint32 LE in 2.0/3.0), the header (a Python dict literal), then the data.  The files
// in tests/data/npy were written by NumPy (see make_files.py there); tests/io/npy_numpy.sh
// cross-checks the codec against NumPy itself.
#define BOOST_TEST_MODULE io_npy
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"

using namespace attncert;
using namespace attncert::io;
namespace fs = std::filesystem;

namespace {

const std::vector<dtype> all_dtypes = {dtype::f2, dtype::f4, dtype::f8, dtype::i4, dtype::i8, dtype::b1};
const std::vector<std::vector<std::size_t>> all_shapes = {{}, {0}, {3}, {2, 3}, {2, 3, 4}, {1, 2, 3, 4}};

fs::path data_dir() { return fs::path(__FILE__).parent_path().parent_path() / "data" / "npy"; }

std::string le(std::uint64_t v, int n) {
  std::string s;
  for (int k = 0; k < n; ++k) s += static_cast<char>((v >> (8 * k)) & 0xff);
  return s;
}
std::string be(std::uint64_t v, int n) {
  std::string s = le(v, n);
  return std::string(s.rbegin(), s.rend());
}
std::string f8s(const std::vector<double>& v, bool big = false) {
  std::string s;
  for (double x : v) s += big ? be(std::bit_cast<std::uint64_t>(x), 8) : le(std::bit_cast<std::uint64_t>(x), 8);
  return s;
}

// magic + version + header length + header (as given, no padding) + data.
std::string file(int major, const std::string& header, const std::string& data, int minor = 0) {
  std::string s = "\x93NUMPY";
  s += static_cast<char>(major);
  s += static_cast<char>(minor);
  s += le(header.size(), major == 1 ? 2 : 4);
  return s + header + data;
}
std::string hdr(const std::string& descr, const std::string& shape, bool fortran = false) {
  return "{'descr': '" + descr + "', 'fortran_order': " + (fortran ? "True" : "False") + ", 'shape': " + shape +
         ", }\n";
}

bool same_bits(double a, double b) { return std::bit_cast<std::uint64_t>(a) == std::bit_cast<std::uint64_t>(b); }

void check_values(const npy_array& a, const std::vector<double>& want) {
  BOOST_TEST_REQUIRE(a.values.size() == want.size());
  for (std::size_t i = 0; i < want.size(); ++i)
    BOOST_TEST(same_bits(a.values[i], want[i]), "element " << i << ": " << a.values[i] << " vs " << want[i]);
}

// parse_npy(bytes) must throw input_error "case.npy: ..." mentioning `problem`, on one line.
void expect_error(const std::string& bytes, const std::string& problem) {
  try {
    (void)parse_npy(bytes, "case.npy");
    BOOST_ERROR("no error; expected: " << problem);
  } catch (const input_error& e) {
    const std::string m = e.what();
    BOOST_TEST(m.rfind("case.npy: ", 0) == 0u, m);
    BOOST_TEST(m.find(problem) != std::string::npos, "'" << m << "' does not mention '" << problem << "'");
    BOOST_TEST(m.find('\n') == std::string::npos, m);
  }
}

template <class F>
void expect_input_error(F&& f, const std::string& problem) {
  try {
    f();
    BOOST_ERROR("no error; expected: " << problem);
  } catch (const input_error& e) {
    const std::string m = e.what();
    BOOST_TEST(m.find(problem) != std::string::npos, "'" << m << "' does not mention '" << problem << "'");
    BOOST_TEST(m.find('\n') == std::string::npos, m);
  }
}

// Values exactly representable in each dtype, cycled through.
double sample(dtype t, std::size_t i) {
  static const std::vector<double> f2 = {0.0, -0.0, 1.0, -2.0, 0x1p-24, 1023 * 0x1p-24, 0x1p-14, 65504.0,
                                         -65504.0, 0.333251953125, 1.5, -3.25};
  static const std::vector<double> f4 = {0.0, -0.0, static_cast<double>(0.1f), -0x1p-149,
                                         static_cast<double>(std::numeric_limits<float>::max()),
                                         -static_cast<double>(std::numeric_limits<float>::min()),
                                         static_cast<double>(3.14159f)};
  static const std::vector<double> f8 = {0.0, -0.0, 0.1, 0x1p-1074, std::numeric_limits<double>::max(),
                                         -std::numeric_limits<double>::min(), -1.0 / 3};
  static const std::vector<double> i4 = {0, 1, -1, -2147483648.0, 2147483647.0, 123456};
  static const std::vector<double> i8 = {0, -0x1p63, 0x1p53, -0x1p53, 0x1p62, 12345678901.0};
  static const std::vector<double> b1 = {0, 1, 1, 0, 1};
  const std::vector<double>& v = t == dtype::f2   ? f2
                                 : t == dtype::f4 ? f4
                                 : t == dtype::f8 ? f8
                                 : t == dtype::i4 ? i4
                                 : t == dtype::i8 ? i8
                                                  : b1;
  return v[i % v.size()];
}

npy_array make(dtype t, std::vector<std::size_t> shape) {
  npy_array a;
  a.type = t;
  a.shape = std::move(shape);
  std::size_t n = 1;
  for (auto d : a.shape) n *= d;
  for (std::size_t i = 0; i < n; ++i) a.values.push_back(sample(t, i + 3 * a.shape.size()));
  return a;
}

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("attncert_io_npy_" + std::to_string(::getpid()));
  temp_dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
  std::vector<std::string> entries() const {
    std::vector<std::string> out;
    for (const auto& e : fs::directory_iterator(path)) out.push_back(e.path().filename().string());
    return out;
  }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

}  // namespace

// ---- round trips -----------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(round_trip_every_dtype_and_shape) {
  for (dtype t : all_dtypes)
    for (const auto& shape : all_shapes) {
      const npy_array a = make(t, shape);
      const std::string bytes = serialize_npy(a);
      BOOST_TEST(bytes.substr(0, 8) == std::string("\x93NUMPY\x01\x00", 8));
      const std::size_t hlen = static_cast<unsigned char>(bytes[8]) + 256u * static_cast<unsigned char>(bytes[9]);
      BOOST_TEST((10 + hlen) % 64 == 0u);  // data aligned as NumPy aligns it
      BOOST_TEST(bytes[10 + hlen - 1] == '\n');
      const npy_array b = parse_npy(bytes, "rt.npy");
      BOOST_TEST((b.type == t));
      BOOST_TEST(b.shape == shape);
      check_values(b, a.values);
    }
}

BOOST_AUTO_TEST_CASE(write_and_read_files) {
  temp_dir dir;
  for (dtype t : all_dtypes) {
    const fs::path p = dir.path / (dtype_descr(t).substr(1) + ".npy");
    const npy_array a = make(t, {2, 3});
    write_npy(p.string(), a);
    const npy_array b = read_npy(p.string());
    BOOST_TEST((b.type == t));
    BOOST_TEST(b.shape == a.shape);
    check_values(b, a.values);
    BOOST_TEST(slurp(p) == serialize_npy(a));
  }
  BOOST_TEST(dir.entries().size() == all_dtypes.size());  // no temporary files left behind
}

BOOST_AUTO_TEST_CASE(header_matches_numpy_layout) {
  // np.save(f, np.zeros(3)) writes exactly this 128-byte prefix + data.
  npy_array a{dtype::f8, {3}, {0, 0, 0}};
  std::string h = "{'descr': '<f8', 'fortran_order': False, 'shape': (3,), }";
  h += std::string(20, ' ');                       // room to grow shape[0] to 21 digits
  h += std::string(128 - 10 - h.size() - 1, ' ');  // pad to 64 bytes
  h += '\n';
  BOOST_TEST(serialize_npy(a) == file(1, h, f8s({0, 0, 0})));
  // A scalar gets no growth padding.
  npy_array s{dtype::b1, {}, {1}};
  const std::string sb = serialize_npy(s);
  BOOST_TEST(sb.substr(10, 55) == "{'descr': '|b1', 'fortran_order': False, 'shape': (), }");
  BOOST_TEST(sb.size() == 128u + 1u);
}

BOOST_AUTO_TEST_CASE(version_2_when_header_is_long) {
  npy_array a{dtype::i4, std::vector<std::size_t>(30000, 1), {-7}};
  const std::string bytes = serialize_npy(a);
  BOOST_TEST(bytes[6] == '\x02');
  BOOST_TEST(bytes[7] == '\x00');
  const npy_array b = parse_npy(bytes, "v2.npy");
  BOOST_TEST(b.shape.size() == 30000u);
  check_values(b, {-7});
}

// ---- hand-built headers ---------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(header_versions_and_syntax) {
  const std::string d6 = f8s({1, 2, 3, 4, 5, 6});
  const std::vector<double> v6 = {1, 2, 3, 4, 5, 6};
  // v1, double quotes, keys reversed, no trailing comma, no padding or newline.
  auto a = parse_npy(file(1, R"({"shape": (2,3), "fortran_order": False, "descr": "<f8"})", d6), "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{2, 3}));
  check_values(a, v6);
  // v2: spaces, tabs, newlines, a comment, tuple with trailing comma.
  a = parse_npy(file(2, "{ 'descr' : '<f8' ,\n\t'fortran_order':False, # a comment\n 'shape':( 6 , ) , }   \n", d6),
                "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{6}));
  check_values(a, v6);
  // v3: UTF-8 header (a non-ASCII comment).
  a = parse_npy(file(3, "{'descr': '<f8', 'fortran_order': False, 'shape': (3, 2)} # \xc3\xa9t\xc3\xa9\n", d6), "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{3, 2}));
  // latin-1 in v1 is fine, but not valid UTF-8 in v3.
  BOOST_CHECK_NO_THROW(parse_npy(file(1, hdr("<f8", "(6,)") + "#\xe9\n", d6), "x"));
  expect_error(file(3, hdr("<f8", "(6,)") + "#\xe9\n", d6), "header is not valid UTF-8");
  // Python 2 era: u'' strings and 'L' longs (NumPy filters them in 1.0/2.0 only).
  a = parse_npy(file(1, "{'descr': u'<f8', 'fortran_order': False, 'shape': (2L, 3L), }", d6), "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{2, 3}));
  expect_error(file(3, "{'descr': '<f8', 'fortran_order': False, 'shape': (2L, 3L), }", d6),
               "header is not a Python dict literal");
  // Other literal forms: concatenation, escapes, raw strings, hex/binary/underscores, +.
  for (const char* descr : {"'<' 'f8'", "'\\x3cf8'", "'\\u003cf8'", "r'<f8'", "'\\74f8'", "\"<f\" \"8\""}) {
    a = parse_npy(file(1, std::string("{'descr': ") + descr + ", 'fortran_order': False, 'shape': (6,)}", d6), "x");
    check_values(a, v6);
  }
  a = parse_npy(file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0x2, +0b11)}", d6), "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{2, 3}));
  a = parse_npy(file(1, "{'descr': '<f8', 'fortran_order': False, 'shape': (0_0, 1_0, 00)}", ""), "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{0, 10, 0}));
  // scalar and empty arrays
  a = parse_npy(file(1, hdr("<f8", "()"), f8s({-2.5})), "x");
  BOOST_TEST(a.shape.empty());
  check_values(a, {-2.5});
  a = parse_npy(file(1, hdr("<f8", "(0, 5)"), ""), "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{0, 5}));
  BOOST_TEST(a.values.empty());
  // byte-order spellings: '=', '|' and no prefix are native (little-endian here), bool any.
  if constexpr (std::endian::native == std::endian::little) {
    for (const char* descr : {"=f8", "|f8", "f8"}) check_values(parse_npy(file(1, hdr(descr, "(6,)"), d6), "x"), v6);
  }
  for (const char* descr : {"|b1", "<b1", ">b1", "=b1", "b1", "?", "|?"}) {
    a = parse_npy(file(1, hdr(descr, "(3,)"), std::string("\x01\x00\x01", 3)), "x");
    BOOST_TEST((a.type == dtype::b1));
    check_values(a, {1, 0, 1});
  }
}

BOOST_AUTO_TEST_CASE(big_endian) {
  auto a = parse_npy(file(1, hdr(">f8", "(2,)"), f8s({1.5, -0x1p-1074}, true)), "x");
  BOOST_TEST((a.type == dtype::f8));
  check_values(a, {1.5, -0x1p-1074});
  a = parse_npy(file(1, hdr(">f4", "(2,)"), be(0x3fc00000, 4) + be(0x80000001, 4)), "x");
  BOOST_TEST((a.type == dtype::f4));
  check_values(a, {1.5, -0x1p-149});
  a = parse_npy(file(1, hdr(">f2", "(3,)"), be(0x3e00, 2) + be(0x8001, 2) + be(0x7bff, 2)), "x");
  BOOST_TEST((a.type == dtype::f2));
  check_values(a, {1.5, -0x1p-24, 65504});
  a = parse_npy(file(1, hdr(">i4", "(2,)"), be(0xfffffffe, 4) + be(0x80000000, 4)), "x");
  BOOST_TEST((a.type == dtype::i4));
  check_values(a, {-2, -2147483648.0});
  a = parse_npy(file(1, hdr(">i8", "(2,)"), be(0xfffffffffffffffeull, 8) + be(1ull << 53, 8)), "x");
  BOOST_TEST((a.type == dtype::i8));
  check_values(a, {-2, 0x1p53});
}

BOOST_AUTO_TEST_CASE(fortran_order_comes_back_in_c_order) {
  // [[1, 2, 3], [4, 5, 6]] stored column by column.
  auto a = parse_npy(file(1, hdr("<f8", "(2, 3)", true), f8s({1, 4, 2, 5, 3, 6})), "x");
  BOOST_TEST(a.shape == (std::vector<std::size_t>{2, 3}));
  check_values(a, {1, 2, 3, 4, 5, 6});
  // 2x3x4: element (i, j, k) = 100i + 10j + k, at Fortran offset i + 2j + 6k.
  std::vector<double> stored(24), want(24);
  for (int i = 0; i < 2; ++i)
    for (int j = 0; j < 3; ++j)
      for (int k = 0; k < 4; ++k) {
        stored[i + 2 * j + 6 * k] = 100 * i + 10 * j + k;
        want[12 * i + 4 * j + k] = 100 * i + 10 * j + k;
      }
  a = parse_npy(file(2, hdr(">f8", "(2, 3, 4)", true), f8s(stored, true)), "x");
  check_values(a, want);
  // rank 0 and 1 Fortran arrays are the same as C arrays.
  check_values(parse_npy(file(1, hdr("<f8", "()", true), f8s({7})), "x"), {7});
  check_values(parse_npy(file(1, hdr("<f8", "(3,)", true), f8s({1, 2, 3})), "x"), {1, 2, 3});
  check_values(parse_npy(file(1, hdr("<f8", "(0, 3)", true), ""), "x"), {});
}

BOOST_AUTO_TEST_CASE(files_written_by_numpy) {
  const fs::path d = data_dir();
  auto a = read_npy((d / "f2_be_fortran_v3.npy").string());
  BOOST_TEST((a.type == dtype::f2));
  BOOST_TEST(a.shape == (std::vector<std::size_t>{2, 3}));
  check_values(a, {0x1p-24, -0.0, 65504, -0x1p-14, 1023 * 0x1p-24, 0.333251953125});
  a = read_npy((d / "i8_be_v2.npy").string());
  BOOST_TEST((a.type == dtype::i8));
  check_values(a, {-0x1p63, 0x1p53, -0x1p53, 0x1p62});
  a = read_npy((d / "b1_scalar.npy").string());
  BOOST_TEST((a.type == dtype::b1));
  BOOST_TEST(a.shape.empty());
  check_values(a, {1});
  a = read_npy((d / "f4_empty_0x3.npy").string());
  BOOST_TEST((a.type == dtype::f4));
  BOOST_TEST(a.shape == (std::vector<std::size_t>{0, 3}));
  BOOST_TEST(a.values.empty());
  a = read_npy((d / "f8_fortran_2x3x2.npy").string());
  BOOST_TEST(a.shape == (std::vector<std::size_t>{2, 3, 2}));
  std::vector<double> want;
  for (int i = 0; i < 12; ++i) want.push_back(i - 5.5);
  check_values(a, want);
  a = read_npy((d / "py2_header_i4.npy").string());
  BOOST_TEST((a.type == dtype::i4));
  check_values(a, {0, 1, 2, 3, 4, 5});

  auto bad = [&](const char* name, const std::string& problem) {
    const std::string path = (d / name).string();
    expect_input_error([&] { (void)read_npy(path); }, problem);
    expect_input_error([&] { (void)read_npy(path); }, path + ": ");
  };
  bad("nan_at_1_2.npy", "contains NaN at index (1, 2)");
  bad("i8_inexact.npy", "int64 value 9007199254740993 at index (1,) is not exactly representable");
  bad("c16.npy", "unsupported dtype '<c16'");
  bad("truncated_f8.npy", "truncated data: expected 48 bytes, found 40");
}

// ---- float16 ---------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(float16_every_bit_pattern) {
  std::string data;
  std::vector<std::uint16_t> finite;
  for (std::uint32_t h = 0; h < 65536; ++h) {
    if (((h >> 10) & 0x1f) == 0x1f) {
      const bool nan = (h & 0x3ff) != 0;
      const std::string want = nan ? "contains NaN at index (0,)" : (h & 0x8000) ? "contains -Inf" : "contains +Inf";
      expect_error(file(1, hdr("<f2", "(1,)"), le(h, 2)), want);
      continue;
    }
    finite.push_back(static_cast<std::uint16_t>(h));
    data += le(h, 2);
  }
  BOOST_TEST_REQUIRE(finite.size() == 63488u);
  const auto a = parse_npy(file(1, hdr("<f2", "(63488,)"), data), "x");
  for (std::size_t i = 0; i < finite.size(); ++i) {
    const std::uint16_t h = finite[i];
    const int e = (h >> 10) & 0x1f, m = h & 0x3ff;
    double want = e == 0 ? m * 0x1p-24 : (1024 + m) * std::ldexp(1.0, e - 25);
    if (h & 0x8000) want = -want;
#ifdef __FLT16_MAX__
    _Float16 f;
    std::memcpy(&f, &h, 2);
    BOOST_TEST(same_bits(want, static_cast<double>(f)));  // the reference formula agrees with the compiler's
#endif
    if (!same_bits(a.values[i], want)) BOOST_ERROR("float16 0x" << std::hex << h << " decoded as " << a.values[i]);
  }
  // Encoding every finite value gives the original bits back.
  const std::string out = serialize_npy(a);
  BOOST_TEST(out.substr(out.size() - data.size()) == data);
  // Values between two neighbouring float16 values, or beyond them, are refused.
  for (double v : {65505.0, 65520.0, 1.0 / 3, 0x1p-25, 3 * 0x1p-26, 1 + 0x1p-11, 2049.0, -0x1p-30})
    expect_input_error([&] { (void)serialize_npy(npy_array{dtype::f2, {1}, {v}}); },
                       "is not exactly representable as float16");
}

// ---- errors ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(file_errors) {
  temp_dir dir;
  const std::string missing = (dir.path / "missing.npy").string();
  expect_input_error([&] { (void)read_npy(missing); }, missing + ": cannot open: No such file or directory");
  expect_input_error([&] { (void)read_npy(dir.path.string()); }, ": cannot read: Is a directory");
}

BOOST_AUTO_TEST_CASE(magic_version_and_truncated_header) {
  const std::string good = file(1, hdr("<f8", "(1,)"), f8s({1}));
  expect_error("", "not a .npy file (bad magic string)");
  expect_error("\x93NUMP", "bad magic");
  expect_error(std::string("PK\x03\x04\x14\x00\x00\x00", 8), "bad magic");  // an .npz
  expect_error("\x93NUMPX" + good.substr(6), "bad magic");
  expect_error(good.substr(0, 7), "truncated header");
  expect_error(good.substr(0, 9), "truncated header");
  expect_error(file(4, hdr("<f8", "(1,)"), f8s({1})), "unsupported .npy format version 4.0");
  expect_error(file(1, hdr("<f8", "(1,)"), f8s({1}), 1), "unsupported .npy format version 1.1");
  expect_error(file(0, hdr("<f8", "(1,)"), f8s({1})), "unsupported .npy format version 0.0");
  const std::string h = hdr("<f8", "(1,)");
  expect_error(good.substr(0, 10 + 20), "truncated header: expected " + std::to_string(h.size()) +
                                            " header bytes, found 20");
  expect_error(std::string("\x93NUMPY\x02\x00\xff\xff\xff\xff{}", 14), "truncated header: expected 4294967295");
}

BOOST_AUTO_TEST_CASE(malformed_headers) {
  const std::string d = f8s({1, 2, 3});
  auto with = [&](const std::string& header) { return file(1, header, d); };
  expect_error(with(""), "header is not a Python dict literal: empty header");
  expect_error(with("   \n"), "empty header");
  expect_error(with("['descr', '<f8']"), "header is not a dict");
  expect_error(with("'abc'"), "header is not a dict");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)"), "header is not a Python dict literal");
  expect_error(with("{'descr': '<f8' 'fortran_order': False}"), "header is not a Python dict literal");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)} x"), "after the literal");
  expect_error(with("{'descr': '<f8, 'fortran_order': False, 'shape': (3,)}"), "header is not a Python dict literal");
  expect_error(with("{'descr': '<f8', 'fortran_order': false, 'shape': (3,)}"), "unexpected name 'false'");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (03,)}"), "leading zeros");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (0_0_3,)}"), "leading zeros");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3__0,)}"), "invalid number");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3_,)}"), "invalid number");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (0x,)}"), "invalid number");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3a,)}"), "invalid number");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,,)}"), "header is not a Python dict");
  expect_error(with("{'descr': '''<f8''', 'fortran_order': False, 'shape': (3,)}"), "triple-quoted");
  expect_error(with(std::string(100, '(') + std::string(100, ')')), "nesting deeper than 32 levels");
  expect_error(with("{'descr': '<f8', 'shape': (3,)}"), "header is missing key 'fortran_order'");
  expect_error(with("{'descr': '<f8', 'fortran_order': False}"), "header is missing key 'shape'");
  expect_error(with("{'fortran_order': False, 'shape': (3,)}"), "header is missing key 'descr'");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'extra': 1}"),
               "header has unexpected key 'extra'");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 3: 1}"), "header has unexpected key 3");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,), 'shape': (3,)}"),
               "header has duplicate key 'shape'");
  const std::string fo = "'fortran_order' must be True or False";
  expect_error(with("{'descr': '<f8', 'fortran_order': 0, 'shape': (3,)}"), fo + ", got 0");
  expect_error(with("{'descr': '<f8', 'fortran_order': 'False', 'shape': (3,)}"), fo);
  expect_error(with("{'descr': '<f8', 'fortran_order': None, 'shape': (3,)}"), fo);
  const std::string sh = "bad header value: 'shape' must be a tuple of non-negative integers, got ";
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3)}"), sh + "(3)");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': [3]}"), sh + "[3]");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (-3,)}"), sh + "(-3,)");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3.0,)}"), sh + "(3.0,)");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (True,)}"), sh);
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': ((3,),)}"), sh);
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': '3'}"), sh);
  expect_error(with("{'descr': 8, 'fortran_order': False, 'shape': (3,)}"), "'descr' must be a dtype string, got 8");
  // Messages stay on one line whatever the header holds.
  expect_error(with("{'descr': '<f8\\n', 'fortran_order': False, 'shape': (3,)}"), "unsupported dtype");
  expect_error(with("{'descr': '<f8', 'fortran_order': False, 'shape': (3,)}\n\n\x01"), "unexpected '\\x01'");
}

BOOST_AUTO_TEST_CASE(unsupported_dtypes) {
  for (const char* descr : {"<c16", "<U3", "|O", "O", "<u4", "<f16", "|i1", "<i2", "<M8[ns]", "|S5", "<f8 ", ""})
    expect_error(file(1, hdr(descr, "(1,)"), std::string(8, '\0')), std::string("unsupported dtype '") + descr + "'");
  expect_error(file(1, "{'descr': [('a', '<f4'), ('b', '<i4')], 'fortran_order': False, 'shape': (1,)}", ""),
               "unsupported dtype [('a', '<f4'), ('b', '<i4')] (structured dtypes are not supported)");
}

BOOST_AUTO_TEST_CASE(shape_overflow) {
  for (const char* shape : {"(1099511627777,)", "(1048576, 1048576, 2)", "(18446744073709551616,)",
                            "(99999999999999999999999999999999,)", "(4294967296, 4294967296, 4294967296)",
                            "(0, 2199023255552)"})
    expect_error(file(1, hdr("<f8", shape), ""), "shape overflow: ");
  expect_error(file(1, hdr("<f8", "(1048576, 1048577)"), ""),
               "shape overflow: shape (1048576, 1048577) has more than 2^40 elements");
  expect_error(file(1, hdr("<f8", "(0, 2199023255552)"), ""),
               "shape overflow: the nonzero dimensions of shape (0, 2199023255552) multiply to more than 2^40");
  expect_error(file(1, hdr("<f8", "(0, 99999999999999999999999)"), ""),
               "the nonzero dimensions of shape (0, 99999999999999999999999) multiply to more than 2^40");
  // 2^40 elements is the limit itself: accepted by the header check, then the data is missing.
  expect_error(file(1, hdr("|b1", "(1048576, 1048576)"), ""), "truncated data: expected 1099511627776 bytes, found 0");
}

BOOST_AUTO_TEST_CASE(truncated_and_trailing_data) {
  std::vector<double> v(12, 1.0);
  const std::string full = file(1, hdr("<f8", "(2, 3, 2)"), f8s(v));
  expect_error(full.substr(0, full.size() - 56), "truncated data: expected 96 bytes, found 40");
  expect_error(full.substr(0, full.size() - 96), "truncated data: expected 96 bytes, found 0");
  expect_error(full + "x", "trailing garbage: 1 bytes after the 96 data bytes");
  expect_error(file(1, hdr("<f8", "(0,)"), "\n"), "trailing garbage: 1 bytes after the 0 data bytes");
}

BOOST_AUTO_TEST_CASE(non_finite_values) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  expect_error(file(1, hdr("<f8", "(2, 3)"), f8s({0, 1, 2, 3, 4, nan})), "case.npy: contains NaN at index (1, 2)");
  expect_error(file(1, hdr("<f8", "(3,)"), f8s({inf, 1, 2})), "contains +Inf at index (0,)");
  expect_error(file(1, hdr(">f8", "()"), f8s({-inf}, true)), "contains -Inf at index ()");
  expect_error(file(1, hdr("<f4", "(1, 1, 2)"), le(0, 4) + le(0xff800000, 4)), "contains -Inf at index (0, 0, 1)");
  expect_error(file(1, hdr(">f4", "(2,)"), be(0x7fc00001, 4) + be(0, 4)), "contains NaN at index (0,)");
  expect_error(file(1, hdr("<f2", "(2,)"), le(0, 2) + le(0x7c00, 2)), "contains +Inf at index (1,)");
  expect_error(file(1, hdr("<f2", "(2,)"), le(0, 2) + le(0xfe01, 2)), "contains NaN at index (1,)");
  // Fortran order: the index is the array's, not the storage position (storage 1 is (1, 0)).
  expect_error(file(1, hdr("<f8", "(2, 3)", true), f8s({0, nan, 0, 0, 0, 0})), "contains NaN at index (1, 0)");
  // The first bad element in C order is reported.
  expect_error(file(1, hdr("<f8", "(2, 2)", true), f8s({0, inf, nan, 0})), "contains NaN at index (0, 1)");
}

BOOST_AUTO_TEST_CASE(int64_and_bool_values) {
  const auto i8 = [](std::int64_t v) { return le(static_cast<std::uint64_t>(v), 8); };
  check_values(parse_npy(file(1, hdr("<i8", "(4,)"), i8(INT64_MIN) + i8(1ll << 62) + i8(-(1ll << 53)) +
                                                         i8((1ll << 53) + 2)),
                         "x"),
               {-0x1p63, 0x1p62, -0x1p53, 0x1p53 + 2});
  expect_error(file(1, hdr("<i8", "(2,)"), i8(0) + i8((1ll << 53) + 1)),
               "int64 value 9007199254740993 at index (1,) is not exactly representable as a double");
  expect_error(file(1, hdr("<i8", "()"), i8(INT64_MAX)), "int64 value 9223372036854775807 at index ()");
  expect_error(file(1, hdr(">i8", "(1,)"), be(static_cast<std::uint64_t>(INT64_MIN + 1), 8)), "not exactly representable");
  expect_error(file(1, hdr("|b1", "(2, 2)"), std::string("\x00\x01\x01\x02", 4)), "invalid bool byte 2 at index (1, 1)");
}

BOOST_AUTO_TEST_CASE(write_errors) {
  auto bad = [](dtype t, std::vector<std::size_t> shape, std::vector<double> v, const std::string& problem) {
    expect_input_error([&] { (void)serialize_npy(npy_array{t, shape, v}); }, problem);
  };
  bad(dtype::f8, {2, 3}, {1, 2, 3}, "3 values do not match shape (2, 3) (6 elements)");
  bad(dtype::f8, {}, {}, "0 values do not match shape () (1 elements)");
  bad(dtype::f8, {1u << 21, 1u << 20}, {}, "npy array: shape overflow: shape (2097152, 1048576) has more than 2^40");
  bad(dtype::f8, {2}, {1, std::numeric_limits<double>::quiet_NaN()}, "value nan at index (1,)");
  bad(dtype::f8, {1}, {-std::numeric_limits<double>::infinity()}, "not exactly representable as float64");
  bad(dtype::f4, {1}, {0.1}, "value 0.1 at index (0,) is not exactly representable as float32");
  bad(dtype::f4, {1}, {1e39}, "as float32");
  bad(dtype::f4, {1}, {0x1p-150}, "as float32");
  bad(dtype::i4, {1}, {2147483648.0}, "as int32");
  bad(dtype::i4, {1}, {-2147483649.0}, "as int32");
  bad(dtype::i4, {1}, {0.5}, "as int32");
  bad(dtype::i8, {1}, {0x1p63}, "as int64");
  bad(dtype::i8, {1}, {-0x1p64}, "as int64");
  bad(dtype::b1, {1}, {2}, "as bool");
  bad(dtype::b1, {1}, {-1}, "as bool");
  // edges that are representable
  BOOST_CHECK_NO_THROW(serialize_npy(npy_array{dtype::i8, {1}, {-0x1p63}}));
  BOOST_CHECK_NO_THROW(serialize_npy(npy_array{dtype::i4, {1}, {-2147483648.0}}));
  BOOST_CHECK_NO_THROW(serialize_npy(npy_array{dtype::f4, {1}, {0x1p-149}}));
}

BOOST_AUTO_TEST_CASE(write_is_atomic) {
  temp_dir dir;
  const std::string p = (dir.path / "a.npy").string();
  write_npy(p, npy_array{dtype::f8, {2}, {1, 2}});
  const std::string before = slurp(p);
  // A value that cannot be written leaves the old file and no temporary file.
  expect_input_error([&] { write_npy(p, npy_array{dtype::f4, {1}, {0.1}}); }, p + ": value 0.1");
  BOOST_TEST(slurp(p) == before);
  BOOST_TEST(dir.entries() == std::vector<std::string>{"a.npy"});
  // Replacing works.
  write_npy(p, npy_array{dtype::i4, {3}, {1, 2, 3}});
  check_values(read_npy(p), {1, 2, 3});
  BOOST_TEST(dir.entries() == std::vector<std::string>{"a.npy"});
  // A missing directory, or a directory in the way, is an input_error and leaves nothing.
  const std::string nodir = (dir.path / "no" / "b.npy").string();
  expect_input_error([&] { write_npy(nodir, npy_array{dtype::f8, {}, {1}}); }, nodir + ": cannot write");
  fs::create_directory(dir.path / "sub");
  const std::string sub = (dir.path / "sub").string();
  expect_input_error([&] { write_npy(sub, npy_array{dtype::f8, {}, {1}}); }, sub + ": cannot write");
  BOOST_TEST(dir.entries().size() == 2u);
  BOOST_TEST(fs::is_empty(dir.path / "sub"));
}

// ---- fuzz ----------------------------------------------------------------------------------

BOOST_AUTO_TEST_CASE(fuzz_mutations_never_crash) {
  std::uint64_t seed = 20240611;
  if (const char* s = std::getenv("ATTNCERT_SEED")) seed = std::strtoull(s, nullptr, 0);
  std::cout << "io_npy fuzz: seed " << seed << " (set ATTNCERT_SEED to reproduce)" << std::endl;
  std::mt19937_64 rng(seed);

  std::vector<std::string> bases = {
      file(1, "{'descr': '<f8', 'fortran_order': True, 'shape': (2, 3), }  \n", f8s({1, 2, 3, 4, 5, 6})),
      file(3, "{\"shape\": (3,), 'descr': '>f2', 'fortran_order': False}\n", be(0x3c00, 2) + be(0x0001, 2) + be(0x8000, 2)),
      file(2, "{'descr': u'<i8', 'fortran_order': False, 'shape': (2L,),}\n", le(5, 8) + le(1ull << 60, 8)),
      serialize_npy(npy_array{dtype::b1, {2, 2}, {1, 0, 0, 1}}),
      serialize_npy(npy_array{dtype::i4, {}, {-3}}),
  };
  static const char chars[] = "(){}[],:'\"0123456789-+_.Lux#\\ \n\t\x93\xff\x00TrueFalse";
  const std::string interesting(chars, sizeof chars - 1);  // with the NUL
  auto pick = [&](std::size_t n) { return n == 0 ? std::size_t{0} : static_cast<std::size_t>(rng() % n); };

  int parsed = 0, rejected = 0;
  for (int iter = 0; iter < 2000; ++iter) {
    std::string s = bases[pick(bases.size())];
    const int ops = 1 + static_cast<int>(pick(4));
    for (int k = 0; k < ops; ++k) {
      // Mostly mutate the header, where the parsing happens.
      const std::size_t limit = rng() % 4 ? std::min<std::size_t>(s.size(), 96) : s.size();
      // Each random draw is its own statement, so the sequence is the same with every compiler.
      const std::size_t op = pick(6);
      const std::size_t at = pick(op == 2 || op == 3 ? limit + 1 : limit);
      const std::size_t arg = pick(op == 3 || op == 4 ? interesting.size() : 8);
      const auto byte = static_cast<char>(rng());
      switch (op) {
        case 0:  // bit flip
          if (!s.empty()) s[at] ^= static_cast<char>(1u << arg);
          break;
        case 1:  // truncation
          s.resize(at * s.size() / std::max<std::size_t>(limit, 1));
          break;
        case 2:  // insertion of random bytes
          s.insert(at, std::string(1 + arg % 4, byte));
          break;
        case 3:  // insertion of a syntax character
          s.insert(at, 1, interesting[arg]);
          break;
        case 4:  // overwrite with a syntax character
          if (!s.empty()) s[at] = interesting[arg];
          break;
        default:  // deletion
          if (!s.empty()) s.erase(at, 1 + arg % 3);
          break;
      }
    }
    try {
      const npy_array a = parse_npy(s, "fuzz.npy");
      std::size_t n = 1;
      for (auto d : a.shape) n *= d;
      BOOST_TEST_REQUIRE(a.values.size() == n, "seed " << seed << " iteration " << iter);
      ++parsed;
    } catch (const input_error& e) {
      const std::string m = e.what();
      if (m.find('\n') != std::string::npos || m.rfind("fuzz.npy: ", 0) != 0)
        BOOST_ERROR("seed " << seed << " iteration " << iter << ": bad message " << m);
      ++rejected;
    } catch (const std::exception& e) {
      BOOST_ERROR("seed " << seed << " iteration " << iter << ": unexpected exception " << e.what());
    }
  }
  std::cout << "io_npy fuzz: " << parsed << " parsed, " << rejected << " rejected" << std::endl;
  BOOST_TEST(parsed + rejected == 2000);
}
