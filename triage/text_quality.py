"""Is a generated response text, or garbage? A cheap score from the characters alone.

The guides' first check of a run is to read the rollouts: "determine whether the
responses are coherent and sensible"; garbled output from the very first step points
at checkpoint loading or weight conversion, not at training. A model whose weights
are wrong does not produce mildly bad English: it produces random-token soup (byte
fragments, replacement characters, glued word pieces, several scripts at once) or
collapses onto one token repeated. Those leave traces in the characters that need no
model to see:

- replacement / control characters (lone bytes of a byte-level BPE decoded on their own);
- letters from several writing systems, worse when mixed inside one word;
- tokens that are not word-like (no vowel, absurd case patterns, very long glued pieces);
- too few function words for the amount of Latin-script prose (soup has almost none);
- repeated n-gram loops, one token dominating;
- runs of special tokens (`<|endoftext|>`, `<unk>`, `<pad>`);
- a high entropy over character classes (letters, digits, punctuation, symbols, scripts).

Each signal gives a sub-score in [0, 1]; they combine as a noisy OR (any one strong
signal is enough; several weak ones add up). 0 reads as coherent, 1 as garbage; 0.5 is
the line `judge_texts` uses.
"""

from __future__ import annotations

import math
import re
import unicodedata
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field

from triage.thresholds import threshold

GARBLED_AT = threshold("text.garbled_score")  # triage/thresholds.yaml
GARBLED_FRACTION = threshold("text.garbled_fraction")
MAX_CHARS = 20_000  # longer texts are judged on their first MAX_CHARS characters

SPECIAL_TOKEN = re.compile(
    r"<\|[A-Za-z0-9_:\- ]{1,48}\|>|<unk>|<pad>|<s>|</s>|<mask>|\[(?:PAD|UNK|CLS|SEP|MASK)\]|<extra_id_\d+>"
)
SPECIAL_RUN = re.compile(r"(?:(?:" + SPECIAL_TOKEN.pattern + r")\s*){2,}")
# One or two end-of-turn markers closing a response are how chat models stop.
TRAILING_SPECIALS = re.compile(r"(?:\s*(?:" + SPECIAL_TOKEN.pattern + r")){1,2}\s*$")
SYMBOL_RUN = re.compile(r"([^\w\s])\1{3,}")
CODE_MARK = re.compile(r"[(){}\[\]=<>|;]|^>>>|^#|::|->|\w_\w|\w\.\w+\(")
CODE_KEYWORDS = frozenset({"def", "class", "return", "import", "lambda", "elif", "self", "None", "const", "var", "fn"})
LATEX_COMMAND = re.compile(r"\\[A-Za-z]+")
PIECE = re.compile(r"[^\W_]+")  # runs of letters / digits, any script
VOWELS = set("aeiouyAEIOUYàáâãäåèéêëìíîïòóôõöùúûüýÿæœøÀÁÂÃÄÅÈÉÊËÌÍÎÏÒÓÔÕÖÙÚÛÜÝŒØÆ")
# Scripts written without spaces between words; each character counts as a word.
UNSPACED = {"CJK", "HIRAGANA", "KATAKANA", "THAI", "LAO", "KHMER", "MYANMAR", "TIBETAN"}
# Scripts that occur together in ordinary text (Japanese mixes three; Korean quotes Hanja).
COMPATIBLE = [{"CJK", "HIRAGANA", "KATAKANA", "LATIN"}, {"HANGUL", "CJK", "LATIN"}]
FUNCTION_WORDS = frozenset(
    """a an the and or but if then so of to in on at by for with from as into about than that this these those
    is are was were be been being am do does did done have has had not no yes it its it's i you he she we they
    me him her us them my your his our their what which who whom whose when where why how all any each some
    can could will would shall should may might must there here also just only very more most such one two
    let lets let's we'll i'm you're it'll there's that's""".split()
)


def _script(ch: str) -> str | None:
    """The writing system of a letter, from its Unicode name ('LATIN', 'CYRILLIC', 'CJK', ...)."""
    if not ch.isalpha():
        return None
    try:
        name = unicodedata.name(ch)
    except ValueError:
        return "UNKNOWN"
    first = name.split(" ", 1)[0]
    if first in ("CJK", "HIRAGANA", "KATAKANA", "HANGUL"):
        return first
    if first in ("HALFWIDTH", "FULLWIDTH"):
        return "CJK" if "IDEOGRAPH" in name else ("KATAKANA" if "KATAKANA" in name else "LATIN")
    return first


