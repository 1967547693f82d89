#!/usr/bin/env python3
"""Writes the fuzz targets' seed corpora, tests/fuzz/corpus/<target>/ (docs/fuzzing.md).

    python3 tests/fuzz/make_seeds.py          # rewrites every corpus folder

Deterministic (gzip without a timestamp), small (a few hundred bytes each), and valid unless a
name says otherwise, so the fuzzers start from inputs that reach deep into each reader. The
multi-part layouts (FUZZ_SEP, the checkpoint's file order, plugin_desc's byte layout) are the
ones the targets document in their opening comments. Regressions are not made here: they are
the exact inputs that once crashed a target (tests/fuzz/regressions/)."""
import base64
import gzip
import json
import math
import os
import shutil
import struct

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
CORPUS = os.path.join(ROOT, "tests", "fuzz", "corpus")
SEP = b"\n--8<--\n"


def write(target, name, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data.encode() if isinstance(data, str) else data)


def gz(data):
    return gzip.compress(data, mtime=0)


def parts(*p):
    return SEP.join(x.encode() if isinstance(x, str) else x for x in p)


# ---- config and override ----

def configs():
    for folder in ("configs", "tools/bench/configs", "docs/examples/local_sgd", "docs/examples/npy_dataset"):
        for name in sorted(os.listdir(os.path.join(ROOT, folder))):
            if name.endswith(".yaml"):
                with open(os.path.join(ROOT, folder, name), "rb") as f:
                    write("config", name, f.read())
    write("config", "empty.yaml", "")
    write("config", "document_only.yaml", "---\n")
    write("config", "flow.yaml", "{run: {name: flow, seed: 3}, model: {name: mlp, params: {layers: []}}, "
                                 "data: {name: synthetic, batch_size: 8}}\n")
    write("config", "all_keys.yaml", """run: {name: all, seed: 0, output_dir: "runs/x"}
model:
  name: mlp
  params: {layers: [4, 4], dropout: 0.0}
data:
  name: csv
  params: {path: a.csv}
  val_params: {path: b.csv}
  batch_size: 16
  shuffle: yes
  drop_last: off
  prefetch: 0
  workers: 0
  val_fraction: .25
optimizer: {name: sgd, lr: 0.1, weight_decay: 0, momentum: 0.9, dampening: 0, nesterov: true, eps: 1e-8}
scheduler: {name: cosine, warmup_steps: 10, step_size: 5, gamma: 0.5, min_lr: 1e-6}
trainer:
  max_epochs: 3
  max_steps: -1
  grad_accum: 2
  grad_clip: 1.0
  log_every: 1
  loggers: [jsonl, tensorboard, csv]
  val_every_n_steps: 0
  limit_train_batches: 0.5
  limit_val_batches: 3
  val_check_interval: 0.25
  fast_dev_run: false
  threads: 1
  strategy: auto
  accelerator: cpu
  devices: -1
  precision: fp32
  progress: lines
  max_restarts: 0
strategy: {}
checkpoint: {every_n_epochs: 1, every_n_steps: 0, keep_last: 2, resume: never}
plugins: [../plugins]
""")
    write("config", "devices_list.yaml", "trainer:\n  devices: [0, 2, 3]\noptimizer:\n  betas: [0.8, 0.99]\n")
    write("config", "scalars.yaml", "run:\n  name: \"tab\\there \\u0085 \\x01\"\n  output_dir: 'it''s'\n"
                                    "model:\n  name: |\n    block\n    literal\n  params: ~\n"
                                    "data: {name: null, batch_size: \"64\"}\n")
    write("config", "monitor.yaml", "model: {name: mlp, init_from: runs/x/0/best}\n"
                                    "trainer: {early_stopping: {monitor: val_loss, mode: min, patience: 2, min_delta: 0.01}}\n"
                                    "checkpoint: {monitor: val_accuracy, save_top_k: -1, save_last: true}\n")
    write("config", "unknown_key.yaml", "trainer:\n  max_epoch: 3\n")
    write("config", "bad_range.yaml", "data:\n  batch_size: 0\n")
    write("config", "anchor.yaml", "run: &a {name: x}\nmodel: *a\n")
    write("config", "nested.yaml", "strategy:\n" + "".join("  " * i + "  k%d:\n" % i for i in range(20)) + "  " * 21 + "v\n")


