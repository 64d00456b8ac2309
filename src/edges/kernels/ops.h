// Every lean kernel, as ops (launch/grid.h says what an op is): the list
// that the launch templates are instantiated for, once per scalar type, on
// the CPU (edges/cpu/ops.cpp) and on CUDA (edges/cuda/ops.cu).  A kernel is
// its body (kernels/NAME.h), its op and its line in its family's list
// (kernels/NAME_ops.h), and its caller (edges/lean_NAME.cpp); a new family
// adds its list here.
#pragma once

#include "edges/kernels/gate_ops.h"
#include "edges/kernels/rotate_in_grad_ops.h"
#include "edges/kernels/rotate_in_ops.h"
#include "edges/kernels/rotate_out_ops.h"

#define UMA_LEAN_OPS(X) \
  UMA_GATE_OPS(X) UMA_ROTATE_IN_OPS(X) UMA_ROTATE_IN_GRAD_OPS(X) UMA_ROTATE_OUT_OPS(X)
