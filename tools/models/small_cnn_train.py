#!/usr/bin/env python3
"""PyTorch's side of hjit-bench --small-cnn: the training step of the same small CNN (conv-relu-pool
twice, a linear head, cross entropy, SGD with momentum; 32 images 3x8x8), written as a user writes
it in eager PyTorch. Prints one line, `RESULT name=small_cnn first_ms=... steady_med_ms=... loss=...`.

    /usr/bin/python3 tools/models/small_cnn_train.py [THREADS]

Run by hjit-bench with the peers' tuned settings (../shared/peers/README.md); never by the build.
"""
import sys
import time

import torch


def main(argv):
    torch.set_num_threads(int(argv[1]) if len(argv) > 1 else 2)
    torch.manual_seed(70)
    model = torch.nn.Sequential(
        torch.nn.Conv2d(3, 16, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Conv2d(16, 32, 3, padding=1), torch.nn.ReLU(), torch.nn.MaxPool2d(2),
        torch.nn.Flatten(), torch.nn.Linear(32 * 2 * 2, 10))
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(32, 3, 8, 8)
    y = torch.tensor([(i * 7) % 10 for i in range(32)])

    def step():
        opt.zero_grad()
        loss = torch.nn.functional.cross_entropy(model(x), y)
        loss.backward()
        opt.step()
        return loss

    t = time.perf_counter()
    first_loss = float(step())
    first = (time.perf_counter() - t) * 1e3
    for _ in range(3):
        step()
    times = []
    deadline = time.perf_counter() + 3.0
    while len(times) < 10 or (len(times) < 2000 and time.perf_counter() < deadline):
        t = time.perf_counter()
        step()
        times.append((time.perf_counter() - t) * 1e3)
    times.sort()
    print("RESULT name=small_cnn first_ms=%.2f steady_med_ms=%.4f loss=%.4f" % (first, times[len(times) // 2], first_loss),
          flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
