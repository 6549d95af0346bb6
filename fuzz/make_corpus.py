#!/usr/bin/env python3
"""Writes the seed corpora of the fuzz targets (fuzz/corpus/<target>/) from the formats in
docs/formats.md: small valid files and near-misses. Run from anywhere; it replaces those
folders except corpus/safetensors (kept as it was written). Inputs of targets that read
several files are pieces as fuzz_input.h splits them: a 4-byte little-endian length and that
many bytes per piece but the last."""
import json, os, shutil, struct

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")


def header(*fields):
    h = [0] * 256
    for i, v in enumerate(fields):
        h[i] = v
    return struct.pack("<256i", *h)


def f32_bits(x):
    return struct.unpack("<i", struct.pack("<f", x))[0]


def floats(n, scale=0.01):
    return struct.pack(f"<{n}f", *[(i % 7 - 3) * scale for i in range(n)])


def pieces(*parts):
    out = b""
    for p in parts[:-1]:
        out += struct.pack("<I", len(p)) + p
    return out + parts[-1]


def write(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def reset(target):
    shutil.rmtree(os.path.join(ROOT, target), ignore_errors=True)


# ---- llm.c checkpoints ----
def gpt2(maxT, V, L, NH, C, Vp, version=3):
    n = Vp * C + maxT * C + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C) + 2 * C
    width = 4 if version == 3 else 2
    return header(20240326, version, maxT, V, L, NH, C, Vp) + (floats(n) if width == 4 else b"\x80\x3f" * n)


def llama3(maxT, V, L, NH, KV, C, mult=0.0, multiple_of=4, version=3):
    hd = C // NH
    H = (2 * 4 * C) // 3
    if mult > 0:
        H = int(mult * H + 0.5)
    H = (H + multiple_of - 1) // multiple_of * multiple_of
    n = V * C + L * C + L * (NH + 2 * KV) * hd * C + L * C * C + L * C + 2 * L * H * C + L * C * H + C + V * C
    h = header(20240803, version, maxT, V, L, NH, KV, C, f32_bits(mult), multiple_of, f32_bits(1e-5),
               f32_bits(500000.0), 0, 4, 3, 2)
    return h + (floats(n) if version == 3 else b"\x80\x3f" * n)


reset("llmc_checkpoint")
write("llmc_checkpoint", "valid_gpt2_f32", gpt2(4, 5, 1, 2, 4, 8))
write("llmc_checkpoint", "valid_gpt2_bf16", gpt2(4, 5, 2, 1, 2, 5, version=5))
write("llmc_checkpoint", "invalid_gpt2_truncated", gpt2(4, 5, 1, 2, 4, 8)[:-3])
write("llmc_checkpoint", "invalid_gpt2_heads", gpt2(4, 5, 1, 3, 4, 8))
write("llmc_checkpoint", "valid_llama3_f32", llama3(4, 6, 1, 2, 1, 4))
write("llmc_checkpoint", "valid_llama3_bf16_multiplier", llama3(4, 6, 1, 2, 2, 4, mult=1.3, version=5))
write("llmc_checkpoint", "invalid_llama3_kv_heads", llama3(4, 6, 1, 2, 3, 4))
write("llmc_checkpoint", "invalid_magic", header(20240520, 1, 3) + b"\x01\x00" * 3)

# ---- token files ----
reset("llmc_tokens")
write("llmc_tokens", "valid_gpt2", header(20240520, 1, 5) + struct.pack("<5H", 50256, 1, 2, 65535, 0))
write("llmc_tokens", "valid_llama3", header(20240801, 7, 3) + struct.pack("<3I", 128000, 7, 4294967295))
write("llmc_tokens", "invalid_count", header(20240520, 1, 6) + struct.pack("<5H", 1, 2, 3, 4, 5))
write("llmc_tokens", "invalid_zero_tokens", header(20240520, 1, 0))
write("llmc_tokens", "invalid_short_header", header(20240520, 1, 5)[:100])

# ---- tokenizer files ----
reset("llmc_tokenizer")
toks = [b"a", b"b", b" the", b"\xe2\x82", b"<|endoftext|>"]
body = b"".join(bytes([len(t)]) + t for t in toks)
write("llmc_tokenizer", "valid_v2", header(20240328, 2, len(toks), 4) + body)
write("llmc_tokenizer", "valid_v1", header(20240328, 1, len(toks)) + body)
write("llmc_tokenizer", "invalid_eot", header(20240328, 2, len(toks), 5) + body)
write("llmc_tokenizer", "invalid_empty_token", header(20240328, 1, 2) + b"\x01a\x00")
write("llmc_tokenizer", "invalid_truncated", header(20240328, 1, len(toks)) + body[:-2])


