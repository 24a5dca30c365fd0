// The one list of hjit's primitive ops. Every layer expands it to make its per-op table: the enum,
// names and schedule classes here, the op definitions (arity, attributes, traits, shape/dtype
// inference) in graph/op_defs.cpp, the eager kernels in frontend/eager/, the Halide lowerings in
// halide_backend/, the gradient rules in graph/autodiff/. A missing entry in any of those tables
// fails the build; docs/adding-an-op.md lists every place an op touches.
//
// X(Kind, "printed name", arity (-1 = variadic), traits, "attribute,names", inference function,
//   schedule class)
#pragma once

#define HJIT_OPS(X)                                                                                                        \
  /* sources: the type is declared by whoever creates the node */                                                          \
  X(Parameter, "parameter", 0, Source, "index,captured", infer_source, Source)                                             \
  X(Constant, "constant", 0, Source, "", infer_source, Source)                                                             \
  X(Full, "full", 0, Source, "value", infer_source, Source)                                                                \
  X(Iota, "iota", 0, Source, "axis", infer_iota, Source)                                                                   \
  /* elementwise, one operand, same dtype out */                                                                           \
  X(Neg, "neg", 1, Elementwise | NumericOnly, "", infer_unary, Elementwise)                                                \
  X(Abs, "abs", 1, Elementwise | NumericOnly, "", infer_unary, Elementwise)                                                \
  X(Sign, "sign", 1, Elementwise | NumericOnly, "", infer_unary, Elementwise)                                              \
  X(Relu, "relu", 1, Elementwise | NumericOnly, "", infer_unary, Elementwise)                                              \
  X(Floor, "floor", 1, Elementwise | FloatOnly, "", infer_unary, Elementwise)                                              \
  X(Ceil, "ceil", 1, Elementwise | FloatOnly, "", infer_unary, Elementwise)                                                \
  X(Round, "round", 1, Elementwise | FloatOnly, "", infer_unary, Elementwise)                                              \
  X(Exp, "exp", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                  \
  X(Log, "log", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                  \
  X(Log1p, "log1p", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                              \
  X(Sqrt, "sqrt", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                \
  X(Rsqrt, "rsqrt", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                              \
  X(Sin, "sin", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                  \
  X(Cos, "cos", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                  \
  X(Tanh, "tanh", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                \
  X(Sigmoid, "sigmoid", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                          \
  X(Erf, "erf", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                  \
  X(Hardswish, "hardswish", 1, Elementwise | FloatOnly, "", infer_unary, Elementwise)                                      \
  X(Atan, "atan", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                \
  X(Asin, "asin", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                \
  X(Acos, "acos", 1, Elementwise | FloatOnly, "", infer_unary, LongLatency)                                                \
  X(Not, "not", 1, Elementwise | BoolOnly, "", infer_unary, Elementwise)                                                   \
  X(Cast, "convert", 1, Elementwise, "dtype", infer_cast, Elementwise)                                                     \
  /* elementwise, two operands of one dtype, numpy broadcasting */                                                         \
  X(Add, "add", 2, Elementwise | Commutative, "", infer_binary, Elementwise)  /* bool: or */                               \
  X(Sub, "sub", 2, Elementwise | NumericOnly, "", infer_binary, Elementwise)                                               \
  X(Mul, "mul", 2, Elementwise | Commutative, "", infer_binary, Elementwise)  /* bool: and */                              \
  X(Div, "div", 2, Elementwise | FloatOnly, "", infer_binary, Elementwise)                                                 \
  X(Pow, "pow", 2, Elementwise | NumericOnly, "", infer_binary, ScalarCall)                                                \
  X(Max, "max", 2, Elementwise | Commutative, "", infer_binary, Elementwise)                                               \
  X(Min, "min", 2, Elementwise | Commutative, "", infer_binary, Elementwise)                                               \
  X(Eq, "eq", 2, Elementwise | Comparison | Commutative, "", infer_compare, Elementwise)                                   \
  X(Ne, "ne", 2, Elementwise | Comparison | Commutative, "", infer_compare, Elementwise)                                   \
  X(Lt, "lt", 2, Elementwise | Comparison, "", infer_compare, Elementwise)                                                 \
  X(Le, "le", 2, Elementwise | Comparison, "", infer_compare, Elementwise)                                                 \
  X(Gt, "gt", 2, Elementwise | Comparison, "", infer_compare, Elementwise)                                                 \
  X(Ge, "ge", 2, Elementwise | Comparison, "", infer_compare, Elementwise)                                                 \
  X(And, "and", 2, Elementwise | BoolOnly | Commutative, "", infer_binary, Elementwise)                                    \
  X(Or, "or", 2, Elementwise | BoolOnly | Commutative, "", infer_binary, Elementwise)                                      \
  X(Where, "where", 3, Elementwise, "", infer_where, Elementwise)                                                          \
  /* reductions */                                                                                                         \
  X(ReduceSum, "reduce_sum", 1, Reduction, "axes,keepdims", infer_reduce, Reduction)                                       \
  X(ReduceMax, "reduce_max", 1, Reduction, "axes,keepdims", infer_reduce, Reduction)                                       \
  X(ReduceMin, "reduce_min", 1, Reduction, "axes,keepdims", infer_reduce, Reduction)                                       \
  X(ArgMax, "argmax", 1, Reduction | NonDifferentiable, "axis,keepdims", infer_arg_reduce, ArgReduction)                   \
  X(ArgMin, "argmin", 1, Reduction | NonDifferentiable, "axis,keepdims", infer_arg_reduce, ArgReduction)                   \
  /* the number of elements of x along `axes` (all, when empty) as a 0-d tensor of `dtype`: a */                          \
  /* value that follows dynamic sizes (mean's divisor), where the shape's numbers are constants */                         \
  X(Numel, "numel", 1, NonDifferentiable | ShapeOnly, "axes,dtype", infer_numel, Elementwise)                              \
  X(Matmul, "matmul", 2, Contraction, "", infer_matmul, Matmul)                                                            \
  /* u8 [.., M, 4K] x i8 [.., K, N, 4] -> i32 [.., M, N], exact: the right operand packed four */                        \
  /* rows at a time, as x86's VNNI dot products read it (hjit::int_matmul packs it) */                                     \
  X(IntMatmul, "int_matmul", 2, Contraction | NonDifferentiable, "", infer_int_matmul, Matmul)                              \
  /* u8 [N, C, H, W, 4] (input channels in fours, padded already) x i8 [O/B, C, KH, KW, B, 4] -> */                      \
  /* i32 [N, O, OH, OW], exact: VNNI's layout, four channels to a lane, outputs in blocks of B    */                      \
  /* (hjit::int_conv2d packs both); a third operand, i32 [O], is subtracted from each channel's  */                      \
  /* sums (a zero point's correction, the sums' starting value: simplify folds it in)            */                      \
  X(IntConv2d, "int_conv2d", -1, Contraction | NonDifferentiable, "stride,dilation", infer_int_conv2d, Convolution)      \
  /* u8 [N, C, H, W] (padded already) x i8 [C/B, 1, R, KW, B, 4] -> i32 [N, C, OH, OW]: a depthwise */                    \
  /* convolution (channel c of the output sums channel c of the input), exact; the weights' rows in */                     \
  /* fours (R = ceil(KH/4), zeros past the kernel's KH rows: attribute `kernel` is [KH, KW]), so */                         \
  /* that one VNNI dot product sums four rows of a column of the window; optional offsets [C] */                          \
  /* subtracted as int_conv2d's */                                                                                        \
  X(IntDepthwise2d, "int_depthwise2d", -1, Contraction | NonDifferentiable, "stride,dilation,kernel", infer_int_depthwise2d, \
    Convolution)                                                                                                           \
  X(Conv2d, "conv2d", 2, Contraction | NumericOnly, "stride,padding,dilation,groups", infer_conv2d, Convolution)           \
  X(Attention, "attention", 3, Contraction | FloatOnly, "causal,scale", infer_attention, Attention)                        \
  X(MaxPool2d, "max_pool2d", 1, Reduction | NumericOnly, "kernel,stride,padding", infer_pool2d, Pooling)                   \
  X(AvgPool2d, "avg_pool2d", 1, Reduction | NumericOnly, "kernel,stride,padding,count_include_pad", infer_pool2d, Pooling) \
  X(CumSum, "cumsum", 1, Reduction | NumericOnly, "axis", infer_cumsum, Scan)                                              \
  /* the i64 positions that order x along `axis` (stable; NaN after every number, before when */                           \
  /* descending, as torch.sort); sort is a gather at them */                                                                \
  X(ArgSort, "argsort", 1, NonDifferentiable, "axis,descending", infer_argsort, Sort)                                      \
  /* gradients of the layers that need their own loops */                                                                  \
  X(Conv2dWeightGrad, "conv2d_weight_grad", 2, Contraction | FloatOnly | NonDifferentiable,                                \
    "kernel,stride,padding,dilation,groups", infer_conv2d_weight_grad, ConvolutionWeightGrad)                              \
  X(MaxPool2dGrad, "max_pool2d_grad", 2, Reduction | FloatOnly | NonDifferentiable,                                        \
    "kernel,stride,padding", infer_max_pool2d_grad, PoolingGrad)                                                           \
  /* data movement */                                                                                                      \
  X(Reshape, "reshape", 1, Movement, "shape", infer_reshape, Movement)                                                     \
  X(Transpose, "transpose", 1, Movement, "perm", infer_transpose, Movement)                                                \
  X(BroadcastTo, "broadcast_to", 1, Movement, "shape", infer_broadcast_to, Movement)                                       \
  X(Slice, "slice", 1, Movement, "starts,stops,steps", infer_slice, Movement)                                              \
  X(Concat, "concatenate", -1, Movement, "axis", infer_concat, Movement)                                                   \
  X(Pad, "pad", 1, Movement, "lo,hi,value", infer_pad, Movement)                                                           \
  X(Take, "take", 2, Movement, "axis", infer_take, Gather)                                                                 \
  X(Flip, "flip", 1, Movement, "axes", infer_flip, Movement)                                                               \
  /* x with the slice [starts:stops:steps] replaced by v (the functional form of x[...] = v) */                            \
  X(SliceUpdate, "slice_update", 2, Movement, "starts,stops,steps", infer_slice_update, Movement)                          \
  /* u32 draws of Threefry-2x32 under a u32[2] key, a pure function of key and position (JAX's layout) */                  \
  X(RandomBits, "random_bits", 1, NonDifferentiable, "shape", infer_random_bits, Random)                                   \
  /* control flow (graphs as attributes; one node per result, see ControlFlow in graph/op_def.h):  */                      \
  /* cond: pred, operands...; `then`/`else` take the operands and give the results alike */                                \
  X(Cond, "cond", -1, ControlFlow, "then,else,result", infer_cond, ControlFlow)                                            \
  /* while_loop: carries..., captures...; `cond` gives a bool[], `body` the next carries */                                \
  X(While, "while_loop", -1, ControlFlow, "cond,body,result", infer_while, ControlFlow)                                    \
  /* scan: carries..., xs..., captures...; `body` maps carries and one slice of each x along */                            \
  /* axis 0 to the next carries and one slice of each y; results: carries, then stacked ys  */                             \
  X(Scan, "scan", -1, ControlFlow, "body,length,carries,xs,reverse,result", infer_scan, ControlFlow)                       \
  /* checkpoint: operands...; `body` maps them to the results, its values recomputed in the */                             \
  /* backward pass instead of kept (jax.checkpoint): the gradient is a checkpoint of vjp(body) */                          \
  X(Checkpoint, "checkpoint", -1, ControlFlow, "body,result", infer_checkpoint, ControlFlow)                               \
  /* checks: the operand, or an IndexError naming `what` when a value is outside [lo, hi) */                               \
  X(CheckIndex, "check_index", 1, Elementwise | NonDifferentiable, "lo,hi,what", infer_check_index, Check)                 \
  /* collectives (hjit/distributed.h): every rank runs the same ones in the same order, so they  */                        \
  /* are never folded, merged or dropped (Collective in graph/op_def.h); `op` is a dist::ReduceOp, */                      \
  /* `root` -1 or the one rank that keeps the result (the others get zeros), `world` the world   */                        \
  /* size the shape was inferred for                                                              */                        \
  X(AllReduce, "all_reduce", 1, Collective, "op,root", infer_all_reduce, Collective)                                      \
  X(AllGather, "all_gather", 1, Collective, "axis,world", infer_all_gather, Collective)                                   \
  X(ReduceScatter, "reduce_scatter", 1, Collective, "axis,op,world", infer_reduce_scatter, Collective)                    \
  X(DistBroadcast, "dist_broadcast", 1, Collective, "root", infer_unary, Collective)                                      \
  /* point to point: send's result is an empty token; recv's type is its attributes */                                     \
  X(Send, "send", 1, Collective | NonDifferentiable, "peer,tag", infer_send, Collective)                                   \
  X(Recv, "recv", 0, Collective | NonDifferentiable, "peer,tag,shape,dtype", infer_recv, Collective)

// How the schedulers treat an op (schedules/class_rules.h: the CPU's built-in and the GPU's rules per
// class; halide_backend/providers/extern_stages.h: which classes a library can compute). X(Class, "name")
#define HJIT_SCHEDULE_CLASSES(X)                                                                       \
  X(Source, "source")                       /* inlined into its readers, never scheduled */           \
  X(Elementwise, "elementwise")             /* cheap: inlined into the loop nest that reads it */     \
  X(LongLatency, "long_latency")            /* a polynomial or slow instruction per element: */       \
                                            /* stored when read twice, several vectors at a time */   \
  X(ScalarCall, "scalar_call")              /* a scalar libm call per lane: stored when read twice */ \
  X(Check, "check")                         /* checks indices: on the host of a GPU pipeline */       \
  X(Reduction, "reduction")                 /* folds axes: per row of its reader, or at root */       \
  X(ArgReduction, "arg_reduction")          /* folds to an (index, value) pair */                     \
  X(Scan, "scan")                           /* a running fold along an axis */                        \
  X(Sort, "sort")                           /* a compare-exchange network: its steps stored at root */\
  X(Pooling, "pooling")                     /* a window fold */                                       \
  X(PoolingGrad, "pooling_grad")            /* a window fold of the gradient */                       \
  X(Matmul, "matmul")                       /* register tiles; extern sgemm */                        \
  X(Convolution, "convolution")             /* register tiles; extern oneDNN convolution */           \
  X(ConvolutionWeightGrad, "convolution_weight_grad") /* register tiles; extern oneDNN */             \
  X(Attention, "attention")                 /* register tiles of query rows; scores never stored */   \
  X(Movement, "movement")                   /* moves data: inlined into its readers */                \
  X(Gather, "gather")                       /* reads at computed indices: on the host of a GPU */     \
  X(Random, "random")                       /* counter-based draws: its key operand is stored */      \
  X(ControlFlow, "control_flow")            /* run by host steps between pipelines */            \
  X(Collective, "collective")               /* communication: a host step between pipelines */

namespace hjit {

enum class ScheduleClass : uint8_t {
#define HJIT_SCHEDULE_CLASS_ENUM(cls, name) cls,
  HJIT_SCHEDULE_CLASSES(HJIT_SCHEDULE_CLASS_ENUM)
#undef HJIT_SCHEDULE_CLASS_ENUM
};
#define HJIT_SCHEDULE_CLASS_COUNT(cls, name) +1
inline constexpr int kNumScheduleClasses = 0 HJIT_SCHEDULE_CLASSES(HJIT_SCHEDULE_CLASS_COUNT);
#undef HJIT_SCHEDULE_CLASS_COUNT
const char* schedule_class_name(ScheduleClass c);

enum class OpKind : uint8_t {
#define HJIT_OP_ENUM(kind, name, arity, traits, attrs, infer, sched) kind,
  HJIT_OPS(HJIT_OP_ENUM)
#undef HJIT_OP_ENUM
};

#define HJIT_OP_COUNT(kind, name, arity, traits, attrs, infer, sched) +1
inline constexpr int kNumOps = 0 HJIT_OPS(HJIT_OP_COUNT);
#undef HJIT_OP_COUNT

const char* op_name(OpKind op);

// The lookup of a layer's per-op table (eager kernel, Halide lowering, gradient rule): the entry of
// op kind K is the function named K visible where this expands (a `using namespace` of the
// layer's entries), so an op added to HJIT_OPS without its entry in some layer fails to link.
#define HJIT_OP_FUNCTION_ADDRESS(kind, name, arity, traits, attrs, infer, sched) &kind,
#define HJIT_PER_OP_LOOKUP(FnType, op)                                                       \
  [](OpKind k) {                                                                             \
    static constexpr FnType table[] = {HJIT_OPS(HJIT_OP_FUNCTION_ADDRESS)};                  \
    static_assert(sizeof(table) / sizeof(table[0]) == ::hjit::kNumOps);                     \
    return table[int(k)];                                                                    \
  }(op)

}  // namespace hjit
