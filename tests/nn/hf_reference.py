#!/usr/bin/env python3
"""Writes a Hugging Face model directory from a float32 llm.c checkpoint, the way transformers'
save_pretrained lays it out, with the standard library only: the independent reference for
Infini's hf::read_gpt2 / write_gpt2 / read_llama3 / write_llama3 tests.

  hf_reference.py MODEL.bin OUT_DIR [--dtype float32|bfloat16|float16] [--shard_bytes N]
                  [--no_prefix] [--buffers] [--tie]

A GPT-2 checkpoint (magic 20240326) becomes GPT2LMHeadModel's directory:

- Names: transformer.wte.weight, transformer.wpe.weight, transformer.h.<l>.ln_1.weight, ...,
  transformer.ln_f.bias (--no_prefix: without "transformer.", as GPT2Model and the original
  openai-community/gpt2 files name them). No lm_head.weight: tied to wte, which
  save_pretrained drops.
- Conv1D: c_attn, attn.c_proj, c_fc and mlp.c_proj weights are (in, out), the transpose of
  llm.c's (out, in).
- wte keeps the first vocab_size rows (llm.c pads to a multiple of 128 with zero rows).
- --buffers adds what older files hold: the causal-mask buffers h.<l>.attn.bias (1, 1, T, T)
  and h.<l>.attn.masked_bias, and lm_head.weight (equal to wte).
- --shard_bytes N: shards of at most N bytes (a larger tensor alone in its shard), named
  model-0000k-of-0000n.safetensors, listed by model.safetensors.index.json.

A LLaMA-3 checkpoint (magic 20240803, the layout docs/formats.md describes) becomes
LlamaForCausalLM's directory: model.embed_tokens.weight, model.layers.<l>.self_attn.q_proj /
k_proj / v_proj / o_proj, mlp.gate_proj (llm.c's fc2w) / up_proj (fcw) / down_proj,
input_layernorm, post_attention_layernorm, model.norm.weight, lm_head.weight (--tie: none, and
tie_word_embeddings true; the file's wlmhead must equal wte). q_proj and k_proj rows are
permuted for rotate-half RoPE as convert_llama_weights_to_hf.py's permute() does:
w.view(heads, rows // heads // 2, 2, cols).transpose(1, 2).

Either way:
- --shard_bytes N: shards of at most N bytes (a larger tensor alone in its shard), named
  model-0000k-of-0000n.safetensors, listed by model.safetensors.index.json.
- bfloat16 rounds to nearest even; float16 through struct's 'e' (also to nearest even).
"""
import argparse
import json
import os
import struct
import sys


def read_tensors(path, data, shapes):
    tensors, offset = {}, 1024
    for name, shape in shapes:
        count = 1
        for d in shape:
            count *= d
        tensors[name] = (shape, list(struct.unpack_from(f"<{count}f", data, offset)))
        offset += 4 * count
    if offset != len(data):
        sys.exit(f"{path}: {len(data)} bytes, expected {offset}")
    return tensors


def read_llmc_gpt2(path, data, header):
    maxT, V, L, NH, C, Vp = header[2], header[3], header[4], header[5], header[6], header[7]
    shapes = [("wte", [Vp, C]), ("wpe", [maxT, C]), ("ln1w", [L, C]), ("ln1b", [L, C]),
              ("qkvw", [L, 3 * C, C]), ("qkvb", [L, 3 * C]), ("attprojw", [L, C, C]), ("attprojb", [L, C]),
              ("ln2w", [L, C]), ("ln2b", [L, C]), ("fcw", [L, 4 * C, C]), ("fcb", [L, 4 * C]),
              ("fcprojw", [L, C, 4 * C]), ("fcprojb", [L, C]), ("lnfw", [C]), ("lnfb", [C])]
    return {"maxT": maxT, "V": V, "L": L, "NH": NH, "C": C, "Vp": Vp}, read_tensors(path, data, shapes)


def float_of(bits):
    return struct.unpack("<f", struct.pack("<i", bits))[0]


def read_llmc_llama3(path, data, header):
    maxT, V, L, NH, KV, C = header[2:8]
    m, multiple_of = float_of(header[8]), header[9]
    hidden = 2 * (4 * C) // 3
    if m > 0:
        product = m * hidden
        hidden = int(product + 0.5) if product >= 0 else -int(-product + 0.5)  # half away from zero
    H = (hidden + multiple_of - 1) // multiple_of * multiple_of
    hd = C // NH
    shapes = [("wte", [V, C]), ("ln1w", [L, C]), ("qkvw", [L, (NH + 2 * KV) * hd, C]), ("attprojw", [L, C, C]),
              ("ln2w", [L, C]), ("fcw", [L, H, C]), ("fc2w", [L, H, C]), ("fcprojw", [L, C, H]), ("lnfw", [C]),
              ("wlmhead", [V, C])]
    config = {"maxT": maxT, "V": V, "L": L, "NH": NH, "KV": KV, "C": C, "H": H, "eps": float_of(header[10]),
              "theta": float_of(header[11]), "scaled": header[12] != 0}
    return config, read_tensors(path, data, shapes)


