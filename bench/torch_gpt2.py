"""PyTorch baseline for bench/gpt2.lua: GPT-2 small with the weights of
bench/gpt2_make_weights.py, on the same GPU in the same session.

    python3 bench/torch_gpt2.py [--dir /tmp/gpt2] [--csv torch_gpt2.csv]

TF32 off (true float32 products, as lumus computes). Batch 1. Writes into --dir:
  torch_logits.bin   float32 little-endian logits [128, 50257] of the fixed 128-token prompt
                     (GPT-2 id i of the prompt: (i * 7919 + 13) % 50257, i from 0)
  torch_ids.txt      the 64 greedy ids after the prompt (0-based GPT-2 ids, one line)
  torch_logits_f16.bin, torch_ids_f16.txt   the same from the model in float16 (logits
                     widened to float32), for bench/gpt2.lua's float16 comparison
and prints: decode tokens/s of a manual KV-cache loop (float32 and float16): prefill of
the prompt, then 63 single-token steps each reading its argmax id back to the host
(.item(), as lumus reads one 4-byte id), timed over the steps; the prefill of 512 tokens
(median of 10, synchronized wall time).
"""
import argparse
import csv
import json
import os
import statistics
import time

import torch
from safetensors.torch import load_file
from transformers import GPT2Config, GPT2LMHeadModel

PROMPT_LEN, NEW_TOKENS, PREFILL = 128, 64, 512


def prompt_ids(n, vocab):
    return [(i * 7919 + 13) % vocab for i in range(n)]


def load(d, dtype):
    with open(os.path.join(d, "gpt2_small.json")) as f:
        meta = json.load(f)
    config = GPT2Config(**meta)
    model = GPT2LMHeadModel(config)
    missing, unexpected = model.load_state_dict(load_file(os.path.join(d, "gpt2_small.safetensors")), strict=False)
    assert not unexpected, unexpected
    assert all(k == "lm_head.weight" or k.endswith("attn.bias") or k.endswith("masked_bias") for k in missing), missing
    model.tie_weights()
    return model.to("cuda", dtype).eval(), config


def decode(model, ids, n):
    """Greedy: prefill, then n - 1 single-token steps with the KV cache; returns the n
    ids and the seconds of the single-token steps."""
    with torch.no_grad():
        x = torch.tensor([ids], device="cuda")
        out = model(x, use_cache=True)
        past = out.past_key_values
        nxt = out.logits[:, -1].argmax(-1)
        new = [int(nxt.item())]
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(n - 1):
            out = model(nxt.view(1, 1), past_key_values=past, use_cache=True)
            past = out.past_key_values
            nxt = out.logits[:, -1].argmax(-1)
            new.append(int(nxt.item()))
        return new, time.perf_counter() - t0


def prefill_ms(model, vocab, reps=10):
    x = torch.tensor([prompt_ids(PREFILL, vocab)], device="cuda")
    times = []
    with torch.no_grad():
        for i in range(reps + 2):
            torch.cuda.synchronize()
            t0 = time.perf_counter()
            model(x, use_cache=False)
            torch.cuda.synchronize()
            if i >= 2:
                times.append((time.perf_counter() - t0) * 1e3)
    return statistics.median(times)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--dir", default="/tmp/gpt2")
    ap.add_argument("--csv")
    args = ap.parse_args()
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    torch.set_float32_matmul_precision("highest")

    rows = []
    print("## PyTorch GPT-2 small (random weights), batch 1\n")
    print("| dtype | decode tokens/s | prefill 512 ms |")
    print("|:---|---:|---:|")
    for dtype in (torch.float32, torch.float16):
        model, config = load(args.dir, dtype)
        ids = prompt_ids(PROMPT_LEN, config.vocab_size)
        suffix = "" if dtype == torch.float32 else "_f16"
        with torch.no_grad():
            logits = model(torch.tensor([ids], device="cuda")).logits[0].float().cpu()
        logits.numpy().astype("<f4").tofile(os.path.join(args.dir, f"torch_logits{suffix}.bin"))
        decode(model, ids, 8)                       # warm-up
        new, secs = decode(model, ids, NEW_TOKENS)
        with open(os.path.join(args.dir, f"torch_ids{suffix}.txt"), "w") as f:
            f.write(" ".join(str(i) for i in new) + "\n")
        if dtype == torch.float32:
            greedy = new
        rate = (NEW_TOKENS - 1) / secs
        pre = prefill_ms(model, config.vocab_size)
        name = str(dtype).replace("torch.", "")
        print(f"| {name} | {rate:.1f} | {pre:.2f} |")
        rows.append({"dtype": name, "decode_tokens_per_s": rate, "prefill512_ms": pre})
        del model
        torch.cuda.empty_cache()
    print(f"\nfloat32 greedy ids (0-based): {' '.join(str(i) for i in greedy)}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)


if __name__ == "__main__":
    main()