def _is_bad_char(ch: str) -> bool:
    """Replacement characters, control characters (other than whitespace), private use, unassigned."""
    if ch == "\ufffd":
        return True
    cat = unicodedata.category(ch)
    if cat == "Cc":
        return ch not in "\n\r\t"
    return cat in ("Co", "Cn", "Cs")


def _char_class(ch: str) -> str:
    if ch.isspace():
        return "space"
    if ch.isdigit():
        return "digit"
    if ch.isalpha():
        script = _script(ch) or "?"
        if script == "LATIN":
            return "lower" if ch.islower() else "upper"
        return script
    cat = unicodedata.category(ch)
    return {"P": "punct", "S": "symbol", "M": "mark"}.get(cat[0], "other")


def _entropy(counts: Iterable[int]) -> float:
    values = [c for c in counts if c > 0]
    total = sum(values)
    return -sum(c / total * math.log2(c / total) for c in values) if total else 0.0


def _clip(x: float) -> float:
    return 0.0 if x <= 0 else (1.0 if x >= 1 else x)


def _latin_word_ok(piece: str) -> bool:
    if len(piece) > 20:
        return False
    if not (piece.islower() or piece.isupper() or piece.istitle()):
        return False
    if piece.isupper():
        return len(piece) <= 6 or any(c in VOWELS for c in piece)
    if len(piece) > 3 and not any(c in VOWELS for c in piece):
        return False
    run = 0
    for c in piece.lower():
        run = 0 if c in VOWELS else run + 1
        if run > 5:
            return False
    return True


def _one_writing_system(scripts: set[str | None]) -> bool:
    return any(scripts <= group for group in COMPATIBLE)


def _piece_ok(piece: str) -> tuple[bool, int]:
    """(word-like, how many words the piece counts as)."""
    if piece.isdigit():
        return True, 1
    letters = [c for c in piece if c.isalpha()]
    digits = len(piece) - len(letters)
    scripts = {_script(c) for c in letters}
    if digits:
        # x2, 3rd, h2o, 0x1f: short alphanumerics are fine; long mixtures are not
        return len(piece) <= 8 and len(scripts) == 1, 1
    if len(scripts) > 1:
        # Japanese mixes kana and kanji in one word, Chinese runs Latin terms into the text
        return _one_writing_system(scripts), len(piece)
    script = next(iter(scripts))
    if script in UNSPACED:
        return True, len(piece)
    if script == "LATIN":
        return _latin_word_ok(piece), 1
    return len(piece) <= 24, 1


@dataclass(frozen=True)
class GarbleSignals:
    """The sub-scores behind one garble score (each in [0, 1]) and the raw measurements."""

    bad_chars: float
    scripts: float
    words: float
    function_words: float
    repetition: float
    special_tokens: float
    class_entropy: float
    measurements: dict[str, float] = field(default_factory=dict)

    def score(self) -> float:
        weights = {
            "bad_chars": 1.0,
            "special_tokens": 1.0,
            "scripts": 0.9,
            # a sentence looping is degeneration (often a missing stop token), not garbage;
            # one or two tokens repeated is what mis-loaded weights produce
            "repetition": 0.9 if self.measurements.get("distinct_words", 99.0) <= 3 else 0.45,
            "words": 0.8,
            "function_words": 0.45,
            "class_entropy": 0.5,
        }
        keep = 1.0
        for name, w in weights.items():
            keep *= 1.0 - w * getattr(self, name)
        return round(1.0 - keep, 4)


def repetition_fraction(text: str) -> float:
    """How much of the text is a loop: the larger of the duplicated share of word 3-grams,
    the share of the most common word (with at least 8 words), and the duplicated share of
    character 8-grams (loops without spaces, e.g. one CJK character repeated). 0 for ordinary prose."""
    words = text.split()
    word_rep = 0.0
    if len(words) >= 8:
        grams = [tuple(words[i : i + 3]) for i in range(len(words) - 2)]
        word_rep = 1.0 - len(set(grams)) / len(grams)
        top = Counter(w.lower() for w in words).most_common(1)[0][1] / len(words)
        word_rep = max(word_rep, top if top > 0.3 else 0.0)
    char_rep = 0.0
    # runs of one symbol (table rules, "=====") are layout, not a loop; "!!!!" alone is caught as a non-word
    compact = SYMBOL_RUN.sub(r"\1\1\1", re.sub(r"\s+", " ", text))
    if len(compact) >= 24:
        n = 8
        grams = [compact[i : i + n] for i in range(len(compact) - n + 1)]
        char_rep = 1.0 - len(set(grams)) / len(grams)
    return max(word_rep, char_rep)


