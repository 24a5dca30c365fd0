#!/usr/bin/python3
# Writes the PyTorch references test_nn loads: for each layer, one .npz holding its state dict
# (under "state.<name>"), its inputs ("in.<i>") and its outputs ("out.<i>"), from PyTorch 1.13
# (Debian's python3-torch) in eval mode. Run by hand (never by the build):
#   /usr/bin/python3 tests/data/nn/make_torch_references.py tests/data/nn
# and, for the numpy files test_nn reads, tests/data/npy (see npy_files below).
import sys
import numpy as np
import torch

torch.manual_seed(0)
out_dir = sys.argv[1]


def save(name, module, inputs, outputs):
    arrays = {f"state.{k}": v.detach().numpy() for k, v in module.state_dict().items()}
    arrays.update({f"in.{i}": t.detach().numpy() for i, t in enumerate(inputs)})
    arrays.update({f"out.{i}": t.detach().numpy() for i, t in enumerate(outputs)})
    np.savez(f"{out_dir}/{name}.npz", **arrays)


def run(name, module, *inputs):
    module.eval()
    with torch.no_grad():
        y = module(*inputs)
    ys = list(y) if isinstance(y, tuple) else [y]
    flat = []
    for t in ys:
        flat.extend(t if isinstance(t, tuple) else [t])
    save(name, module, inputs, [t for t in flat if t is not None])


nn = torch.nn
run("linear", nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)), torch.randn(5, 4))
conv = nn.Sequential(nn.Conv2d(3, 4, 3, stride=2, padding=1), nn.BatchNorm2d(4), nn.ReLU(), nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1, output_padding=1), nn.GroupNorm(1, 2))
with torch.no_grad():  # running statistics that are not 0 and 1
    conv[1].running_mean.uniform_(-1, 1)
    conv[1].running_var.uniform_(0.5, 2)
run("conv", conv, torch.randn(2, 3, 8, 8))
run("conv1d_3d", nn.Conv1d(2, 4, 3, padding=2, dilation=2), torch.randn(2, 2, 9))
run("conv3d", nn.Conv3d(2, 2, (2, 3, 3), stride=(1, 2, 1), padding=1), torch.randn(1, 2, 4, 5, 5))
run("lstm", nn.LSTM(3, 5, num_layers=2, batch_first=True), torch.randn(2, 6, 3))
run("gru", nn.GRU(3, 4), torch.randn(6, 2, 3))
mha = nn.MultiheadAttention(8, 2, batch_first=True)
with torch.no_grad():
    mha.in_proj_bias.uniform_(-0.2, 0.2)
    mha.out_proj.bias.uniform_(-0.2, 0.2)


run("mha", mha, torch.randn(2, 4, 8), torch.randn(2, 6, 8), torch.randn(2, 6, 8))
run("encoder", nn.TransformerEncoderLayer(8, 2, dim_feedforward=16, batch_first=True, activation="gelu"), torch.randn(2, 5, 8))
run("embedding", nn.Sequential(nn.Embedding(10, 4, padding_idx=0), nn.LayerNorm(4)), torch.tensor([[1, 0, 9], [3, 3, 2]]))

if len(sys.argv) > 2:
    npy = sys.argv[2]
    np.save(f"{npy}/f32_c.npy", np.arange(6, dtype=np.float32).reshape(2, 3))
    np.save(f"{npy}/f64_fortran.npy", np.asfortranarray(np.arange(6, dtype=np.float64).reshape(3, 2)))
    np.save(f"{npy}/i32_big.npy", np.arange(-2, 3, dtype=">i4"))
    np.save(f"{npy}/bool.npy", np.array([[True, False], [False, True]]))
    np.save(f"{npy}/f16_scalar.npy", np.float16(1.5))
    np.save(f"{npy}/u8_empty.npy", np.zeros((0, 3), dtype=np.uint8))
    np.savez(f"{npy}/plain.npz", a=np.arange(3, dtype=np.int64), b=np.ones((2, 2), dtype=np.float32))
    np.savez_compressed(f"{npy}/compressed.npz", a=np.arange(1000, dtype=np.int16), b=np.full((4,), 7.25))
