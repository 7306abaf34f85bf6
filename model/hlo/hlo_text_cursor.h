// The HLO text reader's lexer (Cursor: a position with line and column, the tokens of
// HLO text, comments, errors naming WHAT, line and column, and the working memory
// charged as the parse goes) and what the reader charges for what it builds
// (working_memory.h; upper bounds checked by tests/hlo_memory_test.cc). Shared by
// hlo_text.cc and hlo_text_values.cc only: the public reader is hlo_text.h.
// Torch-free; a Cursor belongs to one parse, on one thread.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "model/hlo/hlo_text.h"
#include "model/hlo/working_memory.h"
#include "tgraph/hlo/hlo.pb.h"

namespace tgraph::hlo::text_internal {

// What the parser charges (working_memory.h) for what it builds, upper bounds checked
// by tests/hlo_memory_test.cc. A protobuf string field is a heap std::string (32
// bytes) plus its characters when longer than 15; a repeated element's slot is charged
// three times its size (the old and the doubled array live at once while it grows).
inline constexpr int64_t kAlloc = 16;
inline constexpr int64_t kSlot = 3 * 8;
inline constexpr int64_t kStringField = 32 + kAlloc;
inline constexpr int64_t HeapChars(size_t len) { return len > 15 ? static_cast<int64_t>(len) + 1 + kAlloc : 0; }
inline constexpr int64_t kMapEntry = 64 + 2 * 8;  // an unordered_map node with a string key, and its buckets
inline constexpr int64_t kShapeBytes = static_cast<int64_t>(sizeof(xla::ShapeProto)) + kAlloc + kSlot;
inline constexpr int64_t kLayoutBytes = static_cast<int64_t>(sizeof(xla::LayoutProto)) + kAlloc;
// Attributes read into repeated messages or split into pieces (dimensions, window,
// slice, padding, dim_labels): per character of the value (the pieces' strings while
// split), and per piece (a separator ',', 'x', '_' or ' ' ends one) a message element.
inline constexpr int64_t kAttributeCharBytes = 32;
inline constexpr int64_t kAttributePieceBytes =
    static_cast<int64_t>(std::max({sizeof(xla::WindowDimension), sizeof(xla::HloInstructionProto::SliceDimensions),
                                   sizeof(xla::PaddingConfig::PaddingConfigDimension)})) +
    kAlloc + 2 * kSlot;
// A type name no XLA type has: its features are all zero, as the narrow types' are.
inline constexpr int kOtherElementType = 1000;

inline bool IsNameChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '-' || c == '$';
}

// A position in the text with line and column (1-based) and the tokens of HLO text.
class Cursor {
 public:
  // A UTF-8 byte order mark (an editor's, on Windows) is skipped; offsets stay the text's.
  Cursor(absl::string_view text, absl::string_view what, const Limits& limits)
      : text_(text), what_(what), limits_(limits), memory_(limits, what),
        pos_(absl::StartsWith(text, "\xEF\xBB\xBF") ? 3 : 0) {}

  // Charges `bytes` about to be built (working_memory.h).
  absl::Status Charge(int64_t bytes) { return memory_.Charge(bytes); }
  WorkingMemory* memory() { return &memory_; }
  // Counts one more instruction: RESOURCE_EXHAUSTED past the limit, at this line.
  absl::Status CountInstruction(int64_t line) {
    if (++instructions_ <= limits_.max_instructions) return absl::OkStatus();
    return absl::ResourceExhaustedError(absl::StrCat(what_, ": line ", line, ": the module has more than ",
                                                     limits_.max_instructions, " instructions, the limit"));
  }

