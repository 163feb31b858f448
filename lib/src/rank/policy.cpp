#include "attncert/rank/policy.hpp"

#include <cerrno>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace attncert {

namespace {
double parse_positive(const std::string& s, const std::string& whole) {
  errno = 0;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (s.empty() || end != s.c_str() + s.size() || errno == ERANGE || !std::isfinite(v) || v < 0)
    throw input_error("bad number '" + s + "' in rank policy '" + whole + "' (expected a finite number >= 0)");
  return v;
}
// Shortest decimal that reads back as v (so "absolute:1e-6" is named "absolute:1e-06").
std::string num(double v) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}
std::vector<std::string> split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::size_t start = 0;
  for (;;) {
    const std::size_t at = s.find(sep, start);
    out.push_back(s.substr(start, at == std::string::npos ? std::string::npos : at - start));
    if (at == std::string::npos) break;
    start = at + 1;
  }
  return out;
}
}  // namespace

rank_policy rank_policy::parse(const std::string& text) {
  const auto parts = split(text, ':');
  const std::string& head = parts[0];
  rank_policy p;
  auto want = [&](std::size_t lo, std::size_t hi) {
    if (parts.size() - 1 < lo || parts.size() - 1 > hi)
      throw input_error("rank policy '" + text + "' takes " + std::to_string(lo) +
                        (hi > lo ? "-" + std::to_string(hi) : std::string()) + " parameter(s)");
  };
  if (head == "numpy") { want(0, 0); p.type_ = kind::numpy; }
  else if (head == "matlab") { want(0, 0); p.type_ = kind::matlab; }
  else if (head == "eigen") { want(0, 0); p.type_ = kind::eigen; }
  else if (head == "torch") {
    want(0, 2);
    p.type_ = kind::torch;
    if (parts.size() > 1 && parts[1] != "default") p.rtol_ = parse_positive(parts[1], text);
    if (parts.size() > 2) p.atol_ = parse_positive(parts[2], text);
  } else if (head == "lapack") {
    want(0, 1);
    p.type_ = kind::lapack;
    if (parts.size() > 1) p.rcond_ = parse_positive(parts[1], text);
  } else if (head == "absolute" || head == "relative") {
    want(1, 1);
    p.type_ = head == "absolute" ? kind::absolute : kind::relative;
    p.tau_ = parse_positive(parts[1], text);
  } else {
    throw input_error("unknown rank policy '" + text +
                      "' (expected numpy, matlab, torch[:RTOL[:ATOL]], lapack[:RCOND], eigen, absolute:TAU, relative:TAU)");
  }
  return p;
}

std::string rank_policy::name() const {
  switch (type_) {
    case kind::numpy: return "numpy";
    case kind::matlab: return "matlab";
    case kind::eigen: return "eigen";
    case kind::torch:
      if (rtol_ < 0 && atol_ == 0) return "torch";
    {
      std::string r = "torch:";
      r += rtol_ < 0 ? std::string("default") : num(rtol_);
      if (atol_ != 0) {
        r += ':';
        r += num(atol_);
      }
      return r;
    }
    case kind::lapack: return rcond_ < 0 ? "lapack" : "lapack:" + num(rcond_);
    case kind::absolute: return "absolute:" + num(tau_);
    default: return "relative:" + num(tau_);
  }
}

std::string rank_policy::formula() const {
  switch (type_) {
    case kind::numpy: return "sigma > sigma1*max(m,n)*eps";
    case kind::matlab: return "sigma > max(m,n)*eps(sigma1)";
    case kind::eigen: return "sigma >= max(sigma1*min(m,n)*eps, smallest normal)";
    case kind::torch:
      return "sigma > max(" + num(atol_) + ", " +
             (rtol_ < 0 ? std::string(atol_ > 0 ? "0" : "max(m,n)*eps") : num(rtol_)) + "*sigma1)";
    case kind::lapack: return "sigma > " + (rcond_ < 0 ? std::string("eps") : num(rcond_)) + "*sigma1";
    case kind::absolute: return "sigma > " + num(tau_);
    default: return "sigma > " + num(tau_) + "*sigma1";
  }
}

std::vector<rank_policy> parse_policies(const std::string& list) {
  std::vector<rank_policy> out;
  for (const auto& item : split(list, ',')) {
    if (item.empty()) throw input_error("empty rank policy in list '" + list + "'");
    rank_policy p = rank_policy::parse(item);
    for (const auto& q : out)
      if (q.name() == p.name()) throw input_error("rank policy '" + p.name() + "' listed twice");
    out.push_back(p);
  }
  return out;
}

}  // namespace attncert
