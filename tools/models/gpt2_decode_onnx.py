#!/usr/bin/env python3
"""GPT-2's decode step with past keys and values as an ONNX case, for ONNX Runtime beside
`hjit-bench --generate`: run by hand (needs Debian's python3-onnx and python3-numpy; never the
build or CI).

    /usr/bin/python3 tools/models/gpt2_decode_onnx.py DIR [--past 511] [--layers 12] [--embd 768]
        [--heads 12] [--vocab 50257] [--context 1024]
    ORT_SPIN=0 node ../shared/peers/ort_time.js DIR/gpt2_decode_p511 2 30

The model is the step Hugging Face's GPT-2 ONNX exports run for one new token at batch 1: inputs
`input_ids` and `position_ids` ([1, 1], int64) and each layer's `past_key_L` / `past_value_L`
([1, heads, past, head_dim]); outputs `logits` ([1, 1, vocab]) and each layer's `present_key_L` /
`present_value_L` (the past with the new column appended, as those exports return it). Weights are
seeded normal(0, 0.02) (the residual projections scaled by 1/sqrt(2 * layers)), biases zero but for
the layer norms' ones, as nn::GPT2 initializes them; the expected outputs come from numpy, in f64.
The case is laid out as ONNX's backend tests: DIR/gpt2_decode_pP/model.onnx and
test_data_set_0/{input,output}_K.pb.
"""
import argparse
import math
import os

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def build(layers, embd, heads, vocab, context, past, seed=0):
    rng = np.random.default_rng(seed)
    d = embd // heads
    init, nodes = [], []
    weights = {}

    def param(name, shape, std=0.02, zeros=False, ones=False):
        if ones:
            a = np.ones(shape, np.float32)
        elif zeros:
            a = np.zeros(shape, np.float32)
        else:
            a = (rng.standard_normal(shape) * std).astype(np.float32)
        weights[name] = a
        init.append(numpy_helper.from_array(a, name))
        return name

    def const(name, value, dtype=np.float32):
        init.append(numpy_helper.from_array(np.array(value, dtype), name))
        return name

    counter = [0]

    def node(op, inputs, **attrs):
        counter[0] += 1
        out = f"{op.lower()}_{counter[0]}"
        nodes.append(helper.make_node(op, inputs, [out], **attrs))
        return out

    residual_std = 0.02 / math.sqrt(2 * layers)
    wte = param("wte", [vocab, embd])
    wpe = param("wpe", [context, embd])
    const("c_scale", 1 / math.sqrt(d))
    const("c_half", 0.5)
    const("c_one", 1.0)
    const("c_gelu", math.sqrt(2 / math.pi))
    const("c_cube", 0.044715)
    const("c_three", 3.0)
    const("c_heads_shape", [1, 1, heads, d], np.int64)
    const("c_embd_shape", [1, 1, embd], np.int64)
    const("c_split", [embd, embd, embd], np.int64)

    inputs = [helper.make_tensor_value_info("input_ids", TensorProto.INT64, [1, 1]),
              helper.make_tensor_value_info("position_ids", TensorProto.INT64, [1, 1])]
    outputs = [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [1, 1, vocab])]
    x = node("Add", [node("Gather", [wte, "input_ids"]), node("Gather", [wpe, "position_ids"])])

    def layer_norm(x, name):
        return node("LayerNormalization", [x, param(name + ".weight", [embd], ones=True), param(name + ".bias", [embd], zeros=True)],
                    axis=-1, epsilon=1e-5)

    def linear(x, name, n_in, n_out, std=0.02):
        return node("Add", [node("MatMul", [x, param(name + ".weight", [n_in, n_out], std)]), param(name + ".bias", [n_out], zeros=True)])

    for l in range(layers):
        p = f"h.{l}."
        qkv = linear(layer_norm(x, p + "ln_1"), p + "attn.c_attn", embd, 3 * embd)
        q, k, v = (f"{p}{n}" for n in ("q", "k", "v"))
        nodes.append(helper.make_node("Split", [qkv, "c_split"], [q, k, v], axis=2))
        q, k, v = (node("Transpose", [node("Reshape", [t, "c_heads_shape"])], perm=[0, 2, 1, 3]) for t in (q, k, v))
        for kind, new in (("key", k), ("value", v)):
            inputs.append(helper.make_tensor_value_info(f"past_{kind}_{l}", TensorProto.FLOAT, [1, heads, past, d]))
            outputs.append(helper.make_tensor_value_info(f"present_{kind}_{l}", TensorProto.FLOAT, [1, heads, past + 1, d]))
            nodes.append(helper.make_node("Concat", [f"past_{kind}_{l}", new], [f"present_{kind}_{l}"], axis=2))
        scores = node("Mul", [node("MatMul", [q, node("Transpose", [f"present_key_{l}"], perm=[0, 1, 3, 2])]), "c_scale"])
        a = node("MatMul", [node("Softmax", [scores], axis=-1), f"present_value_{l}"])
        a = node("Reshape", [node("Transpose", [a], perm=[0, 2, 1, 3]), "c_embd_shape"])
        x = node("Add", [x, linear(a, p + "attn.c_proj", embd, embd, residual_std)])
        h = linear(layer_norm(x, p + "ln_2"), p + "mlp.c_fc", embd, 4 * embd)
        inner = node("Mul", [node("Add", [h, node("Mul", [node("Pow", [h, "c_three"]), "c_cube"])]), "c_gelu"])
        h = node("Mul", [node("Mul", [h, "c_half"]), node("Add", [node("Tanh", [inner]), "c_one"])])
        x = node("Add", [x, linear(h, p + "mlp.c_proj", 4 * embd, embd, residual_std)])
    x = layer_norm(x, "ln_f")
    nodes.append(helper.make_node("MatMul", [x, node("Transpose", [wte], perm=[1, 0])], ["logits"]))
    graph = helper.make_graph(nodes, "gpt2_decode", inputs, outputs, init)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    return model, weights