def overrides():
    write("override", "typical", "trainer.max_epochs=3\noptimizer.lr=1e-3\ntrainer.devices=2\n")
    write("override", "structures", "optimizer.betas=[0.9, 0.99]\nmodel.params={layers: [8, 8], dropout: 0}\n"
                                    "data.params.label='a: b'\nstrategy.stage=3\ntrainer.devices=[1]\n")
    write("override", "new_sections", "scheduler.name=step\nscheduler.gamma=0.5\nrun.name=\"quoted name\"\n"
                                      "checkpoint.keep_last=1\nplugins=[a, b]\n")
    write("override", "empty_values", "run.name=\ntrainer.devices=~\ndata.params.path=''\n")
    write("override", "refused", "trainer.max_epochs\n=3\na..b=1\ntrainer.\ntrainer.devices.x=1\n"
                                 "model.params.layers[0]=3\nrun.name=- a\nrun.name=a: b\nrun.name=[\n")


# ---- datasets ----

def idx():
    images = struct.pack(">IIII", 0x803, 3, 2, 2) + bytes([0, 255, 128, 7, 1, 2, 3, 4, 250, 251, 252, 253])
    labels = struct.pack(">II", 0x801, 3) + bytes([1, 0, 9])
    write("idx", "plain", parts("classes=10", images, labels))
    write("idx", "gzip_flat_range", parts("flatten=true normalize=false first=1 count=2", gz(images), gz(labels)))
    write("idx", "val_split", parts("classes=10 mean=0.5 std=0.25 split=val", images, gz(labels)))
    write("idx", "bad_label", parts("classes=5", images, labels))
    write("idx", "truncated", parts("", images[:-3], labels))


def csv():
    table = "x1,x2,label\n1,2,0\n3.5,-4,1\n\n5,6e2,2\n7,8,1\n"
    write("csv", "header_standard", parts("normalize=standard", table))
    write("csv", "no_header_minmax", parts("header=false label=2 normalize=minmax split=val val_fraction=0.5",
                                           "1,2,0\n3,4,1\n5,6,1\n7,8,0\r\n"))
    write("csv", "regress_val_path", parts("task=regress normalize=none label=y", "a,b,y\n1,2,0.5\n3,4,-1.5\n",
                                           "a,b,y\n5,6,2.25\n"))
    write("csv", "val_path_unlabelled", parts("split=val labels_optional=1", "a,b,label\n1,2,0\n3,4,1\n", "a,b\n5,6\n7,8\n"))
    write("csv", "gzip", parts("label=label", gz(table.encode())))
    write("csv", "bad_cell", parts("", "a,label\n1,0\nx,1\n"))


def text():
    prose = "To be, or not to be, that is the question:\nWhether 'tis nobler in the mind to suffer\n"
    write("text", "lm", parts("mode=lm seq_len=8 stride=4", prose))
    write("text", "lm_val_gzip", parts("mode=lm seq_len=4 split=val val_fraction=0.5", gz(prose.encode())))
    write("text", "classify", parts("mode=classify seq_len=12", "pos\tgood movie\nneg\tbad film\r\n\npos\tgreat\n"
                                    "neutral\tit was a film of some length\n"))
    write("text", "pairs", parts("mode=pairs seq_len=6 split=val val_fraction=0.5",
                                 "1\twhat is yaml\ta config format\n0\twhat is yaml\ta kind of tea\n"
                                 "0.5\tq\tp\n"))
    write("text", "classify_no_tab", parts("mode=classify", "no tab here\n"))


# ---- safetensors and checkpoints ----

DTYPES = {"F32": ("<f", 4), "F64": ("<d", 8), "I32": ("<i", 4), "I64": ("<q", 8), "U8": ("<B", 1),
          "F16": ("<e", 2), "BF16": ("<H", 2)}


def safetensors(tensors, meta=None):
    """tensors: list of (name, dtype, shape, values); data in the given order, header padded to 8."""
    header, data = {}, b""
    for name, dtype, shape, values in tensors:
        fmt, size = DTYPES[dtype]
        blob = b"".join(struct.pack(fmt, v) for v in values)
        assert len(blob) == size * math.prod(shape)
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(blob)]}
        data += blob
    if meta is not None:
        header["__metadata__"] = meta
    h = json.dumps(header, separators=(",", ":")).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + data


