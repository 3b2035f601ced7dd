// App's handlers that turn a request into generation parameters, and the /infill, embeddings and
// rerank routes (the class: app.hpp).
#include "server/app.hpp"

namespace rocky::server::detail {

runtime::GenerateParams App::to_params(const SamplingFields& s) const {
  runtime::GenerateParams p;
  p.sampling = o_.sampling;
  if (!s.grammar.empty()) p.grammar = compile_constraint(s.grammar, s.grammar_param);
  if (s.temperature) p.sampling.temp = static_cast<float>(*s.temperature);
  if (s.top_p) p.sampling.top_p = static_cast<float>(*s.top_p);
  if (s.min_p) p.sampling.min_p = static_cast<float>(*s.min_p);
  if (s.top_k) p.sampling.top_k = static_cast<int32_t>(*s.top_k);
  if (s.repeat_penalty) p.sampling.repeat_penalty = static_cast<float>(*s.repeat_penalty);
  if (s.repeat_last_n) p.sampling.repeat_last_n = static_cast<int32_t>(*s.repeat_last_n);
  if (s.presence_penalty) p.sampling.presence_penalty = static_cast<float>(*s.presence_penalty);
  if (s.frequency_penalty) p.sampling.frequency_penalty = static_cast<float>(*s.frequency_penalty);
  if (s.seed) p.sampling.seed = static_cast<uint32_t>(*s.seed);  // -1 → 0xFFFFFFFF: random, as llama.cpp
  auto set_f = [](float& dst, const std::optional<double>& v) {
    if (v) dst = static_cast<float>(*v);
  };
  auto set_i = [](int32_t& dst, const std::optional<int64_t>& v) {
    if (v) dst = static_cast<int32_t>(*v);
  };
  runtime::SamplerParams& sp = p.sampling;
  set_f(sp.typical_p, s.typical_p);
  set_f(sp.top_n_sigma, s.top_n_sigma);
  set_f(sp.xtc_probability, s.xtc_probability);
  set_f(sp.xtc_threshold, s.xtc_threshold);
  set_f(sp.dry_multiplier, s.dry_multiplier);
  set_f(sp.dry_base, s.dry_base);
  set_i(sp.dry_allowed_length, s.dry_allowed_length);
  set_i(sp.dry_penalty_last_n, s.dry_penalty_last_n);
  set_i(sp.mirostat, s.mirostat);
  set_f(sp.mirostat_tau, s.mirostat_tau);
  set_f(sp.mirostat_eta, s.mirostat_eta);
  if (s.samplers) sp.order = *s.samplers;
  if (s.dry_sequence_breakers) sp.dry_sequence_breakers = *s.dry_sequence_breakers;
  if (sp.dry_multiplier != 0.0f) {
    // The vocabulary scan for the breakers: once for the server's default list, per request for
    // a list of the request's own.
    if (!s.dry_sequence_breakers || *s.dry_sequence_breakers == o_.sampling.dry_sequence_breakers) {
      std::lock_guard lk(dry_mu_);
      if (!dry_default_) dry_default_ = runtime::dry_breakers(*tok_, o_.sampling.dry_sequence_breakers);
      sp.dry_breakers = dry_default_;
    } else {
      sp.dry_breakers = runtime::dry_breakers(*tok_, sp.dry_sequence_breakers);
    }
  }
  p.t_max_predict_ms = static_cast<int32_t>(s.t_max_predict_ms);
  if (const int n_slots = sched_->stats().n_slots; s.id_slot >= n_slots)
    throw ApiError(400,
                   fmt::format("'id_slot' is {}: the server has {} slots (0 … {})", s.id_slot, n_slots, n_slots - 1),
                   "id_slot", "invalid_value");
  p.id_slot = static_cast<int32_t>(s.id_slot);
  for (const LogitBias& b : s.logit_bias) {
    const float bias = static_cast<float>(b.bias);
    if (b.id >= 0) {
      if (!tok_->vocab().valid(static_cast<int32_t>(std::min<int64_t>(b.id, INT32_MAX))))
        throw ApiError(
            400,
            fmt::format("'{}' names token {}, not a token id (the vocab has {})", b.param, b.id, tok_->vocab().size()),
            b.param, "invalid_value");
      p.sampling.logit_bias.emplace_back(static_cast<int32_t>(b.id), bias);
    } else {  // llama-server: every token of the text gets the bias
      for (int32_t t : tok_->tokenize(b.text, false, false)) p.sampling.logit_bias.emplace_back(t, bias);
    }
  }
  p.max_tokens = static_cast<int32_t>(s.max_tokens.value_or(o_.n_predict));
  p.stop = s.stop;
  p.ignore_eos = s.ignore_eos;
  p.cache_prompt = s.cache_prompt;
  p.n_probs = static_cast<int32_t>(s.n_probs);
  p.return_tokens = s.return_tokens;
  set_speculation(s, p);
  return p;
}

void App::set_speculation(const SamplingFields& s, runtime::GenerateParams& p) const {
  const bool ngram = o_.spec_type == "ngram-simple";
  if (!ngram && o_.draft_model.empty()) {
    if (!s.spec_param.empty())
      throw ApiError(400,
                     fmt::format("'{}': the server has no drafter (start it with --spec-type ngram-simple or -md "
                                 "MODEL for speculative decoding)",
                                 s.spec_param),
                     s.spec_param, "invalid_value");
    return;
  }
  if (s.spec_p_min && ngram)
    throw ApiError(400, "'speculative.p_min' tunes a draft model; this server drafts by prompt lookup (ngram-simple)",
                   "speculative.p_min", "invalid_value");
  p.draft_max = static_cast<int32_t>(s.spec_n_max.value_or(o_.draft_max));
  // As llama-server: n_min at most n_max.
  p.draft_min = std::min(p.draft_max, static_cast<int32_t>(s.spec_n_min.value_or(o_.draft_min)));
  p.draft_p_min = static_cast<float>(s.spec_p_min.value_or(o_.draft_p_min));
  p.speculative = p.draft_max > 0;  // speculative.n_max 0: this request without speculation
}

void App::add_tool_grammar(runtime::GenerateParams& gp, const chat::ReplySyntax& syntax, const json& tools,
                           const std::string& choice, const std::string& name) const {
  if (tools.is_null() || choice == "none" || (choice == "auto" && gp.grammar)) return;
  const ToolGrammar tg = tool_call_grammar(syntax.format, tools, choice, name);
  if (tg.gbnf.empty()) return;
  gp.grammar = compile_constraint(tg.gbnf, "tools");
  gp.grammar_triggers = tg.triggers;
}

void App::check_fits(const std::vector<int32_t>& prompt, const char* param) const {
  if (prompt.empty()) throw ApiError(400, "the prompt is empty (no tokens to evaluate)", param, "invalid_value");
  if (static_cast<int64_t>(prompt.size()) > sched_->n_ctx()) {
    // llama-server's answer, field for field (clients read n_prompt_tokens and n_ctx to trim).
    ApiError e(400,
               fmt::format("request ({} tokens) exceeds the available context size ({} tokens), try increasing it",
                           prompt.size(), sched_->n_ctx()),
               param, "", "exceed_context_size_error");
    e.extra = {{"code", 400}, {"n_prompt_tokens", prompt.size()}, {"n_ctx", sched_->n_ctx()}};
    throw e;
  }
}

void App::require_completions() const {
  if (o_.embedding)
    throw ApiError(501, "This server does not support completions. Start it without `--embedding`", "", "not_supported",
                   "not_supported_error");
}

void App::infill(const httplib::Request& req, httplib::Response& res) {
  require_completions();
  const std::string missing = fim_.missing();
  if (!missing.empty())
    throw ApiError(400,
                   fmt::format("Infill is not supported by this model: it has no fill-in-the-middle tokens ({} "
                               "absent, and no <|fim_prefix|>-style tokens in the vocab)",
                               missing),
                   "", "fim_not_supported");
  const InfillRequest r = parse_infill(parse_body(req.body));
  std::vector<int32_t> prompt;
  if (r.completion.prompt_text) {
    prompt = tok_->tokenize(*r.completion.prompt_text, false, false);
  } else {
    prompt = r.completion.prompt_tokens;
    check_token_ids(prompt, "prompt");
  }
  const int32_t n_predict = static_cast<int32_t>(r.completion.sampling.max_tokens.value_or(o_.n_predict));
  std::vector<int32_t> ids = format_infill(*tok_, fim_, r, prompt, o_.n_batch, n_predict, sched_->n_ctx());
  check_fits(ids, "input_prefix");
  generate(req, res, std::move(ids), to_params(r.completion.sampling), Kind::Native, r.completion.stream,
           r.completion.include_usage, {});
}

void App::check_token_ids(const std::vector<int32_t>& ids, const std::string& param) const {
  for (size_t i = 0; i < ids.size(); ++i)
    if (!tok_->vocab().valid(ids[i]))
      throw ApiError(
          400, fmt::format("'{}[{}]' is {}, not a token id (the vocab has {})", param, i, ids[i], tok_->vocab().size()),
          fmt::format("{}[{}]", param, i), "invalid_value");
}

std::vector<float> App::run_hidden(const httplib::Request& req, std::vector<int32_t> ids) {
  auto probe = std::make_shared<ConnectionProbe>(req.local_addr, req.local_port, req.remote_addr, req.remote_port);
  auto job = submit(std::move(ids), runtime::GenerateParams{}, probe);
  job->embed = true;
  admit(job);
  while (!job->wait_for_ms(20))
    if (!probe->alive()) job->cancel = true;
  probe->release();
  if (const auto e = settle(*job)) throw *e;
  return std::move(job->hidden);
}

void App::require_embedding(const char* what, const char* flag) const {
  // Reranking: --reranking, or --embedding --pooling rank (the head is loaded with either).
  if (!o_.embedding || (std::string(flag) == "--reranking" && pooling_ != Pooling::rank))
    throw ApiError(501, fmt::format("This server does not support {}. Start it with `{}`", what, flag), "",
                   "not_supported", "not_supported_error");
}

void App::embeddings(const httplib::Request& req, httplib::Response& res, bool oai) {
  require_embedding("embeddings", "--embedding");
  const EmbeddingRequest r = parse_embeddings(parse_body(req.body), oai);
  if (oai && pooling_ == Pooling::none)
    throw ApiError(400,
                   "Pooling type 'none' is not OAI compatible (one vector per token): use /embedding, or start "
                   "the server with --pooling mean, cls or last",
                   "input", "invalid_value");
  if (pooling_ == Pooling::rank)
    throw ApiError(400, "this server pools with 'rank' (a reranker): use /rerank", "input", "invalid_value");
  const int64_t n_embd = model_->hparams().n_embd;
  json data = json::array();
  int64_t n_tokens = 0;
  for (size_t i = 0; i < r.inputs.size(); ++i) {
    const std::string& param = r.inputs[i].param;
    std::vector<int32_t> ids = r.inputs[i].text ? tok_->tokenize(*r.inputs[i].text, true, true) : r.inputs[i].tokens;
    check_token_ids(ids, param);
    check_fits(ids, param.c_str());
    n_tokens += static_cast<int64_t>(ids.size());
    std::vector<std::vector<float>> vecs = pool(run_hidden(req, std::move(ids)), n_embd, pooling_);
    if (pooling_ != Pooling::none)
      for (auto& v : vecs) normalize(v, r.embd_normalize);
    if (oai) {
      json e = r.base64 ? json(base64_floats(vecs[0])) : json(vecs[0]);
      data.push_back({{"embedding", std::move(e)}, {"index", i}, {"object", "embedding"}});
    } else {
      data.push_back({{"index", i}, {"embedding", vecs}});
    }
  }
  if (!oai) return send_json(res, 200, data);
  send_json(res, 200,
            {{"model", r.model.empty() ? model_id_ : r.model},
             {"object", "list"},
             {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}},
             {"data", std::move(data)}});
}

