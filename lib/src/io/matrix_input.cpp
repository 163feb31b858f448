#include "attncert/io/matrix_input.hpp"

#include <nlohmann/json.hpp>
#include <vector>

#include "attncert/io/bounded_input.hpp"
#include "attncert/io/npy.hpp"

namespace attncert::io {

namespace {

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// SAX handler collecting a 2-D array of exact values (as decimal text).
class exact_collector : public nlohmann::json_sax<nlohmann::json> {
 public:
  std::vector<std::vector<std::string>> rows;
  std::string error;

  bool null() override { return fail("null entry"); }
  bool boolean(bool v) override { return value(v ? "1" : "0", true); }
  bool number_integer(number_integer_t v) override { return value(std::to_string(v), false); }
  bool number_unsigned(number_unsigned_t v) override { return value(std::to_string(v), false); }
  bool number_float(number_float_t, const string_t& s) override { return value(s, false); }
  bool string(string_t& s) override { return value(s, false); }
  bool binary(binary_t&) override { return fail("binary entry"); }
  bool start_object(std::size_t) override { return fail("objects are not matrices"); }
  bool key(string_t&) override { return fail("objects are not matrices"); }
  bool end_object() override { return fail("objects are not matrices"); }
  bool start_array(std::size_t) override {
    if (depth_ >= 2) return fail("more than 2 dimensions");
    ++depth_;
    if (depth_ == 2) rows.emplace_back();
    return true;
  }
  bool end_array() override {
    --depth_;
    return true;
  }
  bool parse_error(std::size_t pos, const std::string&, const nlohmann::detail::exception& ex) override {
    error = "malformed JSON at byte " + std::to_string(pos) + ": " + one_line(std::string(ex.what()), 120);
    return false;
  }
  bool saw_bool = false;

 private:
  int depth_ = 0;
  bool value(const std::string& s, bool is_bool) {
    if (depth_ != 2) return fail("expected a 2-D array [[...], ...]");
    saw_bool = saw_bool || is_bool;
    rows.back().push_back(s);
    return true;
  }
  bool fail(const std::string& why) {
    if (error.empty()) error = why;
    return false;
  }
};

// `label` (field("scores") + ": FILE") starts every message.
std::vector<std::vector<std::string>> json_rows(const std::string& text, const std::string& label) {
  exact_collector c;
  const bool ok = nlohmann::json::sax_parse(quote_huge_number_literals(text), &c);
  if (!ok || !c.error.empty()) throw input_error(label + ": " + (c.error.empty() ? "malformed JSON" : c.error));
  if (c.rows.empty() || c.rows[0].empty()) throw input_error(label + ": empty matrix");
  for (std::size_t i = 1; i < c.rows.size(); ++i)
    if (c.rows[i].size() != c.rows[0].size())
      throw input_error(label + ": row " + std::to_string(i) + " has " + std::to_string(c.rows[i].size()) +
                        " entries, row 0 has " + std::to_string(c.rows[0].size()));
  return c.rows;
}

std::vector<std::vector<std::string>> read_json_rows(const std::string& path, const std::string& what) {
  std::string text;
  try {
    text = read_file_bounded(path);
  } catch (const input_error& e) {
    throw input_error(what + ": " + e.what());
  }
  return json_rows(text, what + ": " + one_line(path, 4096));
}

matrix<mpq_rational> exact_from_rows(const std::vector<std::vector<std::string>>& rows, const std::string& label) {
  matrix<mpq_rational> m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows[0].size()));
  for (std::size_t i = 0; i < rows.size(); ++i)
    for (std::size_t j = 0; j < rows[i].size(); ++j) {
      try {
        m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = number_traits<mpq_rational>::from_string(rows[i][j]);
      } catch (const input_error& e) {
        throw input_error(label + ": entry (" + std::to_string(i) + ", " + std::to_string(j) + "): " + e.what());
      }
    }
  return m;
}

npy_array read_npy_2d(const std::string& path, const std::string& what) {
  npy_array a;
  try {
    a = read_npy(path);
  } catch (const input_error& e) {
    throw input_error(what + ": " + e.what());
  }
  if (a.shape.size() != 2)
    throw input_error(what + ": " + path + ": expected a 2-D array, got " + std::to_string(a.shape.size()) + "-D");
  if (a.shape[0] == 0 || a.shape[1] == 0) throw input_error(what + ": " + path + ": empty matrix");
  return a;
}

}  // namespace

matrix<mpq_rational> read_exact_matrix(const std::string& path, const std::string& what) {
  if (ends_with(path, ".npy")) {
    const npy_array a = read_npy_2d(path, what);
    matrix<mpq_rational> m(static_cast<Eigen::Index>(a.shape[0]), static_cast<Eigen::Index>(a.shape[1]));
    for (std::size_t i = 0; i < a.shape[0]; ++i)
      for (std::size_t j = 0; j < a.shape[1]; ++j)
        m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = mpq_rational(a.values[i * a.shape[1] + j]);
    return m;
  }
  if (ends_with(path, ".json")) return exact_from_rows(read_json_rows(path, what), what + ": " + one_line(path, 4096));
  throw input_error(what + ": '" + path + "' is neither .npy nor .json");
}

matrix<mpq_rational> parse_exact_matrix_json(const std::string& text, const std::string& label) {
  return exact_from_rows(json_rows(text, label), label);
}

bool_matrix read_bool_matrix(const std::string& path, const std::string& what) {
  if (ends_with(path, ".npy")) {
    const npy_array a = read_npy_2d(path, what);
    bool_matrix m(static_cast<Eigen::Index>(a.shape[0]), static_cast<Eigen::Index>(a.shape[1]));
    for (std::size_t k = 0; k < a.values.size(); ++k) {
      const double v = a.values[k];
      if (v != 0 && v != 1) throw input_error(what + ": " + path + ": mask entries must be 0/1 or boolean");
      m(static_cast<Eigen::Index>(k / a.shape[1]), static_cast<Eigen::Index>(k % a.shape[1])) = v == 1;
    }
    return m;
  }
  if (ends_with(path, ".json")) {
    const auto rows = read_json_rows(path, what);
    bool_matrix m(static_cast<Eigen::Index>(rows.size()), static_cast<Eigen::Index>(rows[0].size()));
    for (std::size_t i = 0; i < rows.size(); ++i)
      for (std::size_t j = 0; j < rows[i].size(); ++j) {
        if (rows[i][j] != "0" && rows[i][j] != "1") throw input_error(what + ": " + path + ": mask entries must be true/false or 0/1");
        m(static_cast<Eigen::Index>(i), static_cast<Eigen::Index>(j)) = rows[i][j] == "1";
      }
    return m;
  }
  throw input_error(what + ": '" + path + "' is neither .npy nor .json");
}

}  // namespace attncert::io
