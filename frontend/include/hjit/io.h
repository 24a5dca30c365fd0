// Tensors in files: numpy's .npy and .npz (weights to and from Python), and hjit's tensor files
// (checkpoints: named tensors, versioned and checksummed). Every reader checks what it reads: a
// missing, truncated, corrupt or foreign file is a ValueError saying what is wrong, never a crash
// or a tensor of garbage.
//
//   hjit::save_npz("weights.npz", model.state());            // np.load("weights.npz")["fc1.weight"]
//   model.load_state(hjit::load_npz("from_torch.npz"));      // np.savez(path, **{k: v.numpy() ...})
#pragma once
#include <string>
#include <utility>
#include <vector>

#include <hjit/tensor.h>

namespace hjit {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// numpy's format 1.0-3.0: every dtype numpy shares with hjit (bool, int8-64, uint8-64, float16,
// float32, float64), either byte order, C or Fortran order. bf16 has no numpy dtype: DTypeError.
Tensor load_npy(const std::string& path);
void save_npy(const std::string& path, const Tensor& t);
// The same from and to bytes in memory.
Tensor npy_from_bytes(const std::string& bytes);
std::string npy_to_bytes(const Tensor& t);

// A zip archive of .npy members (np.savez / np.savez_compressed; members stored or deflated, zip64
// read), in archive order, each named without its ".npy". compressed: deflated members.
NamedTensors load_npz(const std::string& path);
void save_npz(const std::string& path, const NamedTensors& tensors, bool compressed = false);

// hjit's tensor file: names, dtypes (bf16 too), shapes and bytes, under a header with a format
// version and a checksum of the whole. Written to a temporary file and renamed, so a crash while
// saving leaves the previous file whole.
void save_tensors(const std::string& path, const NamedTensors& tensors);
NamedTensors load_tensors(const std::string& path);

// Sets each slot from the entry of `state` with its name (by assign: handles that jitted
// functions and optimizers hold see the new values). The whole state is checked before the first
// assign: with `strict`, a name missing on either side is a ValueError naming them; a shape that
// differs is a ShapeError, a dtype a DTypeError. `what` begins the messages ("nn::Module::load_state").
void assign_by_name(const std::vector<std::pair<std::string, Tensor*>>& slots, const NamedTensors& state, bool strict,
                    const std::string& what);

}  // namespace hjit
