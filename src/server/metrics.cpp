#include "server/metrics.hpp"

#include <fmt/format.h>

#include <utility>

#include "core/fault.hpp"

namespace rocky::server {

void Metrics::record(const runtime::GenerateResult& r) {
  prompt_tokens += r.n_prompt - r.n_cached;
  prompt_tokens_all += r.n_prompt;
  prompt_tokens_cached += r.n_cached;
  predicted_tokens += static_cast<int64_t>(r.tokens.size());
  std::lock_guard lk(m);
  prompt_ms += r.prompt_ms;
  predicted_ms += r.gen_ms;
}

namespace {

// The batched steps' counters and where their wall time goes (runtime::BatchStats).
template <class Add>
void add_batch(const runtime::BatchStats& b, Add add) {
  add("batch_seqs_per_step", "gauge", "Sequences in the last batched step.", static_cast<double>(b.last_seqs));
  add("batch_seqs_per_step_max", "gauge", "The most sequences one batched step carried.",
      static_cast<double>(b.max_seqs));
  add("batch_steps_total", "counter", "Batched steps (ubatches) run.", static_cast<double>(b.steps));
  add("batch_prefill_tokens_total", "counter", "Prompt tokens evaluated in batched steps.",
      static_cast<double>(b.prefill_tokens));
  add("batch_decode_tokens_total", "counter", "Decode tokens evaluated in batched steps.",
      static_cast<double>(b.decode_tokens));
  add("batch_step_seconds_total", "counter", "Wall time of the batched steps.", b.step_s);
  add("batch_compute_seconds_total", "counter", "Of it, the context's compute (record, submit, GPU, readback).",
      b.compute_s);
  add("batch_record_seconds_total", "counter", "Of the compute, recording command buffers.", b.record_s);
  add("batch_submit_wait_seconds_total", "counter", "Of the compute, waiting for the GPU's fences.", b.submit_wait_s);
  add("batch_readback_seconds_total", "counter", "Of the compute, copying logits to the host.", b.readback_s);
  add("batch_gather_seconds_total", "counter",
      "Between steps while a sequence was active (sampling, streaming, the join window).", b.gather_s);
  add("batch_replays_total", "counter", "Batched steps that replayed a recorded command buffer.",
      static_cast<double>(b.replays));
  add("kv_preemptions_total", "counter",
      "Sequences preempted because the shared KV ran out (each goes on when there is room).",
      static_cast<double>(b.preemptions));
  add("kv_replayed_tokens_total", "counter", "Tokens re-evaluated after preemptions.",
      static_cast<double>(b.replayed_tokens));
  add("requests_cancelled_in_step_total", "counter", "Waiting requests failed because their client left.",
      static_cast<double>(b.cancelled));
}

// Speculative decoding (--spec-type / -md): drafted tokens and how many the target kept.
template <class Add>
void add_speculation(const runtime::SchedulerStats& st, Add add) {
  add("draft_tokens_total", "counter", "Drafted tokens the target evaluated (speculative decoding).",
      static_cast<double>(st.draft_n));
  add("draft_tokens_accepted_total", "counter", "Of the drafted tokens, those kept.",
      static_cast<double>(st.draft_n_accepted));
  add("draft_acceptance_ratio", "gauge", "Accepted / drafted tokens so far (0 before any draft).",
      st.draft_n > 0 ? static_cast<double>(st.draft_n_accepted) / static_cast<double>(st.draft_n) : 0.0);
}

}  // namespace

std::string prometheus_text(Metrics& m, const runtime::SchedulerStats& st, const backend::Backend* be,
                            const runtime::PrefixCache* cache, const runtime::KvBytes* kv,
                            const runtime::KvBytes* kv_per_token) {
  double pms, gms;
  {
    std::lock_guard lk(m.m);
    pms = m.prompt_ms;
    gms = m.predicted_ms;
  }
  const double ptps = pms > 0 ? m.prompt_tokens / (pms / 1000.0) : 0.0;
  const double gtps = gms > 0 ? m.predicted_tokens / (gms / 1000.0) : 0.0;
  std::string out;
  auto add = [&](const char* name, const char* type, const char* help, double v) {
    out += fmt::format("# HELP rocky:{} {}\n# TYPE rocky:{} {}\nrocky:{} {}\n", name, help, name, type, name, v);
  };
  add("requests_total", "counter", "Generation requests received.", static_cast<double>(m.requests));
  add("requests_rejected_total", "counter", "Requests refused with 503 because the queue was full.",
      static_cast<double>(m.rejected));
  add("errors_total", "counter", "Requests answered with an error status.", static_cast<double>(m.errors));
  add("device_faults_total", "counter",
      "Requests failed with 503 by a device fault (out of device memory, device lost); the server made its "
      "context again.",
      static_cast<double>(m.device_faults));
  if (fault::active()) {  // ROCKY_FAULT: what the injector did so far
    out +=
        "# HELP rocky:faults_injected_total Faults the injector made (ROCKY_FAULT), by kind.\n"
        "# TYPE rocky:faults_injected_total counter\n";
    for (const fault::Kind k : {fault::Kind::Alloc, fault::Kind::Lost, fault::Kind::Disk, fault::Kind::Kill})
      out += fmt::format("rocky:faults_injected_total{{kind=\"{}\"}} {}\n", fault::kind_name(k), fault::injected(k));
    out +=
        "# HELP rocky:fault_events_total Events the injector counted (ROCKY_FAULT's N counts these), by kind.\n"
        "# TYPE rocky:fault_events_total counter\n";
    for (const fault::Kind k : {fault::Kind::Alloc, fault::Kind::Lost, fault::Kind::Disk, fault::Kind::Kill})
      out += fmt::format("rocky:fault_events_total{{kind=\"{}\"}} {}\n", fault::kind_name(k), fault::events(k));
  }
  add("prompt_tokens_total", "counter", "Prompt tokens evaluated.", static_cast<double>(m.prompt_tokens));
  add("tokens_predicted_total", "counter", "Tokens generated.", static_cast<double>(m.predicted_tokens));
  add("prompt_tokens_seconds", "gauge", "Average prefill throughput (tokens/s).", ptps);
  add("predicted_tokens_seconds", "gauge", "Average decode throughput (tokens/s).", gtps);
  add("requests_queued", "gauge", "Requests waiting for a slot.", static_cast<double>(st.queued));
  add("slots_busy", "gauge", "Slots generating.", static_cast<double>(st.slots_busy));
  add("slots_total", "gauge", "Slots (-np).", static_cast<double>(st.n_slots));
  add("kv_cells_used", "gauge", "KV cells in use over all slots.", static_cast<double>(st.kv_used));
  add("n_ctx", "gauge", "Context size of one slot (tokens).", static_cast<double>(st.n_ctx));
  // What a load balancer or an inference gateway routes on: work running and waiting, KV
  // occupancy, and how much of the prompts the prefix cache supplied (affinity pays off).
  add("requests_running", "gauge", "Requests generating (prefill or decode).", static_cast<double>(st.slots_busy));
  add("requests_waiting", "gauge", "Requests waiting for a slot or for KV cells.", static_cast<double>(st.queued));
  add("kv_cells_total", "gauge", "KV cells the slots share (-c).", static_cast<double>(st.n_cells));
  add("prompt_tokens_cached_total", "counter", "Prompt tokens supplied by the prefix cache (not evaluated).",
      static_cast<double>(m.prompt_tokens_cached));
  {
    const double all = static_cast<double>(m.prompt_tokens_all);
    add("prefix_cache_hit_ratio", "gauge", "Share of all prompt tokens the prefix cache supplied (0 .. 1).",
        all > 0 ? static_cast<double>(m.prompt_tokens_cached) / all : 0.0);
  }
  add_batch(st.batch, add);
  add_speculation(st, add);
  auto kinds = [&](const char* name, const char* help, const runtime::KvBytes& b, bool all) {
    out += fmt::format("# HELP rocky:{} {}\n# TYPE rocky:{} gauge\n", name, help, name);
    out += fmt::format("rocky:{}{{kind=\"full\"}} {}\n", name, b.full);
    out += fmt::format("rocky:{}{{kind=\"sliding_window\"}} {}\n", name, b.sliding_window);
    if (!all) return;
    out += fmt::format("rocky:{}{{kind=\"recurrent\"}} {}\n", name, b.recurrent);
    out += fmt::format("rocky:{}{{kind=\"unused\"}} {}\n", name, b.unused);
  };
  if (kv != nullptr)
    kinds("kv_bytes",
          "KV memory of the contexts by kind of layer: full attention, sliding window, recurrent state, held "
          "but unused.",
          *kv, true);
  if (kv_per_token != nullptr)
    kinds("kv_bytes_per_token", "KV bytes one position of one sequence costs, by kind of layer.", *kv_per_token, false);
  if (be != nullptr) {  // pipelines are created on first use: a request of a new shape pays for them
    const backend::BackendStats bs = be->stats();
    add("pipelines_created_total", "counter", "Compute pipelines created (first use of a kernel variant).",
        static_cast<double>(bs.pipelines));
    add("pipeline_create_seconds_total", "counter", "Wall time spent creating compute pipelines.",
        bs.pipeline_create_ms / 1000.0);
  }
  if (cache != nullptr) {
    const runtime::PrefixCacheStats cs = cache->stats();
    auto tiered = [&](const char* name, const char* type, const char* help, auto get) {
      out += fmt::format("# HELP rocky:{} {}\n# TYPE rocky:{} {}\n", name, help, name, type);
      for (const auto& [tier, t] : {std::pair<const char*, const runtime::TierStats*>{"device", &cs.device},
                                    {"ram", &cs.ram},
                                    {"disk", &cs.disk}})
        out += fmt::format("rocky:{}{{tier=\"{}\"}} {}\n", name, tier, static_cast<double>(get(*t)));
    };
    tiered("prefix_cache_hits_total", "counter", "Prompt blocks found in a prefix-cache tier.",
           [](const runtime::TierStats& t) { return t.hits; });
    tiered("prefix_cache_misses_total", "counter", "Prompt block lookups a prefix-cache tier could not answer.",
           [](const runtime::TierStats& t) { return t.misses; });
    tiered("prefix_cache_bytes", "gauge", "Bytes held by a prefix-cache tier.",
           [](const runtime::TierStats& t) { return t.bytes; });
    tiered("prefix_cache_evictions_total", "counter", "Blocks evicted from a prefix-cache tier.",
           [](const runtime::TierStats& t) { return t.evictions; });
    add("prefix_cache_disk_errors_total", "counter", "Damaged disk entries skipped (recomputed).",
        static_cast<double>(cs.disk_errors));
    add("prefix_cache_disk_writes_total", "counter", "Blocks written to the disk tier.",
        static_cast<double>(cs.disk_writes));
  }
  // llama-server's names (its `llamacpp:` prefix), for dashboards built for it: the same counts.
  auto llama = [&](const char* name, const char* type, const char* help, double v) {
    out +=
        fmt::format("# HELP llamacpp:{} {}\n# TYPE llamacpp:{} {}\nllamacpp:{} {}\n", name, help, name, type, name, v);
  };
  llama("prompt_tokens_total", "counter", "Number of prompt tokens processed.", static_cast<double>(m.prompt_tokens));
  llama("prompt_seconds_total", "counter", "Prompt process time", pms / 1000.0);
  llama("tokens_predicted_total", "counter", "Number of generation tokens processed.",
        static_cast<double>(m.predicted_tokens));
  llama("tokens_predicted_seconds_total", "counter", "Predict process time", gms / 1000.0);
  llama("prompt_tokens_seconds", "gauge", "Average prompt throughput in tokens/s.", ptps);
  llama("predicted_tokens_seconds", "gauge", "Average generation throughput in tokens/s.", gtps);
  // Over the cells the slots share (-c): with a unified KV n_ctx is all of them, not one slot's.
  const double cells = static_cast<double>(st.n_cells);
  llama("kv_cache_usage_ratio", "gauge", "KV-cache usage. 1 means 100 percent usage.",
        cells > 0 ? static_cast<double>(st.kv_used) / cells : 0.0);
  llama("kv_cache_tokens", "gauge", "KV-cache tokens.", static_cast<double>(st.kv_used));
  llama("requests_processing", "gauge", "Number of requests processing.", static_cast<double>(st.slots_busy));
  llama("requests_deferred", "gauge", "Number of requests deferred.", static_cast<double>(st.queued));
  llama("n_decode_total", "counter", "Total number of llama_decode() calls (here: batched steps).",
        static_cast<double>(st.batch.steps));
  return out;
}

}  // namespace rocky::server
