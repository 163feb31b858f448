// lib/src/io/atomic_file.cpp — atomic file writing and output transactions, see
// attncert/io/atomic_file.hpp.
#include "attncert/io/atomic_file.hpp"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <system_error>

#include "attncert/error.hpp"

namespace attncert::io {

namespace fs = std::filesystem;

namespace {

std::atomic<int> pending_transactions{0};
std::atomic<bool> committed_transactions{false};
static_assert(std::atomic<int>::is_always_lock_free, "read from a signal handler");
std::atomic<unsigned long> temp_counter{0};

[[noreturn]] void fail(const fs::path& target, const std::string& reason) {
  throw input_error(one_line(target.string(), 4096) + ": cannot write: " + reason);
}

std::string errno_text(int err) { return std::error_code(err, std::generic_category()).message(); }

fs::path directory_of(const fs::path& p) {
  const fs::path d = p.parent_path();
  return d.empty() ? fs::path(".") : d;
}

// A fresh name beside `target`: DIR/.NAME.attncert-KIND-PID-N (hidden, recognisable).
fs::path temp_name(const fs::path& target, const char* kind) {
  return directory_of(target) / ("." + target.filename().string() + ".attncert-" + kind + "-" +
                                 std::to_string(::getpid()) + "-" + std::to_string(temp_counter++));
}

// Writes all of `bytes` to `fd` and flushes it to disk; returns 0 or an errno value.
int write_and_sync(int fd, std::string_view bytes) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return errno;
    done += static_cast<std::size_t>(n);
  }
  return ::fsync(fd) != 0 ? errno : 0;
}

// Flushes a directory's entries to disk (best effort: not every file system supports it).
void sync_directory(const fs::path& dir) {
  const int fd = ::open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return;
  (void)::fsync(fd);
  ::close(fd);
}

// Creates `path` exclusively, writes and syncs `bytes`; on failure removes it and throws
// input_error naming `target`.
void create_synced(const fs::path& path, std::string_view bytes, const fs::path& target) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
  if (fd < 0) fail(target, errno_text(errno));
  int err = write_and_sync(fd, bytes);
  if (::close(fd) != 0 && err == 0) err = errno;
  if (err != 0) {
    ::unlink(path.c_str());
    fail(target, errno_text(err));
  }
}

void refuse_directory_target(const fs::path& target) {
  struct stat st {};
  if (::stat(target.c_str(), &st) == 0 && S_ISDIR(st.st_mode)) fail(target, "it is a directory");
}

// A temporary file beside `target` holding `bytes` (synced); its path.
fs::path write_temp_beside(const fs::path& target, std::string_view bytes) {
  if (!target.has_filename()) fail(target, "not a file name");
  refuse_directory_target(target);
  for (int attempt = 0;; ++attempt) {
    const fs::path tmp = temp_name(target, "tmp");
    const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666);
    if (fd < 0 && errno == EEXIST && attempt < 100) continue;
    if (fd < 0) fail(target, errno_text(errno));
    int err = write_and_sync(fd, bytes);
    if (::close(fd) != 0 && err == 0) err = errno;
    if (err != 0) {
      ::unlink(tmp.c_str());
      fail(target, errno_text(err));
    }
    return tmp;
  }
}

// A target that is not a file to replace: an existing node that is neither a regular file nor a
// directory (a device such as /dev/null, a FIFO, a terminal), or any path under /dev/ or /proc/
// (/dev/stdout names a descriptor, whatever it is open on).  Such a target is written through
// (opened, written, never created, truncated or renamed over: a rename would replace the device
// node with a regular file).
bool write_through_target(const fs::path& target) {
  const std::string t = target.string();
  if (t.rfind("/dev/", 0) == 0 || t.rfind("/proc/", 0) == 0) return true;
  struct stat st {};
  return ::stat(target.c_str(), &st) == 0 && !S_ISREG(st.st_mode) && !S_ISDIR(st.st_mode);
}

