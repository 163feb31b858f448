// tests/field.cpp — field.hpp: library text names fields, each front end spells them.
#define BOOST_TEST_MODULE field
#include <boost/test/unit_test.hpp>

#include <cctype>
#include <nlohmann/json.hpp>
#include <string>

#include "attncert/error.hpp"
#include "attncert/field.hpp"

using namespace attncert;

namespace {
std::string python(std::string_view n) { return std::string(n) + "="; }
}  // namespace

BOOST_AUTO_TEST_CASE(marks_are_spelled_in_raw_and_json_text) {
  const std::string m = "give " + field("sink") + " or " + field("sink_off_by_one") + ", not both";
  BOOST_TEST(spell_fields(m, cli_spelling) == "give --sink or --sink-off-by-one, not both");
  BOOST_TEST(spell_fields(m, python) == "give sink= or sink_off_by_one=, not both");
  // in a JSON report the marks are escaped; keys are spelled too
  const nlohmann::json j = {{field("max_seconds"), "stopped at " + field("max_seconds")}};
  BOOST_TEST(spell_fields(j.dump(), cli_spelling) == R"({"--max-seconds":"stopped at --max-seconds"})");
  BOOST_TEST(spell_fields("no marks here", cli_spelling) == "no marks here");
}

BOOST_AUTO_TEST_CASE(a_callers_text_is_never_taken_for_a_mark) {
  // A file name holding the six characters \u001e (not the control character): JSON writes its
  // backslash escaped, and it stays text.
  const nlohmann::json j = {{"file", "a\\u001eq\\u001f.npy"}, {"why", field("q") + ": bad"}};
  const std::string spelled = spell_fields(j.dump(), cli_spelling);
  BOOST_TEST(nlohmann::json::parse(spelled).at("file") == "a\\u001eq\\u001f.npy");
  BOOST_TEST(nlohmann::json::parse(spelled).at("why") == "--q: bad");
  // raw control characters from input are escaped by one_line before they reach a message
  const std::string echoed = one_line(std::string("x\x1eq\x1fy"));
  BOOST_TEST(spell_fields(echoed, cli_spelling) == echoed);
  // an unclosed mark is left as it is
  BOOST_TEST(spell_fields(std::string("a\x1e") + "b", cli_spelling) == std::string("a\x1e") + "b");
}

BOOST_AUTO_TEST_CASE(a_spelling_may_read_and_replace_what_follows_the_field) {
  // Python's: a field followed by a number is a keyword given it ("max_seconds=0.5"), in raw and in
  // JSON text; the spelling sees the text after the field, not the text before it
  const auto keyword_with_value = [](std::string_view name, std::string_view after) {
    const bool value = after.size() > 1 && after[0] == ' ' && std::isdigit(static_cast<unsigned char>(after[1]));
    return field_spelled{std::string(name) + "=", value ? std::size_t{1} : 0};
  };
  const std::string m = "stopped at " + field("max_seconds") + " 0.5; " + field("softcap") + " must be > 0";
  BOOST_TEST(spell_fields_in_context(m, keyword_with_value) == "stopped at max_seconds=0.5; softcap= must be > 0");
  const nlohmann::json j = {{"why", m}};
  BOOST_TEST(nlohmann::json::parse(spell_fields_in_context(j.dump(), keyword_with_value)).at("why") ==
             "stopped at max_seconds=0.5; softcap= must be > 0");
  // a spelling that claims more than is left consumes what is left, no more
  const auto greedy = [](std::string_view, std::string_view) { return field_spelled{"X", 1000}; };
  BOOST_TEST(spell_fields_in_context("a " + field("n") + " tail", greedy) == "a X");
}
