#!/usr/bin/env python3
"""Writes tests/data/tokenizer_stress.txt: the tokenizer stress set, one text per line (UTF-8).

  tools/oracle/make_stress.py [OUT]      (default: tests/data/tokenizer_stress.txt)

Hand-written lines by theme (accents, CJK, emoji and ZWJ, combining marks, zero-width and
control characters, full-width forms, right-to-left text, ligatures, long words, whitespace
runs, empty lines, scripts, punctuation of every Unicode category...) plus lines generated from
code point lists. Deterministic: the output is committed and must not change between runs. No
line holds '\\n' or '\\r' (the CLI reads one text per line); tabs do, and the pair tests split
at them only in files of their own. Uses the standard library only (unicodedata for categories).
"""
import os
import sys
import unicodedata

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

LINES = [
    # --- accents, cased and uncased
    "Café, naïve, façade, jalapeño, résumé, coöperate, Zoë, Noël.",
    "CAFÉ NAÏVE FAÇADE JALAPEÑO RÉSUMÉ COÖPERATE ZOË NOËL",
    "Ångström Øresund Ærø Œuvre Straße STRASSE ẞ ß ﬀ",
    "Dvořák, Łódź, Kraków, Gdańsk, Škoda, Čapek, Žižek, Ďurovič",
    "İstanbul ısı IŞIK ığdır — Turkish dotted and dotless i",
    "ÀÁÂÃÄÅ àáâãäå ÈÉÊË èéêë ÌÍÎÏ ìíîï ÒÓÔÕÖ òóôõö ÙÚÛÜ ùúûü Ýÿý",
    "Ǆ ǅ ǆ Ǉ ǈ ǉ — titlecase digraphs",
    "Ελληνικά: Αθήνα, ΆΈΉΊΌΎΏ, ΐΰ, σοφός ΣΟΦΟΣ (final sigma)",
    "Русский текст: Ёлка, ёжик, ЙОД, Україна, Ґанок, Їжак",
    "Tiếng Việt có dấu: Nguyễn, Phước, Đặng, ườ, ữ, ỹ",
    "ﬁﬂ ﬃ ﬄ ﬅ ﬆ — Latin ligatures",
    "Ĳ ĳ Ŀ ŀ ŉ ſ — old letters and compatibility",
    # --- combining marks (decomposed forms), stacked marks, Zalgo
    "Cafe\u0301 nai\u0308ve fac\u0327ade jalapen\u0303o",
    "e\u0301\u0302\u0303\u0304\u0305\u0306\u0307\u0308 stacked combining marks",
    "Z\u0351\u0358a\u0364\u0361l\u0310g\u036eo\u0334 t\u0489e\u0488x\u0335t",
    "\u0301 leading combining acute with nothing before it",
    "A\u030a vs \u00c5 vs \u212b (ring above, precomposed, angstrom sign)",
    "ᄀ\u1161\u11a8 (conjoining jamo) vs 각 (precomposed)",
    "q\u0323\u0307 and q\u0307\u0323 (canonical reordering)",
    "\u05d1\u05bc\u05b8 \u0628\u0650\u0633\u0652\u0645\u0650 — Hebrew and Arabic points",
    # --- CJK
    "中文测试：北京欢迎你！我爱自然语言处理。",
    "日本語のテキスト：東京は晴れです。カタカナとひらがな。",
    "漢字かな交じり文、半角ｶﾀｶﾅ、全角カタカナ",
    "한국어 텍스트: 안녕하세요, 세계! 서울특별시",
    "𠀀𠀁𠀂 𪜀 𫝀 𫠠 𬺰 — CJK extension B to F",
    "㐀㐁㐂 䶵 — CJK extension A",
    "豈 更 車 賈 — CJK compatibility ideographs",
    "⺀ ⺁ ⼀ ⼁ ㇀ ㇁ — radicals and strokes",
    "mixed中文and英文words混合123数字",
    "〇一二三四五六七八九十百千万億",
    "「引用」『二重』【強調】〔括弧〕《書名》〈題〉",
    # --- emoji and ZWJ sequences
    "Emoji 😀😃😄😁 🙂 🙃 😉",
    "👨‍👩‍👧‍👦 family ZWJ sequence",
    "👩🏽‍💻 woman technologist medium skin tone",
    "🏳️‍🌈 rainbow flag 🏴‍☠️ pirate flag",
    "🇺🇸🇫🇷🇯🇵🇩🇪 regional indicator flags",
    "👍🏻👍🏼👍🏽👍🏾👍🏿 skin tone modifiers",
    "❤️ ❤ ♥️ ☺️ ☺ — variation selectors 15 and 16",
    "1️⃣ 2️⃣ #️⃣ *️⃣ keycaps",
    "🏴󠁧󠁢󠁳󠁣󠁴󠁿 tag sequence (Scotland)",
    "🧑‍🤝‍🧑🫶🏾🫠🪿 newer emoji",
    "text😀text😀text no spaces around emoji",
    # --- zero-width and format characters
    "zero\u200bwidth\u200bspace",
    "zero\u200cwidth\u200dnon-joiner and joiner",
    "word\u2060joiner and \ufeffBOM in the middle",
    "\ufeffleading BOM",
    "soft\u00adhyphen in\u00adside words",
    "invisible\u2062times and \u2063separator \u2064plus",
    "left\u200eto\u200fright marks \u202aembedding\u202c \u202boverride\u202c \u2066isolate\u2069",
    "Mongolian\u180evowel separator",
    "interlinear \ufff9annotation\ufffaanchor\ufffbterminator",
    "object \ufffc replacement \ufffd character",
    # --- control characters (no \\n, no \\r)
    "bell\x07 backspace\x08 escape\x1b[0m vertical\x0btab form\x0cfeed",
    "\x00nul at start and in\x00side",
    "C1 controls: \x80\x81\x85next line\x9b\x9f",
    "unit\x1fseparator record\x1eseparator group\x1dseparator file\x1cseparator",
    "delete\x7fcharacter",
    # --- whitespace of all kinds
    "non\u00a0breaking\u00a0space and narrow\u202fno-break",
    "en\u2002em\u2003thin\u2009hair\u200afigure\u2007punct\u2008six\u2006four\u2005three\u2004quad\u2000\u2001",
    "ideographic\u3000space\u3000全角スペース",
    "ogham\u1680space mark and medium\u205fmath space",
    "line\u2028separator paragraph\u2029separator",
    "   leading spaces",
    "trailing spaces   ",
    "   ",
    "\t",
    "\t\t\t",
    " \t \t ",
    "\u00a0",
    "\u3000",
    "\u200b",
    "many     spaces     between     words",
    "tabs\tbetween\t\twords\t\t\tand more",
    "mixed \t \u00a0 \u2003 \u3000 whitespace \t run",
    "",
    "",
    # --- full-width and half-width forms
    "ＡＢＣＤＥＦ ａｂｃｄｅｆ ０１２３４５６７８９",
    "Ｈｅｌｌｏ，　Ｗｏｒｌｄ！　（全角）",
    "！＂＃＄％＆＇（）＊＋，－．／：；＜＝＞？＠［＼］＾＿｀｛｜｝～",
    "ｱｲｳｴｵ ｶﾞｷﾞｸﾞ ﾊﾟﾋﾟﾌﾟ halfwidth katakana with voiced marks",
    "ﾡﾢﾣ ￠￡￢￣￤￥￦ halfwidth hangul and fullwidth signs",
    # --- right-to-left
    "עברית: שלום עולם! מה שלומך?",
    "العربية: مرحبا بالعالم! كيف حالك؟",
    "فارسی: سلام دنیا، حالت چطوره؟ ۱۲۳۴۵",
    "اردو: ہیلو دنیا ٹھیک ہے",
    "mixed English עברית and العربية in one line 123",
    "\u202eevil override text\u202c",
    "ﷺ ﷻ ﷲ ﻻ ﻷ — Arabic presentation forms and ligatures",
    "ܐܪܡܝܐ ܣܘܪܝܝܐ — Syriac",
    "ދިވެހި — Thaana",
    # --- Indic, Southeast Asian and other scripts
    "हिन्दी: नमस्ते दुनिया। क्षत्रिय ज्ञान श्री",
    "मराठी भाषा आणि संस्कृत: ॐ नमः शिवाय॥",
    "বাংলা: আমার সোনার বাংলা",
    "ਪੰਜਾਬੀ ગુજરાતી ଓଡ଼ିଆ தமிழ் తెలుగు ಕನ್ನಡ മലയാളം සිංහල",
    "ไทย: สวัสดีครับ ภาษาไทยไม่มีช่องว่างระหว่างคำ",
    "ລາວ ພາສາລາວ ກ ຂ ຄ",
    "ខ្មែរ: សួស្តី ពិភពលោក",
    "မြန်မာ: မင်္ဂလာပါ",
    "ᠮᠣᠩᠭᠣᠯ ᠪᠢᠴᠢᠭ — Mongolian",
    "བོད་སྐད། — Tibetan",
    "ქართული ენა — Georgian",
    "Հայերեն լեզու — Armenian",
    "አማርኛ ቋንቋ — Ethiopic",
    "ᏣᎳᎩ — Cherokee ꭰꭱ (lowercase Cherokee)",
    "ᐃᓄᒃᑎᑐᑦ — Canadian syllabics",
    "𐌰𐌱𐌲 𐐀𐐁𐐨𐐩 𓀀𓀁 𒀀 — Gothic, Deseret, hieroglyphs, cuneiform",
    "Ⓐⓑⓒ ①②③ ⑴⑵ ⒈⒉ ㊀㊁ 🄰🄱 — enclosed forms",
    "𝐇𝐞𝐥𝐥𝐨 𝑊𝑜𝑟𝑙𝑑 𝕄𝕒𝕥𝕙 𝔉𝔯𝔞𝔨 𝚖𝚘𝚗𝚘 — mathematical alphanumerics",
    "x² y³ H₂O ½ ¾ ⅓ ⅞ ⁿ ₙ — super and subscripts, fractions",
    "Ⅰ Ⅱ Ⅲ Ⅳ Ⅻ ⅰ ⅱ ⅲ Ⅿ — Roman numerals",
    "٠١٢٣٤٥٦٧٨٩ ०१२३४५६७८९ ๐๑๒๓ ߀߁ — digits of other scripts",
    "℃ ℉ № ™ ℠ ℡ ℮ Ω K Å ℏ — letterlike symbols",
    "㍿ ㌀ ㎏ ㎞ ㏄ ㋿ ㈱ — CJK compatibility squares",
    # --- digits and numbers
    "1234567890 3.14159 1,000,000 -42 +7 1e-10 0x1F 0b1010",
    "phone: +1 (555) 123-4567, date 2024-01-31, time 12:34:56",
    "version v1.2.3-rc.4+build.5",
    "IPv4 192.168.0.1 and IPv6 fe80::1ff:fe23:4567:890a",
    # --- URLs, code, markup
    "https://example.com/path?query=value&other=1#frag",
    "user.name+tag@example.co.uk",
    "def f(x): return x**2 if x > 0 else -x  # comment",
    "<html><body class=\"a\">Hello &amp; goodbye</body></html>",
    "{\"key\": [1, 2, 3], \"nested\": {\"a\": null}}",
    "C:\\Windows\\System32\\drivers\\etc\\hosts",
    "$HOME/.config/~user/file_name-v2.tar.gz",
    "snake_case camelCase PascalCase kebab-case SCREAMING_CASE",
    "#hashtag @mention $TICKER %percent ^caret &and *star",
    "!!!??? ... --- ___ *** ### ''' \"\"\" ``` ~~~",
    "a.b.c.d e-f-g h_i_j k/l/m n\\o\\p",
    "(((nested))) [[[brackets]]] {{{braces}}} <<<angles>>>",
    # --- quotes and dashes
    "“double” ‘single’ „German“ «French» ‹single› 「Japanese」",
    "hyphen-minus en–dash em—dash figure‒dash horizontal―bar minus−sign",
    "ellipsis… bullet• middle·dot prime′ double″ dagger† double‡",
    "apostrophes: don't, don’t, donʼt, rock 'n' roll",
    # --- long words (more than 100 characters: WordPiece's max_input_chars_per_word)
    "Pneumonoultramicroscopicsilicovolcanoconiosis and supercalifragilisticexpialidocious",
    "a" * 99,
    "b" * 100,
    "c" * 101,
    "Lopadotemachoselachogaleokranioleipsanodrimhypotrimmatosilphiokarabomelitokatakechymenokichlepikossyphophattoperisteralektryonoptekephalliokigklopeleiolagoiosiraiobaphetraganopterygon",
    "thequickbrownfoxjumpsoverthelazydog" * 4,
    "é" * 120,
    "漢" * 150,
    "😀" * 110,
    "ab\u0301" * 40,
    "xyz" * 34 + " " + "xyz" * 33,
    "0123456789" * 12,
    "-" * 130,
    "word " * 200,
    " ".join(["token%d" % i for i in range(300)]),
    # --- case
    "ALL CAPS SENTENCE WITH SHOUTING!",
    "all lower case sentence with no capitals",
    "MiXeD cAsE tExT wItH aLtErNaTiOn",
    "ﬁ ǲ ᾈ ΐ — special case mappings",
    "İi Iı Ǳǲǳ ẞß ſs ﬀff",
    # --- Tiny-Shakespeare-like lines
    "First Citizen:",
    "Before we proceed any further, hear me speak.",
    "What, ho! Romeo! Thou art thyself, though not a Montague.",
    "O Romeo, Romeo! wherefore art thou Romeo?",
    "'Tis but thy name that is my enemy;",
    "KING RICHARD III:",
    "Now is the winter of our discontent",
    # --- pairs-friendly lines with tabs (pair tests read text<TAB>pair)
    "question?\tanswer.",
    "left only\t",
    "\tright only",
    "a\tb\tc",
]