def _special_tokens(text: str) -> tuple[float, str, int]:
    """(sub-score, text without special tokens, how many): one or two closing markers are how chat
    models stop; runs of them, or text that is mostly markers, are not."""
    trimmed = TRAILING_SPECIALS.sub("", text)
    specials = SPECIAL_TOKEN.findall(trimmed)
    body = SPECIAL_TOKEN.sub(" ", trimmed)
    if not trimmed:
        return (1.0 if len(SPECIAL_TOKEN.findall(text)) >= 3 else 0.0), body, len(specials)
    longest_run = max((len(SPECIAL_TOKEN.findall(m.group(0))) for m in SPECIAL_RUN.finditer(trimmed)), default=0)
    share = sum(len(t) for t in specials) / len(trimmed)
    return _clip(max((longest_run - 2) / 3, (share - 0.3) / 0.3, (len(specials) - 4) / 6)), body, len(specials)


def _script_mix(body: str) -> tuple[float, float, Counter[str | None]]:
    """(sub-score, share of letters outside the main writing system, letters per script).

    A one- or two-letter token of another script is a symbol (θ, π, λ in maths) and is not
    counted; Latin words (names, code, English terms) are at home in text of every script.
    """
    counted = [
        c
        for token in body.split()
        if sum(ch.isalpha() for ch in token) > 2 or any(_script(ch) in UNSPACED for ch in token)
        for c in token
        if c.isalpha()
    ]
    counts: Counter[str | None] = Counter(_script(c) for c in counted)
    if not counted:
        return 0.0, 0.0, counts
    main_script = counts.most_common(1)[0][0]
    compatible = next((g for g in COMPATIBLE if main_script in g), {main_script}) | {"LATIN"}
    foreign = sum(n for sc, n in counts.items() if sc not in compatible) / len(counted)
    score = _clip(foreign * 4) if len(counted) >= 8 else _clip(foreign * 2)
    major = {sc for sc, n in counts.items() if n / len(counted) >= 0.05}
    if len(major) >= 3 and not major <= compatible:
        score = max(score, 0.8)
    return score, foreign, counts


@dataclass
class _WordStats:
    tokens: int = 0
    units: int = 0  # words, counting each CJK character as one
    ok_units: int = 0
    mixed_tokens: int = 0  # tokens mixing incompatible scripts ("abcдеж")
    latin_words: int = 0
    function: int = 0
    long_pieces: int = 0  # Latin pieces of 13+ letters
    capitalised: int = 0  # Title-case pieces in mid-sentence
    upper_words: int = 0
    code_tokens: int = 0

    @property
    def wordlike(self) -> float:
        return self.ok_units / self.units if self.units else 1.0

    @property
    def prose(self) -> bool:
        """Enough Latin words to judge as prose, and neither code nor shouting (identifiers are capitalised)."""
        code_like = self.tokens > 0 and self.code_tokens / self.tokens >= 0.25
        shouting = self.latin_words > 0 and self.upper_words / self.latin_words > 0.5
        return self.latin_words >= 8 and not code_like and not shouting


def _word_stats(body: str) -> _WordStats:
    w = _WordStats()
    sentence_start = True
    for token in LATEX_COMMAND.sub(" ", body).split():
        w.tokens += 1
        w.code_tokens += bool(CODE_MARK.search(token)) or token in CODE_KEYWORDS
        pieces = PIECE.findall(token)
        if not pieces:  # operators and punctuation: fine when short
            w.units += 1
            w.ok_units += len(token) <= 4
            continue
        token_scripts = {_script(c) for p in pieces for c in p if c.isalpha()} - {None}
        w.mixed_tokens += len(token_scripts) > 1 and not _one_writing_system(token_scripts)
        for piece in pieces:
            ok, units = _piece_ok(piece)
            w.units += units
            w.ok_units += units if ok else 0
            if piece.isalpha() and _script(piece[0]) == "LATIN":
                w.latin_words += 1
                w.long_pieces += len(piece) >= 13
                w.capitalised += (not sentence_start) and piece[0].isupper() and not piece.isupper()
                w.upper_words += piece.isupper() and len(piece) > 1
                sentence_start = False
        w.function += re.sub(r"^[^\w']+|[^\w']+$", "", token).lower() in FUNCTION_WORDS
        sentence_start = token[-1] in ".!?:;\"'”)" or token.startswith("#")
    return w


