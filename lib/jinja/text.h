// UTF-8 text as Python's str sees it: code points, whitespace (str.isspace), case mapping, printability
// (repr), and indexing by code point.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace hftrain::jinja {

std::vector<char32_t> decode_utf8(std::string_view s);
void append_utf8(std::string& out, char32_t cp);
std::string encode_utf8(const std::vector<char32_t>& cps);
size_t code_point_count(std::string_view s);

bool py_isspace(char32_t cp);
bool py_isprintable(char32_t cp);
bool py_isalpha(char32_t cp);
bool py_islower_char(char32_t cp);
bool py_isupper_char(char32_t cp);
bool py_isdigit(char32_t cp);
char32_t to_upper(char32_t cp);
char32_t to_lower(char32_t cp);

std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string capitalize(std::string_view s);   // str.capitalize
std::string py_title(std::string_view s);     // str.title
bool str_islower(std::string_view s);         // str.islower
bool str_isupper(std::string_view s);         // str.isupper

// str.strip / lstrip / rstrip: `chars` null strips whitespace, else any of its code points.
std::string strip(std::string_view s, const std::string* chars, bool left, bool right);
// str.split(sep=None / sep, maxsplit).
std::vector<std::string> split(std::string_view s, const std::string* sep, int64_t maxsplit);
// str.replace(old, new, count) (count < 0: all).
std::string replace(std::string_view s, std::string_view from, std::string_view to, int64_t count);
// str.splitlines() (without the line ends).
std::vector<std::string> split_lines(std::string_view s);
// Python's repr of a str ('...' or "..." with escapes).
std::string py_repr(std::string_view s);

}  // namespace hftrain::jinja
