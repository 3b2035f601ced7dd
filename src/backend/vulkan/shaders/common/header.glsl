// Included first by every compute shader: version, extensions, the ABI header, workgroup size.
#extension GL_GOOGLE_include_directive : require
#include "abi.h"
layout(local_size_x_id = ROCKY_SC_WG) in;
