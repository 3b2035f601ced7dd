// Per-element dequantization of ggml weight rows, read from a uint[] storage buffer named `wdata`
// (declared by the including shader) through byte addressing, so rows of any block size and
// alignment work without 8/16-bit storage features. Correct and simple, not fast (adds the
// fast kernels). Block layouts: ggml/src/ggml-common.h (llama.cpp 0253fb21f); all little-endian.
//
// dequant_elem(row, i): element i of the row whose first byte is `row` (byte offset in wdata).
// The type is the specialization constant WTYPE (ggml type id).

uint rd_u8(uint b) { return (wdata[b >> 2] >> ((b & 3u) * 8u)) & 0xFFu; }
uint rd_u16(uint b) { return (wdata[b >> 2] >> ((b & 2u) * 8u)) & 0xFFFFu; }  // b even
float rd_f16(uint b) { return unpackHalf2x16(rd_u16(b)).x; }
int rd_i8(uint b) { return int(rd_u8(b) << 24) >> 24; }

// 6-bit scale/min pair `j` (0..7) of q4_K / q5_K packed in 12 bytes at `s`.
vec2 scale_min_k4(uint s, uint j) {
  uint sc, m;
  if (j < 4u) {
    sc = rd_u8(s + j) & 63u;
    m = rd_u8(s + j + 4u) & 63u;
  } else {
    sc = (rd_u8(s + j + 4u) & 0xFu) | ((rd_u8(s + j - 4u) >> 6) << 4);
    m = (rd_u8(s + j + 4u) >> 4) | ((rd_u8(s + j) >> 6) << 4);
  }
  return vec2(float(sc), float(m));
}

