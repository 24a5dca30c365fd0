# examples/digits_cnn.cpp in PyTorch, line for line: the reference its accuracy and length are
# measured against. /usr/bin/python3 examples/torch/digits_cnn.py [digits.csv.gz] [epochs]
import sys
import numpy as np
import torch
from torch import nn

torch.manual_seed(0)
data = torch.from_numpy(np.loadtxt(sys.argv[1] if len(sys.argv) > 1 else "examples/data/digits.csv.gz", delimiter=",", dtype=np.float32))
x = data[:, :64].reshape(-1, 1, 8, 8) / 16
y = data[:, 64].long()
order = torch.randperm(len(x))
train, test = order[:1437], order[1437:]

model = nn.Sequential(
    nn.Conv2d(1, 16, 3, 1, 1), nn.BatchNorm2d(16), nn.ReLU(), nn.MaxPool2d(2),
    nn.Conv2d(16, 32, 3, 1, 1), nn.ReLU(), nn.MaxPool2d(2),
    nn.Flatten(), nn.Dropout(0.2), nn.Linear(32 * 2 * 2, 10))
opt = torch.optim.AdamW(model.parameters(), 3e-3)


def step(xb, yb):
    loss = nn.functional.cross_entropy(model(xb), yb)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return loss


epochs = int(sys.argv[2]) if len(sys.argv) > 2 else 20
for epoch in range(1, epochs + 1):
    model.train()
    shuffled = train[torch.randperm(len(train))]
    for i in range(0, len(shuffled) - 31, 32):
        loss = step(x[shuffled[i:i + 32]], y[shuffled[i:i + 32]])
    model.eval()
    with torch.no_grad():
        accuracy = (model(x[test]).argmax(1) == y[test]).float().mean().item()
    print(f"epoch {epoch}: loss {loss.item():.4f}, test accuracy {100 * accuracy:.2f}%")
torch.save({"model": model.state_dict(), "optim": opt.state_dict()}, "digits_cnn.pt")
