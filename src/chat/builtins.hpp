// What the builtins' files share (internal to src/chat): argument checks, Python's str semantics
// (pystr.cpp), and a few value helpers.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "chat/value.hpp"

namespace rocky::chat::detail {

// builtins.cpp: a required argument (positional `i` or keyword `name`) of `fn`, else TypeError;
// a str / an int argument, else TypeError naming `what`.
const Value& need(const Args& a, size_t i, const char* name, const char* fn);
const std::string& need_str(const Value& v, const char* what);
int64_t need_int(const Value& v, const char* what);

// pystr.cpp
bool is_ascii(std::string_view s);
std::string ascii_lower(std::string s);
std::string ascii_upper(std::string s);
void check_size(size_t n);  // a string past k_max_string raises
std::string html_escape(const std::string& s);
bool is_line_break(char32_t c);
std::vector<std::string> splitlines(const std::string& s, bool keepends);
Value str_list(const std::vector<std::string>& parts);
// str.split / str.rsplit (sepv null or None: runs of whitespace).
std::vector<std::string> split(const std::string& s, const Value* sepv, int64_t maxsplit, bool from_right);
std::string replace(const std::string& s, const std::string& old, const std::string& repl, int64_t count);
int64_t cp_index(const std::string& s, size_t byte_pos);  // the code point index of a byte offset
std::string capitalize(const std::string& s);
std::string py_title(const std::string& s);

// methods.cpp: a dict's items() as a list of (key, value) tuples.
Value dict_items(const Value& d);

// operators.cpp: OverflowError (chat templates use 64-bit integers).
[[noreturn]] void overflow();

}  // namespace rocky::chat::detail
