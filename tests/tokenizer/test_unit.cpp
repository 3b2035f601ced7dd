// Unit tests: vocab loading rules and errors (on small GGUF files written here), BPE merge order,
// special-token matching, SPM byte fallback / space prefix, pieces, streaming, UTF-8 helpers, speed.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>
#include <variant>

#include "core/error.hpp"
#include "tokenizer/common.hpp"
#include "tokenizer/unicode.hpp"

namespace {

using rocky::tok::k_null_token;
using rocky::tok::TokenId;
using rocky::tok::Tokenizer;

// ---- a minimal GGUF v3 writer (metadata only) ----
struct Kv {
  std::string key;
  std::variant<std::string, uint32_t, bool, std::vector<std::string>, std::vector<int32_t>, std::vector<float>> v;
};

class Writer {
 public:
  void u32(uint32_t x) { raw(&x, 4); }
  void u64(uint64_t x) { raw(&x, 8); }
  void str(const std::string& s) {
    u64(s.size());
    raw(s.data(), s.size());
  }
  void raw(const void* p, size_t n) { buf.append(static_cast<const char*>(p), n); }
  std::string buf;
};

std::string write_gguf(const std::string& name, const std::vector<Kv>& kvs) {
  Writer w;
  w.raw("GGUF", 4);
  w.u32(3);
  w.u64(0);
  w.u64(kvs.size());
  for (const auto& kv : kvs) {
    w.str(kv.key);
    if (auto* s = std::get_if<std::string>(&kv.v)) {
      w.u32(8);
      w.str(*s);
    } else if (auto* u = std::get_if<uint32_t>(&kv.v)) {
      w.u32(4);
      w.u32(*u);
    } else if (auto* b = std::get_if<bool>(&kv.v)) {
      w.u32(7);
      uint8_t x = *b;
      w.raw(&x, 1);
    } else if (auto* ss = std::get_if<std::vector<std::string>>(&kv.v)) {
      w.u32(9);
      w.u32(8);
      w.u64(ss->size());
      for (const auto& s2 : *ss) w.str(s2);
    } else if (auto* is = std::get_if<std::vector<int32_t>>(&kv.v)) {
      w.u32(9);
      w.u32(5);
      w.u64(is->size());
      for (int32_t x : *is) w.raw(&x, 4);
    } else if (auto* fs = std::get_if<std::vector<float>>(&kv.v)) {
      w.u32(9);
      w.u32(6);
      w.u64(fs->size());
      for (float x : *fs) w.raw(&x, 4);
    }
  }
  const std::string path = rocky::test::scratch_dir("tokenizer") + "/" + name + ".gguf";
  std::ofstream(path, std::ios::binary) << w.buf;
  return path;
}

// A tiny byte-level BPE vocab: the 256 byte characters, a few merged tokens, a CONTROL and a
// USER_DEFINED token, and an UNUSED one.
struct SmallBpe {
  std::vector<std::string> tokens;
  std::vector<int32_t> types;
  std::vector<std::string> merges = {"l l", "h e", "he ll", "hell o", "a a"};
  SmallBpe() {
    for (int b = 0; b < 256; ++b) {
      tokens.push_back(rocky::tok::bpe_encode_bytes(std::string(1, static_cast<char>(b))));
      types.push_back(1);
    }
    for (const char* t : {"ll", "he", "hell", "hello", "aa", "world"}) {
      tokens.push_back(t);
      types.push_back(1);
    }
    tokens.push_back("<|c|>");
    types.push_back(3);
    tokens.push_back("<|u|>");
    types.push_back(4);
    tokens.push_back("[unused]");
    types.push_back(5);
  }
  TokenId id(const std::string& t) const {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (tokens[i] == t) return static_cast<TokenId>(i);
    }
    return k_null_token;
  }
  std::vector<Kv> kvs(const std::string& pre) const {
    return {{"tokenizer.ggml.model", std::string("gpt2")},
            {"tokenizer.ggml.pre", pre},
            {"tokenizer.ggml.tokens", tokens},
            {"tokenizer.ggml.token_type", types},
            {"tokenizer.ggml.merges", merges},
            {"tokenizer.ggml.bos_token_id", static_cast<uint32_t>(id("<|c|>"))},
            {"tokenizer.ggml.eos_token_id", static_cast<uint32_t>(id("<|c|>"))}};
  }
};