def garble_signals(text: str) -> GarbleSignals:
    """Every signal `garble_score` combines, with the measurements behind them."""
    stripped = text[:MAX_CHARS].strip()
    if not stripped:
        return GarbleSignals(0, 0, 0, 0, 0, 0, 0, {"chars": 0})
    special, body, n_specials = _special_tokens(stripped)
    chars = [c for c in body if not c.isspace()]
    n_chars = max(len(chars), 1)
    bad = sum(1 for c in chars if _is_bad_char(c)) / n_chars
    scripts_score, foreign, script_counts = _script_mix(body)

    w = _word_stats(body)
    words_score = _clip((0.85 - w.wordlike) / 0.45)
    if w.tokens:
        words_score = max(words_score, _clip(w.mixed_tokens / w.tokens * 3))
    # glued word pieces: prose rarely has many 13+ letter words, decoded soup often does
    long_fraction = w.long_pieces / w.latin_words if w.latin_words >= 5 else 0.0
    words_score = max(words_score, _clip((long_fraction - 0.1) / 0.2))
    # capitalised pieces in mid-sentence: names are a few percent of prose, vocabulary soup a third
    caps_fraction = w.capitalised / w.latin_words if w.prose else 0.0
    words_score = max(words_score, _clip((caps_fraction - 0.2) / 0.25))

    function_ratio = w.function / w.latin_words if w.latin_words else 0.0
    digits = sum(1 for c in chars if c.isdigit())
    latin_share = script_counts.get("LATIN", 0) / max(sum(script_counts.values()), 1)
    function_score = 0.0
    if w.prose and digits / n_chars < 0.2 and latin_share >= 0.8:
        function_score = _clip((0.2 - function_ratio) / 0.15)

    repetition = repetition_fraction(body)
    entropy = _entropy(Counter(_char_class(c) for c in body).values())
    return GarbleSignals(
        bad_chars=_clip(bad * 10),
        scripts=scripts_score,
        words=words_score,
        function_words=function_score,
        repetition=_clip((repetition - 0.4) / 0.35),
        special_tokens=special,
        class_entropy=_clip((entropy - 2.3) / 0.8),
        measurements={
            "chars": float(len(stripped)),
            "bad_char_fraction": round(bad, 4),
            "foreign_script_fraction": round(foreign, 4),
            "scripts": float(len(script_counts)),
            "wordlike_fraction": round(w.wordlike, 4),
            "long_word_fraction": round(long_fraction, 4),
            "midsentence_capital_fraction": round(caps_fraction, 4),
            "code_token_fraction": round(w.code_tokens / w.tokens, 4) if w.tokens else 0.0,
            "function_word_fraction": round(function_ratio, 4),
            "repetition_fraction": round(repetition, 4),
            "distinct_words": float(len(set(body.split()))),
            "special_tokens": float(n_specials),
            "class_entropy_bits": round(entropy, 4),
        },
    )


def garble_score(text: str) -> float:
    """0 for coherent text, 1 for garbage; empty text scores 0 (it carries no evidence either way)."""
    return garble_signals(text).score()


@dataclass(frozen=True)
class TextVerdict:
    """A judgement over many responses."""

    count: int  # non-empty texts judged
    empty: int  # empty texts (not judged)
    mean_score: float
    garbled_fraction: float  # share of judged texts scoring >= threshold
    repetition_fraction: float  # mean loop share over judged texts
    examples: tuple[tuple[float, str], ...]  # (score, text) of the worst texts, worst first

    @property
    def garbled(self) -> bool:
        return self.count > 0 and self.garbled_fraction >= GARBLED_FRACTION


def judge_texts(texts: Iterable[str], threshold: float = GARBLED_AT, examples: int = 3) -> TextVerdict:
    """Score every text; report the mean, the share above `threshold`, loops and the worst examples."""
    scored: list[tuple[float, str]] = []
    reps: list[float] = []
    empty = 0
    for text in texts:
        if not text or not text.strip():
            empty += 1
            continue
        scored.append((garble_score(text), text))
        reps.append(repetition_fraction(text[:MAX_CHARS]))
    if not scored:
        return TextVerdict(0, empty, 0.0, 0.0, 0.0, ())
    worst = sorted(scored, key=lambda st: -st[0])[:examples]
    return TextVerdict(
        count=len(scored),
        empty=empty,
        mean_score=round(sum(s for s, _ in scored) / len(scored), 4),
        garbled_fraction=round(sum(1 for s, _ in scored if s >= threshold) / len(scored), 4),
        repetition_fraction=round(sum(reps) / len(reps), 4),
        examples=tuple(worst),
    )