def f32(n, scale=0.25):
    return [scale * (i - n / 2) for i in range(n)]


def safetensors_seeds():
    write("safetensors", "model", safetensors([("fc.weight", "F32", [2, 3], f32(6)), ("fc.bias", "F32", [2], f32(2))],
                                              {"format": "pt", "trainer_kind": "model"}))
    write("safetensors", "dtypes", safetensors([("d", "F64", [2], [1.5, -2]), ("q", "I64", [1], [-(2 ** 40)]),
                                                ("f", "F32", [1, 1], [3.0]), ("i", "I32", [2], [7, -7]),
                                                ("h", "F16", [2], [0.5, 65504]), ("b", "BF16", [1], [0x3f80]),
                                                ("u", "U8", [3], [0, 128, 255])]))
    write("safetensors", "scalar_and_empty", safetensors([("s", "F32", [], [2.0]), ("e", "F32", [0, 3], [])],
                                                         {"steps": "10"}))
    write("safetensors", "empty_header", safetensors([]))
    write("safetensors", "truncated", safetensors([("w", "F32", [4], f32(4))])[:-5])


NP_W, NP_B, NP_M = 12, 3, 4  # fc.weight (3, 4), fc.bias (3), buffer norm.mean (4): tests/fuzz/checkpoint.c
STATE = json.dumps({"epoch": 1, "step": 10, "batch_in_epoch": 2, "seed": "1", "config_hash": "0123456789abcdef",
                    "model": "mlp"}, indent=2)


def full_checkpoint(with_optim):
    model = safetensors([("fc.weight", "F32", [3, 4], f32(NP_W)), ("fc.bias", "F32", [3], f32(NP_B)),
                         ("norm.mean", "F32", [4], [1.0] * NP_M)], {"format": "pt", "trainer_kind": "model"})
    if not with_optim:
        return parts(STATE, model)
    optim = safetensors([("fc.weight.exp_avg", "F32", [3, 4], f32(NP_W, 0.01)),
                         ("fc.weight.exp_avg_sq", "F32", [3, 4], [0.001] * NP_W),
                         ("fc.bias.exp_avg", "F32", [3], f32(NP_B, 0.01)),
                         ("fc.bias.exp_avg_sq", "F32", [3], [0.002] * NP_B)],
                        {"format": "pt", "trainer_kind": "optimizer", "steps": "10"})
    return parts(STATE, model, optim)


def sharded_checkpoint(with_optim):
    states = ["exp_avg", "exp_avg_sq"] if with_optim else []
    files = ["shard-00000-of-00002.safetensors", "shard-00001-of-00002.safetensors"]
    index = {"format": "trainer-sharded", "version": 1, "world": 2, "files": files,
             "params": [{"name": "fc.weight", "shape": [3, 4]}, {"name": "fc.bias", "shape": [3]}],
             "buffers": [{"name": "norm.mean", "shape": [4]}]}
    if with_optim:
        index["optimizer"] = {"states": states, "steps": 10}

    def shard(rank, pieces, buffers):
        tensors, starts = [], {}
        for name, start, count in pieces:
            starts[name] = start
            tensors.append((name, "F32", [count], f32(count)))
            tensors += [("%s.%s" % (name, s), "F32", [count], [0.01] * count) for s in states]
        tensors += buffers
        return safetensors(tensors, {"trainer_kind": "shard", "rank": str(rank), "world": "2",
                                     "starts": json.dumps(starts, separators=(",", ":"), sort_keys=True)})

    s0 = shard(0, [("fc.weight", 0, 6), ("fc.bias", 0, 3)], [("norm.mean", "F32", [4], [1.0] * NP_M)])
    s1 = shard(1, [("fc.weight", 6, 6)], [])
    return parts(STATE, "", "", json.dumps(index, indent=1), s0, s1)


def checkpoint_seeds():
    write("checkpoint", "full_optim", full_checkpoint(True))
    write("checkpoint", "full_weights", full_checkpoint(False))
    write("checkpoint", "sharded_optim", sharded_checkpoint(True))
    write("checkpoint", "sharded_weights", sharded_checkpoint(False))
    write("checkpoint", "state_only", parts(STATE))