Tokenizer load_kvs(const std::string& name, const std::vector<Kv>& kvs) {
  return Tokenizer::load(write_gguf(name, kvs));
}

std::string load_error(const std::string& name, const std::vector<Kv>& kvs) {
  try {
    load_kvs(name, kvs);
  } catch (const rocky::Error& e) {
    return e.what();
  }
  return "(no error)";
}

TEST(BpeSmall, MergesByRankLeftmostFirst) {
  SmallBpe v;
  const auto tok = load_kvs("bpe-gpt2", v.kvs("gpt-2"));
  // h e l l o: (l,l) rank 0, (h,e) rank 1, then (he,ll) rank 2, then (hell,o) rank 3.
  EXPECT_EQ(tok.tokenize("hello", false), (std::vector<TokenId>{v.id("hello")}));
  // Equal ranks: the leftmost pair merges first: (aa)(a).
  EXPECT_EQ(tok.tokenize("aaa", false), (std::vector<TokenId>{v.id("aa"), v.id("a")}));
  // "world" is a token but no merges build it: characters.
  EXPECT_EQ(tok.tokenize("world", false).size(), 5u);
  // A space is its own byte character "Ġ"; the gpt-2 regex keeps it with the word.
  EXPECT_EQ(tok.tokenize(" he", false), (std::vector<TokenId>{v.id("\xC4\xA0"), v.id("he")}));
  // gpt-2 pre-tokenizer: no BOS by default.
  EXPECT_FALSE(tok.vocab().add_bos());
}

TEST(BpeSmall, LlamaBpeTakesWholeWordsWithoutMerging) {
  SmallBpe v;
  const auto tok = load_kvs("bpe-llama3", v.kvs("llama-bpe"));
  EXPECT_TRUE(tok.vocab().ignore_merges());
  EXPECT_EQ(tok.tokenize("world", false), (std::vector<TokenId>{v.id("world")}));
  // llama-bpe adds BOS by default.
  EXPECT_EQ(tok.tokenize("world"), (std::vector<TokenId>{v.id("<|c|>"), v.id("world")}));
}

TEST(BpeSmall, SpecialTokens) {
  SmallBpe v;
  const auto tok = load_kvs("bpe-special", v.kvs("gpt-2"));
  const TokenId c = v.id("<|c|>"), u = v.id("<|u|>");
  // CONTROL: matched only with parse_special.
  EXPECT_EQ(tok.tokenize("he<|c|>he", false, true), (std::vector<TokenId>{v.id("he"), c, v.id("he")}));
  const auto plain = tok.tokenize("he<|c|>he", false, false);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), c), 0);
  EXPECT_EQ(tok.detokenize(plain), "he<|c|>he");
  // USER_DEFINED: always matched whole.
  EXPECT_EQ(tok.tokenize("<|u|><|u|>", false, false), (std::vector<TokenId>{u, u}));
  EXPECT_EQ(tok.tokenize("a<|u|>", false, true), (std::vector<TokenId>{v.id("a"), u}));
  // Pieces: CONTROL text only when asked; UNUSED gives nothing.
  EXPECT_EQ(tok.token_to_piece(c, true), "<|c|>");
  EXPECT_EQ(tok.token_to_piece(c, false), "");
  EXPECT_EQ(tok.token_to_piece(u, false), "<|u|>");
  EXPECT_EQ(tok.token_to_piece(v.id("[unused]")), "");
  EXPECT_EQ(tok.token_to_piece(-5), "");
  EXPECT_EQ(tok.token_to_piece(static_cast<TokenId>(v.tokens.size())), "");
}

