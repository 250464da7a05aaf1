"""Random-init GPT-2 weights for bench/torch_gpt2.py and bench/gpt2.lua (issue 17).

    python3 bench/gpt2_make_weights.py [--out /tmp/gpt2]

Writes into --out:
  gpt2_small.safetensors   transformers' GPT2LMHeadModel, GPT-2 small config (12 layers,
                           12 heads, 768 wide, vocab 50257, 1024 positions), random init
                           with torch.manual_seed(0), Hugging Face tensor names
                           ("transformer.h.0.attn.c_attn.weight", ...; Conv1D [in, out]);
                           lm_head.weight is left out (tied to transformer.wte.weight)
  gpt2_small.json          its config (n_layer, n_head, n_embd, vocab_size, n_positions,
                           layer_norm_epsilon)
  gpt2_tiny.safetensors / gpt2_tiny.json   the same for a 2-layer, 4-head, 64-wide model with
                           vocab 1000 and 128 positions (seed 0): small enough for lavapipe:
    lua5.4 examples/gpt2.lua gpt2_tiny.safetensors 1 2 3 --config 2,4,64,1000,128
"""
import argparse
import json
import os

import torch
from safetensors.torch import save_file
from transformers import GPT2Config, GPT2LMHeadModel


def make(out, name, **cfg):
    torch.manual_seed(0)
    config = GPT2Config(**cfg)
    model = GPT2LMHeadModel(config).eval()
    state = {}
    for k, v in model.state_dict().items():
        # lm_head is tied to wte; attn.bias / masked_bias are causal-mask buffers of
        # older transformers releases, not weights.
        if k == "lm_head.weight" or k.endswith(".attn.bias") or k.endswith(".attn.masked_bias"):
            continue
        state[k] = v.detach().to(torch.float32).contiguous().cpu()
    path = os.path.join(out, name + ".safetensors")
    save_file(state, path, metadata={"format": "pt"})
    meta = {"n_layer": config.n_layer, "n_head": config.n_head, "n_embd": config.n_embd,
            "vocab_size": config.vocab_size, "n_positions": config.n_positions,
            "layer_norm_epsilon": config.layer_norm_epsilon}
    with open(os.path.join(out, name + ".json"), "w") as f:
        json.dump(meta, f)
    n = sum(v.numel() for v in state.values())
    print(f"| {name} | {path} | {len(state)} tensors | {n / 1e6:.1f} M parameters | "
          f"{os.path.getsize(path) / 2**20:.1f} MiB |")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/gpt2")
    args = ap.parse_args()
    os.makedirs(args.out, exist_ok=True)
    print("## GPT-2 weights (random init, seed 0)\n")
    print("| model | file | tensors | parameters | size |")
    print("|:---|:---|---:|---:|---:|")
    make(args.out, "gpt2_small", n_layer=12, n_head=12, n_embd=768, vocab_size=50257, n_positions=1024)
    make(args.out, "gpt2_tiny", n_layer=2, n_head=4, n_embd=64, vocab_size=1000, n_positions=128)


if __name__ == "__main__":
    main()
