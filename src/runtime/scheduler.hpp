// Slots and the request queue of the server: the Scheduler owns N slots (one Session each) and a
// bounded FIFO of jobs; one worker thread per slot runs one job at a time through the Generator.
//
// Seams for what comes next:
//   batching: the scheduler is the only owner of the slots, and jobs reach them only through
//        submit(); a batched step (several sequences per ubatch) replaces run_job() without
//        touching the HTTP layer.
//   prefix cache (runtime/prefix_cache.hpp): before each prefill, restore_prefix() keeps
//        the common prefix of the slot's KV and the prompt (device tier) and loads the following
//        cached blocks (RAM, disk); they are skipped (GenerateParams::n_cached) and reported as
//        cached_tokens / cache_n. After the generation, before the job is marked done (so the
//        next turn of an agent finds it on any slot), save_prefix() adds the slot's new full
//        blocks to the cache.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "runtime/batch.hpp"
#include "runtime/generator.hpp"
#include "runtime/prefix_cache.hpp"
#include "runtime/session.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::runtime {

// One generation request. The callbacks run on the slot's worker thread.
struct Job {
  std::vector<int32_t> prompt;
  GenerateParams params;
  TokenFn on_token;                 // per token; false cancels
  std::function<bool()> alive;      // polled per token and before the job starts (client still there?)
  std::atomic<bool> cancel{false};  // set from any thread: the job stops within one token
  // An embedding job (rocky serve --embedding): the prompt is evaluated from an empty context and
  // every token's hidden state lands in `hidden` ([prompt.size()][n_embd]); nothing is generated,
  // the prefix cache is not used, and `result` carries only n_prompt and prompt_ms.
  bool embed = false;
  std::vector<float> hidden;

  // Filled in by the scheduler; wait() returns once done.
  std::optional<GenerateResult> result;
  std::string error;    // non-empty: the generation threw (result empty)
  bool fault = false;   // the error is a device fault (rocky::is_device_fault): the server answers 503
  PrefixHit cache_hit;  // where the cached prompt tokens came from
  int slot = -1;
  bool started = false;
  void wait();
  bool wait_for_ms(int ms);  // true when done
  bool done() const;

 private:
  friend class Scheduler;
  mutable std::mutex m_;
  std::condition_variable cv_;
  bool done_ = false;
};

struct SchedulerStats {
  int n_slots = 0;
  int slots_busy = 0;
  int64_t queued = 0;    // jobs waiting for a slot
  int64_t kv_used = 0;   // KV cells in use over all slots
  int32_t n_ctx = 0;     // per slot
  bool batched = false;  // one BatchEngine runs every slot's tokens
  BatchStats batch;      // its steps (batched only)
  struct Slot {
    bool busy = false;
    int64_t kv = 0;  // KV cells it holds
  };
  std::vector<Slot> slots;  // per slot, by id (GET /slots)
};

class Scheduler {
 public:
  // `max_queue`: jobs that may wait when every slot is busy (beyond them submit() says QueueFull).
  // `cache` (may be null: each slot reuses only its own KV) is shared by the slots.
  Scheduler(const tok::Tokenizer& tok, std::vector<std::unique_ptr<Session>> slots, size_t max_queue,
            std::shared_ptr<PrefixCache> cache = nullptr);
  // Continuous batching: engine->n_seq() slots, slot i = sequence i of the engine; every
  // step of the engine carries the next token of each generating slot (batch.hpp). The prefix
  // cache works as with sessions: a slot's sequence keeps its cells between jobs (device tier),
  // cached blocks are imported into them, every full block is saved after the job (attention
  // models; a batched context holds no recurrent state). GenerateResult::batch_seqs_max tells
  // how many sequences shared the job's steps.
  Scheduler(const tok::Tokenizer& tok, std::shared_ptr<BatchEngine> engine, size_t max_queue,
            std::shared_ptr<PrefixCache> cache = nullptr);
  ~Scheduler();
  Scheduler(const Scheduler&) = delete;
  Scheduler& operator=(const Scheduler&) = delete;

  enum class Admit { Accepted, QueueFull, ShuttingDown };
  Admit submit(const std::shared_ptr<Job>& job);
  // Shutdown: no new jobs; with `cancel`, running and queued jobs are cancelled (each ends within
  // one token, queued ones without running). Returns at once; the destructor joins the workers.
  void close(bool cancel);
  SchedulerStats stats() const;
  PrefixCache* cache() const { return cache_.get(); }
  // Forget what every slot's KV holds (DELETE /cache): each slot's next job starts afresh.
  void forget_device_prefixes();
  int32_t n_ctx() const { return n_ctx_; }

 private:
  struct Slot {
    std::unique_ptr<Session> session;
    std::vector<int32_t> tokens;  // what its KV holds
    std::atomic<int64_t> kv{0};
    std::atomic<bool> busy{false};
    std::atomic<bool> forget{false};  // drop `tokens` before the next job
    std::shared_ptr<Job> job;         // running (guarded by mu_)
    std::thread worker;
  };
  void worker(size_t i);
  void run_job(Slot& s, Job& job);
  void run_batched_job(size_t i, Job& job);

  const tok::Tokenizer& tok_;
  std::shared_ptr<PrefixCache> cache_;
  std::shared_ptr<BatchEngine> engine_;  // set: slots have no session of their own
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t max_queue_;
  int32_t n_ctx_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool closed_ = false;
  int running_ = 0;
};

}  // namespace rocky::runtime
