// Scale groups of rocky's mmq layout (ops/matmul_fast.hpp documents it): per weight row one
// group of SG 32-bit words per 8 blocks of 32 values, holding the GGUF's own scale fields (f16 d,
// dmin; 6-bit / int8 sub-block scales; q5_1's per-block d and m), and for q6_K with nibbles also
// the values' high 2 bits.
// The including shader declares `ws` (uint[], binding 1), WTYPE and NIBBLES.
const bool Q6NIB = NIBBLES && WTYPE == 14u;
const uint SG = Q6NIB ? 21u : (WTYPE == 7u ? 8u : 5u);  // words per group

// Words of scale groups per row of nb blocks.
uint mmq_srow_words(uint nb) { return ((nb + 7u) >> 3) * SG; }

// The scale pair (s0, s1) of block b of the row whose groups start at word `srow`: q4_K / q5_K
// (d·sc, −(dmin·m)), q6_K (d·sc of values 0..15, of 16..31), q5_1 (d, m), q8_0 / q4_0 / q5_0 (d, d). The same f32 products
// as ggml's dequantize_row_* (f16 → f32 and int → f32 are exact, one rounded multiply).
// Split in two for kernels that hold the raw words across a stage (mul_mmq: two words per scale
// pair either way, decoded when stored to shared memory).
uvec2 mmq_scale_raw(uint srow, uint b) {
  const uint g = srow + (b >> 3) * SG, j = b & 7u;
  if (WTYPE == 12u || WTYPE == 13u || WTYPE == 14u) return uvec2(ws[g], ws[g + 1u + (j >> 1)] >> ((j & 1u) * 16u));
  if (WTYPE == 7u) return uvec2(ws[g + (j >> 1)], ws[g + 4u + (j >> 1)]) >> ((j & 1u) * 16u);
  return uvec2(ws[g + (j >> 1)] >> ((j & 1u) * 16u), 0u);
}
vec2 mmq_scale_decode(uvec2 r) {
  if (WTYPE == 12u || WTYPE == 13u || WTYPE == 14u) {
    const vec2 dd = unpackHalf2x16(r.x);
    if (WTYPE != 14u) return vec2(dd.x * float(r.y & 0xFFu), -(dd.y * float((r.y >> 8) & 0xFFu)));
    return vec2(dd.x * float(int(r.y << 24) >> 24), dd.x * float(int(r.y << 16) >> 24));
  }
  const float d = unpackHalf2x16(r.x).x;
  if (WTYPE == 7u) return vec2(d, unpackHalf2x16(r.y).x);
  return vec2(d, d);
}
vec2 mmq_scale(uint srow, uint b) { return mmq_scale_decode(mmq_scale_raw(srow, b)); }

// q6_K with nibbles: block b's two words of high bits (nibble word c's 16 bits at half c & 1 of
// word c >> 1: bits 2k = value 4c + k, bits 8 + 2k = value 16 + 4c + k).
uvec2 mmq_q6_hi(uint srow, uint b) {
  const uint g = srow + (b >> 3) * SG + 5u + 2u * (b & 7u);
  return uvec2(ws[g], ws[g + 1u]);
}

// Four 2-bit fields of x's low byte → bits 0..1 of each byte.
uint mmq_spread2(uint x) {
  x = (x | (x << 12)) & 0x000F000Fu;
  return (x | (x << 6)) & 0x03030303u;
}
// q6_K nibble word w (bytes: low nibble value 4c + k, high nibble value 16 + 4c + k) with its 16
// high-bit bits h → the 6-bit values u = q + 32 of the low half (values 4c + k) / high half.
uint mmq_q6lo(uint w, uint h) { return (w & 0x0F0F0F0Fu) | (mmq_spread2(h & 0xFFu) << 4); }
uint mmq_q6hi(uint w, uint h) { return ((w >> 4) & 0x0F0F0F0Fu) | (mmq_spread2((h >> 8) & 0xFFu) << 4); }
// The 16 high-bit bits of nibble word c of a block (hw = mmq_q6_hi).
uint mmq_q6_h16(uvec2 hw, uint c) { return (((c >> 1) == 0u ? hw.x : hw.y) >> ((c & 1u) * 16u)) & 0xFFFFu; }
// Bytes u (0..63) → int8 q = u − 32, four at a time (no borrow between bytes).
uint mmq_s8_from_u6(uint u) { return ((u | 0x80808080u) - 0x20202020u) ^ 0x80808080u; }