// Writes `bytes` through to an existing non-regular target; 0 or an errno value.  Opened
// non-blocking (a FIFO without a reader fails with ENXIO instead of hanging), then blocking for
// the writes.
int write_through(const fs::path& target, std::string_view bytes) {
  const int fd = ::open(target.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (fd < 0) return errno;
  const int flags = ::fcntl(fd, F_GETFL);
  if (flags >= 0) (void)::fcntl(fd, F_SETFL, flags & ~O_NONBLOCK);
  std::size_t done = 0;
  int err = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      err = errno;
      break;
    }
    done += static_cast<std::size_t>(n);
  }
  if (::close(fd) != 0 && err == 0) err = errno;
  return err;
}

// The file a target names, for comparing two outputs' targets: absolute, symbolic links and
// "." / ".." resolved as far as the path exists.
fs::path resolved(const fs::path& target) {
  std::error_code ec;
  fs::path p = fs::absolute(target, ec).lexically_normal();
  for (int hops = 0; hops < 40 && fs::is_symlink(p, ec); ++hops) {  // a dangling link names its future target
    const fs::path to = fs::read_symlink(p, ec);
    if (ec) break;
    p = (to.is_absolute() ? to : p.parent_path() / to).lexically_normal();
  }
  const fs::path c = fs::weakly_canonical(p, ec);
  return ec ? p : c;
}

void remove_quietly(const fs::path& p) {
  std::error_code ec;
  fs::remove_all(p, ec);
}

}  // namespace

void write_file_atomic(const std::string& path, std::string_view bytes) {
  const fs::path target(path);
  if (write_through_target(target)) {
    if (const int err = write_through(target, bytes)) fail(target, errno_text(err));
    return;
  }
  const fs::path tmp = write_temp_beside(target, bytes);
  if (::rename(tmp.c_str(), target.c_str()) != 0) {
    const int err = errno;
    ::unlink(tmp.c_str());
    fail(target, errno_text(err));
  }
  sync_directory(directory_of(target));
}

void write_new_file(const fs::path& path, std::string_view bytes) { create_synced(path, bytes, path); }

bool outputs_pending() noexcept { return pending_transactions.load(std::memory_order_relaxed) > 0; }

bool outputs_committed() noexcept { return committed_transactions.load(std::memory_order_relaxed); }

output_transaction::~output_transaction() { rollback(); }

void output_transaction::begin_pending() {
  if (!pending_) pending_transactions.fetch_add(1);
  pending_ = true;
}

void output_transaction::stage_file(const std::string& path, std::string_view bytes) {
  begin_pending();
  const fs::path target(path);
  if (write_through_target(target)) {
    staged o;
    o.target = target;
    o.through = true;
    o.bytes = std::string(bytes);
    staged_.push_back(std::move(o));
    return;
  }
  // Two outputs on one file: the second would silently replace the first.
  const fs::path key = resolved(target);
  for (const auto& o : staged_)
    if (!o.through && resolved(o.target) == key)
      fail(target, "named for two outputs of one command (" + o.target.string() + " is already one): give each its own file");
  staged o;
  o.temp = write_temp_beside(target, bytes);
  o.target = target;
  staged_.push_back(std::move(o));
}

fs::path output_transaction::stage_directory(const std::string& path) {
  begin_pending();
  fs::path target(path);
  if (!target.has_filename()) target = target.parent_path();  // "out/" names "out"
  std::error_code ec;
  if (fs::exists(target, ec) && !fs::is_directory(target, ec)) fail(target, "it exists and is not a directory");
  // Missing parents are created now (outermost first) and remembered for the rollback.
  std::vector<fs::path> missing;
  for (fs::path p = target.parent_path(); !p.empty() && !fs::exists(p, ec); p = p.parent_path()) missing.push_back(p);
  for (auto it = missing.rbegin(); it != missing.rend(); ++it) {
    if (::mkdir(it->c_str(), 0777) != 0 && errno != EEXIST) fail(target, errno_text(errno));
    created_parents_.push_back(*it);
  }
  for (int attempt = 0;; ++attempt) {
    const fs::path tmp = temp_name(target, "tmp");
    if (::mkdir(tmp.c_str(), 0777) == 0) {
      staged o;
      o.temp = tmp;
      o.target = target;
      o.directory = true;
      staged_.push_back(std::move(o));
      return tmp;
    }
    if (errno != EEXIST || attempt >= 100) fail(target, errno_text(errno));
  }
}

