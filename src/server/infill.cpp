#include "server/infill.hpp"

#include <algorithm>
#include <initializer_list>

namespace rocky::server {

std::string FimTokens::missing() const {
  std::string m;
  auto need = [&](int32_t id, const char* key) {
    if (id >= 0) return;
    m += (m.empty() ? "" : ", ") + std::string("tokenizer.ggml.") + key + "_token_id";
  };
  need(pre, "fim_pre");
  need(suf, "fim_suf");
  need(mid, "fim_mid");
  return m;
}

FimTokens find_fim_tokens(const gguf::GgufFile& f, const tok::Vocab& v) {
  auto pick = [&](const char* key, std::initializer_list<const char*> spellings) -> int32_t {
    if (auto id = f.get_uint(std::string("tokenizer.ggml.") + key + "_token_id"))
      if (v.valid(static_cast<int32_t>(std::min<uint64_t>(*id, INT32_MAX)))) return static_cast<int32_t>(*id);
    for (const char* s : spellings)
      if (const int32_t id = v.find(s); id >= 0) return id;
    return -1;
  };
  FimTokens t;
  t.pre = pick("fim_pre", {"<|fim_prefix|>", "<fim-prefix>", "<fim_prefix>", "<｜fim▁begin｜>", "<PRE>", "▁<PRE>"});
  t.suf = pick("fim_suf", {"<|fim_suffix|>", "<fim-suffix>", "<fim_suffix>", "<｜fim▁hole｜>", "<SUF>", "▁<SUF>"});
  t.mid = pick("fim_mid", {"<|fim_middle|>", "<fim-middle>", "<fim_middle>", "<｜fim▁end｜>", "<MID>", "▁<MID>"});
  t.pad = pick("fim_pad", {"<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>"});
  t.rep = pick("fim_rep", {"<|fim_repo|>", "<|repo_name|>", "<fim-repo>", "<REPO>", "<reponame>"});
  t.sep = pick("fim_sep", {"<|file_sep|>", "<fim-sep>", "<file_sep>"});
  return t;
}

std::vector<int32_t> format_infill(const tok::Tokenizer& tok, const FimTokens& fim, const InfillRequest& r,
                                   const std::vector<int32_t>& prompt, int32_t n_batch, int32_t n_predict,
                                   int32_t n_ctx) {
  auto tokens = [&](const std::string& s) { return tok.tokenize(s, false, false); };
  std::vector<int32_t> extra;
  if (fim.rep >= 0) {
    extra.push_back(fim.rep);
    for (int32_t t : tokens("myproject\n")) extra.push_back(t);
  }
  for (const InfillChunk& c : r.input_extra) {
    if (fim.sep >= 0) {
      extra.push_back(fim.sep);
      for (int32_t t : tokens(c.filename + "\n")) extra.push_back(t);
    } else {
      for (int32_t t : tokens("\n\n--- snippet ---\n\n")) extra.push_back(t);
    }
    for (int32_t t : tokens(c.text)) extra.push_back(t);
  }
  if (fim.sep >= 0) {
    extra.push_back(fim.sep);
    for (int32_t t : tokens("filename\n")) extra.push_back(t);
  }
  std::vector<int32_t> prefix = tokens(r.input_prefix), suffix = tokens(r.input_suffix);
  const int64_t n_prefix_take = std::min<int64_t>(static_cast<int64_t>(prefix.size()), 3 * (n_batch / 4));
  const int64_t n_suffix_take =
      std::min<int64_t>(static_cast<int64_t>(suffix.size()),
                        std::max<int64_t>(0, n_batch / 4 - (2 + static_cast<int64_t>(prompt.size()))));
  const int64_t n_extra_take = std::min<int64_t>(
      std::max<int64_t>(0, static_cast<int64_t>(n_ctx) - n_batch - 2 * static_cast<int64_t>(n_predict)),
      static_cast<int64_t>(extra.size()));
  prefix.erase(prefix.begin(), prefix.end() - n_prefix_take);
  suffix.resize(static_cast<size_t>(n_suffix_take));

  std::vector<int32_t> out(extra.end() - n_extra_take, extra.end());
  if (tok.vocab().add_bos() && tok.vocab().bos() >= 0) out.push_back(tok.vocab().bos());
  out.push_back(fim.pre);
  out.insert(out.end(), prefix.begin(), prefix.end());
  out.insert(out.end(), prompt.begin(), prompt.end());
  out.push_back(fim.suf);
  out.insert(out.end(), suffix.begin(), suffix.end());
  out.push_back(fim.mid);
  return out;
}

}  // namespace rocky::server