def rows(tensor, first, count):
    (_, cols), values = tensor
    return [count, cols], values[first * cols:(first + count) * cols]


def rotate_half(tensor, heads):
    """convert_llama_weights_to_hf.py's permute(): row (h, i, j) of pair i, half j moves to (h, j, i)."""
    (n, cols), values = tensor
    half = n // heads // 2
    out = []
    for h in range(heads):
        for j in range(2):
            for i in range(half):
                r = h * 2 * half + 2 * i + j
                out += values[r * cols:(r + 1) * cols]
    return [n, cols], out


def layer(tensor, l):
    """Layer l of a stacked (L, ...) tensor."""
    shape, values = tensor
    size = len(values) // shape[0]
    return shape[1:], values[l * size:(l + 1) * size]


def transpose(tensor):
    (rows, cols), values = tensor
    return [cols, rows], [values[r * cols + c] for c in range(cols) for r in range(rows)]


def encode(values, dtype):
    if dtype == "float32":
        return struct.pack(f"<{len(values)}f", *values)
    if dtype == "float16":
        return struct.pack(f"<{len(values)}e", *values)
    out = bytearray()
    for bits in struct.unpack(f"<{len(values)}I", struct.pack(f"<{len(values)}f", *values)):
        rounded = (bits + 0x7FFF + ((bits >> 16) & 1)) >> 16  # to nearest even (no NaN here)
        out += struct.pack("<H", rounded)
    return bytes(out)


def write_safetensors(path, entries, dtype):
    """entries: [(name, shape, values)], laid out in name order as safetensors does."""
    code = {"float32": "F32", "bfloat16": "BF16", "float16": "F16"}[dtype]
    header, blobs, offset = {"__metadata__": {"format": "pt"}}, [], 0
    for name, shape, values in sorted(entries, key=lambda e: e[0]):
        blob = encode(values, dtype)
        header[name] = {"dtype": code, "shape": shape, "data_offsets": [offset, offset + len(blob)]}
        blobs.append(blob)
        offset += len(blob)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def gpt2_directory(args, config, t):
    C, V, L = config["C"], config["V"], config["L"]
    prefix = "" if args.no_prefix else "transformer."

    wte_shape, wte = t["wte"]
    entries = [(prefix + "wte.weight", [V, C], wte[:V * C]),
               (prefix + "wpe.weight", *t["wpe"])]
    conv1d = {"qkvw", "attprojw", "fcw", "fcprojw"}
    names = [("ln1w", "ln_1.weight"), ("ln1b", "ln_1.bias"), ("qkvw", "attn.c_attn.weight"),
             ("qkvb", "attn.c_attn.bias"), ("attprojw", "attn.c_proj.weight"), ("attprojb", "attn.c_proj.bias"),
             ("ln2w", "ln_2.weight"), ("ln2b", "ln_2.bias"), ("fcw", "mlp.c_fc.weight"), ("fcb", "mlp.c_fc.bias"),
             ("fcprojw", "mlp.c_proj.weight"), ("fcprojb", "mlp.c_proj.bias")]
    for l in range(L):
        for llmc, hf in names:
            piece = layer(t[llmc], l)
            if llmc in conv1d:
                piece = transpose(piece)
            entries.append((f"{prefix}h.{l}.{hf}", *piece))
        if args.buffers:
            T = config["maxT"]
            mask = [1.0 if c <= r else 0.0 for r in range(T) for c in range(T)]
            entries.append((f"{prefix}h.{l}.attn.bias", [1, 1, T, T], mask))
            entries.append((f"{prefix}h.{l}.attn.masked_bias", [], [-1e4]))
    entries += [(prefix + "ln_f.weight", *t["lnfw"]), (prefix + "ln_f.bias", *t["lnfb"])]
    if args.buffers:
        entries.append(("lm_head.weight", [V, C], wte[:V * C]))
    return entries, {"activation_function": "gelu_new", "architectures": ["GPT2LMHeadModel"], "attn_pdrop": 0.1,
                     "bos_token_id": V - 1, "embd_pdrop": 0.1, "eos_token_id": V - 1, "initializer_range": 0.02,
                     "layer_norm_epsilon": 1e-05, "model_type": "gpt2", "n_ctx": config["maxT"], "n_embd": C,
                     "n_head": config["NH"], "n_inner": None, "n_layer": L, "n_positions": config["maxT"],
                     "resid_pdrop": 0.1, "torch_dtype": args.dtype, "transformers_version": "4.46.0",
                     "use_cache": True, "vocab_size": V}


