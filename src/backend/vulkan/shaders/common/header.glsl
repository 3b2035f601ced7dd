// Included first by every compute shader: version, extensions, the ABI header, workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "abi.h"
layout(local_size_x_id = ROCKY_SC_WG) in;
// The K/V cache column of position p of the sequence whose first column in a full layer is c0
// (abi.h's k_tok_table: s · seq_cells; 0 where the binding starts at the sequence): c0 + p, or in a
// sliding-window ring of `ring` columns per sequence (graph.hpp KvShape) s · ring + p mod ring.
uint kv_col(uint c0, uint p, uint ring, uint seq_cells) {
  return ring == 0u ? c0 + p : (c0 / seq_cells) * ring + p % ring;
}