std::vector<int32_t> App::rerank_tokens(const std::string& query, const std::string& doc) const {
  if (auto t = model_->file().get_string("tokenizer.chat_template.rerank")) {
    std::string p(*t);
    auto replace_all = [&p](const std::string& from, const std::string& to) {
      for (size_t at = p.find(from); at != std::string::npos; at = p.find(from, at + to.size()))
        p.replace(at, from.size(), to);
    };
    replace_all("{query}", query);
    replace_all("{document}", doc);
    return tok_->tokenize(p, false, true);
  }
  const tok::Vocab& v = tok_->vocab();
  const auto sep = model_->file().get_uint("tokenizer.ggml.seperator_token_id");
  const bool add_sep = model_->file().get_bool("tokenizer.ggml.add_sep_token").value_or(false) && sep;
  const int32_t eos = v.eos() >= 0 ? v.eos() : sep ? static_cast<int32_t>(*sep) : -1;
  std::vector<int32_t> out;
  if (v.add_bos() && v.bos() >= 0) out.push_back(v.bos());
  for (int32_t t : tok_->tokenize(query, false, false)) out.push_back(t);
  if (v.add_eos() && eos >= 0) out.push_back(eos);
  if (add_sep) out.push_back(static_cast<int32_t>(*sep));
  for (int32_t t : tok_->tokenize(doc, false, false)) out.push_back(t);
  if (v.add_eos() && eos >= 0) out.push_back(eos);
  return out;
}