TEST(VocabLoad, Errors) {
  SmallBpe v;
  auto replace = [&](std::vector<Kv> kvs, const std::string& key, decltype(Kv::v) val) {
    bool found = false;
    for (auto& kv : kvs) {
      if (kv.key == key) {
        kv.v = val;
        found = true;
      }
    }
    if (!found) kvs.push_back({key, val});
    return kvs;
  };
  const auto base = v.kvs("gpt-2");
  const uint32_t n = static_cast<uint32_t>(v.tokens.size());

  std::string e = load_error("bad-bos", replace(base, "tokenizer.ggml.bos_token_id", n));
  EXPECT_NE(e.find("tokenizer.ggml.bos_token_id"), std::string::npos) << e;
  EXPECT_NE(e.find("outside the vocabulary"), std::string::npos) << e;
  EXPECT_NE(e.find("bad-bos.gguf"), std::string::npos) << e;
  e = load_error("bad-pad", replace(base, "tokenizer.ggml.padding_token_id", 4000000000u));
  EXPECT_NE(e.find("tokenizer.ggml.padding_token_id"), std::string::npos) << e;
  // 4294967295 means "unset".
  const auto unset = load_kvs("unset-eos", replace(base, "tokenizer.ggml.eos_token_id", 4294967295u));
  EXPECT_EQ(unset.vocab().eos(), k_null_token);

  std::vector<Kv> no_model(base.begin() + 1, base.end());
  e = load_error("no-model", no_model);
  EXPECT_NE(e.find("tokenizer.ggml.model"), std::string::npos) << e;
  e = load_error("t5", replace(base, "tokenizer.ggml.model", std::string("t5")));
  EXPECT_NE(e.find("'t5'"), std::string::npos) << e;
  e = load_error("bad-pre", replace(base, "tokenizer.ggml.pre", std::string("no-such-pre")));
  EXPECT_NE(e.find("no-such-pre"), std::string::npos) << e;
  e = load_error("bad-merge", replace(base, "tokenizer.ggml.merges", std::vector<std::string>{"h e", "he"}));
  EXPECT_NE(e.find("tokenizer.ggml.merges"), std::string::npos) << e;
  e = load_error("bad-types", replace(base, "tokenizer.ggml.token_type", std::vector<int32_t>{1, 1}));
  EXPECT_NE(e.find("tokenizer.ggml.token_type"), std::string::npos) << e;
  e = load_error("bad-scores", replace(base, "tokenizer.ggml.scores", std::vector<float>{0.5f}));
  EXPECT_NE(e.find("tokenizer.ggml.scores"), std::string::npos) << e;
  e = load_error("bad-type-of-tokens", replace(base, "tokenizer.ggml.tokens", 7u));
  EXPECT_NE(e.find("tokenizer.ggml.tokens"), std::string::npos) << e;
  std::vector<Kv> no_merges;
  for (const auto& kv : base) {
    if (kv.key != "tokenizer.ggml.merges") no_merges.push_back(kv);
  }
  e = load_error("no-merges", no_merges);
  EXPECT_NE(e.find("tokenizer.ggml.merges"), std::string::npos) << e;
}

TEST(VocabLoad, Stories260KUnsetIds) {
  // stories260K stores 4294967295 for the separator and padding ids: unset, not an error.
  const auto& tok = rocky::test::shared_tokenizer("models/stories260K.gguf");
  EXPECT_EQ(tok.vocab().sep(), k_null_token);
  EXPECT_EQ(tok.vocab().pad(), k_null_token);
  EXPECT_EQ(tok.vocab().bos(), 1);
  EXPECT_EQ(tok.vocab().eos(), 2);
  EXPECT_TRUE(tok.vocab().add_bos());
  EXPECT_TRUE(tok.vocab().is_eog(2));
  EXPECT_EQ(tok.vocab().type(), rocky::tok::VocabType::Spm);
}

TEST(Spm, ByteFallbackSpacePrefixAndPieces) {
  const auto& tok = rocky::test::shared_tokenizer("vocab/ggml-vocab-llama-spm.gguf");
  const auto& v = tok.vocab();
  const TokenId space = v.find("\xE2\x96\x81");
  ASSERT_NE(space, k_null_token);
  // "\x01" has no token: "▁" then the byte token <0x01>.
  EXPECT_EQ(tok.tokenize("\x01", false), (std::vector<TokenId>{space, v.find("<0x01>")}));
  EXPECT_EQ(tok.token_to_piece(v.find("<0x01>")), "\x01");
  EXPECT_EQ(tok.detokenize(tok.tokenize("\x01", false)), "\x01");
  // The space prefix is added again after a special token (llama.cpp's rule), but not after text.
  const auto hello = tok.tokenize("Hello", false);
  std::vector<TokenId> want = {v.bos()};
  want.insert(want.end(), hello.begin(), hello.end());
  EXPECT_EQ(tok.tokenize("<s>Hello", false, true), want);
  EXPECT_NE(tok.tokenize("<s>Hello", false, false).front(), v.bos());
  // BOS added by default; EOS not.
  EXPECT_EQ(tok.tokenize("Hello").front(), v.bos());
  EXPECT_NE(tok.tokenize("Hello").back(), v.eos());
  EXPECT_TRUE(tok.tokenize("", false).empty());
  EXPECT_EQ(tok.tokenize(""), (std::vector<TokenId>{v.bos()}));
  // Pieces: "▁" → ' '; CONTROL text only when asked.
  EXPECT_EQ(tok.token_to_piece(v.find("\xE2\x96\x81Hello")), " Hello");
  EXPECT_EQ(tok.token_to_piece(v.bos(), true), "<s>");
  EXPECT_EQ(tok.token_to_piece(v.bos(), false), "");
  EXPECT_EQ(tok.detokenize(hello), "Hello");
}

