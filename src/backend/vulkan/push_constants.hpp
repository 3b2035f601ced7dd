// C++ view of shaders/abi.h with the size checks that keep host and GLSL layouts equal: every
// push-constant struct is a packed sequence of 32-bit scalars (std430 for scalars = C++ layout).
#pragma once

#include "backend/vulkan/shaders/abi.h"

namespace rocky::vulkan::abi {

static_assert(sizeof(GetRowsPC) == 8 * 4);
static_assert(sizeof(RmsNormPC) == 6 * 4);
static_assert(sizeof(MatmulPC) == 9 * 4);
static_assert(sizeof(BinaryPC) == 5 * 4);
static_assert(sizeof(RopePC) == 12 * 4);
static_assert(sizeof(KvStorePC) == 7 * 4);
static_assert(sizeof(AttnPC) == 15 * 4);
static_assert(sizeof(TakeColsPC) == 5 * 4);
static_assert(sizeof(RopeKvPC) == 19 * 4);
static_assert(sizeof(TakeRowsPC) == 6 * 4);
static_assert(sizeof(SsmConvPC) == 8 * 4);
static_assert(sizeof(GatedDeltaPC) == 12 * 4);
inline constexpr uint32_t k_max_push_constant_bytes = 128;
static_assert(sizeof(AttnPC) <= k_max_push_constant_bytes);

}  // namespace rocky::vulkan::abi
