// runtime::BatchEngine: several sequences generated at once, each from its own thread through
// BatchSource + Generator, equal the same generations alone (Session + Generator), greedy, on
// stories260K (CPU and Vulkan on lavapipe): long prompts in small chunks next to decoding
// sequences, a sequence cancelled in the middle, a sequence reused after end(); speculative
// verification (several tokens of one sequence in a decode step) and dropping rejected cells;
// non-finite logits fail the request that gets them.
#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <thread>
#include <vector>

#include "common/shared.hpp"
#include "model/ref.hpp"
#include "core/error.hpp"
#include "gguf/gguf.hpp"
#include "model/model.hpp"
#include "runtime/backend_factory.hpp"
#include "runtime/batch.hpp"
#include "runtime/generator.hpp"
#include "runtime/session.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky {
namespace {

constexpr int32_t k_ctx = 160;

runtime::GenerateParams greedy(int32_t n) {
  runtime::GenerateParams p;
  p.sampling.temp = 0;
  p.max_tokens = n;
  p.ignore_eos = true;
  return p;
}

std::shared_ptr<backend::Backend> make(const std::string& dev) {
  runtime::BackendOptions bo;
  bo.device = dev;
  bo.kv_f16 = false;
  return runtime::make_backend(bo);
}

void check(const std::string& dev) {
  SCOPED_TRACE(dev);
  auto m = model::Model::load(test::shared_path("reference/models/stories260K.gguf"));
  auto tok = tok::Tokenizer::from_gguf(m->file());
  const int32_t nv = m->hparams().n_vocab;
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(37, 1, nv), test::random_prompt(5, 2, nv),
                                                     test::random_prompt(61, 3, nv), test::random_prompt(12, 4, nv)};
  const int32_t n_gen = 40;
  auto be = make(dev);
  // Alone: one Session per generation, the ordinary prefill + decode.
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    runtime::Session s(*m, be, runtime::SessionOptions{k_ctx, 512});
    runtime::SessionSource src(s);
    runtime::Generator g(src, tok);
    alone.push_back(g.generate(p, greedy(n_gen)).tokens);
    ASSERT_EQ(alone.back().size(), size_t(n_gen));
  }
  runtime::BatchOptions bo;
  bo.n_seq = 4;
  bo.n_ctx = k_ctx;
  bo.n_ubatch = 16;
  bo.prefill_chunk = 7;  // prompts of 37 and 61 tokens go in chunks of 7 while the others decode
  runtime::BatchEngine e(*m, be, bo);
  auto run = [&](int cancel_seq, int cancel_at, std::vector<runtime::GenerateResult>& out) {
    out.assign(prompts.size(), {});
    std::vector<std::thread> th;
    for (size_t i = 0; i < prompts.size(); ++i)
      th.emplace_back([&, i] {
        const int32_t seq = int32_t(i);
        e.begin(seq);
        runtime::BatchSource src(e, seq);
        runtime::Generator g(src, tok);
        runtime::TokenFn cb = [&](const runtime::TokenEvent& ev) {
          return !(int(i) == cancel_seq && ev.token >= 0 && ev.index + 1 == cancel_at);
        };
        out[i] = g.generate(prompts[i], greedy(n_gen), cb);
        out[i].batch_seqs_max = src.seqs_max();
        e.end(seq);
      });
    for (auto& t : th) t.join();
  };
  std::vector<runtime::GenerateResult> together;
  run(-1, 0, together);
  int32_t widest = 0;
  for (size_t i = 0; i < prompts.size(); ++i) {
    EXPECT_EQ(together[i].tokens, alone[i]) << "sequence " << i << " differs when batched";
    widest = std::max(widest, together[i].batch_seqs_max);
  }
  EXPECT_GT(widest, 1) << "the sequences never shared a step";
  const runtime::BatchStats st = e.stats();
  EXPECT_GT(st.max_seqs, 1);
  int64_t prompt_tokens = 0;
  for (const auto& p : prompts) prompt_tokens += int64_t(p.size()) - 1;  // each prompt's last token decodes
  EXPECT_GE(st.prefill_tokens + st.decode_tokens, prompt_tokens + int64_t(prompts.size()) * n_gen);
  // Sequence 2 (the longest prompt) cancelled after 6 tokens: the others are unchanged and its
  // tokens up to the cancel were right.
  std::vector<runtime::GenerateResult> mixed;
  run(2, 6, mixed);
  EXPECT_EQ(mixed[2].reason, runtime::StopReason::Cancelled);
  ASSERT_EQ(mixed[2].tokens.size(), 6u);
  EXPECT_TRUE(std::equal(mixed[2].tokens.begin(), mixed[2].tokens.end(), alone[2].begin()));
  for (size_t i : {0u, 1u, 3u}) EXPECT_EQ(mixed[i].tokens, alone[i]) << "sequence " << i << " after a cancel";
  // A prompt that does not fit is an error for its sequence only.
  e.begin(1);
  EXPECT_THROW(e.eval(1, test::random_prompt(k_ctx + 1, 9, nv), false, {}), Error);
  e.end(1);
}

