// tests/io/atomic_file.cpp — attncert/io/atomic_file.hpp: atomic writes, and output
// transactions that commit everything or leave nothing (no target, no temporary, no parent
// directory they created).
#define BOOST_TEST_MODULE io_atomic_file
#include <boost/test/unit_test.hpp>

#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <stdexcept>
#include <chrono>
#include <thread>

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

// Issue 28, item 4: two outputs on one file are refused (the second silently replaced the
// first), whatever spelling names the file; nothing is written.
BOOST_AUTO_TEST_CASE(two_outputs_on_one_file_are_refused) {
  scratch_dir d;
  fs::create_directories(d.path / "sub");
  {
    output_transaction tx;
    tx.stage_file(d / "x.npy", "first");
    BOOST_CHECK_THROW(tx.stage_file(d / "x.npy", "second"), input_error);
    BOOST_CHECK_THROW(tx.stage_file((d.path / "sub" / ".." / "x.npy").string(), "third"), input_error);
  }
  BOOST_TEST(!fs::exists(d.path / "x.npy"));
  BOOST_TEST(entries(d.path) == 1u);  // sub/ only: no temporary left
  // A symbolic link to the first target is the same file.
  fs::create_symlink(d.path / "y.npy", d.path / "link.npy");
  output_transaction tx;
  tx.stage_file(d / "y.npy", "a");
  try {
    tx.stage_file(d / "link.npy", "b");
    BOOST_ERROR("a link to a staged target was accepted");
  } catch (const input_error& e) {
    BOOST_TEST(std::string(e.what()).find("two outputs") != std::string::npos, e.what());
  }
}

// A target that is not a regular file is written through, never renamed over: a symbolic link
// to /dev/null stays a link to the device (the rename replaced it with a regular file; as root
// it replaced /dev/null itself), and a FIFO receives the bytes and stays a FIFO.
BOOST_AUTO_TEST_CASE(devices_and_fifos_are_written_through) {
  scratch_dir d;
  fs::create_symlink("/dev/null", d.path / "null.npy");
  {
    output_transaction tx;
    tx.stage_file(d / "null.npy", "discarded");
    tx.stage_file(d / "real.npy", "kept");
    tx.commit();
  }
  BOOST_TEST(fs::is_symlink(d.path / "null.npy"));
  BOOST_TEST(fs::is_character_file(d.path / "null.npy"));
  BOOST_TEST(slurp(d.path / "real.npy") == "kept");
  write_file_atomic(d / "null.npy", "again");
  BOOST_TEST(fs::is_symlink(d.path / "null.npy"));

  const fs::path fifo = d.path / "pipe.npy";
  BOOST_REQUIRE(::mkfifo(fifo.c_str(), 0600) == 0);
  // No reader: an error, not a hang.
  {
    output_transaction tx;
    tx.stage_file(fifo.string(), "bytes");
    BOOST_CHECK_THROW(tx.commit(), input_error);
  }
  BOOST_TEST(fs::is_fifo(fifo));
  // With a reader: the bytes arrive.
  std::string got;
  std::thread reader([&] { got = slurp(fifo); });
  for (int i = 0; i < 200; ++i) {  // the reader's open must come first
    output_transaction tx;
    tx.stage_file(fifo.string(), "through the pipe");
    try {
      tx.commit();
      break;
    } catch (const input_error&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }
  reader.join();
  BOOST_TEST(got == "through the pipe");
  BOOST_TEST(fs::is_fifo(fifo));
}