fs::path output_transaction::scratch_directory(const std::string& near) {
  begin_pending();
  fs::path at(near);
  if (!at.has_filename()) at = at.parent_path();
  for (int attempt = 0;; ++attempt) {
    const fs::path tmp = temp_name(at, "scratch");
    if (::mkdir(tmp.c_str(), 0777) == 0) {
      scratch_.push_back(tmp);
      return tmp;
    }
    if (errno != EEXIST || attempt >= 100) fail(at, errno_text(errno));
  }
}

void output_transaction::commit() {
  struct step {
    fs::path target, backup;
    bool existed = false, directory = false;
  };
  std::vector<step> done;
  auto undo = [&]() noexcept {
    for (auto it = done.rbegin(); it != done.rend(); ++it) {
      if (it->directory) remove_quietly(it->target);
      else if (!it->backup.empty()) ::rename(it->backup.c_str(), it->target.c_str());
      else if (!it->existed) ::unlink(it->target.c_str());
    }
  };
  // Moves the file `from` over `to`, keeping a hard-link backup of a file it replaces.
  auto move_file = [&](const fs::path& from, const fs::path& to) {
    step s{to, {}, false, false};
    struct stat st {};
    if (::lstat(to.c_str(), &st) == 0) {
      s.existed = true;
      const fs::path bak = temp_name(to, "bak");
      if (::link(to.c_str(), bak.c_str()) == 0) s.backup = bak;
    }
    if (::rename(from.c_str(), to.c_str()) != 0) {
      const int err = errno;
      if (!s.backup.empty()) ::unlink(s.backup.c_str());
      undo();
      fail(to, errno_text(err));
    }
    done.push_back(s);
  };
  // Set before the first rename, while the transaction is still pending: a signal handler never
  // sees "nothing pending, nothing committed" between the two.
  if (!staged_.empty()) committed_transactions.store(true);
  for (const auto& o : staged_) {
    if (o.through) continue;  // written after every rename succeeded (a device write cannot be undone)
    if (!o.directory) {
      move_file(o.temp, o.target);
      continue;
    }
    std::error_code ec;
    for (const auto& e : fs::directory_iterator(o.temp, ec)) {  // durable before visible
      if (!e.is_regular_file(ec)) continue;
      const int fd = ::open(e.path().c_str(), O_RDONLY | O_CLOEXEC);
      if (fd >= 0) {
        (void)::fsync(fd);
        ::close(fd);
      }
    }
    sync_directory(o.temp);
    if (!fs::exists(o.target, ec)) {
      if (::rename(o.temp.c_str(), o.target.c_str()) != 0) {
        const int err = errno;
        undo();
        fail(o.target, errno_text(err));
      }
      done.push_back({o.target, {}, false, true});
    } else {
      std::vector<fs::path> entries;  // listed first: renaming while reading a directory is unspecified
      for (const auto& e : fs::directory_iterator(o.temp, ec)) entries.push_back(e.path());
      for (const auto& e : entries) move_file(e, o.target / e.filename());
    }
  }
  for (const auto& o : staged_)
    if (o.through)
      if (const int err = write_through(o.target, o.bytes)) {
        undo();
        fail(o.target, errno_text(err));
      }
  for (const auto& s : done) {
    if (!s.backup.empty()) ::unlink(s.backup.c_str());
    sync_directory(directory_of(s.target));
  }
  for (const auto& o : staged_)
    if (o.directory && !o.through) remove_quietly(o.temp);  // emptied (merged) or already renamed away
  staged_.clear();
  created_parents_.clear();  // they now hold committed outputs
  rollback();                // scratch directories and the pending count
}

void output_transaction::rollback() noexcept {
  for (const auto& o : staged_)
    if (!o.through) remove_quietly(o.temp);
  staged_.clear();
  for (const auto& s : scratch_) remove_quietly(s);
  scratch_.clear();
  for (auto it = created_parents_.rbegin(); it != created_parents_.rend(); ++it) ::rmdir(it->c_str());
  created_parents_.clear();
  if (pending_) pending_transactions.fetch_sub(1);
  pending_ = false;
}

}  // namespace attncert::io
