#version 450
// attention_flash_roll: common/attention_flash.glsl with FA_ROLL = 1 — the q·k loop over head_dim in
// rolled steps of 4 vec4 and the P·V key loop not unrolled, so tiles of 4 rows per invocation fit
// the register file (tile field `roll`, ops/attention.cpp). Row reductions through shared memory,
// as attention_flash.comp.
#define FA_SG 0
#define FA_ROLL 1
#include "common/attention_flash.glsl"