  bool AtEnd() {
    SkipSpace();
    return pos_ >= text_.size();
  }
  char Peek() {
    SkipSpace();
    return pos_ < text_.size() ? text_[pos_] : '\0';
  }
  // The next character, spaces and comments not skipped.
  char PeekRaw() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  // At '{': whether a layout follows (a digit, ':' or '}' next), not a computation's body.
  bool LayoutFollows() {
    if (Peek() != '{') return false;
    size_t p = pos_ + 1;
    while (p < text_.size() && absl::ascii_isspace(static_cast<unsigned char>(text_[p]))) ++p;
    return p < text_.size() && (absl::ascii_isdigit(static_cast<unsigned char>(text_[p])) || text_[p] == ':' || text_[p] == '}');
  }
  bool Consume(char c) {
    if (Peek() != c) return false;
    Advance(1);
    return true;
  }
  bool ConsumeWord(absl::string_view w) {
    SkipSpace();
    if (text_.substr(pos_, w.size()) != w) return false;
    if (pos_ + w.size() < text_.size() && IsNameChar(text_[pos_ + w.size()])) return false;
    Advance(w.size());
    return true;
  }
  // A name or keyword ([A-Za-z0-9_.$-]+), without a leading '%'; empty when none.
  std::string Name() {
    SkipSpace();
    if (PeekRaw() == '%') Advance(1);
    const size_t start = pos_;
    while (pos_ < text_.size() && IsNameChar(text_[pos_])) Advance(1);
    return std::string(text_.substr(start, pos_ - start));
  }
  // The raw text of an attribute value: up to a ',' or line end outside brackets and
  // strings, or a closing bracket of the enclosing level.
  absl::string_view RawValue() {
    SkipSpace();
    const size_t start = pos_;
    Scan(/*value=*/true);
    return text_.substr(start, pos_ - start);
  }
  // Skips a balanced (...), {...} or [...] group starting here, strings inside included;
  // false when the text ends inside it.
  bool SkipGroup() {
    SkipSpace();
    return Scan(/*value=*/false);
  }
  // At '"': skips the string literal; false when the text ends inside it.
  bool SkipStringLiteral() {
    return Peek() == '"' && SkipString();
  }
  absl::Status Error(absl::string_view expected) {
    SkipSpace();
    std::string got = pos_ >= text_.size() ? "the end of the text" : "";
    if (got.empty()) {
      size_t end = pos_;
      while (end < text_.size() && end - pos_ < 24 && text_[end] != '\n') ++end;
      got = absl::StrCat("'", Printable(text_.substr(pos_, end - pos_)), "'");
    }
    return ErrorAt(line_, col_, absl::StrCat("expected ", expected, ", got ", got));
  }
  // A comment opened and never closed swallows the rest of the text: whatever the parse
  // made of what came before, the module is not what its author wrote.
  absl::Status UnclosedComment() const {
    if (unclosed_comment_line_ == 0) return absl::OkStatus();
    return ErrorAt(unclosed_comment_line_, unclosed_comment_col_, "'/*' opens a comment that the text never closes ('*/')");
  }
  absl::Status ErrorAt(int64_t line, int64_t col, absl::string_view msg) const {
    return absl::InvalidArgumentError(absl::StrCat(what_, ": line ", line, ", column ", col, ": ", msg));
  }
  int64_t line() {
    SkipSpace();
    return line_;
  }
  // The offset of the next token (spaces and comments skipped), and the offset as it is.
  size_t Offset() {
    SkipSpace();
    return pos_;
  }
  size_t RawOffset() const { return pos_; }
  // Back to an offset seen before, with its line and column.
  void Rewind(size_t pos, int64_t line, int64_t col) {
    pos_ = pos;
    line_ = line;
    col_ = col;
  }

  // Where the instructions stand, when the caller asked (ParseHloText's `map`).
  TextMap* map = nullptr;
  TextSpan last_layout;  // the layout of the array shape parsed last
  int64_t col() const { return col_; }

  static std::string Printable(absl::string_view s) {
    std::string out;
    for (char c : s) out.push_back(c >= 32 && c < 127 ? c : '?');
    return out;
  }

 private:
  void Advance(size_t n) {
    for (size_t i = 0; i < n && pos_ < text_.size(); ++i, ++pos_) {
      if (text_[pos_] == '\n') {
        ++line_;
        col_ = 1;
      } else {
        ++col_;
      }
    }
  }
  // Scans brackets and strings from here: an attribute value (RawValue's end), or one
  // bracketed group (ends after its closing bracket). False when the text ends first.
  bool Scan(bool value) {
    int depth = 0;
    while (pos_ < text_.size()) {
      const char c = text_[pos_];
      if (c == '"') {
        SkipString();
        continue;
      }
      if (c == '{' || c == '[' || c == '(') {
        ++depth;
      } else if (c == '}' || c == ']' || c == ')') {
        if (value && depth == 0) return true;
        --depth;
      } else if (value && depth == 0 && (c == ',' || c == '\n')) {
        return true;
      }
      Advance(1);
      if (!value && depth == 0) return true;
    }
    return value;
  }
  // At '"': to after the closing quote (backslash escapes); false when the text ends first.
  bool SkipString() {
    Advance(1);
    while (pos_ < text_.size() && text_[pos_] != '"') Advance(text_[pos_] == '\\' ? 2 : 1);
    if (pos_ >= text_.size()) return false;
    Advance(1);
    return true;
  }
  void SkipSpace() {
    while (pos_ < text_.size()) {
      if (absl::ascii_isspace(static_cast<unsigned char>(text_[pos_]))) {
        Advance(1);
      } else if (text_.substr(pos_, 2) == "/*") {
        const size_t end = text_.find("*/", pos_ + 2);
        if (end == absl::string_view::npos && unclosed_comment_line_ == 0) {
          unclosed_comment_line_ = line_;
          unclosed_comment_col_ = col_;
        }
        Advance(end == absl::string_view::npos ? text_.size() - pos_ : end + 2 - pos_);
      } else if (text_.substr(pos_, 2) == "//") {
        while (pos_ < text_.size() && text_[pos_] != '\n') Advance(1);
      } else {
        break;
      }
    }
  }

  absl::string_view text_, what_;
  int64_t unclosed_comment_line_ = 0, unclosed_comment_col_ = 0;  // a '/*' the text never closes
  const Limits& limits_;
  WorkingMemory memory_;
  int64_t instructions_ = 0;
  size_t pos_ = 0;
  int64_t line_ = 1, col_ = 1;
};

}  // namespace tgraph::hlo::text_internal
