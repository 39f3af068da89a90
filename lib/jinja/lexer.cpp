// jinja2's lexer with HF's environment (see lexer.h): the root text / tag split with whitespace control,
// then the tokens inside {{ }} and {% %}, whose end is only recognised with brackets balanced.
#include "jinja/lexer.h"

#include <algorithm>
#include <cstdlib>

#include "jinja/error.h"
#include "jinja/text.h"

namespace hftrain::jinja {
namespace {

std::string normalise(const std::string& source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False drops one
  return out;
}

// Bytes of the whitespace code point (Python's \s) at s[p], or 0.
size_t space_at(const std::string& s, size_t p) {
  if (p >= s.size()) return 0;
  const auto c = static_cast<unsigned char>(s[p]);
  if (c < 0x80) return py_isspace(c) ? 1 : 0;
  const size_t len = (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
  const auto cps = decode_utf8(std::string_view(s).substr(p, len));
  return !cps.empty() && py_isspace(cps[0]) ? len : 0;
}

size_t skip_spaces(const std::string& s, size_t p) {
  while (size_t n = space_at(s, p)) p += n;
  return p;
}

bool all_spaces(const std::string& s, size_t from) {
  return from < s.size() && skip_spaces(s, from) == s.size();
}

std::string rstrip_spaces(const std::string& s) {
  size_t end = s.size();
  while (end > 0) {
    size_t start = end - 1;
    while (start > 0 && (static_cast<unsigned char>(s[start]) & 0xC0) == 0x80) --start;
    if (space_at(s, start) != end - start) break;
    end = start;
  }
  return s.substr(0, end);
}

bool at(const std::string& s, size_t p, const char* text) { return s.compare(p, std::char_traits<char>::length(text), text) == 0; }
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

class Lexer {
 public:
  Lexer(const std::string& source, const std::string& name) : src_(normalise(source)), name_(name) {
    line_starts_.push_back(0);
    for (size_t i = 0; i < src_.size(); ++i)
      if (src_[i] == '\n') line_starts_.push_back(i + 1);
  }

  std::vector<Token> run() {
    while (pos_ < src_.size()) root_step();
    emit(Token::Type::Eof, "", src_.size());
    return std::move(out_);
  }

 private:
  std::string src_;
  const std::string& name_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  std::vector<size_t> line_starts_;
  std::vector<Token> out_;

  void locate(size_t p, int& line, int& column) const {
    const auto it = std::upper_bound(line_starts_.begin(), line_starts_.end(), p);
    line = static_cast<int>(it - line_starts_.begin());
    column = static_cast<int>(code_point_count(std::string_view(src_).substr(*(it - 1), p - *(it - 1)))) + 1;
  }

  [[noreturn]] void fail(size_t p, const std::string& problem) const {
    int line, column;
    locate(p, line, column);
    throw TemplateError(name_, line, column, problem);
  }

  Token& emit(Token::Type type, std::string text, size_t p) {
    Token t;
    t.type = type;
    t.text = std::move(text);
    locate(p, t.line, t.column);
    out_.push_back(std::move(t));
    return out_.back();
  }

  // The text before a tag, stripped as the tag's sign and lstrip_blocks ask.
  std::string strip_before(std::string text, char sign, bool variable) const {
    if (sign == '-') return rstrip_spaces(text);
    if (sign == '+' || variable) return text;
    const size_t line_pos = text.rfind('\n') == std::string::npos ? 0 : text.rfind('\n') + 1;
    if ((line_pos > 0 || line_starting_) && all_spaces(text, line_pos)) text.erase(line_pos);
    return text;
  }

  size_t next_tag(size_t from) const {
    for (size_t p = src_.find('{', from); p != std::string::npos; p = src_.find('{', p + 1))
      if (p + 1 < src_.size() && (src_[p + 1] == '{' || src_[p + 1] == '%' || src_[p + 1] == '#')) return p;
    return std::string::npos;
  }

  // `{%(-|+|)\s*NAME\s*(-%}\s*|%}...)` at p: the end of the match or 0. `trim` adds the endraw's
  // `+%}` and trim_blocks' `\n?`; *sign receives the opening sign.
  size_t match_raw_tag(size_t p, const char* name, bool trim, char* sign) const {
    if (!at(src_, p, "{%")) return 0;
    p += 2;
    *sign = (p < src_.size() && (src_[p] == '-' || src_[p] == '+')) ? src_[p++] : 0;
    p = skip_spaces(src_, p);
    if (!at(src_, p, name)) return 0;
    p = skip_spaces(src_, p + std::char_traits<char>::length(name));
    if (trim && at(src_, p, "+%}")) return p + 3;
    if (at(src_, p, "-%}")) return skip_spaces(src_, p + 3);
    if (!at(src_, p, "%}")) return 0;
    return p + 2 + (trim && p + 2 < src_.size() && src_[p + 2] == '\n' ? 1 : 0);
  }

  void emit_data(std::string text, size_t p) {
    if (!text.empty()) emit(Token::Type::Data, std::move(text), p);
  }

  void root_step() {
    const size_t tag = next_tag(pos_);
    if (tag == std::string::npos) {
      emit_data(src_.substr(pos_), pos_);
      pos_ = src_.size();
      return;
    }
    const char kind = src_[tag + 1];
    size_t body = tag + 2;
    const char sign = (body < src_.size() && (src_[body] == '-' || src_[body] == '+')) ? src_[body++] : 0;
    char raw_sign = 0;
    const size_t raw_end = kind == '%' ? match_raw_tag(tag, "raw", false, &raw_sign) : 0;
    emit_data(strip_before(src_.substr(pos_, tag - pos_), sign, kind == '{'), pos_);
    if (raw_end) return raw(raw_end);
    if (kind == '#') return comment(body);
    emit(kind == '{' ? Token::Type::VariableBegin : Token::Type::BlockBegin, "", tag);
    pos_ = body;
    tag_tokens(kind == '{');
  }

  void raw(size_t from) {
    line_starting_ = src_[from - 1] == '\n';
    for (size_t p = src_.find("{%", from); p != std::string::npos; p = src_.find("{%", p + 1)) {
      char sign = 0;
      const size_t end = match_raw_tag(p, "endraw", true, &sign);
      if (!end) continue;
      emit_data(strip_before(src_.substr(from, p - from), sign, false), from);
      pos_ = end;
      line_starting_ = src_[end - 1] == '\n';
      return;
    }
    fail(from, "Missing end of raw directive");
  }

  void comment(size_t from) {
    size_t close = src_.find("#}", from);
    if (close == std::string::npos) fail(from, "Missing end of comment tag");
    size_t end = close + 2;
    if (close > from && src_[close - 1] == '-') {
      end = skip_spaces(src_, end);
    } else if (!(close > from && src_[close - 1] == '+') && end < src_.size() && src_[end] == '\n') {
      ++end;  // trim_blocks
    }
    pos_ = end;
    line_starting_ = src_[end - 1] == '\n';
  }

  // The end of the tag at pos_ (only with brackets balanced), or 0.
  size_t tag_end(bool variable) const {
    if (variable) {
      if (at(src_, pos_, "-}}")) return skip_spaces(src_, pos_ + 3);
      return at(src_, pos_, "}}") ? pos_ + 2 : 0;
    }
    if (at(src_, pos_, "+%}")) return pos_ + 3;
    if (at(src_, pos_, "-%}")) return skip_spaces(src_, pos_ + 3);
    if (!at(src_, pos_, "%}")) return 0;
    return pos_ + 2 + (pos_ + 2 < src_.size() && src_[pos_ + 2] == '\n' ? 1 : 0);
  }

  void tag_tokens(bool variable) {
    std::string balance;
    while (true) {
      if (pos_ >= src_.size())
        fail(pos_, std::string("unexpected end of template, expected the end of the ") +
                       (variable ? "print statement ('}}')" : "block tag ('%}')"));
      if (balance.empty()) {
        if (const size_t end = tag_end(variable)) {
          emit(variable ? Token::Type::VariableEnd : Token::Type::BlockEnd, "", pos_);
          pos_ = end;
          line_starting_ = src_[end - 1] == '\n';
          return;
        }
      }
      if (const size_t n = space_at(src_, pos_)) {
        pos_ = skip_spaces(src_, pos_ + n);
      } else if (!number() && !name() && !string_literal()) {
        operator_token(balance);
      }
    }
  }

  size_t digits(size_t p) const {
    while (p < src_.size() && is_digit(src_[p])) ++p;
    return p;
  }

  bool number() {
    if (!is_digit(src_[pos_])) return false;
    return float_literal() || integer_literal();
  }

  // float_re: digits, then an exponent (after optional decimals) or decimals; not right after a '.'.
  bool float_literal() {
    const size_t start = pos_;
    if (start > 0 && src_[start - 1] == '.') return false;
    const size_t p = digits(start);
    size_t frac = p, end = 0;
    if (frac < src_.size() && src_[frac] == '.' && frac + 1 < src_.size() && is_digit(src_[frac + 1])) frac = digits(frac + 1);
    if (frac < src_.size() && (src_[frac] == 'e' || src_[frac] == 'E')) {
      size_t e = frac + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) end = digits(e);
    }
    if (!end && frac != p) end = frac;
    if (!end) return false;
    const std::string text = src_.substr(start, end - start);
    emit(Token::Type::Float, text, start).number = std::strtod(text.c_str(), nullptr);
    pos_ = end;
    return true;
  }

  // integer_re: 0b / 0o / 0x prefixed, a decimal without leading zeros, or zeros.
  bool integer_literal() {
    const size_t start = pos_;
    int base = 10;
    if (src_[start] == '0' && start + 1 < src_.size()) {
      const char b = static_cast<char>(src_[start + 1] | 0x20);
      base = b == 'x' ? 16 : b == 'o' ? 8 : b == 'b' ? 2 : 10;
    }
    const size_t q = base == 10 ? start : start + 2;
    size_t p = q;
    if (base == 10 && src_[start] == '0') {
      while (p < src_.size() && src_[p] == '0') ++p;
    } else if (base == 10) {
      p = digits(start);
    } else {
      while (p < src_.size() && std::isxdigit(static_cast<unsigned char>(src_[p])) &&
             std::strtol(std::string(1, src_[p]).c_str(), nullptr, 16) < base)
        ++p;
      if (p == q) return false;
    }
    emit(Token::Type::Integer, src_.substr(start, p - start), start).integer =
        std::strtoll(src_.substr(q, p - q).c_str(), nullptr, base);
    pos_ = p;
    return true;
  }

  bool name() {
    if (!is_name_start(src_[pos_])) return false;
    size_t p = pos_;
    while (p < src_.size() && is_name_char(src_[p])) ++p;
    emit(Token::Type::Name, src_.substr(pos_, p - pos_), pos_);
    pos_ = p;
    return true;
  }

  bool string_literal() {
    const char quote = src_[pos_];
    if (quote != '\'' && quote != '"') return false;
    size_t p = pos_ + 1;
    while (p < src_.size() && src_[p] != quote) p += src_[p] == '\\' ? 2 : 1;
    if (p >= src_.size()) return false;
    emit(Token::Type::String, unescape(pos_ + 1, p), pos_);
    pos_ = p + 1;
    return true;
  }

  // Python's unicode-escape decoding of a string literal's body.
  std::string unescape(size_t from, size_t to) const {
    std::string out;
    for (size_t p = from; p < to; ++p) {
      if (src_[p] != '\\' || p + 1 >= to) {
        out += src_[p];
        continue;
      }
      const char c = src_[++p];
      switch (c) {
        case '\n': break;
        case '\\': out += '\\'; break;
        case '\'': out += '\''; break;
        case '"': out += '"'; break;
        case 'a': out += '\a'; break;
        case 'b': out += '\b'; break;
        case 'f': out += '\f'; break;
        case 'n': out += '\n'; break;
        case 'r': out += '\r'; break;
        case 't': out += '\t'; break;
        case 'v': out += '\v'; break;
        case 'x': case 'u': case 'U': {
          const size_t n = c == 'x' ? 2 : c == 'u' ? 4 : 8;
          if (p + n >= to + 1 || !std::all_of(src_.begin() + p + 1, src_.begin() + p + 1 + n,
                                              [](char h) { return std::isxdigit(static_cast<unsigned char>(h)); }))
            fail(p - 1, std::string("truncated \\") + c + " escape in a string literal");
          append_utf8(out, static_cast<char32_t>(std::strtoul(src_.substr(p + 1, n).c_str(), nullptr, 16)));
          p += n;
          break;
        }
        default:
          if (c >= '0' && c <= '7') {
            size_t n = 1;
            while (n < 3 && p + n < to && src_[p + n] >= '0' && src_[p + n] <= '7') ++n;
            append_utf8(out, static_cast<char32_t>(std::strtoul(src_.substr(p, n).c_str(), nullptr, 8)));
            p += n - 1;
          } else {
            out += '\\';
            out += c;
          }
      }
    }
    return out;
  }

  void operator_token(std::string& balance) {
    static const char* two[] = {"//", "**", "==", "!=", ">=", "<="};
    for (const char* op : two)
      if (at(src_, pos_, op)) {
        emit(Token::Type::Operator, op, pos_);
        pos_ += 2;
        return;
      }
    const char c = src_[pos_];
    if (std::string("+-/*%~[](){}><=.:|,;").find(c) == std::string::npos)
      fail(pos_, "unexpected char " + py_repr(decode_utf8_char()) + " at " + std::to_string(pos_));
    if (c == '(' || c == '[' || c == '{') balance += c == '(' ? ')' : c == '[' ? ']' : '}';
    if (c == ')' || c == ']' || c == '}') {
      if (balance.empty()) fail(pos_, std::string("unexpected '") + c + "'");
      if (balance.back() != c) fail(pos_, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
      balance.pop_back();
    }
    emit(Token::Type::Operator, std::string(1, c), pos_);
    ++pos_;
  }

  std::string decode_utf8_char() const {
    const auto c = static_cast<unsigned char>(src_[pos_]);
    const size_t len = c < 0x80 ? 1 : (c >> 5) == 6 ? 2 : (c >> 4) == 14 ? 3 : 4;
    return src_.substr(pos_, len);
  }
};

}  // namespace

std::vector<Token> tokenize(const std::string& source, const std::string& template_name) {
  return Lexer(source, template_name).run();
}

}  // namespace hftrain::jinja
