#!/usr/bin/env python3
"""Real architectures as ONNX cases, with PyTorch's outputs: run by hand where Debian's python3-torch
and python3-torchvision are installed (never by the build or CI).

    /usr/bin/python3 tools/models/reference_models.py export DIR [--batch N] [NAME ...]
    /usr/bin/python3 tools/models/reference_models.py time DIR NAME [THREADS]
    /usr/bin/python3 tools/models/reference_models.py example examples/data
    /usr/bin/python3 tools/models/reference_models.py detection DIR

A name with a suffix _bN (resnet50_b8) is the model at batch N; `export DIR --batch 8` exports
every model (or those named) so. `export` writes each model in the layout of ONNX's own test data,
which `hjit-bench --models DIR` and `hjit-onnx run --expect` read:

    DIR/NAME/model.onnx                      fixed random weights (seeded), eval mode
    DIR/NAME/test_data_set_0/input_0.pb      a seeded random input (TensorProto)
    DIR/NAME/test_data_set_0/output_0.pb     PyTorch's output for it

`detection` writes DIR/ssdlite320_mobilenet_v3_large, a torchvision detector with three outputs
(boxes, scores, labels) for `hjit-onnx run --expect`; it is not among the models `export` writes.
`example` writes the small classifier and picture examples/onnx_classify is tested with, and prints
the class PyTorch gives the picture after the example's preprocessing.

`time` rebuilds the same model (same seed) and prints one line, `RESULT name=NAME first_ms=...
steady_med_ms=...`, for hjit-bench to set beside its own numbers in the same sitting. Run it with
the peers' tuned settings (../shared/peers/README.md), as hjit-bench does.
"""
import os
import struct
import sys
import time

import torch
import torchvision

SEED = 29


def vision(name, **kwargs):
    return lambda: getattr(torchvision.models, name)(**kwargs), (1, 3, 224, 224)


def segmentation(name):
    return lambda: getattr(torchvision.models.segmentation, name)(weights=None, weights_backbone=None), (1, 3, 224, 224)


class Encoder(torch.nn.Module):
    """A Transformer encoder (4 layers, d_model 256, 8 heads): over 64 tokens, or as many as its input has."""

    def __init__(self):
        super().__init__()
        layer = torch.nn.TransformerEncoderLayer(d_model=256, nhead=8, dim_feedforward=1024, batch_first=True)
        self.encoder = torch.nn.TransformerEncoder(layer, num_layers=4, enable_nested_tensor=False)

    def forward(self, x):
        return self.encoder(x)


class Recurrent(torch.nn.Module):
    """A 2-layer GRU or LSTM (hidden 256) over 64 steps, then a linear head on the last step."""

    def __init__(self, kind):
        super().__init__()
        self.rnn = getattr(torch.nn, kind)(input_size=64, hidden_size=256, num_layers=2, batch_first=True)
        self.head = torch.nn.Linear(256, 10)

    def forward(self, x):
        y = self.rnn(x)[0]
        return self.head(y[:, -1])


class TinyClassifier(torch.nn.Module):
    """Ten classes of 32x32 pictures: two conv-BN-ReLU blocks, average pooling, a linear head."""

    def __init__(self):
        super().__init__()
        self.features = torch.nn.Sequential(
            torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.BatchNorm2d(16), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
            torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.BatchNorm2d(32), torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1))
        self.head = torch.nn.Linear(32, 10)

    def forward(self, x):
        return self.head(torch.flatten(self.features(x), 1))


# name -> (constructor, input shape, opset)
MODELS = {
    "resnet18": (*vision("resnet18"), 13),
    "resnet50": (*vision("resnet50"), 13),
    "mobilenet_v2": (*vision("mobilenet_v2"), 13),
    "mobilenet_v3_large": (*vision("mobilenet_v3_large"), 13),
    "efficientnet_b0": (*vision("efficientnet_b0"), 13),
    "squeezenet1_1": (*vision("squeezenet1_1"), 13),
    "densenet121": (*vision("densenet121"), 13),
    "convnext_tiny": (*vision("convnext_tiny"), 17),
    "vit_b_16": (*vision("vit_b_16"), 17),
    "lraspp_mobilenet_v3_large": (*segmentation("lraspp_mobilenet_v3_large"), 13),
    "transformer_encoder": (Encoder, (1, 64, 256), 17),
    # The same encoder over 128 tokens: at batch 4 (transformer_encoder_s128_b4), the BERT-like
    # encoder of issue 51's int8 targets.
    "transformer_encoder_s128": (Encoder, (1, 128, 256), 17),
    "gru": (lambda: Recurrent("GRU"), (1, 64, 64), 13),
    "lstm": (lambda: Recurrent("LSTM"), (1, 64, 64), 13),
}