void App::rerank(const httplib::Request& req, httplib::Response& res) {
  require_embedding("reranking", "--reranking");
  const RerankRequest r = parse_rerank(parse_body(req.body));
  const int64_t n_embd = model_->hparams().n_embd;
  json results = json::array();
  int64_t n_tokens = 0;
  std::vector<std::pair<float, size_t>> scores;
  for (size_t i = 0; i < r.documents.size(); ++i) {
    std::vector<int32_t> ids = rerank_tokens(r.query, r.documents[i]);
    check_fits(ids, fmt::format("documents[{}]", i).c_str());
    n_tokens += static_cast<int64_t>(ids.size());
    const std::vector<float> h = run_hidden(req, std::move(ids));
    scores.emplace_back(rank_head_->score(pool(h, n_embd, Pooling::rank)[0]), i);
  }
  std::stable_sort(scores.begin(), scores.end(), [](const auto& a, const auto& b) { return a.first > b.first; });
  const size_t n = r.top_n > 0 ? std::min(scores.size(), static_cast<size_t>(r.top_n)) : scores.size();
  for (size_t k = 0; k < n; ++k) {
    json e = {{"index", scores[k].second}, {"relevance_score", scores[k].first}};
    if (r.return_documents) e["document"] = {{"text", r.documents[scores[k].second]}};
    results.push_back(std::move(e));
  }
  send_json(res, 200,
            {{"model", r.model.empty() ? model_id_ : r.model},
             {"object", "list"},
             {"usage", {{"prompt_tokens", n_tokens}, {"total_tokens", n_tokens}}},
             {"results", std::move(results)}});
}

}  // namespace rocky::server::detail
