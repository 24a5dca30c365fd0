#!/usr/bin/env python3
"""GPT-2 124M's decode step as an ONNX model with past keys and values, for ONNX Runtime beside
hjit's `hjit-bench --generate` (run by hand; never a build or CI dependency).

    /usr/bin/python3 tools/models/gpt2_decode.py DIR [past ...]    # default pasts: 64 447

writes DIR/gpt2_decode_pPAST/{model.onnx, test_data_set_0/{input,output}_K.pb} per past length: one
new token at position PAST attending to PAST cached columns (random, seeded weights with Hugging
Face's initialization; the same architecture as hjit::nn::GPT2: pre-norm blocks, tanh GELU, the
vocabulary projection tied to the token embedding). Time each with ONNX Runtime:

    cd ../shared/peers && ORT_SPIN=0 node ort_time.js DIR/gpt2_decode_p64 2 50

Its median is one decode step with a cache of PAST columns; hjit's decode figure for the same
context is `hjit-bench --generate`'s (prompt 32 and 64 new tokens: columns 32-95; prompt 448: 448-511).
Needs Debian's python3-torch and python3-onnx.
"""
import math
import os
import sys

import numpy as np
import onnx
import onnx.numpy_helper
import torch
import torch.nn as nn
import torch.nn.functional as F

LAYERS, HEADS, EMBD, VOCAB, POSITIONS = 12, 12, 768, 50257, 1024
HEAD_DIM = EMBD // HEADS


class Block(nn.Module):
    def __init__(self):
        super().__init__()
        self.ln_1, self.ln_2 = nn.LayerNorm(EMBD), nn.LayerNorm(EMBD)
        self.c_attn, self.c_proj = nn.Linear(EMBD, 3 * EMBD), nn.Linear(EMBD, EMBD)
        self.c_fc, self.mlp_proj = nn.Linear(EMBD, 4 * EMBD), nn.Linear(4 * EMBD, EMBD)

    def forward(self, x, past_k, past_v):
        b = x.shape[0]
        q, k, v = self.c_attn(self.ln_1(x)).split(EMBD, dim=2)
        heads = lambda t: t.view(b, -1, HEADS, HEAD_DIM).transpose(1, 2)
        q, k, v = heads(q), torch.cat([past_k, heads(k)], 2), torch.cat([past_v, heads(v)], 2)
        # One new token: it attends to every cached column and itself, no mask needed.
        att = F.softmax(q @ k.transpose(-2, -1) / math.sqrt(HEAD_DIM), dim=-1)
        y = (att @ v).transpose(1, 2).reshape(b, -1, EMBD)
        x = x + self.c_proj(y)
        x = x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))
        return x, k, v


class DecodeStep(nn.Module):
    def __init__(self):
        super().__init__()
        self.wte, self.wpe = nn.Embedding(VOCAB, EMBD), nn.Embedding(POSITIONS, EMBD)
        self.blocks = nn.ModuleList(Block() for _ in range(LAYERS))
        self.ln_f = nn.LayerNorm(EMBD)

    def forward(self, ids, position, *past):
        x = self.wte(ids) + self.wpe(position)
        present = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, past[2 * i], past[2 * i + 1])
            present += [k, v]
        logits = self.ln_f(x) @ self.wte.weight.t()
        return (logits, *present)


def initialized():
    torch.manual_seed(0)
    model = DecodeStep()
    for name, p in model.named_parameters():
        if p.dim() >= 2:
            nn.init.normal_(p, std=0.02 / (math.sqrt(2 * LAYERS) if name.endswith(("c_proj.weight", "mlp_proj.weight")) else 1))
        elif "ln" not in name:
            nn.init.zeros_(p)
    return model.eval()


def export(root, model, past):
    folder = os.path.join(root, "gpt2_decode_p%d" % past)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    g = torch.Generator().manual_seed(past)
    ids = torch.tensor([[past * 7919 % VOCAB]], dtype=torch.int64)
    position = torch.tensor([[past]], dtype=torch.int64)
    cache = [torch.randn(1, HEADS, past, HEAD_DIM, generator=g) for _ in range(2 * LAYERS)]
    inputs = [ids, position] + cache
    names = ["ids", "position"] + ["past_%s_%d" % (kv, i) for i in range(LAYERS) for kv in ("k", "v")]
    outputs = ["logits"] + ["present_%s_%d" % (kv, i) for i in range(LAYERS) for kv in ("k", "v")]
    with torch.no_grad():
        expected = model(*inputs)
        torch.onnx.export(model, tuple(inputs), os.path.join(folder, "model.onnx"), opset_version=14, input_names=names,
                          output_names=outputs, do_constant_folding=True,
                          dynamic_axes={n: {2: "past"} for n in names[2:]} | {n: {2: "total"} for n in outputs[1:]})
    for kind, tensors, labels in (("input", inputs, names), ("output", expected, outputs)):
        for i, (t, label) in enumerate(zip(tensors, labels)):
            with open(os.path.join(folder, "test_data_set_0", "%s_%d.pb" % (kind, i)), "wb") as f:
                f.write(onnx.numpy_helper.from_array(t.numpy(), label).SerializeToString())
    print("exported %s: one token after %d cached columns" % (folder, past), flush=True)


def main(argv):
    if len(argv) < 2:
        print(__doc__)
        return 2
    model = initialized()
    for past in [int(p) for p in argv[2:]] or [64, 447]:
        export(argv[1], model, past)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