// The shared cells (BatchOptions::n_cells): two sequences that together outgrow them both finish
// whole with their tokens alone — the newer one is preempted and goes on later — and a sequence
// alone is never preempted.
TEST(BatchEngine, SharedCellsPreemptTheNewestAndLoseNothing) {
  auto m = model::Model::load(test::shared_path("reference/models/stories260K.gguf"));
  auto tok = tok::Tokenizer::from_gguf(m->file());
  const int32_t nv = m->hparams().n_vocab;
  auto be = make("cpu");
  const std::vector<std::vector<int32_t>> prompts = {test::random_prompt(40, 11, nv), test::random_prompt(40, 12, nv)};
  const int32_t n_gen = 60;  // 2 × (40 + 60) = 200 cells > 120
  std::vector<std::vector<int32_t>> alone;
  for (const auto& p : prompts) {
    runtime::Session s(*m, be, runtime::SessionOptions{k_ctx, 512});
    runtime::SessionSource src(s);
    runtime::Generator g(src, tok);
    alone.push_back(g.generate(p, greedy(n_gen)).tokens);
  }
  runtime::BatchOptions bo;
  bo.n_seq = 2;
  bo.n_ctx = k_ctx;
  bo.n_cells = 120;
  bo.n_ubatch = 16;
  runtime::BatchEngine e(*m, be, bo);
  std::vector<runtime::GenerateResult> out(2);
  std::vector<std::thread> th;
  std::atomic<bool> first_going{false};
  for (int32_t i = 0; i < 2; ++i)
    th.emplace_back([&, i] {
      // Sequence 1 is the newer: it begins once sequence 0 has made 5 tokens.
      while (i == 1 && !first_going) std::this_thread::sleep_for(std::chrono::milliseconds(1));
      e.begin(i);
      runtime::BatchSource src(e, i);
      runtime::Generator g(src, tok);
      runtime::TokenFn cb = [&](const runtime::TokenEvent& ev) {
        if (i == 0 && ev.index == 4) first_going = true;
        return true;
      };
      out[size_t(i)] = g.generate(prompts[size_t(i)], greedy(n_gen), cb);
      e.end(i);
    });
  for (auto& t : th) t.join();
  for (size_t i = 0; i < 2; ++i) {
    EXPECT_EQ(out[i].reason, runtime::StopReason::Length) << "sequence " << i;
    EXPECT_EQ(out[i].tokens, alone[i]) << "sequence " << i << " differs after the shared cells ran out";
  }
  const runtime::BatchStats st = e.stats();
  EXPECT_GE(st.preemptions, 1);
  EXPECT_EQ(e.used_cells(), 0);
}

// A long prefill next to a decoding sequence costs the decoder at most one chunk (8 tokens) per token; a
// sequence whose client leaves has its waiting request failed within a step.
TEST(BatchEngine, LongPrefillAndCancelTakeOneStep) {
  auto m = model::Model::load(test::shared_path("reference/models/stories260K.gguf"));
  auto tok = tok::Tokenizer::from_gguf(m->file());
  const int32_t nv = m->hparams().n_vocab;
  auto be = make("cpu");
  runtime::BatchOptions bo;
  bo.n_seq = 2;
  bo.n_ctx = 256;
  bo.n_ubatch = 16;
  bo.prefill_chunk = 8;
  runtime::BatchEngine e(*m, be, bo);
  std::atomic<bool> prefilling{false}, decoding{false};
  std::atomic<int64_t> worst{0}, n_during{0}, n_over{0};
  std::thread dec([&] {
    e.begin(0);
    runtime::BatchSource src(e, 0);
    runtime::Generator g(src, tok);
    int64_t last = -1;
    runtime::TokenFn cb = [&](const runtime::TokenEvent& ev) {
      // Prompt tokens evaluated since the decoder's last token: at most one chunk.
      const int64_t done = e.stats().prefill_tokens;
      if (prefilling && last >= 0) {
        worst = std::max<int64_t>(worst, done - last);
        ++n_during;
        if (done - last > 8) ++n_over;  // the decoder was late for a step (its own sampling, a busy core)
      }
      last = done;
      if (ev.index == 4) decoding = true;
      // Past the prefill, the decoder stops (the context holds 4 + 240 positions).
      return ev.index < 240;
    };
    g.generate(test::random_prompt(4, 21, nv), greedy(240), cb);
    e.end(0);
  });
  while (!decoding) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  e.begin(1);
  prefilling = true;
  e.eval(1, test::random_prompt(200, 22, nv), false, {});  // 25 chunks of 8
  prefilling = false;
  e.end(1);
  dec.join();
  EXPECT_GT(worst.load(), 0) << "the decoder made no token during the prefill";
  // Every step that found the decoder's token waiting ran at most one chunk before it; a token the
  // decoder was late with (more than the 2 ms join) may see two.
  EXPECT_LE(n_over.load() * 5, n_during.load()) << "decode tokens waited for more than one prefill chunk";
  EXPECT_LE(worst.load(), 16);
  // The client leaves after the first chunk: the request fails within two more steps.
  std::atomic<bool> left{false};
  std::atomic<int> chunks_after{0};
  e.begin(1, [&] { return left.load(); });
  runtime::ProgressFn progress = [&](int64_t, int64_t) {
    if (left) ++chunks_after;
    left = true;
  };
  EXPECT_THROW(e.eval(1, test::random_prompt(200, 23, nv), false, progress), Error);
  EXPECT_LE(chunks_after.load(), 1);
  EXPECT_GE(e.stats().cancelled, 1);
  e.end(1);
}

