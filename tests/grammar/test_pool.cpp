// GrammarPool (src/grammar/pool.*): compiled grammars lent to one generation at a time and kept
// between requests, within their bounds.
#include <gtest/gtest.h>

#include <memory>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "grammar/pool.hpp"
#include "grammar_test_util.hpp"

namespace rocky::grammar {
namespace {

struct Counting {
  int calls = 0;
  GrammarPool::Compile fn() {
    return [this](const std::string& text) {
      ++calls;
      return test::compile(text);
    };
  }
};

TEST(GrammarPool, ReusesAReturnedCopyWithItsCaches) {
  Counting c;
  GrammarPool pool(c.fn());
  const std::string text = R"(root ::= "[" [a-z]{1,12} "]")";
  CompiledGrammar* first = nullptr;
  std::vector<uint64_t> mask0;
  {
    auto g = pool.acquire(text);
    first = g.get();
    Matcher m(g);
    ASSERT_TRUE(m.accept_bytes("[ab"));
    mask0 = m.mask();
    EXPECT_GT(g->cache_bytes(), 0u);
  }
  EXPECT_EQ(pool.stats().idle, 1u);
  auto again = pool.acquire(text);
  EXPECT_EQ(again.get(), first);  // the same compiled copy, its caches kept
  EXPECT_EQ(c.calls, 1);
  EXPECT_EQ(pool.stats().reused, 1u);
  EXPECT_EQ(pool.stats().idle, 0u);
  // A reused copy answers as a fresh one: the matcher's position is its own.
  Matcher m(again);
  EXPECT_FALSE(m.accepting());
  ASSERT_TRUE(m.accept_bytes("[ab"));
  EXPECT_EQ(m.mask(), mask0);
  EXPECT_TRUE(test::matches(again, "[abc]"));
  EXPECT_FALSE(test::matches(again, "[]"));
}

TEST(GrammarPool, ConcurrentGenerationsGetTheirOwnCopies) {
  Counting c;
  GrammarPool pool(c.fn(), {8, 2, uint64_t{1} << 30});
  const std::string text = R"(root ::= "x"+)";
  auto a = pool.acquire(text), b = pool.acquire(text), d = pool.acquire(text);
  EXPECT_NE(a.get(), b.get());
  EXPECT_NE(b.get(), d.get());
  EXPECT_EQ(c.calls, 3);
  a.reset();
  b.reset();
  d.reset();
  EXPECT_EQ(pool.stats().idle, 2u);  // idle_per_text = 2: the third copy is freed
  EXPECT_EQ(pool.stats().compiled, 3u);
}

TEST(GrammarPool, LeastRecentlyUsedTextsLeaveFirst) {
  Counting c;
  GrammarPool pool(c.fn(), {2, 4, uint64_t{1} << 30});
  pool.acquire(R"(root ::= "a")");
  pool.acquire(R"(root ::= "b")");
  pool.acquire(R"(root ::= "a")");  // reused: "a" is now the most recent
  pool.acquire(R"(root ::= "c")");  // three texts: "b" leaves
  EXPECT_EQ(c.calls, 3);
  EXPECT_EQ(pool.stats().idle, 2u);
  pool.acquire(R"(root ::= "a")");
  EXPECT_EQ(c.calls, 3);
  pool.acquire(R"(root ::= "b")");
  EXPECT_EQ(c.calls, 4);
}

TEST(GrammarPool, ByteBoundKeepsNothingOverIt) {
  Counting c;
  GrammarPool pool(c.fn(), {8, 4, 1});  // one byte: no compiled grammar fits
  pool.acquire(R"(root ::= "a"*)");
  EXPECT_EQ(pool.stats().idle, 0u);
  EXPECT_EQ(pool.stats().idle_bytes, 0u);
  pool.acquire(R"(root ::= "a"*)");
  EXPECT_EQ(c.calls, 2);
}

TEST(GrammarPool, ErrorsPassThroughAndAHandleOutlivesThePool) {
  Counting c;
  std::shared_ptr<CompiledGrammar> kept;
  {
    GrammarPool pool(c.fn());
    EXPECT_THROW(pool.acquire("root ::= ("), Error);
    EXPECT_EQ(pool.stats().compiled, 0u);
    kept = pool.acquire(R"(root ::= "ok")");
  }
  EXPECT_TRUE(test::matches(kept, "ok"));  // the pool is gone: dropping the handle just frees it
  kept.reset();
}

}  // namespace
}  // namespace rocky::grammar
