// tools/attncert/cli_common.hpp — small helpers shared by the subcommands of the CLI.
#pragma once

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <string>

#include "attncert/error.hpp"

namespace attncert::cli {

/// The command line as one string (arguments with blanks or quotes quoted), for reports.
inline std::string join_args(int argc, char** argv) {
  std::string s = "attncert";
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    s += " " + (a.find_first_of(" \t\"'") == std::string::npos ? a : "'" + a + "'");
  }
  return s;
}

/// Writes `content` to `path` atomically (temp file + rename), or to stdout when `path` is
/// empty or "-".  Errors: input_error (the file is then left as it was).
inline void emit(const std::string& path, const std::string& content) {
  if (path.empty() || path == "-") {
    std::cout << content;
    std::cout.flush();
    return;
  }
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out(tmp, std::ios::binary);
    if (!out) throw input_error("cannot write '" + path + "'");
    out << content;
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      throw input_error("cannot write '" + path + "'");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::remove(tmp.c_str());
    throw input_error("cannot write '" + path + "': " + ec.message());
  }
}

}  // namespace attncert::cli