# ---- plugin descriptors (tests/fuzz/plugin_desc.c's byte layout) ----

def s(text):
    return b"\xff" if text is None else bytes([len(text)]) + text.encode()


def option(key, type_, default, doc, lo, hi, choices):
    # doubles: an index into fuzz_double's table (0 -> 0, 1 -> 1, 5 -> 10, 8 -> 65536, ...)
    return s(key) + bytes([type_]) + s(default) + s(doc) + bytes([lo, hi]) + s(choices)


def desc(kind, name, opts, ops_size=512, holes=0, words=""):
    b = bytes([0, 0, kind]) + s(name) + s("1.0") + s("fuzz") + bytes([len(opts)]) + b"".join(opts)
    return b + struct.pack(">II", ops_size << 1, holes) + words.encode()


def plugin_desc_seeds():
    opts = [option("hidden", 0, "128", "width", 1, 8, None), option("dropout", 1, "0.1", "p", 0, 1, None),
            option("bias", 2, "true", "b", 0, 0, None), option("path", 3, None, "file", 0, 0, None),
            option("act", 4, "relu", "f", 0, 0, "relu|gelu"), option("layers", 5, "[4, 8]", "w", 1, 8, None)]
    write("plugin_desc", "model", desc(1, "fuzz_model", opts, words="hidden=64\npath=a b.csv\nact=gelu\nlayers=[1,2]\n"))
    write("plugin_desc", "strategy", desc(3, "fuzz-strategy", opts[:2], words="dropout=0.5\n"))
    write("plugin_desc", "strategy_holes", desc(3, "holes", [], holes=0b100))
    write("plugin_desc", "dataset_short_ops", desc(2, "data", opts[3:5], ops_size=8, words="path=x\n"))
    write("plugin_desc", "bad_name", desc(4, "Bad Name!", []))
    write("plugin_desc", "bad_abi", bytes([1]) + struct.pack(">I", 99) + bytes([0, 1]) + s("x") + s(None) + s(None)
          + bytes([0]) + struct.pack(">II", 16, 0))


# ---- tokenizer ----

TOK_VOCAB = {"[PAD]": 0, "[UNK]": 1, "[CLS]": 2, "[SEP]": 3, "[MASK]": 4, "hello": 5, ",": 6, "world": 7,
             "!": 8, "un": 9, "##aff": 10, "##able": 11, "cafe": 12, "\u5317": 13, "\u4eac": 14, "1": 15}
TOK_ADDED = [{"id": i, "content": c, "single_word": False, "lstrip": False, "rstrip": False,
              "normalized": False, "special": True} for c, i in list(TOK_VOCAB.items())[:5]]


def tokenizer_json(normalizer, pre_tokenizer, post_processor, truncation=None, padding=None, added=TOK_ADDED):
    return json.dumps({"version": "1.0", "truncation": truncation, "padding": padding, "added_tokens": added,
                       "normalizer": normalizer, "pre_tokenizer": pre_tokenizer, "post_processor": post_processor,
                       "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": True},
                       "model": {"type": "WordPiece", "unk_token": "[UNK]", "continuing_subword_prefix": "##",
                                 "max_input_chars_per_word": 100, "vocab": TOK_VOCAB}}, ensure_ascii=False)


