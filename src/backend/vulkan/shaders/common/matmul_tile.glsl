// The tile of the fast matmul kernels (mul_mm, mul_mmq) as named specialization constants, set from
// rocky::tune::MatmulTile (ids: abi.h / fast_abi.h): weight type, workgroup tile BM rows × BN tokens
// × BK k per stage, warp tile WM × WN, per-invocation tile TM × TN. Defaults are placeholders.
layout(constant_id = ROCKY_SC_WTYPE) const uint WTYPE = 12;
layout(constant_id = ROCKY_SC_BM) const uint BM = 64;
layout(constant_id = ROCKY_SC_BN) const uint BN = 64;
layout(constant_id = ROCKY_SC_BK) const uint BK = 32;
layout(constant_id = ROCKY_SC_WM) const uint WM = 32;
layout(constant_id = ROCKY_SC_WN) const uint WN = 32;
layout(constant_id = ROCKY_SC_TM) const uint TM = 4;
layout(constant_id = ROCKY_SC_TN) const uint TN = 4;
