# examples/char_gpt.cpp in PyTorch, line for line: the reference its loss and length are measured
# against. /usr/bin/python3 examples/torch/char_gpt.py [text] [steps] [checkpoint to resume]
import sys
import torch
from torch import nn

torch.manual_seed(0)
text = open(sys.argv[1] if len(sys.argv) > 1 else "/usr/share/common-licenses/GPL-3").read()
chars = sorted(set(text))
ids = torch.tensor([chars.index(c) for c in text])


class GPT(nn.Module):
    def __init__(self, V, C=128, T=64, n_blocks=2):
        super().__init__()
        self.V, self.T = V, T
        self.tok, self.pos = nn.Embedding(V, C), nn.Embedding(T, C)
        self.blocks = nn.ModuleList(nn.TransformerEncoderLayer(C, 4, 4 * C, 0.1, "gelu", batch_first=True, norm_first=True) for _ in range(n_blocks))
        self.ln, self.head = nn.LayerNorm(C), nn.Linear(C, V)

    def forward(self, x):
        h = self.tok(x) + self.pos(torch.arange(x.shape[1]))
        mask = nn.Transformer.generate_square_subsequent_mask(x.shape[1])
        for b in self.blocks:
            h = b(h, src_mask=mask)
        return self.head(self.ln(h))


model = GPT(len(chars))
V, T, B = model.V, model.T, 16
opt = torch.optim.AdamW(model.parameters(), 1e-3)
steps, start = int(sys.argv[2]) if len(sys.argv) > 2 else 1000, 0
if len(sys.argv) > 3:
    state = torch.load(sys.argv[3])
    model.load_state_dict(state["model"]), opt.load_state_dict(state["optim"])
    start = state["step"]
for step in range(start, steps):
    at = torch.randint(len(ids) - T - 1, (B, 1), generator=torch.Generator().manual_seed(step)) + torch.arange(T)
    loss = nn.functional.cross_entropy(model(ids[at]).reshape(-1, V), ids[at + 1].reshape(-1))
    opt.zero_grad()
    loss.backward()
    opt.step()
    if step % 100 == 0 or step == steps - 1:
        print(f"step {step}: loss {loss.item():.4f}")
torch.save({"model": model.state_dict(), "optim": opt.state_dict(), "step": steps}, "char_gpt.pt")

model.eval()
out = [chars.index("\n")]
with torch.no_grad():
    for i in range(300):
        logits = model(torch.tensor([out[-T:]]))[0, -1]
        out.append(torch.multinomial(torch.softmax(logits, -1), 1, generator=torch.Generator().manual_seed(i)).item())
print("".join(chars[i] for i in out))
