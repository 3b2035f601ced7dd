#version 450
// attention_flash (prefill): tiled causal GQA attention — the body and its documentation are in
// common/attention_flash.glsl; this variant reduces row maxima and sums through shared memory.
#define FA_SG 0
#include "common/attention_flash.glsl"
