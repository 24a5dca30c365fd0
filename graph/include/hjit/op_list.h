// The one list of hjit's primitive ops. Every layer expands it to make its per-op table: the enum and
// names here, the op definitions (arity, attributes, traits, shape/dtype inference) in
// graph/op_defs.cpp, the eager kernels in frontend/eager/, the Halide lowerings in halide_backend/.
// A missing entry in any of those tables is a compile error.
//
// Adding an op: add a row here, then one entry per layer: the inference function in
// graph/shape_inference.cpp, the eager kernel in frontend/eager/, the lowering in
// halide_backend/lower_ops.cpp, and the user-facing function in frontend/ops.cpp.
//
// X(Kind, "printed name", arity (-1 = variadic), traits, "attribute,names", inference function)
#pragma once

#define HJIT_OPS(X)                                                                        \
  /* sources: the type is declared by whoever creates the node */                          \
  X(Parameter, "parameter", 0, Source, "index,captured", infer_source)                     \
  X(Constant, "constant", 0, Source, "", infer_source)                                     \
  X(Full, "full", 0, Source, "value", infer_source)                                        \
  X(Iota, "iota", 0, Source, "axis", infer_iota)                                           \
  /* elementwise, one operand, same dtype out */                                           \
  X(Neg, "neg", 1, Elementwise | NumericOnly, "", infer_unary)                             \
  X(Abs, "abs", 1, Elementwise | NumericOnly, "", infer_unary)                             \
  X(Sign, "sign", 1, Elementwise | NumericOnly, "", infer_unary)                           \
  X(Relu, "relu", 1, Elementwise | NumericOnly, "", infer_unary)                           \
  X(Floor, "floor", 1, Elementwise | FloatOnly, "", infer_unary)                           \
  X(Ceil, "ceil", 1, Elementwise | FloatOnly, "", infer_unary)                             \
  X(Round, "round", 1, Elementwise | FloatOnly, "", infer_unary)                           \
  X(Exp, "exp", 1, Elementwise | FloatOnly, "", infer_unary)                               \
  X(Log, "log", 1, Elementwise | FloatOnly, "", infer_unary)                               \
  X(Log1p, "log1p", 1, Elementwise | FloatOnly, "", infer_unary)                           \
  X(Sqrt, "sqrt", 1, Elementwise | FloatOnly, "", infer_unary)                             \
  X(Rsqrt, "rsqrt", 1, Elementwise | FloatOnly, "", infer_unary)                           \
  X(Sin, "sin", 1, Elementwise | FloatOnly, "", infer_unary)                               \
  X(Cos, "cos", 1, Elementwise | FloatOnly, "", infer_unary)                               \
  X(Tanh, "tanh", 1, Elementwise | FloatOnly, "", infer_unary)                             \
  X(Sigmoid, "sigmoid", 1, Elementwise | FloatOnly, "", infer_unary)                       \
  X(Erf, "erf", 1, Elementwise | FloatOnly, "", infer_unary)                               \
  X(Not, "not", 1, Elementwise | BoolOnly, "", infer_unary)                                \
  X(Cast, "convert", 1, Elementwise, "dtype", infer_cast)                                  \
  /* elementwise, two operands of one dtype, numpy broadcasting */                         \
  X(Add, "add", 2, Elementwise | Commutative, "", infer_binary)  /* bool: or */              \
  X(Sub, "sub", 2, Elementwise | NumericOnly, "", infer_binary)                            \
  X(Mul, "mul", 2, Elementwise | Commutative, "", infer_binary)  /* bool: and */             \
  X(Div, "div", 2, Elementwise | FloatOnly, "", infer_binary)                              \
  X(Pow, "pow", 2, Elementwise | NumericOnly, "", infer_binary)                            \
  X(Max, "max", 2, Elementwise | Commutative, "", infer_binary)                            \
  X(Min, "min", 2, Elementwise | Commutative, "", infer_binary)                            \
  X(Eq, "eq", 2, Elementwise | Comparison | Commutative, "", infer_compare)                \
  X(Ne, "ne", 2, Elementwise | Comparison | Commutative, "", infer_compare)                \
  X(Lt, "lt", 2, Elementwise | Comparison, "", infer_compare)                              \
  X(Le, "le", 2, Elementwise | Comparison, "", infer_compare)                              \
  X(Gt, "gt", 2, Elementwise | Comparison, "", infer_compare)                              \
  X(Ge, "ge", 2, Elementwise | Comparison, "", infer_compare)                              \
  X(And, "and", 2, Elementwise | BoolOnly | Commutative, "", infer_binary)                 \
  X(Or, "or", 2, Elementwise | BoolOnly | Commutative, "", infer_binary)                   \
  X(Where, "where", 3, Elementwise, "", infer_where)                                       \
  /* reductions */                                                                         \
  X(ReduceSum, "reduce_sum", 1, Reduction, "axes,keepdims", infer_reduce)                  \
  X(ReduceMax, "reduce_max", 1, Reduction, "axes,keepdims", infer_reduce)                  \
  X(ReduceMin, "reduce_min", 1, Reduction, "axes,keepdims", infer_reduce)                  \
  X(ArgMax, "argmax", 1, Reduction | NonDifferentiable, "axis,keepdims", infer_arg_reduce) \
  X(ArgMin, "argmin", 1, Reduction | NonDifferentiable, "axis,keepdims", infer_arg_reduce) \
  X(Matmul, "matmul", 2, Contraction, "", infer_matmul)                                    \
  X(Conv2d, "conv2d", 2, Contraction | NumericOnly, "stride,padding,dilation,groups", infer_conv2d) \
  X(Attention, "attention", 3, Contraction | FloatOnly, "causal,scale", infer_attention)  \
  X(MaxPool2d, "max_pool2d", 1, Reduction | NumericOnly, "kernel,stride,padding", infer_pool2d) \
  X(AvgPool2d, "avg_pool2d", 1, Reduction | NumericOnly, "kernel,stride,padding,count_include_pad", infer_pool2d) \
  X(CumSum, "cumsum", 1, Reduction | NumericOnly, "axis", infer_cumsum)                    \
  /* gradients of the layers that need their own loops */                                  \
  X(Conv2dWeightGrad, "conv2d_weight_grad", 2, Contraction | FloatOnly | NonDifferentiable, \
    "kernel,stride,padding,dilation,groups", infer_conv2d_weight_grad)                      \
  X(MaxPool2dGrad, "max_pool2d_grad", 2, Reduction | FloatOnly | NonDifferentiable,         \
    "kernel,stride,padding", infer_max_pool2d_grad)                                         \
  /* data movement */                                                                      \
  X(Reshape, "reshape", 1, Movement, "shape", infer_reshape)                               \
  X(Transpose, "transpose", 1, Movement, "perm", infer_transpose)                          \
  X(BroadcastTo, "broadcast_to", 1, Movement, "shape", infer_broadcast_to)                 \
  X(Slice, "slice", 1, Movement, "starts,stops,steps", infer_slice)                        \
  X(Concat, "concatenate", -1, Movement, "axis", infer_concat)                             \
  X(Pad, "pad", 1, Movement, "lo,hi,value", infer_pad)                                     \
  X(Take, "take", 2, Movement, "axis", infer_take)                                         \
  X(Flip, "flip", 1, Movement, "axes", infer_flip)                                         \
  /* x with the slice [starts:stops:steps] replaced by v (the functional form of x[...] = v) */ \
  X(SliceUpdate, "slice_update", 2, Movement, "starts,stops,steps", infer_slice_update)     \
  /* u32 draws of Threefry-2x32 under a u32[2] key, a pure function of key and position (JAX's layout) */ \
  X(RandomBits, "random_bits", 1, NonDifferentiable, "shape", infer_random_bits)           \
  /* control flow (graphs as attributes; one node per result, see ControlFlow in graph/op_def.h):  */ \
  /* cond: pred, operands...; `then`/`else` take the operands and give the results alike */  \
  X(Cond, "cond", -1, ControlFlow, "then,else,result", infer_cond)                         \
  /* while_loop: carries..., captures...; `cond` gives a bool[], `body` the next carries */   \
  X(While, "while_loop", -1, ControlFlow, "cond,body,result", infer_while)                  \
  /* scan: carries..., xs..., captures...; `body` maps carries and one slice of each x along */ \
  /* axis 0 to the next carries and one slice of each y; results: carries, then stacked ys  */ \
  X(Scan, "scan", -1, ControlFlow, "body,length,carries,xs,reverse,result", infer_scan)    \
  /* checkpoint: operands...; `body` maps them to the results, its values recomputed in the */ \
  /* backward pass instead of kept (jax.checkpoint): the gradient is a checkpoint of vjp(body) */ \
  X(Checkpoint, "checkpoint", -1, ControlFlow, "body,result", infer_checkpoint)            \
  /* checks: the operand, or an IndexError naming `what` when a value is outside [lo, hi) */ \
  X(CheckIndex, "check_index", 1, Elementwise | NonDifferentiable, "lo,hi,what", infer_check_index)

