// Quantize one q8_1 block (32 f32 values) cooperatively: 8 consecutive invocations of a workgroup
// (lane = local id % 8) each hold 4 consecutive values v of the block (lane l: values 4l..4l+3),
// so that their loads are coalesced (consecutive invocations read consecutive 16 bytes). Stores
// block index `blk` of the q8_1 buffers qs / ds (declared by the includer): d = max|x| / 127,
// q = round-half-away(x / d) (ggml's quantize_row_q8_1_ref), lane l writes word l of the block
// (its 4 int8 as one uint) and lane 0 writes (d, d·Σq). max and the integer Σq do not depend on
// the reduction order, so the values are bit-identical to one invocation quantizing the 32 values.
// The reductions go through shared memory (portable: no assumption on the subgroup size).
// Must be called in workgroup-uniform control flow (it has barriers); `live` = false invocations
// (past the end) take part in the barriers and store nothing. The workgroup size must be a multiple
// of 8. Two barriers per call; calling it again in a loop is safe without a third one (the next
// call's writes of a shared array come after a barrier that follows every read of it).
shared float q81_amax[gl_WorkGroupSize.x];
shared int q81_sum[gl_WorkGroupSize.x];

void store_q8_1_x8(vec4 v, uint blk, bool live) {
  const uint t = gl_LocalInvocationID.x, lane = t & 7u, g0 = t & ~7u;
  const vec4 a = abs(v);
  q81_amax[t] = max(max(a.x, a.y), max(a.z, a.w));
  barrier();
  float amax = q81_amax[g0];
  [[unroll]] for (uint i = 1u; i < 8u; ++i) amax = max(amax, q81_amax[g0 + i]);
  const float d = amax / 127.0;
  const float id_ = d != 0.0 ? 1.0 / d : 0.0;
  const vec4 s = v * id_;
  const ivec4 q = ivec4(sign(s) * floor(abs(s) + 0.5));  // roundf: half away from zero, as ggml
  q81_sum[t] = q.x + q.y + q.z + q.w;
  if (live) {
    const uvec4 u = uvec4(q) & 0xFFu;
    qs[blk * 8u + lane] = u.x | (u.y << 8u) | (u.z << 16u) | (u.w << 24u);
  }
  barrier();
  if (live && lane == 0u) {
    int sum = 0;
    [[unroll]] for (uint i = 0u; i < 8u; ++i) sum += q81_sum[g0 + i];
    ds[blk] = vec2(d, d * float(sum));
  }
}