# ---- training checkpoints: manifest.json + state-0-0.safetensors ----
def safetensors(tensors, metadata=None):
    head, buf = {}, b""
    if metadata:
        head["__metadata__"] = metadata
    for name, (dtype, shape, data) in sorted(tensors.items()):
        head[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(buf), len(buf) + len(data)]}
        buf += data
    text = json.dumps(head, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + buf


def manifest(tensors_bytes, parts, step=3, **override):
    m = {"format": "infini.checkpoint", "version": 1, "step": step, "tensors": "state-0-0.safetensors",
         "tensors_bytes": tensors_bytes, "parts": parts, "metadata": {"config": "d2"}}
    m.update(override)
    return json.dumps(m, indent=1).encode()


reset("checkpoint")
state = safetensors({"model/fc.weight": ("F32", [2, 2], floats(4)), "model/fc.bias": ("F32", [2], floats(2)),
                     "optimizer/step": ("I64", [], struct.pack("<q", 3)),
                     "rng/seed": ("I64", [], struct.pack("<q", 42))})
write("checkpoint", "valid", pieces(manifest(len(state), ["model", "optimizer", "rng"]), state))
write("checkpoint", "valid_empty_part", pieces(manifest(len(state), ["model", "optimizer", "rng", "scaler"]), state))
write("checkpoint", "invalid_bytes", pieces(manifest(len(state) + 1, ["model", "optimizer", "rng"]), state))
write("checkpoint", "invalid_unlisted_part", pieces(manifest(len(state), ["model", "rng"]), state))
write("checkpoint", "invalid_version", pieces(manifest(len(state), ["model", "optimizer", "rng"], version=2), state))
write("checkpoint", "invalid_tensors_name",
      pieces(manifest(len(state), ["model", "optimizer", "rng"], tensors="../state-0-0.safetensors"), state))

# ---- distributed checkpoints: checkpoint.json + shard-0-0-0.safetensors ----
def dcp_manifest(shard_bytes, tensors, **override):
    m = {"format": "infini.distributed_checkpoint", "version": 1, "step": 2, "world_size": 1,
         "metadata": {"layout": "DP=1 TP=1 PP=1"},
         "files": [{"name": "shard-0-0-0.safetensors", "bytes": shard_bytes, "rank": 0}], "tensors": tensors}
    m.update(override)
    return json.dumps(m, indent=1).encode()


def chunk(offsets, sizes, begin, end, name):
    return {"offsets": offsets, "sizes": sizes, "begin": begin, "end": end, "file": 0, "name": name}


reset("distributed_checkpoint")
shard = safetensors({"w#0": ("F32", [4], floats(4)), "w#1": ("F32", [2], floats(2)),
                     "s#0": ("I64", [1], struct.pack("<q", 3))})
# w (2 x 3): rows 0-1 of columns 0-1 as one chunk, column 2 as another; s: a 0-d count.
w = {"dtype": "float32", "shape": [2, 3], "chunks": [chunk([0, 0], [2, 2], 0, 4, "w#0"), chunk([0, 2], [2, 1], 0, 2, "w#1")]}
s = {"dtype": "int64", "shape": [], "chunks": [chunk([], [], 0, 1, "s#0")]}
write("distributed_checkpoint", "valid", pieces(dcp_manifest(len(shard), {"w": w, "s": s}), shard))
# a flat range: elements 1-4 of the 2 x 2 box, then element 0 and column 2
w_flat = {"dtype": "float32", "shape": [2, 3],
          "chunks": [chunk([0, 0], [2, 2], 1, 4, "w#0"), chunk([0, 0], [1, 1], 0, 1, "w#1"), chunk([0, 2], [2, 1], 0, 2, "w#1")]}
write("distributed_checkpoint", "invalid_flat_sizes", pieces(dcp_manifest(len(shard), {"w": w_flat, "s": s}), shard))
write("distributed_checkpoint", "invalid_bytes", pieces(dcp_manifest(len(shard) + 1, {"w": w, "s": s}), shard))
w_overlap = {"dtype": "float32", "shape": [2, 3],
             "chunks": [chunk([0, 0], [2, 2], 0, 4, "w#0"), chunk([0, 1], [2, 1], 0, 2, "w#1")]}
write("distributed_checkpoint", "invalid_overlap", pieces(dcp_manifest(len(shard), {"w": w_overlap, "s": s}), shard))
w_outside = {"dtype": "float32", "shape": [2, 3],
             "chunks": [chunk([0, 0], [2, 2], 0, 4, "w#0"), chunk([0, 3], [2, 1], 0, 2, "w#1")]}
write("distributed_checkpoint", "invalid_outside", pieces(dcp_manifest(len(shard), {"w": w_outside, "s": s}), shard))
write("distributed_checkpoint", "invalid_dtype",
      pieces(dcp_manifest(len(shard), {"w": dict(w, dtype="float64"), "s": s}), shard))
write("distributed_checkpoint", "invalid_file_name",
      pieces(dcp_manifest(len(shard), {"w": w, "s": s},
                          files=[{"name": "../shard-0-0-0.safetensors", "bytes": len(shard), "rank": 0}]), shard))

# ---- GPT-2 BPE files: encoder.json + vocab.bpe + a text ----
def byte_chars():
    bs = list(range(ord("!"), ord("~") + 1)) + list(range(ord("\xa1"), ord("\xac") + 1)) + list(range(ord("\xae"), ord("\xff") + 1))
    cs, n = bs[:], 0
    for b in range(256):
        if b not in bs:
            bs.append(b)
            cs.append(256 + n)
            n += 1
    return {b: chr(c) for b, c in zip(bs, cs)}


reset("gpt2_bpe")
chars = byte_chars()
encoder = {chars[b]: i for i, b in enumerate(range(256))}
merges = [("h", "e"), ("l", "l"), ("he", "ll"), (chars[32], "w")]
for a, b in merges:
    encoder[a + b] = len(encoder)
encoder["<|endoftext|>"] = len(encoder)
enc_text = json.dumps(encoder, ensure_ascii=False).encode()
vocab = ("#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)).encode()
write("gpt2_bpe", "valid_hello", pieces(enc_text, vocab, "hello world<|endoftext|> 123 é 🙂  \n".encode()))
write("gpt2_bpe", "valid_no_merges", pieces(enc_text, b"#version: 0.2\n", b"hell"))
write("gpt2_bpe", "invalid_merge_not_a_token", pieces(enc_text, vocab + b"w o\n", b"wo"))
del encoder["<|endoftext|>"]
write("gpt2_bpe", "invalid_no_eot", pieces(json.dumps(encoder, ensure_ascii=False).encode(), vocab, b"x"))

# ---- --profile's trace files: two ranks' files to merge ----
reset("trace_merge")
HEADER = b'{"displayTimeUnit": "ms", "traceEvents": [\n'
FOOTER = b"\n]}\n"


def trace(pid, events):
    meta = b'{"ph": "M", "name": "process_name", "pid": %d, "args": {"name": "rank %d"}}' % (pid, pid)
    return HEADER + b",\n".join([meta] + events) + FOOTER


op = b'{"ph": "X", "name": "matmul", "cat": "op", "pid": 0, "tid": 0, "ts": 10, "dur": 5}'
comm = b'{"ph": "b", "name": "all_reduce", "cat": "comm", "pid": 1, "tid": 0, "ts": 12, "id": "1.7", "args": {"bytes": 64}}'
write("trace_merge", "valid_two_ranks", pieces(trace(0, [op]), trace(1, [comm])))
write("trace_merge", "valid_metadata_only", pieces(trace(0, []), trace(1, [])))
write("trace_merge", "invalid_overlap", pieces(trace(0, [op]), HEADER + b"]}\n"))
write("trace_merge", "invalid_junk", pieces(trace(0, [op]), HEADER + b"junk" + FOOTER))
# Found by trace_merge_fuzz: a NUL byte ended the JSON check's input, "]" passed as no events.
write("trace_merge", "invalid_nul", pieces(trace(0, [op]), HEADER + b"]\0\0\0{\"ph\": 1}" + FOOTER))
# Found by trace_merge_fuzz: no events at all were merged as ",\n" + nothing, a trailing comma.
write("trace_merge", "invalid_empty_events", pieces(trace(0, [op]), HEADER + FOOTER))

# ---- the trainers' command line: arguments separated by NUL bytes ----
reset("cli")
for name, args in {
    "valid_short": ["--batch_size", "2", "--sequence_length", "16", "--num_iteration", "3"],
    "valid_many": ["--learning_rate", "3e-4", "--lr_schedule", "constant", "--warmup_steps", "5", "--grad_clip", "0",
                   "--zero_stage", "1", "--pipeline_parallel", "2", "--pp_schedule", "zb-h1", "--pipeline_blocks", "1,1",
                   "--activation_checkpointing", "selective", "--max_skipped_steps", "0"],
    "invalid_dtype": ["--dtype", "float16"],
    "invalid_device": ["--device", "cuda", "--tensor_parallel", "2"],
    "invalid_number": ["--batch_size", "two"],
}.items():
    write("cli", name, b"\0".join(a.encode() for a in ["--input_bin", "train.bin"] + args))