TEST(Stream, HoldsBackIncompleteUtf8) {
  const auto& tok = rocky::test::shared_tokenizer("vocab/ggml-vocab-qwen2-rebuilt.gguf");
  // " 🦙" is three tokens: " \xF0\x9F", "\xA6", "\x99" (the llama is not in the Qwen vocab).
  const auto ids = tok.tokenize(" \xF0\x9F\xA6\x99!", false);
  ASSERT_EQ(ids.size(), 4u);
  rocky::tok::StreamDecoder dec(tok);
  EXPECT_EQ(dec.push(ids[0]), " ");
  EXPECT_EQ(dec.push(ids[1]), "");
  EXPECT_EQ(dec.push(ids[2]), "\xF0\x9F\xA6\x99");
  EXPECT_EQ(dec.push(ids[3]), "!");
  EXPECT_EQ(dec.flush(), "");
  // A sequence that never completes comes out at flush.
  rocky::tok::StreamDecoder dec2(tok);
  EXPECT_EQ(dec2.push(ids[0]), " ");
  EXPECT_EQ(dec2.flush(), "\xF0\x9F");
}

TEST(Utf8, Helpers) {
  using namespace rocky::tok;
  EXPECT_TRUE(utf8_valid("a\xC3\xA9\xE2\x82\xAC\xF0\x9F\xA6\x99"));
  EXPECT_FALSE(utf8_valid("\xC0\xAF"));          // overlong
  EXPECT_FALSE(utf8_valid("\xED\xA0\x80"));      // surrogate
  EXPECT_FALSE(utf8_valid("\xF4\x90\x80\x80"));  // > U+10FFFF
  EXPECT_FALSE(utf8_valid("\xE2\x82"));          // truncated
  EXPECT_EQ(utf8_sanitize("a\xFF"
                          "b\xE2\x82"),
            "a\xEF\xBF\xBD"
            "b\xEF\xBF\xBD\xEF\xBF\xBD");
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x82"), 2u);
  EXPECT_EQ(utf8_complete_prefix("ab\xE2\x82\xAC"), 5u);
  EXPECT_EQ(utf8_complete_prefix("\xF0"), 0u);
  EXPECT_EQ(utf8_complete_prefix(""), 0u);
  // Byte map: ' ' → "Ġ", '\n' → "Ċ", 'A' stays; all 256 bytes round-trip and are distinct.
  EXPECT_EQ(bpe_encode_bytes(" "), "\xC4\xA0");
  EXPECT_EQ(bpe_encode_bytes("\n"), "\xC4\x8A");
  EXPECT_EQ(bpe_encode_bytes("A"), "A");
  std::set<std::string> seen;
  for (int b = 0; b < 256; ++b) {
    const std::string one(1, static_cast<char>(b));
    const std::string enc = bpe_encode_bytes(one);
    EXPECT_TRUE(utf8_valid(enc));
    EXPECT_EQ(bpe_decode_text(enc), one);
    seen.insert(enc);
  }
  EXPECT_EQ(seen.size(), 256u);
}

TEST(Speed, QwenVocabLoadPlusOneKilobytePrompt) {
  const auto t0 = std::chrono::steady_clock::now();
  const auto tok = Tokenizer::load(rocky::test::shared_path("reference/vocab/ggml-vocab-qwen2-rebuilt.gguf"));
  const std::string text = rocky::test::read_text(rocky::test::shared_path("reference/prompts/p2_paragraph.txt"));
  ASSERT_GE(text.size(), 1000u);
  const auto ids = tok.tokenize(text);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_GT(ids.size(), 150u);
  EXPECT_LT(s, 1.0) << "151,936-token vocab load + 1 KB prompt took " << s << " s";
  std::printf("[ info ] qwen2 vocab load + %zu-byte prompt: %.3f s\n", text.size(), s);
}

}  // namespace
