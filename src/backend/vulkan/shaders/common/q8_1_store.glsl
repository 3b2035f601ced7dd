// Quantize 32 f32 values v[] (one q8_1 block) and store them at block index `blk` of the q8_1
// buffers qs / ds (declared by the includer): d = max|v| / 127, q = round-half-away(v / d), and
// (d, d·Σq) — the same values as quantize_q8_1.comp.
void store_q8_1(float v[32], uint blk) {
  float amax = 0.0;
  [[unroll]] for (uint i = 0u; i < 32u; ++i) amax = max(amax, abs(v[i]));
  const float d = amax / 127.0;
  const float id_ = d != 0.0 ? 1.0 / d : 0.0;
  int sum = 0;
  [[unroll]] for (uint w = 0u; w < 8u; ++w) {
    uint word = 0u;
    [[unroll]] for (uint j = 0u; j < 4u; ++j) {
      float s = v[4u * w + j] * id_;
      int q = int(sign(s) * floor(abs(s) + 0.5));
      sum += q;
      word |= (uint(q) & 0xFFu) << (8u * j);
    }
    qs[blk * 8u + w] = word;
  }
  ds[blk] = vec2(d, d * float(sum));
}
