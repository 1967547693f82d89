#!/usr/bin/env python3
"""Writes core/src/tokenizer/unicode_compat.inc: where Hugging Face tokenizers' character
classes and mappings differ from utf8proc's.

The Rust library takes "control" (Cc/Cf/Co/Cs), punctuation (P*) and non-spacing marks (Mn)
from the `unicode_categories` crate and normalization from `unicode-normalization-alignments`,
whose tables are of an older Unicode version than utf8proc's (characters assigned since are in
none of those classes there, have no decomposition and combining class 0), while regex's \w,
char::is_numeric and char::to_lowercase are of a newer one. This asks the oracle (the `tokenizers` Python package, a pinned version) about every
code point and writes the differences as ranges; the classes themselves still come from
utf8proc. Run it again when the pinned `tokenizers` or utf8proc changes:

    PY="$(python3 tools/oracle/oracle_venv.py python)"   # the oracle's venv: tools/oracle/requirements.txt
    "$PY" tools/tokenizer/unicode_compat.py > core/src/tokenizer/unicode_compat.inc
"""
import ctypes
import ctypes.util

import tokenizers
from tokenizers import normalizers, pre_tokenizers

u = ctypes.CDLL(ctypes.util.find_library("utf8proc") or "libutf8proc.so.2")
NAMES = "Cn Lu Ll Lt Lm Lo Mn Mc Me Nd Nl No Pc Pd Ps Pe Pi Pf Po Sm Sc Sk So Zs Zl Zp Cc Cf Cs Co".split()
ASCII_PUNCT = set(map(ord, "!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"))
CODEPOINTS = [c for c in range(0x110000) if not 0xD800 <= c <= 0xDFFF]


def cat(c):
    return NAMES[u.utf8proc_category(c)]


def no_decomposition(c):
    buf = (ctypes.c_int32 * 8)()
    last = ctypes.c_int(0)
    n = u.utf8proc_decompose_char(c, buf, 8, 1 << 3 | 1 << 1, ctypes.byref(last))  # DECOMPOSE|STABLE
    return n == 1 and buf[0] == c


def kept_by_nfd(c, nfd=normalizers.NFD()):
    """The oracle's NFD leaves c as it is (so BertNormalizer's accent filter sees c itself)."""
    return nfd.normalize_str(chr(c)) == chr(c)


def hf_sets():
    clean = normalizers.BertNormalizer(clean_text=True, handle_chinese_chars=False, strip_accents=False, lowercase=False)
    strip = normalizers.BertNormalizer(clean_text=False, handle_chinese_chars=False, strip_accents=True, lowercase=False)
    pre = pre_tokenizers.BertPreTokenizer()
    marks = normalizers.StripAccents()
    ctl, punc, mn, mark = set(), set(), set(), set()
    for c in CODEPOINTS:
        s = "a" + chr(c) + "b"
        if c not in (0, 9, 10, 13, 0xFFFD) and clean.normalize_str(s) == "ab":
            ctl.add(c)
        if len(pre.pre_tokenize_str(s)) == 3:
            punc.add(c)
        if kept_by_nfd(c) and strip.normalize_str("a" + chr(c)) == "a":
            mn.add(c)
        if marks.normalize_str("a" + chr(c)) == "a":
            mark.add(c)
    return ctl, punc, mn, mark


def utf8proc_str(fn, s):
    f = getattr(u, fn)
    f.restype = ctypes.c_void_p
    p = f(s.encode())
    r = ctypes.string_at(p).decode()
    libc.free(p)
    return r


libc = ctypes.CDLL(None)
libc.free.argtypes = [ctypes.c_void_p]
u.utf8proc_tolower.restype = ctypes.c_int32


