// Data parallelism across processes and machines, on Open MPI: collectives are ops like any other,
// run eagerly, traced into jitted graphs (where they run as host steps between the compiled
// pipelines) and differentiated (all_reduce's sum is its own transpose, all_gather and
// reduce_scatter each other's), as JAX's psum / all_gather are.
//
//   namespace dist = hjit::dist;
//   dist::init();                                  // from mpirun's / srun's environment; a world of 1 without one
//   dist::broadcast_parameters(params, /*root=*/0);
//   auto step = hjit::jit([&](const Tensor& x, const Tensor& y) {
//     auto [loss, grads] = hjit::value_and_grad(loss_fn, params)(x, y);   // this rank's shard of the batch
//     for (auto& g : grads) g = dist::all_reduce(g, dist::ReduceOp::Mean);
//     opt.step(grads);
//     return dist::all_reduce(loss, dist::ReduceOp::Mean);
//   });
//   // mpirun -np 4 ./train
//
// Every rank must call the same collectives in the same order on tensors of the same shape and
// dtype; a rank that reaches another one, or a different shape, makes every rank raise
// DistributedError naming the op and what each rank had. A rank that dies or stops answering makes
// the others raise DistributedError after the timeout (never a hang); the group is then broken
// for good and the job should end.
#pragma once
#include <chrono>
#include <vector>

#include <hjit/reduce_op.h>
#include <hjit/tensor.h>

namespace hjit::dist {

struct InitOptions {
  // How long a collective waits for the other ranks before it raises DistributedError. HJIT_DIST_TIMEOUT
  // (seconds) overrides it.
  std::chrono::milliseconds timeout = std::chrono::minutes(5);
};

// Joins the job mpirun or srun started this process in (MPI_Init), or, started any other way, a
// world of this one process, where every collective is a copy and nothing needs MPI. Calling it
// again changes nothing. DistributedError when MPI fails to start.
void init(const InitOptions& options = {});
// Leaves the job (MPI_Finalize); after it the world is this process alone. Also done at exit.
void finalize();
bool initialized();

int rank();        // 0 .. world_size() - 1
int world_size();  // 1 without init()
// The threads this process computes with. Ranks that share a machine share its cores: init()
// gives each its part (unless HJIT_THREADS is set), so 2 ranks on 2 cores run 1 thread each.
int threads_per_rank();
void barrier();    // returns when every rank has reached it

// Collectives: each rank passes its own x and gets the combined result.
// x combined over the ranks (Mean: floating point only), the same on every rank.
Tensor all_reduce(const Tensor& x, ReduceOp op = ReduceOp::Sum);
// x combined over the ranks on `root`; zeros on the others.
Tensor reduce(const Tensor& x, ReduceOp op, int root);
// The ranks' x concatenated along `axis`, in rank order.
Tensor all_gather(const Tensor& x, int axis = 0);
// x combined over the ranks (Sum or Mean), split along `axis` into world_size() equal parts: rank r
// keeps part r.
Tensor reduce_scatter(const Tensor& x, int axis = 0, ReduceOp op = ReduceOp::Sum);
// root's x on every rank (the others' x gives the shape and dtype).
Tensor broadcast(const Tensor& x, int root = 0);
// x to rank `peer`, which must recv a tensor of its shape and dtype with the same tag. Not
// differentiable (use the collectives above for gradients across ranks).
void send(const Tensor& x, int peer, int tag = 0);
Tensor recv(const Shape& shape, DType dtype, int peer, int tag = 0);

// Each of `params` assigned root's values (call it once, before training, so every rank starts
// from the same model).
void broadcast_parameters(std::vector<Tensor>& params, int root = 0);
// DistributedError naming the first parameter whose values differ between ranks (compared bit for
// bit, over a hash of each), e.g. after a step, to check that the ranks stay in step.
void check_parameters_equal(const std::vector<Tensor>& params);

}  // namespace hjit::dist
