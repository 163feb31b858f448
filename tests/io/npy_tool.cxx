// tests/io/npy_tool.cxx — a small driver of attncert/io/npy.hpp for tests/io/npy_numpy.sh.
//
//   npy_tool cat FILE
//       prints one JSON line {"dtype": "f8", "shape": [2, 3], "values": [1.0, ...]}; the values
//       are in C order, each the shortest decimal that reads back as the same double (always
//       with a '.' or an exponent, so -0.0 keeps its sign through a JSON reader).
//   npy_tool write DTYPE FILE [VALUE...] [--shape A,B,...]
//       writes VALUEs (decimal, read exactly) as a DTYPE (f2 f4 f8 i4 i8 u1 b1) file of the given
//       shape; "--shape" with an empty list writes a scalar, no --shape a 1-D array.
//
// Exit status: 0 on success, 2 with the input_error message on stderr (one line) when the
// library rejects the input, 1 on bad usage.
#include <charconv>
#include <cstring>
#include <iostream>
#include <string>
#include <vector>

#include "attncert/error.hpp"
#include "attncert/io/npy.hpp"

namespace {

using attncert::input_error;
namespace io = attncert::io;

int usage() {
  std::cerr << "usage: npy_tool cat FILE | npy_tool write DTYPE FILE [VALUE...] [--shape A,B,...]\n";
  return 1;
}

std::string number(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  std::string s(buf, r.ptr);
  if (s.find_first_of(".eEn") == std::string::npos) s += ".0";
  return s;
}

const char* code(io::dtype t) {
  switch (t) {
    case io::dtype::f2: return "f2";
    case io::dtype::f4: return "f4";
    case io::dtype::f8: return "f8";
    case io::dtype::i4: return "i4";
    case io::dtype::i8: return "i8";
    case io::dtype::u1: return "u1";
    default: return "b1";
  }
}

bool parse_dtype(std::string s, io::dtype& t) {
  if (!s.empty() && (s[0] == '<' || s[0] == '|')) s.erase(0, 1);
  for (io::dtype c : {io::dtype::f2, io::dtype::f4, io::dtype::f8, io::dtype::i4, io::dtype::i8, io::dtype::u1, io::dtype::b1})
    if (s == code(c)) {
      t = c;
      return true;
    }
  return false;
}

bool parse_double(const std::string& s, double& v) {
  const char* b = s.data();
  const char* e = b + s.size();
  if (b != e && *b == '+') ++b;
  const auto r = std::from_chars(b, e, v);
  return r.ec == std::errc() && r.ptr == e;
}

bool parse_shape(const std::string& s, std::vector<std::size_t>& shape) {
  shape.clear();
  if (s.empty()) return true;
  std::size_t pos = 0;
  for (;;) {
    const std::size_t comma = s.find(',', pos);
    const std::string part = s.substr(pos, comma == std::string::npos ? std::string::npos : comma - pos);
    std::size_t d = 0;
    const auto r = std::from_chars(part.data(), part.data() + part.size(), d);
    if (part.empty() || r.ec != std::errc() || r.ptr != part.data() + part.size()) return false;
    shape.push_back(d);
    if (comma == std::string::npos) return true;
    pos = comma + 1;
  }
}

}  // namespace

int main(int argc, char** argv) {
  const std::vector<std::string> args(argv + 1, argv + argc);
  try {
    if (args.size() == 2 && args[0] == "cat") {
      const io::npy_array a = io::read_npy(args[1]);
      std::string out = "{\"dtype\": \"" + std::string(code(a.type)) + "\", \"shape\": [";
      for (std::size_t k = 0; k < a.shape.size(); ++k) out += (k ? ", " : "") + std::to_string(a.shape[k]);
      out += "], \"values\": [";
      for (std::size_t i = 0; i < a.values.size(); ++i) out += (i ? ", " : "") + number(a.values[i]);
      std::cout << out << "]}\n";
      return 0;
    }
    if (args.size() >= 3 && args[0] == "write") {
      io::npy_array a;
      if (!parse_dtype(args[1], a.type)) return usage();
      bool have_shape = false;
      for (std::size_t i = 3; i < args.size(); ++i) {
        std::string shape_text;
        if (args[i] == "--shape") {
          if (i + 1 >= args.size()) return usage();
          shape_text = args[++i];
        } else if (args[i].rfind("--shape=", 0) == 0) {
          shape_text = args[i].substr(8);
        } else {
          double v = 0;
          if (!parse_double(args[i], v)) return usage();
          a.values.push_back(v);
          continue;
        }
        if (!parse_shape(shape_text, a.shape)) return usage();
        have_shape = true;
      }
      if (!have_shape) a.shape = {a.values.size()};
      io::write_npy(args[2], a);
      return 0;
    }
    return usage();
  } catch (const input_error& e) {
    std::cerr << e.what() << '\n';
    return 2;
  }
}