def other_sets():
    """\w, numeric, lowercase, decomposition and combining-class differences."""
    ws = pre_tokenizers.Whitespace()
    dg = pre_tokenizers.Digits(individual_digits=True)
    lo = normalizers.Lowercase()
    nfd, nfkd = normalizers.NFD(), normalizers.NFKD()
    word_add, word_not, num_add, num_not, nfd_keep, nfkd_canon, ccc_zero = (set() for _ in range(7))
    lower = {}
    for c in CODEPOINTS:
        ch = chr(c)
        r = ws.pre_tokenize_str("a" + ch)
        hw = len(r) == 1 and r[0][0] == "a" + ch
        mw = cat(c)[0] == "L" or cat(c) in ("Mn", "Mc", "Me", "Nd", "Nl", "Pc") or c in (0x200C, 0x200D)
        (word_add if hw and not mw else word_not if mw and not hw else set()).add(c)
        hn = len(dg.pre_tokenize_str("a" + ch)) == 2
        mn = cat(c) in ("Nd", "Nl", "No")
        (num_add if hn and not mn else num_not if mn and not hn else set()).add(c)
        hl = lo.normalize_str(ch)
        ml = "i\u0307" if c == 0x130 else chr(u.utf8proc_tolower(c))
        if hl != ml:
            assert len(hl) == 1, hex(c)
            lower[c] = ord(hl)
        if c < 0x80:
            continue
        canon = utf8proc_str("utf8proc_NFD", ch)
        if nfd.normalize_str(ch) != canon:
            assert nfd.normalize_str(ch) == ch, hex(c)
            nfd_keep.add(c)
        h = nfkd.normalize_str(ch)
        if h != utf8proc_str("utf8proc_NFKD", ch):
            assert h == canon or h == ch, hex(c)
            nfkd_canon.add(c)
        if c >= 0x300 and nfd.normalize_str("a" + ch + "\u0334") != utf8proc_str("utf8proc_NFD", "a" + ch + "\u0334"):
            ccc_zero.add(c)
    return word_add, word_not, num_add, num_not, lower, nfd_keep, nfkd_canon, ccc_zero


def ranges(s):
    out = []
    for c in sorted(s):
        if out and out[-1][1] == c - 1:
            out[-1][1] = c
        else:
            out.append([c, c])
    return out


def emit(name, s):
    print(f"static const uint32_t {name}[][2] = {{")
    rs = ranges(s) or [[0x110000, 0x110000]]
    for i in range(0, len(rs), 4):
        print("    " + " ".join(f"{{0x{a:X}, 0x{b:X}}}," for a, b in rs[i:i + 4]))
    print("};")


def main():
    ctl, punc, mn, mark = hf_sets()
    mine_ctl = {c for c in CODEPOINTS if cat(c) in ("Cc", "Cf", "Co", "Cs") and c not in (0, 9, 10, 13)}
    mine_punc = {c for c in CODEPOINTS if cat(c).startswith("P")} | ASCII_PUNCT
    mine_mn = {c for c in CODEPOINTS if kept_by_nfd(c) and cat(c) == "Mn"}
    mine_mark = {c for c in CODEPOINTS if cat(c) in ("Mn", "Mc", "Me")}
    print(f"/* Generated by tools/tokenizer/unicode_compat.py from tokenizers {tokenizers.__version__}: do not edit.")
    print(" * Code points whose class in Hugging Face tokenizers (older Unicode tables) differs from")
    print(" * utf8proc's category: *_add are in the class there but not here, *_not the reverse. */")
    for name, hf, mine in (("ctl", ctl, mine_ctl), ("punc", punc, mine_punc), ("mn", mn, mine_mn), ("mark", mark, mine_mark)):
        emit(f"tok_{name}_add", hf - mine)
        emit(f"tok_{name}_not", mine - hf)
    word_add, word_not, num_add, num_not, lower, nfd_keep, nfkd_canon, ccc_zero = other_sets()
    emit("tok_word_add", word_add)
    emit("tok_word_not", word_not)
    emit("tok_num_add", num_add)
    emit("tok_num_not", num_not)
    emit("tok_nfd_keep", nfd_keep)      # not decomposed there
    emit("tok_nfkd_canon", nfkd_canon)  # only canonically decomposed there (or not at all)
    emit("tok_ccc_zero", ccc_zero)      # combining class 0 there
    print("static const uint32_t tok_lower_map[][2] = {")
    items = sorted(lower.items()) or [(0x110000, 0x110000)]
    for i in range(0, len(items), 4):
        print("    " + " ".join(f"{{0x{a:X}, 0x{b:X}}}," for a, b in items[i:i + 4]))
    print("};")


if __name__ == "__main__":
    main()