float dequant_elem(uint row, uint i) {
  if (WTYPE == 0u) {  // f32
    return uintBitsToFloat(wdata[(row >> 2) + i]);
  } else if (WTYPE == 1u) {  // f16
    return rd_f16(row + 2u * i);
  } else if (WTYPE == 30u) {  // bf16
    return uintBitsToFloat(rd_u16(row + 2u * i) << 16);
  } else if (WTYPE == 2u) {  // q4_0: f16 d, u8 qs[16]; 32 elements, 18 bytes
    uint b = row + (i >> 5) * 18u, j = i & 31u;
    uint q = rd_u8(b + 2u + (j & 15u));
    q = j < 16u ? (q & 0xFu) : (q >> 4);
    return rd_f16(b) * (float(q) - 8.0);
  } else if (WTYPE == 3u) {  // q4_1: f16 d, f16 m, u8 qs[16]; 20 bytes
    uint b = row + (i >> 5) * 20u, j = i & 31u;
    uint q = rd_u8(b + 4u + (j & 15u));
    q = j < 16u ? (q & 0xFu) : (q >> 4);
    return rd_f16(b) * float(q) + rd_f16(b + 2u);
  } else if (WTYPE == 6u) {  // q5_0: f16 d, u8 qh[4], u8 qs[16]; 22 bytes
    uint b = row + (i >> 5) * 22u, j = i & 31u;
    uint q = rd_u8(b + 6u + (j & 15u));
    q = j < 16u ? (q & 0xFu) : (q >> 4);
    uint qh = rd_u8(b + 2u + (j >> 3));
    q |= ((qh >> (j & 7u)) & 1u) << 4;
    return rd_f16(b) * (float(q) - 16.0);
  } else if (WTYPE == 7u) {  // q5_1: f16 d, f16 m, u8 qh[4], u8 qs[16]; 24 bytes
    uint b = row + (i >> 5) * 24u, j = i & 31u;
    uint q = rd_u8(b + 8u + (j & 15u));
    q = j < 16u ? (q & 0xFu) : (q >> 4);
    uint qh = rd_u8(b + 4u + (j >> 3));
    q |= ((qh >> (j & 7u)) & 1u) << 4;
    return rd_f16(b) * float(q) + rd_f16(b + 2u);
  } else if (WTYPE == 8u) {  // q8_0: f16 d, i8 qs[32]; 34 bytes
    uint b = row + (i >> 5) * 34u, j = i & 31u;
    return rd_f16(b) * float(rd_i8(b + 2u + j));
  } else if (WTYPE == 10u) {  // q2_K: u8 scales[16], u8 qs[64], f16 d, f16 dmin; 84 bytes
    uint b = row + (i >> 8) * 84u, e = i & 255u;
    uint half_ = e >> 7, r = e & 127u, j = r >> 5, l = r & 31u;
    uint sc = rd_u8(b + half_ * 8u + j * 2u + (l >> 4));
    uint q = (rd_u8(b + 16u + half_ * 32u + l) >> (2u * j)) & 3u;
    return rd_f16(b + 80u) * float(sc & 0xFu) * float(q) - rd_f16(b + 82u) * float(sc >> 4);
  } else if (WTYPE == 11u) {  // q3_K: u8 hmask[32], u8 qs[64], u8 scales[12], f16 d; 110 bytes
    uint b = row + (i >> 8) * 110u, e = i & 255u;
    uint half_ = e >> 7, r = e & 127u, j = r >> 5, l = r & 31u;
    uint is = half_ * 8u + j * 2u + (l >> 4);  // scale index 0..15
    uint g = is >> 2, k = is & 3u;
    uint lo = g < 2u ? (rd_u8(b + 96u + g * 4u + k) & 0xFu) : (rd_u8(b + 96u + (g - 2u) * 4u + k) >> 4);
    uint hi = (rd_u8(b + 104u + k) >> (2u * g)) & 3u;
    int sc = int(lo | (hi << 4)) - 32;
    int q = int((rd_u8(b + 32u + half_ * 32u + l) >> (2u * j)) & 3u);
    uint m = 1u << (half_ * 4u + j);
    if ((rd_u8(b + l) & m) == 0u) q -= 4;
    return rd_f16(b + 108u) * float(sc) * float(q);
  } else if (WTYPE == 12u) {  // q4_K: f16 d, f16 dmin, u8 scales[12], u8 qs[128]; 144 bytes
    uint b = row + (i >> 8) * 144u, e = i & 255u;
    uint c = e >> 6, r = e & 63u, l = r & 31u, hi = r >> 5;
    vec2 sm = scale_min_k4(b + 4u, c * 2u + hi);
    uint q = rd_u8(b + 16u + c * 32u + l);
    q = hi == 1u ? (q >> 4) : (q & 0xFu);
    return rd_f16(b) * sm.x * float(q) - rd_f16(b + 2u) * sm.y;
  } else if (WTYPE == 13u) {  // q5_K: f16 d, f16 dmin, u8 scales[12], u8 qh[32], u8 qs[128]; 176
    uint b = row + (i >> 8) * 176u, e = i & 255u;
    uint c = e >> 6, r = e & 63u, l = r & 31u, hi = r >> 5;
    vec2 sm = scale_min_k4(b + 4u, c * 2u + hi);
    uint q = rd_u8(b + 48u + c * 32u + l);
    q = hi == 1u ? (q >> 4) : (q & 0xFu);
    q += ((rd_u8(b + 16u + l) >> (2u * c + hi)) & 1u) << 4;
    return rd_f16(b) * sm.x * float(q) - rd_f16(b + 2u) * sm.y;
  } else if (WTYPE == 14u) {  // q6_K: u8 ql[128], u8 qh[64], i8 scales[16], f16 d; 210 bytes
    uint b = row + (i >> 8) * 210u, e = i & 255u;
    uint half_ = e >> 7, r = e & 127u, quarter = r >> 5, l = r & 31u;
    uint ql = rd_u8(b + half_ * 64u + l + (quarter & 1u) * 32u);
    ql = quarter >= 2u ? (ql >> 4) : (ql & 0xFu);
    uint qh = (rd_u8(b + 128u + half_ * 32u + l) >> (2u * quarter)) & 3u;
    int q = int(ql | (qh << 4)) - 32;
    int sc = rd_i8(b + 192u + half_ * 8u + (l >> 4) + 2u * quarter);
    return rd_f16(b + 208u) * float(sc) * float(q);
  }
  return 0.0;
}
