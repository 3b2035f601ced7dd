// Slots and the request queue of the server: the Scheduler owns one BatchEngine (runtime/batch.hpp)
// whose n_seq sequences are its slots, and a bounded FIFO of jobs; one worker thread per slot runs
// one job at a time through the Generator, every slot's tokens going through the engine's steps.
//
// Dispatch: a queued job goes to the idle slot whose cells share the longest prefix with its prompt
// (the device tier of the prefix cache), and only once the engine's shared cells hold its prompt
// beside what the running jobs hold (or nothing runs): beyond the free KV a job waits in the queue.
//
// Prefix cache (runtime/prefix_cache.hpp): before each prefill, restore_prefix() keeps the common
// prefix of the slot's cells and the prompt (device tier) and loads the following cached blocks
// (RAM, disk); they are skipped (GenerateParams::n_cached) and reported as cached_tokens / cache_n.
// Saves are off the request's path: once the prompt is evaluated and again after the generation,
// save_prefix_async() has the engine's thread copy the new blocks' cells between two steps and the
// scheduler's writer thread add them. cache_prompt false neither reuses nor saves.
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
#include "runtime/task_queue.hpp"
#include "tokenizer/tokenizer.hpp"

namespace rocky::runtime {

// One generation request. The callbacks run on the slot's worker thread.
struct Job {
  std::vector<int32_t> prompt;
  GenerateParams params;
  TokenFn on_token;                 // per token; false cancels
  std::function<bool()> alive;      // polled per token and before the job starts (client still there?)
  std::atomic<bool> cancel{false};  // set from any thread: the job stops within one token
  int id_slot = -1;                 // ≥ 0: only that slot runs it (llama-server's id_slot)
  // An embedding job (rocky serve --embedding): the prompt is evaluated from an empty context and
  // every token's hidden state lands in `hidden` ([prompt.size()][n_embd]); nothing is generated,
  // the prefix cache is not used, and `result` carries only n_prompt and prompt_ms.
  bool embed = false;
  std::vector<float> hidden;
  // A slot action (rocky serve's POST /slots/{id}?action=save|restore|erase) instead of a
  // generation: runs on slot id_slot's worker once that slot is idle (while it is busy the action
  // waits, as llama-server defers it), never beside a job of that slot. It gets the engine, the
  // sequence and the tokens the slot's cells hold, and may replace them (it then leaves the cells
  // holding exactly the new tokens). An exception lands in `error`. `prompt` stays empty.
  std::function<void(BatchEngine&, int32_t seq, std::vector<int32_t>& tokens)> slot_action;

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

// Speculative decoding in the slots (rocky serve --spec-type ngram-simple / -md MODEL): each slot
// keeps a drafter of its own (a draft model: with its own context of the slot's size on the
// engine's backend, whose cells stay from one job to the next like the slot's). A job drafts when
// GenerateParams::speculative is set (not with mirostat, which verification does not replay).
// Verification goes through BatchEngine::verify: several slots' drafts share one step.
struct SlotSpeculation {
  enum class Kind { None, Ngram, Model };
  Kind kind = Kind::None;
  int32_t ngram_n = 3, ngram_m = 48;    // Kind::Ngram (NgramDrafter)
  const model::Model* draft = nullptr;  // Kind::Model: the draft model (outlives the scheduler)
  int32_t n_vocab = 0;                  // Kind::Model: the ids both vocabularies share
  int32_t n_ctx = 0;                    // Kind::Model: each draft context's positions (0: the slot's)
};

struct SchedulerStats {
  int n_slots = 0;
  int slots_busy = 0;
  int64_t queued = 0;   // jobs waiting for a slot
  int64_t kv_used = 0;  // KV cells in use over all slots
  int32_t n_ctx = 0;    // per slot
  int64_t n_cells = 0;  // the KV cells the slots share (-c)
  BatchStats batch;     // the engine's steps
  struct Slot {
    bool busy = false;
    int64_t kv = 0;  // KV cells it holds
  };
  std::vector<Slot> slots;  // per slot, by id (GET /slots)
  // Speculative decoding over all jobs: drafted tokens the target evaluated, and of them accepted.
  int64_t draft_n = 0, draft_n_accepted = 0;
};

class Scheduler {
 public:
  // `max_queue`: jobs that may wait when every slot is busy (beyond them submit() says QueueFull).
  // `cache` (may be null: each slot reuses only its own cells) is shared by the slots. Slot i is
  // sequence i of `engine`; GenerateResult::batch_seqs_max tells how many sequences shared the
  // job's steps.
  Scheduler(const tok::Tokenizer& tok, std::shared_ptr<BatchEngine> engine, size_t max_queue,
            std::shared_ptr<PrefixCache> cache = nullptr, const SlotSpeculation& spec = {});
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
  // Returns once the prefix-cache saves queued so far are in the cache (tests, shutdown).
  void flush_saves();
  // Forget what every slot's KV holds (DELETE /cache): each slot's next job starts afresh.
  void forget_device_prefixes();
  int32_t n_ctx() const { return n_ctx_; }

 private:
  struct Slot {
    std::vector<int32_t> tokens;  // what its cells hold
    std::atomic<int64_t> kv{0};
    std::atomic<bool> busy{false};
    std::atomic<bool> forget{false};         // drop `tokens` before the next job
    std::shared_ptr<Job> job;                // assigned or running (guarded by mu_)
    int64_t reserved = 0;                    // its prompt's cells until evaluated (guarded by mu_)
    std::unique_ptr<Session> embed_session;  // embedding jobs (made on the first one)
    std::unique_ptr<Session> draft_session;  // SlotSpeculation::Kind::Model: the draft model's context
    std::unique_ptr<Drafter> drafter;        // null: no speculation
    std::thread worker;
  };
  void worker(size_t i);
  void run_job(size_t i, Job& job);
  void run_embed(Slot& s, Job& job);
  void run_slot_action(Slot& s, int32_t seq, Job& job);
  void dispatch();  // mu_ held: queued jobs to idle slots
  // The slot's drafter for job params `p` (null: none, or its draft context is lost and cannot be
  // made again: the job runs without drafts, with a warning).
  Drafter* slot_drafter(Slot& s, const GenerateParams& p);
  void make_model_drafter(Slot& s);

  const tok::Tokenizer& tok_;
  std::shared_ptr<PrefixCache> cache_;
  std::shared_ptr<BatchEngine> engine_;
  std::vector<std::unique_ptr<Slot>> slots_;
  size_t max_queue_;
  int32_t n_ctx_ = 0;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<Job>> queue_;
  bool closed_ = false;
  int running_ = 0;
  int64_t reserved_ = 0;  // prompt cells of jobs dispatched but not yet evaluated
  std::atomic<int64_t> draft_n_{0}, draft_n_accepted_{0};
  SlotSpeculation spec_;
  std::unique_ptr<TaskQueue> writer_;  // the prefix cache's block writer
};

}  // namespace rocky::runtime