def llama3_directory(args, config, t):
    C, V, L, NH, KV, H = config["C"], config["V"], config["L"], config["NH"], config["KV"], config["H"]
    hd = C // NH
    entries = [("model.embed_tokens.weight", *t["wte"])]
    for l in range(L):
        name = f"model.layers.{l}."
        qkv = layer(t["qkvw"], l)
        entries += [(name + "self_attn.q_proj.weight", *rotate_half(rows(qkv, 0, NH * hd), NH)),
                    (name + "self_attn.k_proj.weight", *rotate_half(rows(qkv, NH * hd, KV * hd), KV)),
                    (name + "self_attn.v_proj.weight", *rows(qkv, (NH + KV) * hd, KV * hd)),
                    (name + "self_attn.o_proj.weight", *layer(t["attprojw"], l)),
                    (name + "mlp.gate_proj.weight", *layer(t["fc2w"], l)),
                    (name + "mlp.up_proj.weight", *layer(t["fcw"], l)),
                    (name + "mlp.down_proj.weight", *layer(t["fcprojw"], l)),
                    (name + "input_layernorm.weight", *layer(t["ln1w"], l)),
                    (name + "post_attention_layernorm.weight", *layer(t["ln2w"], l))]
    entries.append(("model.norm.weight", *t["lnfw"]))
    if args.tie:
        if t["wlmhead"][1] != t["wte"][1]:
            sys.exit("--tie: the checkpoint's wlmhead differs from wte")
    else:
        entries.append(("lm_head.weight", *t["wlmhead"]))
    scaling = None
    if config["scaled"]:
        scaling = {"factor": 8.0, "high_freq_factor": 4.0, "low_freq_factor": 1.0,
                   "original_max_position_embeddings": 8192, "rope_type": "llama3"}
    return entries, {"architectures": ["LlamaForCausalLM"], "attention_bias": False, "attention_dropout": 0.0,
                     "bos_token_id": 0, "eos_token_id": 1, "head_dim": hd, "hidden_act": "silu", "hidden_size": C,
                     "initializer_range": 0.02, "intermediate_size": H, "max_position_embeddings": config["maxT"],
                     "mlp_bias": False, "model_type": "llama", "num_attention_heads": NH, "num_hidden_layers": L,
                     "num_key_value_heads": KV, "pretraining_tp": 1, "rms_norm_eps": config["eps"],
                     "rope_scaling": scaling, "rope_theta": config["theta"], "tie_word_embeddings": args.tie,
                     "torch_dtype": args.dtype, "transformers_version": "4.46.0", "use_cache": True, "vocab_size": V}


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("model")
    parser.add_argument("out")
    parser.add_argument("--dtype", default="float32", choices=["float32", "bfloat16", "float16"])
    parser.add_argument("--shard_bytes", type=int, default=0)
    parser.add_argument("--no_prefix", action="store_true")
    parser.add_argument("--buffers", action="store_true")
    parser.add_argument("--tie", action="store_true")
    args = parser.parse_args()
    with open(args.model, "rb") as f:
        data = f.read()
    header = struct.unpack_from("<256i", data, 0)
    if header[1] != 3:
        sys.exit(f"{args.model}: not a float32 checkpoint")
    if header[0] == 20240326:
        entries, hf_config = gpt2_directory(args, *read_llmc_gpt2(args.model, data, header))
    elif header[0] == 20240803:
        entries, hf_config = llama3_directory(args, *read_llmc_llama3(args.model, data, header))
    else:
        sys.exit(f"{args.model}: magic {header[0]} is neither GPT-2's nor LLaMA-3's")

    os.makedirs(args.out, exist_ok=True)
    itemsize = 4 if args.dtype == "float32" else 2
    if args.shard_bytes <= 0:
        write_safetensors(os.path.join(args.out, "model.safetensors"), entries, args.dtype)
    else:
        shards, size = [[]], 0
        for entry in entries:  # in state-dict order, as transformers shards
            nbytes = len(entry[2]) * itemsize
            if shards[-1] and size + nbytes > args.shard_bytes:
                shards.append([])
                size = 0
            shards[-1].append(entry)
            size += nbytes
        weight_map = {}
        for k, shard in enumerate(shards):
            file = f"model-{k + 1:05d}-of-{len(shards):05d}.safetensors"
            write_safetensors(os.path.join(args.out, file), shard, args.dtype)
            weight_map.update({name: file for name, _, _ in shard})
        total = sum(len(e[2]) * itemsize for e in entries)
        with open(os.path.join(args.out, "model.safetensors.index.json"), "w") as f:
            json.dump({"metadata": {"total_size": total}, "weight_map": weight_map}, f, indent=2)
    with open(os.path.join(args.out, "config.json"), "w") as f:
        json.dump(hf_config, f, indent=2)


if __name__ == "__main__":
    main()