def tokenizer_seeds():
    bert_norm = {"type": "BertNormalizer", "clean_text": True, "handle_chinese_chars": True, "strip_accents": None,
                 "lowercase": True}
    bert = {"type": "BertProcessing", "sep": ["[SEP]", 3], "cls": ["[CLS]", 2]}
    template = {"type": "TemplateProcessing",
                "single": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                           {"SpecialToken": {"id": "[SEP]", "type_id": 0}}],
                "pair": [{"SpecialToken": {"id": "[CLS]", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                         {"SpecialToken": {"id": "[SEP]", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}},
                         {"SpecialToken": {"id": "[SEP]", "type_id": 1}}],
                "special_tokens": {"[CLS]": {"id": "[CLS]", "ids": [2], "tokens": ["[CLS]"]},
                                   "[SEP]": {"id": "[SEP]", "ids": [3], "tokens": ["[SEP]"]}}}
    write("tokenizer", "bert_uncased", parts(tokenizer_json(bert_norm, {"type": "BertPreTokenizer"}, bert),
                                             "Hello, World! Caf\u00e9 unaffable \u5317\u4eac [SEP] 1", "world"))
    write("tokenizer", "minilm_like", parts(tokenizer_json(
        bert_norm, {"type": "BertPreTokenizer"}, template,
        truncation={"max_length": 8, "strategy": "LongestFirst", "stride": 0},
        padding={"strategy": {"Fixed": 12}, "direction": "Right", "pad_to_multiple_of": None, "pad_id": 0,
                 "pad_type_id": 0, "pad_token": "[PAD]"}), "hello hello hello world", "un un aff"))
    write("tokenizer", "sequences", parts(tokenizer_json(
        {"type": "Sequence", "normalizers": [{"type": "NFKC"}, {"type": "Lowercase"}, {"type": "StripAccents"},
                                             {"type": "Replace", "pattern": {"String": "x"}, "content": "a"},
                                             {"type": "Strip", "strip_left": True, "strip_right": True},
                                             {"type": "Prepend", "prepend": "_"}]},
        {"type": "Sequence", "pretokenizers": [{"type": "Whitespace"}, {"type": "Digits", "individual_digits": True},
                                               {"type": "Punctuation", "behavior": "MergedWithPrevious"},
                                               {"type": "WhitespaceSplit"}]},
        {"type": "Sequence", "processors": [bert]},
        truncation={"max_length": 5, "strategy": "OnlySecond", "stride": 0, "direction": "Left"},
        padding={"strategy": "BatchLongest", "direction": "Left", "pad_to_multiple_of": 4, "pad_id": 0,
                 "pad_type_id": 1, "pad_token": "[PAD]"},
        added=TOK_ADDED + [{"id": 16, "content": "hello world", "single_word": True, "lstrip": True, "rstrip": True,
                            "normalized": True, "special": False}]),
        " \uff28ello world\u00a0 x12. \u1e9b\u0323 ", "\u0130 \ufb01 world"))
    # Byte-level BPE (GPT-2/RoBERTa shape) and a Llama-3-like Split + ByteLevel pipeline.
    g = "\u0120"
    bl_vocab = {c: i for i, c in enumerate(["h", "e", "l", "o", g, "w", "r", "d", "he", "ll", "hell", "hello", g + "w",
                                            "or", g + "wor", "!", "\u00c3", "\u0100", "<s>", "</s>", "<mask>"])}
    bl_merges = [["h", "e"], ["l", "l"], ["he", "ll"], ["hell", "o"], [g, "w"], ["o", "r"], [g + "w", "or"]]
    bl_added = [{"id": bl_vocab[c], "content": c, "single_word": False, "lstrip": c == "<mask>", "rstrip": False,
                 "normalized": False, "special": True} for c in ("<s>", "</s>", "<mask>")]
    bpe = {"type": "BPE", "dropout": None, "unk_token": None, "continuing_subword_prefix": None,
           "end_of_word_suffix": None, "fuse_unk": False, "byte_fallback": False, "ignore_merges": False,
           "vocab": bl_vocab, "merges": bl_merges}
    write("tokenizer", "bpe_bytelevel", parts(json.dumps({
        "version": "1.0", "truncation": None, "padding": None, "added_tokens": bl_added, "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 19], "cls": ["<s>", 18],
                           "trim_offsets": True, "add_prefix_space": True},
        "decoder": {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
        "model": bpe}, ensure_ascii=False), "hello  world! <mask> caf\u00e9 \U0001f389\u0000", "world"))
    llama = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
             r"|\s*[\r\n]+|\s+(?!\S)|\s+")
    write("tokenizer", "bpe_split", parts(json.dumps({
        "version": "1.0", "added_tokens": bl_added, "normalizer": None,
        "pre_tokenizer": {"type": "Sequence", "pretokenizers": [
            {"type": "Split", "pattern": {"Regex": llama}, "behavior": "Isolated", "invert": False},
            {"type": "Split", "pattern": {"String": "-"}, "behavior": "MergedWithNext", "invert": True},
            {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]},
        "post_processor": {"type": "Sequence", "processors": [
            {"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": False, "use_regex": True},
            {"type": "TemplateProcessing", "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                                                      {"Sequence": {"id": "A", "type_id": 0}}],
             "pair": [{"SpecialToken": {"id": "<s>", "type_id": 0}}, {"Sequence": {"id": "A", "type_id": 0}},
                      {"Sequence": {"id": "B", "type_id": 1}}],
             "special_tokens": {"<s>": {"id": "<s>", "ids": [18], "tokens": ["<s>"]}}}]},
        "decoder": {"type": "Sequence", "decoders": [{"type": "ByteLevel", "add_prefix_space": True, "trim_offsets": True, "use_regex": True},
                                                     {"type": "BPEDecoder", "suffix": "d"}]},
        "model": dict(bpe, ignore_merges=True, unk_token="!", fuse_unk=True, byte_fallback=True)},
        ensure_ascii=False), "He's 12345 well-known\r\n  hello\u180e\u0085x", "I'LL"))
    write("tokenizer", "bad_utf8", parts(tokenizer_json(bert_norm, {"type": "BertPreTokenizer"}, bert), b"ok \xff\xfe"))
    write("tokenizer", "unsupported", parts(json.dumps({"normalizer": {"type": "Nmt"}, "model": {"vocab": {}}}), "x"))
    write("tokenizer", "unigram_metaspace", parts(json.dumps({
        "added_tokens": [{"id": 0, "content": "<unk>", "single_word": False, "lstrip": False, "rstrip": False,
                          "normalized": False, "special": True},
                         {"id": 9, "content": "<mask>", "single_word": False, "lstrip": True, "rstrip": False,
                          "normalized": False, "special": True}],
        "normalizer": {"type": "Sequence", "normalizers": [
            {"type": "Precompiled", "precompiled_charsmap": tiny_charsmap()},
            {"type": "Replace", "pattern": {"Regex": " {2,}"}, "content": "\u2581"}]},
        "pre_tokenizer": {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "first", "split": True},
        "post_processor": {"type": "TemplateProcessing",
                           "single": [{"Sequence": {"id": "A", "type_id": 0}}],
                           "pair": [{"Sequence": {"id": "A", "type_id": 0}}, {"Sequence": {"id": "B", "type_id": 1}}],
                           "special_tokens": {}},
        "decoder": {"type": "Sequence", "decoders": [
            {"type": "Replace", "pattern": {"String": "\u2581"}, "content": " "}, {"type": "ByteFallback"},
            {"type": "Fuse"}, {"type": "Strip", "content": " ", "start": 1, "stop": 0},
            {"type": "Metaspace", "replacement": "\u2581", "prepend_scheme": "always"}]},
        "model": {"type": "Unigram", "unk_id": 0, "byte_fallback": True, "vocab": [
            ["<unk>", 0.0], ["\u2581", -2.0], ["a", -1.5], ["ab", -2.5], ["\u2581ab", -3.0], ["<0xE2>", -6.0],
            ["<0x98>", -6.0], ["<0x83>", -6.0], ["c", -4.0], ["<mask>", 0.0]]}}, ensure_ascii=False),
        "ab  abAB\u2603 c<mask>e\u0301", "\u2581ab"))


def tiny_charsmap():
    """A charsmap of "A" -> "a", "B" -> "" and "C" -> "cc" (the unit test's layout, tests/unit/tokenizer.c)."""
    a = [0] * 512
    a[0] = 0x100 << 10
    for k, (c, v) in enumerate((("A", 0), ("B", 2), ("C", 3))):
        pos = 0x100 ^ ord(c)
        a[pos] = (pos ^ (0x1A0 + k)) << 10 | 1 << 8 | ord(c)
        a[0x1A0 + k] = v
    raw = struct.pack("<I", 4 * len(a)) + struct.pack("<%dI" % len(a), *a) + b"a\0\0cc\0"
    return base64.b64encode(raw).decode()


def main():
    if os.path.isdir(CORPUS):
        shutil.rmtree(CORPUS)
    configs()
    overrides()
    idx()
    csv()
    text()
    safetensors_seeds()
    checkpoint_seeds()
    plugin_desc_seeds()
    tokenizer_seeds()


if __name__ == "__main__":
    main()
