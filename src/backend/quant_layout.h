// The layout check of a quantized weight (backend/weight.h's canonical formats), for code that
// launches kernels on one (the CUDA backend) as dequantize_rows() checks before it reads.
#pragma once

#include "backend/weight.h"

namespace syv {

// Checks the shapes and dtypes of a quantized weight's tensors against its n, k and block / group
// sizes (reads no data); a CHECK failure names what is off.
void check_quantized_layout(const Weight& w);

}  // namespace syv