def reference(w, feeds, layers, embd, heads):
    """The step in numpy, f64."""
    d = embd // heads
    f = {k: v.astype(np.float64) for k, v in w.items()}

    def ln(x, name):
        m = x.mean(-1, keepdims=True)
        s = ((x - m) ** 2).mean(-1, keepdims=True)
        return (x - m) / np.sqrt(s + 1e-5) * f[name + ".weight"] + f[name + ".bias"]

    x = f["wte"][feeds["input_ids"]] + f["wpe"][feeds["position_ids"]]  # [1, 1, embd]
    out = {}
    for l in range(layers):
        p = f"h.{l}."
        qkv = ln(x, p + "ln_1") @ f[p + "attn.c_attn.weight"] + f[p + "attn.c_attn.bias"]
        q, k, v = (t.reshape(1, 1, heads, d).transpose(0, 2, 1, 3) for t in np.split(qkv, 3, axis=2))
        pk = np.concatenate([feeds[f"past_key_{l}"].astype(np.float64), k], axis=2)
        pv = np.concatenate([feeds[f"past_value_{l}"].astype(np.float64), v], axis=2)
        out[f"present_key_{l}"], out[f"present_value_{l}"] = pk, pv
        s = q @ pk.transpose(0, 1, 3, 2) / math.sqrt(d)
        s = np.exp(s - s.max(-1, keepdims=True))
        a = (s / s.sum(-1, keepdims=True)) @ pv
        a = a.transpose(0, 2, 1, 3).reshape(1, 1, embd)
        x = x + a @ f[p + "attn.c_proj.weight"] + f[p + "attn.c_proj.bias"]
        h = ln(x, p + "ln_2") @ f[p + "mlp.c_fc.weight"] + f[p + "mlp.c_fc.bias"]
        h = 0.5 * h * (1 + np.tanh(math.sqrt(2 / math.pi) * (h + 0.044715 * h ** 3)))
        x = x + h @ f[p + "mlp.c_proj.weight"] + f[p + "mlp.c_proj.bias"]
    out["logits"] = ln(x, "ln_f") @ f["wte"].T
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("dir")
    ap.add_argument("--past", type=int, default=511)
    ap.add_argument("--layers", type=int, default=12)
    ap.add_argument("--embd", type=int, default=768)
    ap.add_argument("--heads", type=int, default=12)
    ap.add_argument("--vocab", type=int, default=50257)
    ap.add_argument("--context", type=int, default=1024)
    a = ap.parse_args()
    if a.past + 1 > a.context:
        ap.error("the past and the new token must fit the context")
    model, weights = build(a.layers, a.embd, a.heads, a.vocab, a.context, a.past)
    case = os.path.join(a.dir, f"gpt2_decode_p{a.past}")
    data = os.path.join(case, "test_data_set_0")
    os.makedirs(data, exist_ok=True)
    onnx.save(model, os.path.join(case, "model.onnx"))
    rng = np.random.default_rng(1)
    d = a.embd // a.heads
    feeds = {"input_ids": np.array([[464]], np.int64) % a.vocab, "position_ids": np.array([[a.past]], np.int64)}
    for l in range(a.layers):
        for kind in ("key", "value"):
            feeds[f"past_{kind}_{l}"] = rng.standard_normal([1, a.heads, a.past, d]).astype(np.float32)
    expected = reference(weights, feeds, a.layers, a.embd, a.heads)
    for i, inp in enumerate(model.graph.input):
        onnx.save_tensor(numpy_helper.from_array(feeds[inp.name], inp.name), os.path.join(data, f"input_{i}.pb"))
    for i, out in enumerate(model.graph.output):
        onnx.save_tensor(numpy_helper.from_array(expected[out.name].astype(np.float32), out.name), os.path.join(data, f"output_{i}.pb"))
    print(case)


if __name__ == "__main__":
    main()
