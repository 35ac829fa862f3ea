# Trains a small CNN and a small transformer for a fixed number of steps and
# prints one RESULT line: final losses (exact, hex), parameter hashes and
# median step times. Run with and without the shim and compare.
#   train_compare.py LABEL [STEPS]
import hashlib, json, os, sys, time
import torch, torch.nn as nn, torch.nn.functional as F

label = sys.argv[1]
steps = int(sys.argv[2]) if len(sys.argv) > 2 else 40
torch.use_deterministic_algorithms(True)
torch.backends.cudnn.benchmark = False
dev = "cuda"

def params_hash(model):
    h = hashlib.sha256()
    for p in model.parameters():
        h.update(p.detach().cpu().numpy().tobytes())
    return h.hexdigest()[:16]

def train(model, batch, loss_fn):
    opt = torch.optim.AdamW(model.parameters(), lr=1e-3)
    times = []
    for _ in range(steps):
        torch.cuda.synchronize(); t0 = time.perf_counter()
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model, batch)
        loss.backward(); opt.step()
        torch.cuda.synchronize(); times.append(time.perf_counter() - t0)
    warm = sorted(times[5:])
    return {"loss": loss.item().hex(), "params": params_hash(model), "step_ms": warm[len(warm) // 2] * 1e3}

torch.manual_seed(0)
cnn = nn.Sequential(nn.Conv2d(3, 64, 3, padding=1), nn.ReLU(), nn.Conv2d(64, 64, 3, padding=1), nn.ReLU(),
                    nn.MaxPool2d(2), nn.Conv2d(64, 128, 3, padding=1), nn.ReLU(), nn.AdaptiveAvgPool2d(1),
                    nn.Flatten(), nn.Linear(128, 10)).to(dev)
g = torch.Generator().manual_seed(1)
images = (torch.randn(128, 3, 32, 32, generator=g).to(dev), torch.randint(0, 10, (128,), generator=g).to(dev))
result = {"label": label, "limit": os.environ.get("VGPUMEM_LIMIT"),
          "cnn": train(cnn, images, lambda m, b: F.cross_entropy(m(b[0]), b[1]))}

torch.manual_seed(0)
class Tiny(nn.Module):
    def __init__(self, vocab=1000, d=256, layers=4):
        super().__init__()
        self.emb = nn.Embedding(vocab, d)
        layer = nn.TransformerEncoderLayer(d, 8, 4 * d, dropout=0.0, batch_first=True)
        self.enc = nn.TransformerEncoder(layer, layers)
        self.out = nn.Linear(d, vocab)
    def forward(self, x):
        return self.out(self.enc(self.emb(x)))
tiny = Tiny().to(dev)
tokens = torch.randint(0, 1000, (32, 128), generator=g).to(dev)
result["transformer"] = train(tiny, tokens, lambda m, t: F.cross_entropy(m(t[:, :-1]).flatten(0, 1), t[:, 1:].flatten()))
result["max_memory_reserved"] = torch.cuda.max_memory_reserved()
print("RESULT " + json.dumps(result), flush=True)