def randomize(model):
    """Seeded weights of every layer at a scale that keeps activations near 1: torchvision's own
    initializations zero some layers (ViT's head, the last BN of residual blocks), which would
    make the outputs constant and the comparison empty."""
    for m in model.modules():
        for name, p in list(m.named_parameters(recurse=False)) + list(m.named_buffers(recurse=False)):
            if not p.is_floating_point():
                continue
            with torch.no_grad():
                if name == "running_var":
                    p.copy_(1.0 + 0.2 * torch.rand_like(p))
                elif isinstance(m, (torch.nn.BatchNorm2d, torch.nn.LayerNorm, torch.nn.GroupNorm)) and name == "weight":
                    p.copy_(1.0 + 0.1 * torch.randn_like(p))
                elif p.dim() >= 2:
                    fan_in = p[0].numel()
                    p.copy_(torch.randn_like(p) * (1.0 / fan_in) ** 0.5)
                else:  # biases, running means, class tokens, layer scales
                    p.copy_(0.1 * torch.randn_like(p))


def split_name(name):
    """"resnet50" is batch 1; "resnet50_b8" the same model at batch 8 (its own folder and row)."""
    base, _, batch = name.rpartition("_b")
    if base in MODELS and batch.isdigit() and int(batch) >= 1:
        return base, int(batch)
    if name not in MODELS:
        raise SystemExit("unknown model %r; known: %s (a suffix _bN sets the batch)" % (name, ", ".join(MODELS)))
    return name, 1


def build(name):
    base, batch = split_name(name)
    make, shape, opset = MODELS[base]
    torch.manual_seed(SEED)
    model = make().eval()
    randomize(model)
    x = torch.randn(batch, *shape[1:], generator=torch.Generator().manual_seed(SEED + 1))
    return model, x, opset


def first_output(y):
    if isinstance(y, dict):  # segmentation models: {"out": ...}
        return y["out"]
    return y


class Exported(torch.nn.Module):
    def __init__(self, model):
        super().__init__()
        self.model = model

    def forward(self, x):
        return first_output(self.model(x))


def varint(v):
    out = bytearray()
    while True:
        b = v & 0x7F
        v >>= 7
        out.append(b | (0x80 if v else 0))
        if not v:
            return bytes(out)


def tensor_proto(t, name):
    """A TensorProto (float32, or int64 for integers) without the onnx package: dims (1), data_type (2),
    name (8), raw_data (9)."""
    integer = not t.is_floating_point()
    t = t.detach().contiguous().to(torch.int64 if integer else torch.float32)
    out = bytearray()
    for d in t.shape:
        out += b"\x08" + varint(int(d))
    out += b"\x10" + varint(7 if integer else 1)
    encoded = name.encode()
    out += b"\x42" + varint(len(encoded)) + encoded
    raw = struct.pack("<%d%s" % (t.numel(), "q" if integer else "f"), *t.flatten().tolist())
    out += b"\x4a" + varint(len(raw)) + raw
    return bytes(out)


