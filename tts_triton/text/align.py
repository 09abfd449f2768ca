"""Sharing a clause's phonemes out among its words when espeak-ng joins or splits words.

espeak-ng reads a clause in context and may join unstressed words to the next one ("in the house" ->
"ɪnðə hˈaʊs") or change a word's sounds by its neighbours ("the" -> ðə / ði). Each word is therefore
also read alone; espeak-ng words equal to a word read alone (stress aside) are that word's, and in the
stretches between, the clause's symbols are aligned with the words' symbols by edit distance (stress and
length marks cost half): each symbol belongs to the word of the symbol it is aligned with, an inserted one
to its neighbour in the same espeak-ng word. Owners never decrease.
"""

from __future__ import annotations

import difflib
import itertools

from tts_triton.core.symbols import LENGTH, STRESS, WORD_BOUNDARY

_MARKS = frozenset((*STRESS, *LENGTH))
#: Half-width of the band around the diagonal that the alignment searches, beyond the length difference.
_BAND = 16
#: Cells of the edit-distance table beyond which a stretch is shared out in proportion to its symbols instead
#: (hostile text: a clause of hundreds of words that espeak-ng reads otherwise in context, "VIII VIII ...").
_MAX_CELLS = 200_000


def _gap(symbol: str) -> float:
    return 0.5 if symbol in _MARKS else 1.0


def _substitute(x: str, y: str) -> float:
    if x == y:
        return 0.0
    return 0.5 if x in _MARKS and y in _MARKS else 1.0


def align_words(context: list[str], alone: list[list[str]]) -> list[int | None]:
    """For each symbol of ``context`` the index of the word (of ``alone``, each word's symbols read
    alone) it belongs to; None for word boundaries. Indices are non-decreasing.

    espeak-ng words equal to a word read alone (stress aside) are matched first (difflib); only the
    stretches between them are aligned symbol by symbol.
    """
    cuts = [i for i, s in enumerate(context) if s == WORD_BOUNDARY]
    tokens = [(a + 1, b) for a, b in itertools.pairwise([-1, *cuts, len(context)]) if b > a + 1]
    token_keys = [_key(context[a:b]) for a, b in tokens]
    word_keys = [_key(word) for word in alone]
    owners: list[int | None] = [None] * len(context)
    matcher = difflib.SequenceMatcher(None, word_keys, token_keys, autojunk=False)
    for tag, w1, w2, t1, t2 in matcher.get_opcodes():
        if tag == "equal":
            for w, (a, b) in zip(range(w1, w2), tokens[t1:t2], strict=True):
                owners[a:b] = [w] * (b - a)
            continue
        if t1 == t2:
            continue
        a, b = tokens[t1][0], tokens[t2 - 1][1]
        if w1 == w2:  # symbols no word claims: the word before them (or after them, at the start)
            gap: list[int | None] = [None if s == WORD_BOUNDARY else max(w1 - 1, 0) for s in context[a:b]]
        else:
            gap = [None if o is None else w1 + o for o in _align(context[a:b], alone[w1:w2])]
        owners[a:b] = gap
    highest = 0
    for i, owner in enumerate(owners):
        if owner is not None:
            highest = max(highest, owner)
            owners[i] = highest
    return owners


def _key(symbols: list[str]) -> str:
    return "".join(s for s in symbols if s not in _MARKS)


def _align(context: list[str], alone: list[list[str]]) -> list[int | None]:
    """:func:`align_words` by edit distance over all symbols, for a short stretch."""
    positions = [i for i, s in enumerate(context) if s != WORD_BOUNDARY]
    c = [context[i] for i in positions]
    boundaries = list(itertools.accumulate(s == WORD_BOUNDARY for s in context))
    tokens = [boundaries[i] for i in positions]
    a = [s for word in alone for s in word if s != WORD_BOUNDARY]
    label = [w for w, word in enumerate(alone) for s in word if s != WORD_BOUNDARY]
    n, m = len(c), len(a)
    band = abs(n - m) + _BAND
    if not m or (n + 1) * (m + 1) > _MAX_CELLS:
        result: list[int | None] = [None] * len(context)
        for k, position in enumerate(positions):
            result[position] = label[min(m - 1, k * m // max(n, 1))] if m else 0
        return result
    inf = float("inf")
    cost = [[inf] * (m + 1) for _ in range(n + 1)]
    cost[0][0] = 0.0
    for i in range(n + 1):
        for j in range(max(0, i * m // max(n, 1) - band), min(m, i * m // max(n, 1) + band) + 1):
            if i == j == 0:
                continue
            best = inf
            if i and j:
                best = cost[i - 1][j - 1] + _substitute(c[i - 1], a[j - 1])
            if i:
                best = min(best, cost[i - 1][j] + _gap(c[i - 1]))
            if j:
                best = min(best, cost[i][j - 1] + _gap(a[j - 1]))
            cost[i][j] = best
    owner: list[int | None] = [None] * n
    i, j = n, m
    while i and j:
        if cost[i][j] == cost[i - 1][j - 1] + _substitute(c[i - 1], a[j - 1]):
            owner[i - 1] = label[j - 1]
            i, j = i - 1, j - 1
        elif cost[i][j] == cost[i - 1][j] + _gap(c[i - 1]):
            i -= 1
        else:
            j -= 1
    result = [None] * len(context)
    for position, word in zip(positions, _fill(owner, tokens), strict=True):
        result[position] = word
    return result


def _fill(owner: list[int | None], tokens: list[int]) -> list[int]:
    """Unaligned symbols take the owner of the nearest aligned one in their espeak-ng word (before it
    first), else the one before them, else word 0."""
    filled: list[int] = []
    for k, word in enumerate(owner):
        if word is None:
            same = [owner[x] for x in (*range(k - 1, -1, -1), *range(k + 1, len(owner)))
                    if tokens[x] == tokens[k] and owner[x] is not None]
            word = same[0] if same else (filled[-1] if filled else 0)
        filled.append(word)
    return filled
