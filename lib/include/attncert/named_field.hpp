// attncert/named_field.hpp — a library parser's error, named by the field it parsed.
//
// The parsers of formats, policies, recipes or check IDs say what is wrong with a text ("unknown
// format 'fp7'") but not which of the caller's fields held it.  The command line prints their
// messages as they are (its usage line names the option); Python, whose caller passed many keywords
// at once, wants the keyword named.  A *_spec says which (name_parse_errors) and its builder parses
// every such field through named_field.
#pragma once

#include <string>
#include <string_view>

#include "attncert/error.hpp"
#include "attncert/field.hpp"

namespace attncert {

/// f(); when `name_it`, an input_error it throws is rethrown as field(name) + ": " + its message,
/// unless the message names that field already.
template <class F>
auto named_field(std::string_view name, bool name_it, F&& f) -> decltype(f()) {
  if (!name_it) return f();
  try {
    return f();
  } catch (const input_error& e) {
    const std::string m = e.what(), marked = field(name);
    if (m.find(marked) != std::string::npos) throw;
    throw input_error(marked + ": " + m);
  }
}

}  // namespace attncert