// Speculative verification under batching: sequence 0 submits [token + 4 more] through verify()
// while sequence 1 decodes (one step of 5 + 1 tokens when both arrive within the join window);
// every row of sequence 0 equals a lone Session's all-logits rows of the same tokens, and after drop_tail() keeps 2 of the 5 the
// next token's logits equal a Session that never saw the dropped ones.
void check_verify(const std::string& dev) {
  SCOPED_TRACE(dev);
  auto m = model::Model::load(test::shared_path("reference/models/stories260K.gguf"));
  const int32_t nv = m->hparams().n_vocab;
  auto be = make(dev);
  const std::vector<int32_t> p0 = test::random_prompt(20, 5, nv), p1 = test::random_prompt(9, 6, nv),
                             draft = test::random_prompt(5, 7, nv);
  runtime::Session ref(*m, be, runtime::SessionOptions{k_ctx, 512});
  ref.eval(p0, false, {});
  const std::vector<float> ref_rows = ref.eval(draft, true, {});
  ref.truncate(static_cast<int32_t>(p0.size()) + 2);
  const std::vector<float> ref_next = ref.eval(std::vector<int32_t>{42}, false, {});

  runtime::BatchOptions bo;
  bo.n_seq = 2;
  bo.n_ctx = k_ctx;
  bo.n_ubatch = 16;
  runtime::BatchEngine e(*m, be, bo);
  e.begin(0);
  e.begin(1);
  e.eval(0, p0, false, {});
  e.eval(1, p1, false, {});
  std::vector<float> rows, dec;
  int32_t seqs0 = 0;
  std::thread other([&] { dec = e.eval(1, std::vector<int32_t>{17}, false, {}); });
  rows = e.verify(0, draft, &seqs0);
  other.join();
  ASSERT_EQ(rows.size(), ref_rows.size());
  EXPECT_EQ(dec.size(), static_cast<size_t>(nv));
  EXPECT_LT(test::max_abs_diff(rows, ref_rows), 1e-3);
  EXPECT_EQ(e.n_past(0), static_cast<int32_t>(p0.size() + draft.size()));
  e.drop_tail(0, static_cast<int32_t>(p0.size()) + 2);
  EXPECT_EQ(e.n_past(0), static_cast<int32_t>(p0.size()) + 2);
  const std::vector<float> next = e.eval(0, std::vector<int32_t>{42}, false, {});
  ASSERT_EQ(next.size(), ref_next.size());
  EXPECT_LT(test::max_abs_diff(next, ref_next), 1e-3);
  EXPECT_THROW(e.drop_tail(0, e.n_past(0) + 1), Error);  // past what it holds
  EXPECT_GE(seqs0, 1);
  e.end(0);
  e.end(1);
}