def category_lines():
    """One line per Unicode general category of punctuation and symbols (P*, S*), and per other
    categories whose handling differs (Mn, Mc, Me, Nd, Nl, No, Zs, Cf, Co, Cn), from the
    Basic Multilingual Plane and the emoji planes, in code point order, 24 each."""
    wanted = ["Pc", "Pd", "Ps", "Pe", "Pi", "Pf", "Po", "Sm", "Sc", "Sk", "So",
              "Mn", "Mc", "Me", "Nd", "Nl", "No", "Zs", "Cf", "Co", "Cn", "Lm", "Lo", "Lt"]
    found = {c: [] for c in wanted}
    for cp in list(range(0x20, 0x3000)) + list(range(0xA000, 0x10000)) + list(range(0x1F000, 0x1FB00)):
        if 0xD800 <= cp <= 0xDFFF or cp in (0x0A, 0x0D):
            continue
        c = unicodedata.category(chr(cp))
        if c in found and len(found[c]) < 240:
            found[c].append(chr(cp))
    out = []
    for c in wanted:
        chars = found[c][::10][:24]
        out.append(f"{c}: " + " ".join(chars))
        out.append(f"{c} glued: x" + "x".join(chars) + "x")
    return out


def script_samples():
    """Runs of letters from blocks the normalizers treat specially: CJK ranges that
    BertNormalizer pads with spaces and their neighbours that it must not."""
    blocks = [(0x4E00, 0x9FFF), (0x3400, 0x4DBF), (0x20000, 0x2A6DF), (0x2A700, 0x2B73F),
              (0x2B740, 0x2B81F), (0x2B820, 0x2CEAF), (0xF900, 0xFAFF), (0x2F800, 0x2FA1F),
              (0x3040, 0x309F), (0x30A0, 0x30FF), (0xAC00, 0xD7A3), (0x3100, 0x312F)]
    out = []
    for lo, hi in blocks:
        pts = [lo, lo + 1, (lo + hi) // 2, hi - 1, hi]
        out.append("block %04X-%04X: " % (lo, hi) + "".join(chr(p) for p in pts) + " ab" + chr(lo) + "cd")
    return out


def variants():
    """The accent and script lines again, upper-cased, lower-cased, decomposed (NFD) and
    compatibility-composed (NFKC): the same words reach the normalizers in other forms."""
    out = []
    for ln in LINES[:12] + LINES[90:96]:
        for v in (ln.upper(), ln.lower(), unicodedata.normalize("NFD", ln), unicodedata.normalize("NFKC", ln)):
            if v != ln and v not in out:
                out.append(v)
    return out


def main():
    out = sys.argv[1] if len(sys.argv) > 1 else os.path.join(ROOT, "tests", "data", "tokenizer_stress.txt")
    lines = LINES + variants() + category_lines() + script_samples()
    for ln in lines:
        assert "\n" not in ln and "\r" not in ln, repr(ln)
        assert not any(0xD800 <= ord(ch) <= 0xDFFF for ch in ln), repr(ln)
    os.makedirs(os.path.dirname(out), exist_ok=True)
    with open(out, "w", encoding="utf-8", newline="\n") as f:
        for ln in lines:
            f.write(ln + "\n")
    print(f"{out}: {len(lines)} lines")


if __name__ == "__main__":
    main()
