// POST /slots/{id}?action=save|restore|erase, as llama-server (with --slot-save-path DIR): a slot's
// cached tokens and their KV (and a hybrid model's recurrent state) to and from DIR/filename
// (runtime/slot_file.hpp). The action runs on the slot's own worker once the slot is idle
// (runtime::Job::slot_action), so it never races a generation of that slot.
#include <chrono>

#include "runtime/slot_file.hpp"
#include "server/app.hpp"

namespace rocky::server::detail {

namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}

// The body's "filename": a plain file name under --slot-save-path (llama-server's rule).
std::string body_filename(const std::string& body) {
  const nlohmann::ordered_json j = parse_body(body);
  if (!j.is_object() || !j.contains("filename"))
    throw ApiError(400, "the body must be a JSON object with \"filename\"", "filename", "missing_field");
  if (!j["filename"].is_string()) throw ApiError(400, "\"filename\" must be a string", "filename", "invalid_type");
  const std::string name = j["filename"].get<std::string>();
  if (!runtime::valid_slot_filename(name))
    throw ApiError(400,
                   fmt::format("Invalid filename '{}': a plain file name (no '/', '\\\\', '..', control characters)",
                               Error::printable(name.substr(0, 100))),
                   "filename", "invalid_value");
  return name;
}
}  // namespace

void App::slot_action(const httplib::Request& req, httplib::Response& res) {
  if (o_.slot_save_path.empty())
    throw ApiError(501, "This server does not support slots action. Start it with `--slot-save-path`", "", "",
                   "not_supported_error");
  const std::string id_str = req.matches.size() > 1 ? std::string(req.matches[1]) : std::string();
  int id_slot = -1;
  {
    bool digits = !id_str.empty() && id_str.size() <= 9;
    for (char c : id_str) digits = digits && c >= '0' && c <= '9';
    if (digits) id_slot = std::stoi(id_str);
  }
  if (id_slot < 0 || id_slot >= o_.n_parallel)
    throw ApiError(400,
                   fmt::format("Invalid slot ID '{}' (this server has slots 0 .. {})",
                               Error::printable(id_str.substr(0, 40)), o_.n_parallel - 1),
                   "id_slot", "invalid_value");
  const std::string action = req.get_param_value("action");
  if (action != "save" && action != "restore" && action != "erase")
    throw ApiError(400,
                   fmt::format("Invalid action '{}' (save, restore or erase)", Error::printable(action.substr(0, 40))),
                   "action", "invalid_value");
  const std::string filename = action == "erase" ? std::string() : body_filename(req.body);
  const std::string path = o_.slot_save_path + "/" + filename;
  const runtime::CacheIdentity id = cache_->identity();
  const int32_t n_vocab = model_->hparams().n_vocab;
  const int32_t n_ctx = sched_->n_ctx();

  // What the action did (written on the slot's worker, read here after wait()).
  struct Outcome {
    std::optional<ApiError> error;  // the file is at fault: 400, the slot unchanged
    int64_t n_tokens = 0;
    uint64_t n_bytes = 0;
    double ms = 0;
  };
  auto out = std::make_shared<Outcome>();
  auto job = std::make_shared<runtime::Job>();
  job->id_slot = id_slot;
  job->slot_action = [out, action, path, filename, id, n_vocab, n_ctx](runtime::BatchEngine& e, int32_t seq,
                                                                       std::vector<int32_t>& tokens) {
    const auto t0 = std::chrono::steady_clock::now();
    if (action == "erase") {
      out->n_tokens = static_cast<int64_t>(tokens.size());
      e.truncate(seq, 0);
      tokens.clear();
      return;
    }
    try {
      if (action == "save") {
        const runtime::SlotState st = runtime::export_slot(e, seq, tokens);
        out->n_bytes = runtime::write_slot_file(path, st, id);
        out->n_tokens = static_cast<int64_t>(st.tokens.size());
      } else {
        runtime::SlotState st = runtime::read_slot_file(path, id, n_vocab, n_ctx, &out->n_bytes);
        tokens.clear();  // from here on the cells change: import_slot leaves them empty if it fails
        runtime::import_slot(e, seq, st);
        tokens = std::move(st.tokens);
        out->n_tokens = static_cast<int64_t>(tokens.size());
      }
    } catch (const runtime::SlotFileError& err) {
      out->error =
          ApiError(400, fmt::format("Unable to {} slot {} with file '{}': {}", action, seq, filename, err.what()),
                   "filename", "invalid_slot_file");
    }
    out->ms = ms_since(t0);
  };
  // Not admit()/settle(): a slot action is no generation request (the /metrics counters skip it).
  switch (sched_->submit(job)) {
    case runtime::Scheduler::Admit::Accepted: break;
    case runtime::Scheduler::Admit::QueueFull:
      throw ApiError(503, fmt::format("the server is busy: {} requests wait (--queue)", o_.queue), "", "queue_full",
                     "unavailable_error");
    case runtime::Scheduler::Admit::ShuttingDown:
      throw ApiError(503, "the server is shutting down", "", "shutting_down", "unavailable_error");
  }
  job->wait();
  if (!job->error.empty())
    throw ApiError(job->fault ? 503 : 500, fmt::format("slot {} {}: {}", id_slot, action, job->error), "",
                   job->fault ? "device_fault" : "", job->fault ? "unavailable_error" : "server_error");
  if (!job->result || job->result->reason == runtime::StopReason::Cancelled)
    throw ApiError(503, "the server is shutting down", "", "shutting_down", "unavailable_error");
  if (out->error) throw *out->error;
  if (action == "erase") {
    send_json(res, 200, {{"id_slot", id_slot}, {"n_erased", out->n_tokens}});
  } else if (action == "save") {
    send_json(res, 200,
              {{"id_slot", id_slot},
               {"filename", filename},
               {"n_saved", out->n_tokens},
               {"n_written", out->n_bytes},
               {"timings", {{"save_ms", out->ms}}}});
  } else {
    send_json(res, 200,
              {{"id_slot", id_slot},
               {"filename", filename},
               {"n_restored", out->n_tokens},
               {"n_read", out->n_bytes},
               {"timings", {{"restore_ms", out->ms}}}});
  }
}

}  // namespace rocky::server::detail