// Verifications and prompt chunks taking turns: sequence 0 verifies 6-token drafts while sequence
// 1 evaluates 7-token prompts in chunks of 5 (the last chunk of 2 wants its logits); a step that
// hands its turn to the chunk carries no decode rows, and every result has its rows.
void check_verify_beside_prefill(const std::string& dev) {
  SCOPED_TRACE(dev);
  auto m = model::Model::load(test::shared_path("reference/models/stories260K.gguf"));
  const int32_t nv = m->hparams().n_vocab;
  auto be = make(dev);
  runtime::BatchOptions bo;
  bo.n_seq = 2;
  bo.n_ctx = k_ctx;
  bo.n_ubatch = 16;
  bo.prefill_chunk = 5;
  runtime::BatchEngine e(*m, be, bo);
  e.begin(0);
  e.begin(1);
  e.eval(0, test::random_prompt(10, 8, nv), false, {});
  e.eval(1, test::random_prompt(10, 9, nv), false, {});
  std::atomic<bool> failed{false};
  std::thread a([&] {
    try {
      for (uint32_t i = 0; i < 30; ++i) {
        const int32_t np = e.n_past(0);
        const std::vector<float> rows = e.verify(0, test::random_prompt(6, 100 + i, nv));
        if (rows.size() != size_t(6) * static_cast<size_t>(nv)) failed = true;
        e.drop_tail(0, np + 1);
      }
    } catch (const std::exception& ex) {
      ADD_FAILURE() << "verify: " << ex.what();
      failed = true;
    }
  });
  try {
    for (uint32_t i = 0; i < 30; ++i) {
      const int32_t np = e.n_past(1);
      const std::vector<float> last = e.eval(1, test::random_prompt(7, 200 + i, nv), false, {});
      EXPECT_EQ(last.size(), static_cast<size_t>(nv));
      e.drop_tail(1, np + 1);
    }
  } catch (const std::exception& ex) {
    ADD_FAILURE() << "prefill: " << ex.what();
  }
  a.join();
  EXPECT_FALSE(failed.load());
  e.end(0);
  e.end(1);
}

TEST(BatchEngine, CpuVerifyBesideDecodeAndDropTail) { check_verify("cpu"); }
TEST(BatchEngine, CpuVerifyTakesTurnsWithPrefill) { check_verify_beside_prefill("cpu"); }
TEST(BatchEngine, VulkanVerifyTakesTurnsWithPrefill) { check_verify_beside_prefill("vulkan"); }
TEST(BatchEngine, VulkanVerifyBesideDecodeAndDropTail) { check_verify("vulkan"); }

// A NaN in the final norm's weight makes every logit NaN: each sequence's batched decode fails with
// the error that names its position and sequence (each request's own thread checks its rows), the
// prompt's check names its last position, and the engine goes on serving.
void check_nonfinite(const std::string& dev) {
  SCOPED_TRACE(dev);
  const std::string src = test::shared_path("reference/models/stories260K.gguf");
  const std::string path = test::scratch_dir("batch-nan") + "/nan.gguf";
  std::filesystem::copy_file(src, path, std::filesystem::copy_options::overwrite_existing);
  {
    const gguf::GgufFile g = gguf::GgufFile::open(src);
    const auto& ts = g.tensors();
    const auto t = std::find_if(ts.begin(), ts.end(), [](const auto& x) { return x.name == "output_norm.weight"; });
    ASSERT_NE(t, ts.end());
    ASSERT_EQ(t->type, DType::F32);
    std::fstream f(path, std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(static_cast<std::streamoff>(g.data_offset() + t->offset));
    const std::vector<float> nan(t->n_elements, std::nanf(""));
    f.write(reinterpret_cast<const char*>(nan.data()), static_cast<std::streamsize>(nan.size() * sizeof(float)));
    ASSERT_TRUE(f.good());
  }
  auto m = model::Model::load(path);
  const int32_t nv = m->hparams().n_vocab;
  runtime::BatchOptions bo;
  bo.n_seq = 3;
  bo.n_ctx = k_ctx;
  bo.n_ubatch = 16;
  runtime::BatchEngine e(*m, make(dev), bo);
  std::vector<std::string> errs(3);
  std::vector<std::thread> th;
  for (int32_t s = 0; s < 3; ++s)
    th.emplace_back([&, s] {
      e.begin(s);
      try {
        e.eval(s, test::random_prompt(1, 30 + uint32_t(s), nv), false, {});  // one token: a decode step
      } catch (const Error& x) {
        errs[size_t(s)] = x.what();
      }
      e.end(s);
    });
  for (auto& t : th) t.join();
  for (int32_t s = 0; s < 3; ++s)
    EXPECT_NE(errs[size_t(s)].find(fmt::format("non-finite logits at position 0 of sequence {}", s)), std::string::npos)
        << errs[size_t(s)];
  // A prompt with its logits: the check names its last position.
  e.begin(1);
  const std::vector<int32_t> p = test::random_prompt(9, 40, nv);
  try {
    e.eval(1, p, false, {});
    ADD_FAILURE() << "NaN logits were returned";
  } catch (const Error& x) {
    EXPECT_NE(std::string(x.what()).find("non-finite logits at position 8 of sequence 1"), std::string::npos)
        << x.what();
  }
  e.end(1);
}

TEST(BatchEngine, CpuNonFiniteLogitsFailTheRequest) { check_nonfinite("cpu"); }
TEST(BatchEngine, VulkanNonFiniteLogitsFailTheRequest) { check_nonfinite("vulkan"); }

TEST(BatchEngine, CpuBatchedEqualsAlone) { check("cpu"); }
TEST(BatchEngine, VulkanBatchedEqualsAlone) { check("vulkan"); }

}  // namespace
}  // namespace rocky
