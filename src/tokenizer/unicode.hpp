// UTF-8 helpers and the GPT-2 byte-level mapping used by byte-level BPE vocabularies.
//
// Byte-level BPE (GPT-2, openai/gpt-2 encoder.py `bytes_to_unicode`) stores every byte as one
// printable code point: the bytes '!'..'~', U+00A1..U+00AC and U+00AE..U+00FF stand for themselves;
// the other 68 bytes (controls, space, 0x7F..0xA0, 0xAD) map in increasing byte order to U+0100,
// U+0101, … (so ' ' is "Ġ" U+0120 and '\n' is "Ċ" U+010A).
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace rocky::tok {

// Length of the UTF-8 sequence a lead byte announces (1 for continuation/invalid bytes), as
// llama.cpp's unicode_len_utf8: used to cut text into symbols; never reads past the text.
size_t utf8_len_from_lead(uint8_t lead);

// Strict UTF-8 decode of one code point at `s[pos]`: returns the length (1..4) and sets `cp`, or 0
// when the bytes at `pos` do not start a valid sequence (overlong, surrogate, > U+10FFFF, truncated).
size_t utf8_decode(std::string_view s, size_t pos, uint32_t& cp);
bool utf8_valid(std::string_view s);
void utf8_append(std::string& out, uint32_t cp);
// `s` with every byte that does not belong to a valid sequence replaced by U+FFFD (llama.cpp's BPE
// path does the same before pre-tokenizing).
std::string utf8_sanitize(std::string_view s);
// Length of the longest prefix of `s` that does not end inside an incomplete (but so far valid)
// UTF-8 sequence; the bytes after it may still be completed by more input.
size_t utf8_complete_prefix(std::string_view s);

// Byte-level BPE mapping: raw bytes → vocabulary text and back. bpe_decode passes through (as
// UTF-8) any code point that is not in the map.
std::string bpe_encode_bytes(std::string_view bytes);
std::string bpe_decode_text(std::string_view text);

}  // namespace rocky::tok