namespace hjit {

enum class OpKind : uint8_t {
#define HJIT_OP_ENUM(kind, name, arity, traits, attrs, infer) kind,
  HJIT_OPS(HJIT_OP_ENUM)
#undef HJIT_OP_ENUM
};

#define HJIT_OP_COUNT(kind, name, arity, traits, attrs, infer) +1
inline constexpr int kNumOps = 0 HJIT_OPS(HJIT_OP_COUNT);
#undef HJIT_OP_COUNT

const char* op_name(OpKind op);

// The lookup of a layer's per-op table (eager kernel, Halide lowering, gradient rule): the entry of
// op kind K is the function named K visible where this expands (a `using namespace` of the
// layer's entries), so an op added to HJIT_OPS without its entry in some layer fails to link.
#define HJIT_OP_FUNCTION_ADDRESS(kind, name, arity, traits, attrs, infer) &kind,
#define HJIT_PER_OP_LOOKUP(FnType, op)                                                       \
  [](OpKind k) {                                                                             \
    static constexpr FnType table[] = {HJIT_OPS(HJIT_OP_FUNCTION_ADDRESS)};                  \
    static_assert(sizeof(table) / sizeof(table[0]) == ::hjit::kNumOps);                     \
    return table[int(k)];                                                                    \
  }(op)

}  // namespace hjit
