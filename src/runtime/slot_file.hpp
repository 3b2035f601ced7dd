// Slot files: what `rocky serve --slot-save-path DIR` writes for POST /slots/{id}?action=save and
// reads back for action=restore (llama-server's slot save/restore).
//
// A file holds one slot's sequence: the token ids its cells hold, their K/V (the same bytes the
// prefix cache's blocks hold: backend::Context::export_kv of positions [0, n)) and, on a hybrid
// model, the recurrent state after the last token (Session::export_state, CacheIdentity::state_bytes
// bytes). Layout (little-endian, as the host writes it): a fixed header (magic "RKYSLOT1", format
// version, header size, the prefix cache's model identity — CacheIdentity::model and its hash() —,
// KV type and shape, token count, K/V and state lengths, payload length and checksum, header
// checksum), then the payload: token ids (int32), K/V bytes, state bytes. hash64 checksums both.
//
// decode_slot_file checks everything before anything is used (size, magic, version, identity,
// shape, lengths, checksums, token ids within the vocabulary) and throws SlotFileError saying what
// is wrong; the caller names the file. A restore therefore changes the slot only once a file has
// been read whole and found right.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "core/error.hpp"
#include "runtime/prefix_cache.hpp"

namespace rocky::runtime {

// A slot file that cannot be used (missing, unreadable, damaged, another model or KV layout).
class SlotFileError : public Error {
 public:
  using Error::Error;
};

struct SlotState {
  std::vector<int32_t> tokens;  // the token ids of positions [0, n)
  std::vector<uint8_t> kv;      // their K/V: CacheIdentity::kv_bytes_per_pos · n bytes
  std::vector<uint8_t> state;   // hybrid models: the recurrent state after position n − 1; else empty
};

// The file's bytes for `s`, bound to identity `id`.
std::vector<uint8_t> encode_slot_file(const SlotState& s, const CacheIdentity& id);
// Parses `bytes` written for `id`; token ids must be below `n_vocab`, their count at most
// `max_tokens` (the slot's context). Throws SlotFileError.
SlotState decode_slot_file(std::span<const uint8_t> bytes, const CacheIdentity& id, int32_t n_vocab,
                           int32_t max_tokens);

// Writes the file at `path` whole or not at all (a temporary name in the same directory, renamed
// into place); returns its size. Throws SlotFileError naming the path.
uint64_t write_slot_file(const std::string& path, const SlotState& s, const CacheIdentity& id);
// Reads and decodes `path` (decode_slot_file's checks; a file larger than any state of
// `max_tokens` tokens is refused unread); `n_read` gets its size. Throws SlotFileError naming the
// path.
SlotState read_slot_file(const std::string& path, const CacheIdentity& id, int32_t n_vocab, int32_t max_tokens,
                         uint64_t* n_read);

// llama-server's filename rule for the files under --slot-save-path: 1 .. 255 bytes, no control
// characters, none of / \ : * ? " < > |, no "..", not ".", no leading or trailing space, no
// trailing dot (so a name can never leave the directory).
bool valid_slot_filename(const std::string& name);

class BatchEngine;
// Sequence `seq` of `e` holding `tokens` (its first positions: what the scheduler's slot holds)
// as a SlotState: their K/V through the prefix cache's path (BatchEngine::export_kv, or a hybrid
// sequence's Session) and, on a hybrid model, its recurrent state. Only the sequence's own thread
// between its jobs calls these (slot_state.cpp).
SlotState export_slot(BatchEngine& e, int32_t seq, std::span<const int32_t> tokens);
// Loads `s` into sequence `seq` (its cells then hold s.tokens); on failure the sequence is left
// empty (position 0), never half-loaded.
void import_slot(BatchEngine& e, int32_t seq, const SlotState& s);

}  // namespace rocky::runtime
