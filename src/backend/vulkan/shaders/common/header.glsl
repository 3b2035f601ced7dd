// Included first by every compute shader: version, extensions, the ABI header, workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "abi.h"
layout(local_size_x_id = ROCKY_SC_WG) in;
// The K/V cache column of position p of the sequence whose first column in a full layer is c0
// (abi.h's k_tok_table: s · seq_cells; 0 where the binding starts at the sequence): c0 + p, or in a
// sliding-window ring of `ring` columns per sequence (graph.hpp KvShape) s · ring + p mod ring.
// The quotients come from f32 division, corrected by one step (exact for positions < 2^24): the
// integer division's sequence doubles the work registers of the attention kernels on Mali.
uint kv_col(uint c0, uint p, uint ring, uint seq_cells) {
  if (ring == 0u) return c0 + p;
  const uint s = uint(float(c0) / float(seq_cells) + 0.5);  // c0 is a multiple of seq_cells
  int r = int(p) - int(uint(float(p) / float(ring)) * ring);
  r += r < 0 ? int(ring) : (r >= int(ring) ? -int(ring) : 0);
  return s * ring + uint(r);
}
