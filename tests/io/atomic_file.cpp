// tests/io/atomic_file.cpp — attncert/io/atomic_file.hpp: atomic writes, and output
// transactions that commit everything or leave nothing (no target, no temporary, no parent
// directory they created).
#define BOOST_TEST_MODULE io_atomic_file
#include <boost/test/unit_test.hpp>

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>

#include "attncert/error.hpp"
#include "attncert/io/atomic_file.hpp"

using namespace attncert;
using namespace attncert::io;
namespace fs = std::filesystem;

namespace {

struct scratch_dir {
  fs::path path = fs::temp_directory_path() / ("attncert-test-atomic-" + std::to_string(::getpid()));
  scratch_dir() {
    fs::remove_all(path);
    fs::create_directories(path);
  }
  ~scratch_dir() { fs::remove_all(path); }
  std::string operator/(const std::string& name) const { return (path / name).string(); }
};

std::string slurp(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::ostringstream os;
  os << in.rdbuf();
  return os.str();
}

std::size_t entries(const fs::path& d) {
  std::size_t n = 0;
  for (auto it = fs::recursive_directory_iterator(d); it != fs::recursive_directory_iterator(); ++it) ++n;
  return n;
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

}  // namespace

BOOST_AUTO_TEST_CASE(write_file_atomic_replaces_or_leaves_as_it_was) {
  scratch_dir d;
  write_file_atomic(d / "a.txt", "one");
  write_file_atomic(d / "a.txt", "two");
  BOOST_TEST(slurp(d / "a.txt") == "two");
  expect_input_error([&] { write_file_atomic(d / "missing/a.txt", "x"); }, "missing/a.txt: cannot write");
  expect_input_error([&] { write_file_atomic(d.path.string(), "x"); }, "it is a directory");
  expect_input_error([&] { write_file_atomic(d / "no\ndir/x", "x"); }, "no\\x0adir/x: cannot write");  // one line
  BOOST_TEST(slurp(d / "a.txt") == "two");
}

BOOST_AUTO_TEST_CASE(transaction_without_commit_leaves_nothing) {
  scratch_dir d;
  write_file_atomic(d / "kept.txt", "old");
  BOOST_TEST(!outputs_pending());
  try {
    output_transaction tx;
    tx.stage_file(d / "kept.txt", "new");
    tx.stage_file(d / "report.txt", "report");
    const fs::path dir = tx.stage_directory(d / "p/q/figs");
    write_new_file(dir / "f.dat", "1");
    const fs::path s = tx.scratch_directory(d / "plot.png");
    write_new_file(s / "plot.gp", "plot");
    BOOST_TEST(outputs_pending());
    throw std::runtime_error("failure after staging");
  } catch (const std::runtime_error&) {
  }
  BOOST_TEST(!outputs_pending());
  BOOST_TEST(!outputs_committed());  // a rollback commits nothing (cases run in file order)
  BOOST_TEST(slurp(d / "kept.txt") == "old");
  BOOST_TEST(entries(d.path) == 1u);  // kept.txt only: no temporary, no created parent
}

BOOST_AUTO_TEST_CASE(a_failing_stage_leaves_nothing) {
  scratch_dir d;
  {
    output_transaction tx;
    tx.stage_file(d / "ref.npy", "ref");
    expect_input_error([&] { tx.stage_file(d / "nodir/r.txt", "r"); }, "nodir/r.txt: cannot write");
  }
  BOOST_TEST(entries(d.path) == 0u);
}

BOOST_AUTO_TEST_CASE(commit_makes_everything_visible) {
  scratch_dir d;
  write_file_atomic(d / "a.txt", "old");
  {
    output_transaction tx;
    tx.stage_file(d / "a.txt", "new");
    const fs::path dir = tx.stage_directory(d / "p/figs");
    write_new_file(dir / "f1", "1");
    const fs::path s = tx.scratch_directory(d / "plot.png");
    write_new_file(s / "tmp", "t");
    BOOST_TEST(!fs::exists(d / "p/figs"));
    tx.commit();
    BOOST_TEST(!outputs_pending());
    BOOST_TEST(outputs_committed());  // the CLI's signal handler then lets the command finish
  }
  BOOST_TEST(slurp(d / "a.txt") == "new");
  BOOST_TEST(slurp(d / "p/figs/f1") == "1");
  BOOST_TEST(entries(d.path) == 4u);  // a.txt, p, p/figs, p/figs/f1: scratch removed
  {
    output_transaction tx;  // into an existing directory: its files are replaced one by one
    const fs::path dir = tx.stage_directory(d / "p/figs");
    write_new_file(dir / "f1", "2");
    write_new_file(dir / "f2", "3");
    tx.commit();
  }
  BOOST_TEST(slurp(d / "p/figs/f1") == "2");
  BOOST_TEST(slurp(d / "p/figs/f2") == "3");
  BOOST_TEST(entries(d.path) == 5u);
  output_transaction tx;
  expect_input_error([&] { tx.stage_directory(d / "a.txt"); }, "a.txt: cannot write: it exists and is not a directory");
}