def export(root, name):
    model, x, opset = build(name)
    wrapped = Exported(model).eval()
    folder = os.path.join(root, name)
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    with torch.no_grad():
        y = wrapped(x)
    # Traced with gradients enabled: otherwise nn.MultiheadAttention takes its inference fast path,
    # an op (_native_multi_head_attention) the exporter does not know.
    torch.onnx.export(wrapped, x, os.path.join(folder, "model.onnx"), opset_version=opset,
                      input_names=["input"], output_names=["output"], do_constant_folding=True)
    with open(os.path.join(folder, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(tensor_proto(x, "input"))
    with open(os.path.join(folder, "test_data_set_0", "output_0.pb"), "wb") as f:
        f.write(tensor_proto(y, "output"))
    print("exported %s: input %s, output %s, opset %d" % (name, tuple(x.shape), tuple(y.shape), opset), flush=True)


def export_detection(root):
    """SSDLite320-MobileNetV3 from torchvision with seeded weights (randomize: distinct scores), a
    score threshold of 0.001 and 50 detections, one 320 x 320 image: its boxes, scores and labels.
    Its postprocessing (NonZero, TopK, NonMaxSuppression per class) reads values: hjit compiles it
    in segments between graph breaks (hjit-onnx run). Not one of MODELS: hjit-bench --models would
    compile those segments in every sitting."""
    torch.manual_seed(SEED)
    model = torchvision.models.detection.ssdlite320_mobilenet_v3_large(weights=None, weights_backbone=None).eval()
    randomize(model)
    model.score_thresh, model.detections_per_img = 0.001, 50
    x = torch.rand(3, 320, 320)
    folder = os.path.join(root, "ssdlite320_mobilenet_v3_large")
    os.makedirs(os.path.join(folder, "test_data_set_0"), exist_ok=True)
    with torch.no_grad():
        found = model([x])[0]
    names = ["boxes", "scores", "labels"]
    torch.onnx.export(model, ([x],), os.path.join(folder, "model.onnx"), opset_version=13, input_names=["image"], output_names=names)
    with open(os.path.join(folder, "test_data_set_0", "input_0.pb"), "wb") as f:
        f.write(tensor_proto(x, "image"))
    for k, name in enumerate(names):
        with open(os.path.join(folder, "test_data_set_0", "output_%d.pb" % k), "wb") as f:
            f.write(tensor_proto(found[name], name))
    print("exported ssdlite320_mobilenet_v3_large: %d detections" % found["boxes"].shape[0], flush=True)


def time_model(name, threads):
    torch.set_num_threads(threads)
    model, x, _ = build(name)
    with torch.no_grad():
        t = time.perf_counter()
        model(x)
        first = (time.perf_counter() - t) * 1e3
        for _ in range(3):
            model(x)
        times = []
        deadline = time.perf_counter() + 3.0
        while len(times) < 10 or (len(times) < 200 and time.perf_counter() < deadline):
            t = time.perf_counter()
            model(x)
            times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    print("RESULT name=%s first_ms=%.2f steady_med_ms=%.3f runs=%d" % (name, first, times[len(times) // 2], len(times)), flush=True)


def preprocess(picture, size):
    """examples/onnx_classify's preprocessing: the shorter side resized to `size` (bilinear, half-pixel
    centres, no antialiasing), the centre size x size cut out, scaled to [0, 1] and normalized with
    ImageNet's mean and deviation."""
    x = picture.permute(2, 0, 1)[None].float() / 255.0
    h, w = x.shape[2:]
    nh, nw = (size, round(w * size / h)) if h <= w else (round(h * size / w), size)
    x = torch.nn.functional.interpolate(x, size=(nh, nw), mode="bilinear", align_corners=False)
    top, left = (nh - size) // 2, (nw - size) // 2
    x = x[:, :, top:top + size, left:left + size]
    mean = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
    std = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
    return (x - mean) / std


def example(folder):
    os.makedirs(folder, exist_ok=True)
    torch.manual_seed(SEED)
    model = TinyClassifier().eval()
    randomize(model)
    torch.onnx.export(model, torch.zeros(1, 3, 32, 32), os.path.join(folder, "tiny_classifier.onnx"), opset_version=13,
                      input_names=["image"], output_names=["logits"])
    # A 40 x 48 picture: smooth colour gradients with a bright square, deterministic.
    ys, xs = torch.meshgrid(torch.arange(40), torch.arange(48), indexing="ij")
    picture = torch.stack([xs * 5, ys * 6, (xs + ys) * 3], dim=2).clamp(0, 255).to(torch.uint8)
    picture[10:22, 14:30] = torch.tensor([250, 240, 30], dtype=torch.uint8)
    with open(os.path.join(folder, "picture.ppm"), "wb") as f:
        f.write(b"P6\n48 40\n255\n" + bytes(picture.flatten().tolist()))
    with torch.no_grad():
        p = torch.softmax(model(preprocess(picture, 32)), dim=1)[0]
    top = torch.topk(p, 3)
    print("PyTorch: " + ", ".join("class %d %.4f" % (int(i), float(v)) for v, i in zip(top.values, top.indices)))


def main(argv):
    if len(argv) == 3 and argv[1] == "example":
        example(argv[2])
        return 0
    if len(argv) == 3 and argv[1] == "detection":
        export_detection(argv[2])
        return 0
    if len(argv) < 3 or argv[1] not in ("export", "time"):
        print(__doc__)
        return 2
    root = argv[2]
    if argv[1] == "time":
        time_model(argv[3], int(argv[4]) if len(argv) > 4 else 2)
        return 0
    names = argv[3:]
    if names[:1] == ["--batch"] and len(names) >= 2 and names[1].isdigit():
        batch, names = int(names[1]), names[2:] or list(MODELS)
        names = [n if batch == 1 else "%s_b%d" % (n, batch) for n in names]
    for name in names or list(MODELS):
        export(root, name)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
