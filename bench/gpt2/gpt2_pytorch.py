"""GPT-2 training steps in PyTorch, the same model and update as build/release/bin/gpt2:
llm.c's GPT-2 (tied head, GELU-tanh, LayerNorm eps 1e-5, vocab padded to 50304 with the loss
over the first 50257 logits), AdamW with decay on matrices, gradient clipping at 1.0.
Prints the mean ms per step after the first and the phase split as one JSON line.

  /usr/bin/python3 bench/gpt2/gpt2_pytorch.py --model d12 --batch_size 4 --sequence_length 64 --steps 10 --threads 2
"""
import argparse
import json
import math
import time

import torch
import torch.nn as nn
import torch.nn.functional as F

SIZES = {"d12": (12, 12, 768), "d24": (24, 16, 1024), "d36": (36, 20, 1280), "d48": (48, 25, 1600)}


class Block(nn.Module):
    def __init__(self, C, NH):
        super().__init__()
        self.NH = NH
        self.ln_1 = nn.LayerNorm(C)
        self.c_attn = nn.Linear(C, 3 * C)
        self.c_proj = nn.Linear(C, C)
        self.ln_2 = nn.LayerNorm(C)
        self.c_fc = nn.Linear(C, 4 * C)
        self.mlp_proj = nn.Linear(4 * C, C)

    def forward(self, x):
        B, T, C = x.shape
        q, k, v = self.c_attn(self.ln_1(x)).split(C, dim=2)
        q, k, v = (t.view(B, T, self.NH, C // self.NH).transpose(1, 2) for t in (q, k, v))
        # PyTorch 1.13 (Debian's) has no F.scaled_dot_product_attention: llm.c's train_gpt2.py form.
        att = (q @ k.transpose(-2, -1)) * (1.0 / math.sqrt(k.size(-1)))
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).tril()
        y = F.softmax(att.masked_fill(~causal, float("-inf")), dim=-1) @ v
        x = x + self.c_proj(y.transpose(1, 2).reshape(B, T, C))
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh"))


class GPT2(nn.Module):
    def __init__(self, L, NH, C, V=50257, Vp=50304, maxT=1024):
        super().__init__()
        self.V = V
        self.wte = nn.Embedding(Vp, C)
        self.wpe = nn.Embedding(maxT, C)
        self.h = nn.ModuleList(Block(C, NH) for _ in range(L))
        self.ln_f = nn.LayerNorm(C)
        for name, p in self.named_parameters():
            if p.dim() >= 2:
                std = 0.02 / math.sqrt(2 * L) if name.endswith("c_proj.weight") or name.endswith("mlp_proj.weight") else 0.02
                nn.init.normal_(p, 0.0, std)

    def forward(self, idx, targets):
        x = self.wte(idx) + self.wpe(torch.arange(idx.shape[1]))
        for block in self.h:
            x = block(x)
        logits = self.ln_f(x) @ self.wte.weight.t()
        return F.cross_entropy(logits[..., : self.V].reshape(-1, self.V), targets.reshape(-1))


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--model", default="d12", choices=SIZES)
    parser.add_argument("--batch_size", type=int, default=4)
    parser.add_argument("--sequence_length", type=int, default=64)
    parser.add_argument("--steps", type=int, default=10)
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    model = GPT2(*SIZES[args.model])
    decay = [p for p in model.parameters() if p.dim() >= 2]
    no_decay = [p for p in model.parameters() if p.dim() < 2]
    optimizer = torch.optim.AdamW([{"params": decay, "weight_decay": 0.1}, {"params": no_decay, "weight_decay": 0.0}],
                                  lr=6e-4, betas=(0.9, 0.95), eps=1e-8)
    B, T = args.batch_size, args.sequence_length
    times = {"ms": [], "forward_ms": [], "backward_ms": [], "optimizer_ms": []}
    for step in range(args.steps):
        idx = torch.randint(0, 50257, (B, T))
        targets = torch.randint(0, 50257, (B, T))
        t0 = time.perf_counter()
        optimizer.zero_grad(set_to_none=True)
        loss = model(idx, targets)
        t1 = time.perf_counter()
        loss.backward()
        t2 = time.perf_counter()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        t3 = time.perf_counter()
        if step > 0:
            for key, value in (("ms", t3 - t0), ("forward_ms", t1 - t0), ("backward_ms", t2 - t1), ("optimizer_ms", t3 - t2)):
                times[key].append(value * 1000)
        print(f"step {step}: loss {loss.item():.4f}, {(t3 - t0) * 1000:.1f} ms", flush=True)
    print(json.dumps({key: sum(v) / len(v) for key, v in times.items()}))


if __name__ == "__main__":
    main()
