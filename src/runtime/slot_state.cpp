// A scheduler slot's sequence to and from a SlotState (slot_file.hpp): the K/V moves as the prefix
// cache moves it (BatchEngine::export_kv / import_kv, or a hybrid sequence's own Session with its
// recurrent state), between the slot's jobs.
#include <fmt/format.h>

#include "core/error.hpp"
#include "runtime/batch.hpp"
#include "runtime/slot_file.hpp"

namespace rocky::runtime {

SlotState export_slot(BatchEngine& e, int32_t seq, std::span<const int32_t> tokens) {
  e.wait_deferred(seq);  // a prefix-cache export still queued reads the cells first
  SlotState s;
  s.tokens.assign(tokens.begin(), tokens.end());
  const auto n = static_cast<int32_t>(tokens.size());
  if (n == 0) return s;
  if (Session* ses = e.session(seq)) {
    // A hybrid sequence: its state is that after its last position, so it must hold exactly these.
    if (ses->n_past() != n)
      fail("slot {}: its session holds {} positions, not the {} tokens the slot holds", seq, ses->n_past(), n);
    s.kv = ses->export_kv(0, n);
    s.state = ses->export_state();
    return s;
  }
  s.kv = e.export_kv(seq, 0, n);
  return s;
}

void import_slot(BatchEngine& e, int32_t seq, const SlotState& s) {
  const auto n = static_cast<int32_t>(s.tokens.size());
  e.truncate(seq, 0);  // waits for the sequence's deferred work; a hybrid session is reset
  if (n == 0) return;
  try {
    if (Session* ses = e.session(seq)) {
      ses->import_kv(0, n, s.kv);
      ses->import_state(n, s.state);
      e.sync_session(seq);
    } else {
      e.import_kv(seq, 0, n, s.kv);
      e.keep_window_only(seq);  // a sliding-window ring: only what the next token reads is known good
    }
  } catch (...) {
    e.truncate(seq, 0);
    throw;
  }
}

}  // namespace rocky::runtime
