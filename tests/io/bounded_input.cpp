// Tests of attncert/io/bounded_input.hpp: the bounded reader stops endless inputs
// (/dev/zero, a FIFO) at the limit within a second, a FIFO without a writer does not hang,
// and overflowing number literals are quoted (strings and malformed tokens are left for the
// parser).  Also the bounded reading through read_npy and read_exact_matrix.
#define BOOST_TEST_MODULE io_bounded_input
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <string>

#include "attncert/error.hpp"
#include "attncert/field.hpp"
#include "attncert/io/bounded_input.hpp"
#include "attncert/io/matrix_input.hpp"
#include "attncert/io/npy.hpp"
#include <nlohmann/json.hpp>

using namespace attncert;
namespace fs = std::filesystem;

namespace {

struct temp_dir {
  fs::path path = fs::temp_directory_path() / ("attncert_io_bounded_" + std::to_string(::getpid()));
  temp_dir() { fs::create_directories(path); }
  ~temp_dir() {
    std::error_code ec;
    fs::remove_all(path, ec);
  }
};

double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

std::string error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const input_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace

BOOST_AUTO_TEST_CASE(dev_zero_stops_at_the_limit) {
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e = error_of([] { (void)io::read_file_bounded("/dev/zero", 1 << 20); });
  BOOST_TEST(e.find("larger than the input limit of 1048576 bytes") != std::string::npos, e);
  BOOST_TEST(seconds_since(t0) < 1.0);
}

BOOST_AUTO_TEST_CASE(small_files_are_read_whole_and_the_limit_is_inclusive) {
  temp_dir d;
  const fs::path p = d.path / "ten.txt";
  std::ofstream(p) << "0123456789";
  BOOST_TEST(io::read_file_bounded(p.string(), 10) == "0123456789");
  BOOST_CHECK_THROW(io::read_file_bounded(p.string(), 9), input_error);
  BOOST_CHECK_THROW(io::read_file_bounded((d.path / "missing").string(), 10), input_error);
  BOOST_CHECK_THROW(io::read_file_bounded(d.path.string(), 10), input_error);  // a directory
}

BOOST_AUTO_TEST_CASE(a_fifo_without_writer_does_not_hang) {
  temp_dir d;
  const fs::path p = d.path / "fifo";
  BOOST_TEST_REQUIRE(::mkfifo(p.c_str(), 0600) == 0);
  const auto t0 = std::chrono::steady_clock::now();
  BOOST_TEST(io::read_file_bounded(p.string(), 100) == "");
  BOOST_TEST(seconds_since(t0) < 1.0);
}

BOOST_AUTO_TEST_CASE(the_process_wide_limit_applies_to_npy_and_json_matrices) {
  temp_dir d;
  const fs::path npy = d.path / "zero.npy", js = d.path / "zero.json";
  fs::create_symlink("/dev/zero", npy);
  fs::create_symlink("/dev/zero", js);
  const std::size_t old = io::max_input_bytes();
  BOOST_TEST(old == io::default_max_input_bytes);
  io::set_max_input_bytes(1 << 16);
  const auto t0 = std::chrono::steady_clock::now();
  const std::string e1 = error_of([&] { (void)io::read_npy(npy.string()); });
  const std::string e2 = error_of([&] { (void)io::read_exact_matrix(js.string(), field("scores")); });
  io::set_max_input_bytes(old);
  BOOST_TEST(e1.find("larger than the input limit of 65536 bytes") != std::string::npos, e1);
  BOOST_TEST(e2.find(field("scores") + ": ") == 0, e2);
  BOOST_TEST(e2.find("larger than the input limit") != std::string::npos, e2);
  BOOST_TEST(seconds_since(t0) < 1.0);
  BOOST_CHECK_THROW(io::set_max_input_bytes(0), input_error);
  // at the default limit /dev/zero is still stopped quickly (64 MiB read, then rejected)
  const auto t1 = std::chrono::steady_clock::now();
  BOOST_CHECK_THROW(io::read_npy(npy.string()), input_error);
  BOOST_TEST(seconds_since(t1) < 5.0);
}

BOOST_AUTO_TEST_CASE(overflowing_literals_become_their_text) {
  using io::quote_huge_number_literals;
  const std::string big_int(400, '9');
  BOOST_TEST(quote_huge_number_literals("[1e100000, -0.5, 2, -3, -1E+400, 1e-100000]") ==
             "[\"1e100000\", -0.5, 2, -3, \"-1E+400\", 1e-100000]");
  BOOST_TEST(quote_huge_number_literals("[" + big_int + ", 18446744073709551616]") == "[\"" + big_int + "\", 18446744073709551616]");
  // strings are copied as they are, escaped quotes included
  BOOST_TEST(quote_huge_number_literals("{\"a\": \"1e999 [\\\" 2e999\", \"b\": 1E999}") ==
             "{\"a\": \"1e999 [\\\" 2e999\", \"b\": \"1E999\"}");
  // malformed numbers stay malformed for the parser
  for (const char* bad : {"[01e999]", "[1.e999]", "[.5e999]", "[-]", "[1e]", "[1e+]", "[+1e999]", "[- 1e999]", "[1e999x]"})
    BOOST_TEST(!nlohmann::json::accept(quote_huge_number_literals(bad)), bad);
  BOOST_TEST(quote_huge_number_literals("\"unterminated 1e999") == "\"unterminated 1e999");
}

BOOST_AUTO_TEST_CASE(json_matrices_read_float_literals_exactly) {
  temp_dir d;
  const fs::path p = d.path / "m.json";
  std::ofstream(p) << "[[1e100000, \"1e100000\"], [0.1, 1e-100000]]";
  const auto m = io::read_exact_matrix(p.string(), field("scores"));
  BOOST_TEST(m(0, 0) == m(0, 1));
  BOOST_TEST(m(1, 0) == mpq_rational(1, 10));
  BOOST_TEST(m(1, 1) > 0);
}

BOOST_AUTO_TEST_CASE(one_line_escapes_control_characters) {
  BOOST_TEST(one_line("a\nb\r\x7f") == "a\\x0ab\\x0d\\x7f");
  BOOST_TEST(one_line(std::string(100, 'x'), 10) == std::string(10, 'x') + "...");
}
