"""The English sentences of the synthetic corpus: a seeded grammar over a built-in lexicon.

The generator uses only integer arithmetic (SplitMix64) and the word lists in this file, so the
same ``(count, seed)`` gives the same sentences on every machine and every Python version; the
split is a function of the sentence index. ``python -m tts_triton.data.sentences --out FILE``
writes them as ``id<TAB>split<TAB>text`` lines, which :func:`read_sentences` reads back.

Sentences have 3-30 words and carry commas, questions, exclamations, semicolons, colons and a
few small numbers written as digits (2-99, which every reader says the same way).
"""

from __future__ import annotations

import argparse
import hashlib
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

#: Defaults of the corpus: 6000 sentences, every 20th one test, the one after it validation.
DEFAULT_COUNT = 6000
DEFAULT_SEED = 2024
SPLITS = ("train", "val", "test")
_SPLIT_PERIOD = 20
MIN_WORDS, MAX_WORDS = 3, 30


@dataclass(frozen=True)
class CorpusSentence:
    """One corpus sentence; ``id`` is ``s`` + zero-padded index, ``split`` one of :data:`SPLITS`."""

    id: str
    split: str
    text: str


def split_of(index: int) -> str:
    """Split of the ``index``-th sentence: 5 % test, 5 % validation, 90 % train, interleaved."""
    phase = index % _SPLIT_PERIOD
    return "test" if phase == 0 else "val" if phase == 1 else "train"


class Rng:
    """SplitMix64: a tiny PRNG whose output depends on the seed only (not on the interpreter)."""

    _MASK = (1 << 64) - 1

    def __init__(self, seed: int) -> None:
        self._state = seed & self._MASK

    def next64(self) -> int:
        """Next 64-bit output."""
        self._state = (self._state + 0x9E3779B97F4A7C15) & self._MASK
        z = self._state
        z = ((z ^ (z >> 30)) * 0xBF58476D1CE4E5B9) & self._MASK
        z = ((z ^ (z >> 27)) * 0x94D049BB133111EB) & self._MASK
        return z ^ (z >> 31)

    def below(self, n: int) -> int:
        """Uniform integer in ``[0, n)`` (the modulo bias of a 64-bit draw is negligible here)."""
        return self.next64() % n

    def chance(self, p: float) -> bool:
        """True with probability ``p``."""
        return self.next64() < p * 2.0**64

    def choice(self, items: Sequence[str]) -> str:
        return items[self.below(len(items))]

    def between(self, lo: int, hi: int) -> int:
        """Uniform integer in ``[lo, hi]``."""
        return lo + self.below(hi - lo + 1)


# --- lexicon ----------------------------------------------------------------------------------


def _words(text: str) -> list[str]:
    return text.split()


NAMES = _words("""
Anna Ben Clara Daniel Emma Felix Grace Henry Isla Jack Kate Leo Maya Noah Olivia Peter Quinn Rosa Sam Tara
Victor Wendy Adam Bella Carlos Diana Elliot Fiona George Hannah Ian Julia Kevin Laura Martin Nina Oscar Paula
Ruth Simon Tom Uma Vera William Yusuf Zoe Alice Brian Chloe Derek Ellen Frank Greta Harold Irene James Lucy
Mark Nora Owen Priya Ravi Sara Tobias Walter Amir Mei Hugo Agnes Rupert Lena Marcus Ingrid Pablo Hazel
""")

# "singular:plural" for the irregular nouns; "_" stands for a space everywhere in the lexicon.
PEOPLE = _words("""
teacher farmer doctor pilot baker student child:children neighbour driver nurse painter sailor singer guard
waiter writer engineer gardener librarian fisherman:fishermen woman:women man:men stranger visitor captain
soldier scientist musician dancer shopkeeper cook boy girl grandmother grandfather uncle aunt tourist mechanic
carpenter judge king queen postman:postmen builder poet tailor shepherd hunter merchant doctor clerk firefighter
photographer professor twin cousin porter
""")

THINGS = _words("""
apple basket bicycle blanket book bottle bucket button camera candle carpet chair clock coat coin cup desk
drawer envelope feather flag glove hammer hat jacket jar kettle key ladder lamp letter map mirror needle
notebook orange painting parcel pencil piano pillow plate radio ribbon ring rope saucepan scarf shell shoe
spoon stone suitcase sweater table ticket towel toy trumpet umbrella vase violin wallet wheel whistle
box:boxes brush:brushes dish:dishes glass:glasses knife:knives leaf:leaves loaf:loaves shelf:shelves
tomato:tomatoes potato:potatoes watch:watches match:matches sandwich:sandwiches compass:compasses
lantern helmet guitar drum kite puzzle magazine newspaper postcard photograph telescope microscope
backpack pumpkin cabbage carrot onion lemon melon pear peach cherry:cherries strawberry:strawberries
biscuit cake pie sausage teapot bowl fork bench fence gate window door curtain sofa mattress bracelet
necklace medal trophy crown sword shield anchor barrel tent torch battery:batteries cable screwdriver
""")

PLACES = _words("""
market station library harbour museum village garden kitchen park school hospital bakery beach forest
river castle farm office airport cinema theatre church hotel island valley square lake factory stadium
zoo lighthouse cellar attic playground bridge tower cottage meadow orchard workshop shop restaurant
café garage hall classroom gallery pier swimming_pool post_office town_hall bus_stop corner_shop
train_station city_centre railway_bridge
""")

THING_ADJECTIVES = _words("""
old new small large bright dark heavy light soft warm cold wet dry clean dirty empty full tiny huge
strange simple narrow wide round square golden silver wooden broken shiny dusty rusty fresh ancient modern
expensive cheap beautiful delicate fragile colourful pale green blue red yellow purple brown grey white
black striped spotted crooked useful useless enormous ordinary unusual precious mysterious lovely
""")

PEOPLE_ADJECTIVES = _words("""
brave calm busy lazy lucky happy sad angry tired hungry polite proud rich poor famous honest clever silly
friendly lonely curious gentle careful nervous cheerful patient quiet young old clumsy generous grumpy
sleepy stubborn wise shy cautious excited
""")

EXCLAIM_ADJECTIVES = _words("""
wonderful terrible beautiful strange lovely brilliant horrible marvellous delightful ridiculous
extraordinary magnificent peculiar splendid awful
""")

# Transitive verbs usable with any small object: "base" or "base:past" for the irregular ones; "*" doubles
# the final consonant (drop -> dropped, dropping); "_" separates a particle (give the key away).
OBJECT_VERBS = _words("""
paint clean drop* fix wash open close move lift borrow wrap* polish repair collect carry push pull kick
check fill empty count measure weigh share deliver return order pack unpack mend fold touch inspect
buy:bought find:found bring:brought hold:held lose:lost hide:hid sell:sold take:took make:made
break:broke throw:threw catch:caught steal:stole keep:kept leave:left draw:drew give_away:gave
forget:forgot choose:chose drop* grab* hug* rub* shake:shook sweep:swept
""")

MOTION_VERBS = _words("""
walk run:ran hurry wander travel* drive:drove cycle rush swim:swam march stroll race limp sail
""")

STILL_VERBS = _words("""
wait laugh smile sleep:slept sing:sang dance shout whisper cry rest listen work read:read sit*:sat stand:stood
""")

ADVERBS = _words("""
quickly slowly carefully quietly suddenly happily sadly angrily gently nervously patiently loudly softly
eagerly proudly calmly politely bravely cheerfully secretly silently clumsily
""")

PAST_TIMES = _words("""
yesterday today last_night this_morning this_afternoon this_evening on_Monday on_Tuesday
on_Wednesday on_Thursday on_Friday on_Saturday on_Sunday in_the_spring in_the_summer in_the_autumn
in_the_winter at_dawn at_midnight after_lunch before_dinner every_morning last_winter last_summer
at_noon after_school before_breakfast during_the_storm
""")

FUTURE_TIMES = ["tomorrow", "tonight", "next week", "next summer", "on Monday", "on Friday", "after lunch", "soon"]

PREPOSITIONS = ["in", "at", "near", "behind", "outside", "next to", "inside", "beside", "opposite"]
CONJUNCTIONS = ["and", "but", "so", "yet"]
SUBORDINATORS = ["when", "because", "although", "after", "before", "while", "as soon as", "since", "until"]
THINKING = ["said", "thought", "knew", "remembered", "noticed", "explained", "believed", "admitted", "guessed"]
INTERJECTIONS = ["Oh", "Well", "Look", "Hey", "Listen", "Wow", "Hurry", "Wait", "Oh dear", "Goodness", "Honestly"]
PRONOUNS = [("I", "was"), ("you", "were"), ("he", "was"), ("she", "was"), ("we", "were"), ("they", "were")]
POSSESSIVES = ["my", "your", "his", "her", "our", "their"]
ADVERBIAL_OPENERS = ["Luckily", "Sadly", "Suddenly", "Of course", "In the end", "At first", "Meanwhile",
                     "Unfortunately", "To everyone's surprise", "Later that day", "As usual", "For once"]
LINKERS = ["however", "meanwhile", "instead", "nevertheless", "besides", "otherwise", "still"]


# --- morphology -------------------------------------------------------------------------------


def _entries(words: list[str]) -> list[tuple[str, str]]:
    """``"a:b"`` -> ``(a, b)``, ``"a"`` -> ``(a, "")``; ``_`` stands for a space."""
    out = []
    for word in words:
        head, _, tail = word.replace("_", " ").partition(":")
        out.append((head, tail))
    return out


def _plural(noun: str, given: str) -> str:
    if given:
        return given
    if noun.endswith(("s", "x", "ch", "sh")):
        return noun + "es"
    if noun.endswith("y") and noun[-2] not in "aeiou":
        return noun[:-1] + "ies"
    return noun + "s"


@dataclass(frozen=True)
class Verb:
    """A verb's forms; ``particle`` follows the object (``gave the key away``)."""

    base: str
    past: str
    third: str
    ing: str
    particle: str = ""


def _verb(head: str, past_given: str) -> Verb:
    """Inflect ``head`` (``"drop*"`` doubles its last consonant, ``"give away"`` has a particle)."""
    base, _, particle = head.partition(" ")
    double = base.endswith("*")
    base = base.rstrip("*")
    stem = base + base[-1] if double else base
    if base.endswith("e"):
        ing, past = base[:-1] + "ing", base + "d"
    elif base.endswith("y") and base[-2] not in "aeiou":
        ing, past = base + "ing", base[:-1] + "ied"
    else:
        ing, past = stem + "ing", stem + "ed"
    if base.endswith(("s", "x", "ch", "sh")):
        third = base + "es"
    elif base.endswith("y") and base[-2] not in "aeiou":
        third = base[:-1] + "ies"
    else:
        third = base + "s"
    return Verb(base, past_given or past, third, ing, particle)


def _verbs(words: list[str]) -> list[Verb]:
    unique: dict[str, Verb] = {}
    for head, past in _entries(words):
        verb = _verb(head, past)
        unique.setdefault(verb.base, verb)
    return list(unique.values())


def _article(phrase: str) -> str:
    first = phrase.split(" ")[0].lower()
    vowel = first[0] in "aeiou" and not first.startswith(("uni", "use", "eu", "one"))
    return ("an " if vowel or first.startswith(("hour", "honest")) else "a ") + phrase


_PEOPLE = list(dict.fromkeys((s, _plural(s, p)) for s, p in _entries(PEOPLE)))
_THINGS = list(dict.fromkeys((s, _plural(s, p)) for s, p in _entries(THINGS)))
_PLACES = [p for p, _ in _entries(PLACES)]
_PAST_TIMES = [t for t, _ in _entries(PAST_TIMES)]
_OBJECT_VERBS = _verbs(OBJECT_VERBS)
_MOTION_VERBS = _verbs(MOTION_VERBS)
_STILL_VERBS = _verbs(STILL_VERBS)


# --- grammar ----------------------------------------------------------------------------------


class _Grammar:
    """Phrase builders over one :class:`Rng`; the sentence templates capitalise and punctuate their output."""

    def __init__(self, rng: Rng) -> None:
        self.r = rng

    def person(self) -> tuple[str, bool]:
        """A human subject and whether it is plural (for was/were)."""
        r = self.r
        kind = r.below(10)
        if kind < 3:
            return r.choice(NAMES), False
        if kind < 5:
            pronoun, be = PRONOUNS[r.below(len(PRONOUNS))]
            return pronoun, be == "were"
        singular, plural = _PEOPLE[r.below(len(_PEOPLE))]
        many = r.chance(0.3)
        noun = plural if many else singular
        if r.chance(0.3):
            noun = r.choice(PEOPLE_ADJECTIVES) + " " + noun
        det = r.choice(POSSESSIVES) if r.chance(0.3) else "the"
        return f"{det} {noun}", many

    def thing(self) -> str:
        r = self.r
        singular, plural = _THINGS[r.below(len(_THINGS))]
        adjective = r.choice(THING_ADJECTIVES) + " " if r.chance(0.45) else ""
        kind = r.below(10)
        if kind < 4:
            return _article(adjective + singular)
        if kind < 5:
            return f"{r.between(2, 99)} {adjective}{plural}"
        if kind < 6:
            return f"some {adjective}{plural}"
        if kind < 7:
            return f"{r.choice(POSSESSIVES)} {adjective}{singular}"
        return f"the {adjective}{plural if r.chance(0.3) else singular}"

    def place(self) -> str:
        r = self.r
        place = r.choice(_PLACES)
        return f"the {r.choice(THING_ADJECTIVES)} {place}" if r.chance(0.2) else f"the {place}"

    def location(self) -> str:
        return f"{self.r.choice(PREPOSITIONS)} {self.place()}"

    def tail(self, times: Sequence[str]) -> str:
        """Optional adverbial tail: a location, a time, both, or nothing."""
        r = self.r
        parts = []
        if r.chance(0.45):
            parts.append(self.location())
        if r.chance(0.35):
            parts.append(r.choice(times))
        return (" " + " ".join(parts)) if parts else ""

    def object_phrase(self, verb: Verb) -> str:
        obj = self.thing()
        return f"{obj} {verb.particle}" if verb.particle else obj

    def past_clause(self) -> str:
        r = self.r
        subject, plural = self.person()
        kind = r.below(10)
        if kind < 5:
            verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
            adverb = r.choice(ADVERBS) + " " if r.chance(0.15) else ""
            return f"{subject} {adverb}{verb.past} {self.object_phrase(verb)}{self.tail(_PAST_TIMES)}"
        if kind < 7:
            verb = _MOTION_VERBS[r.below(len(_MOTION_VERBS))]
            adverb = " " + r.choice(ADVERBS) if r.chance(0.3) else ""
            return f"{subject} {verb.past}{adverb} to {self.place()}{self.tail(_PAST_TIMES) if r.chance(0.5) else ''}"
        if kind < 9:
            verb = _STILL_VERBS[r.below(len(_STILL_VERBS))]
            adverb = " " + r.choice(ADVERBS) if r.chance(0.4) else ""
            return f"{subject} {verb.past}{adverb}{self.tail(_PAST_TIMES)}"
        verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
        be = "were" if plural else "was"
        return f"{subject} {be} {verb.ing} {self.object_phrase(verb)}{self.tail(_PAST_TIMES)}"

    def short_clause(self) -> str:
        """A clause of a few words, for compounds that should not grow too long."""
        r = self.r
        subject, _ = self.person()
        if r.chance(0.5):
            verb = _STILL_VERBS[r.below(len(_STILL_VERBS))]
            return f"{subject} {verb.past}"
        verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
        return f"{subject} {verb.past} {self.object_phrase(verb)}"


def _cap(text: str) -> str:
    return text[0].upper() + text[1:]


def _statement(g: _Grammar) -> str:
    r = g.r
    opener = r.choice(ADVERBIAL_OPENERS) + ", " if r.chance(0.2) else ""
    return _cap(opener + g.past_clause()) + "."


def _compound(g: _Grammar) -> str:
    r = g.r
    first, second = g.past_clause(), g.short_clause() if r.chance(0.5) else g.past_clause()
    return _cap(f"{first}, {r.choice(CONJUNCTIONS)} {second}") + "."


def _subordinate(g: _Grammar) -> str:
    r = g.r
    sub = r.choice(SUBORDINATORS)
    if r.chance(0.5):
        return _cap(f"{sub} {g.short_clause()}, {g.past_clause()}") + "."
    return _cap(f"{g.past_clause()} {sub} {g.short_clause()}") + "."


def _semicolon(g: _Grammar) -> str:
    r = g.r
    linker = r.choice(LINKERS) + ", " if r.chance(0.4) else ""
    return _cap(f"{g.past_clause()}; {linker}{g.past_clause()}") + "."


def _long(g: _Grammar) -> str:
    r = g.r
    return _cap(f"{r.choice(SUBORDINATORS)} {g.past_clause()}, {g.past_clause()}, {r.choice(CONJUNCTIONS)} "
                f"{g.past_clause()}") + "."


def _listing(g: _Grammar) -> str:
    r = g.r
    subject, _ = g.person()
    items = [g.thing() for _ in range(r.between(3, 5))]
    joined = ", ".join(items[:-1]) + ("," if r.chance(0.3) else "") + " and " + items[-1]
    if r.chance(0.3):
        return _cap(f"{subject} needed {r.choice(['three', 'a few', 'several'])} things: {joined}") + "."
    verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
    return _cap(f"{subject} {verb.past} {joined}{g.tail(_PAST_TIMES)}") + "."


def _reported(g: _Grammar) -> str:
    r = g.r
    subject, _ = g.person()
    return _cap(f"{subject} {r.choice(THINKING)} that {g.past_clause()}") + "."


def _question(g: _Grammar) -> str:
    r = g.r
    # One template per kind; called after the draws below (the kind is drawn first, then the words they share).
    questions: tuple[Callable[[], str], ...] = (
        lambda: f"did {subject} {verb.base} {g.object_phrase(verb)}{g.tail(_PAST_TIMES)}",
        lambda: f"where did {subject} {verb.base} the {singular}{' ' + verb.particle if verb.particle else ''}",
        lambda: f"why {'were' if plural else 'was'} {subject} {verb.ing} {g.object_phrase(verb)}{g.tail(_PAST_TIMES)}",
        lambda: f"how many {many} did {subject} {verb.base}{' ' + verb.particle if verb.particle else ''}",
        lambda: f"who {verb.past} {g.object_phrase(verb)}{g.tail(_PAST_TIMES)}",
        lambda: f"what did {subject} find {g.location()}",
        lambda: f"could you {verb.base} {g.object_phrase(verb)}, please",
        lambda: f"would you like {_article(singular) if r.chance(0.5) else 'some ' + many}",
        lambda: f"is it true that {g.past_clause()}",
        lambda: f"do you know where {g.place()} is",
        lambda: f"{g.past_clause()}, {r.choice(['right', 'really', 'or not'])}",
        lambda: f"will {subject} {verb.base} {g.object_phrase(verb)} {r.choice(FUTURE_TIMES)}",
    )
    kind = r.below(len(questions))
    subject, plural = g.person()
    verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
    singular, many = _THINGS[r.below(len(_THINGS))]
    return _cap(questions[kind]()) + "?"


def _exclamation(g: _Grammar) -> str:
    r = g.r

    def stop() -> str:
        verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
        return f"stop {verb.ing} {g.object_phrase(verb)}"

    # One template per kind; called after the draws below (the kind is drawn first, then the words they share).
    exclamations: tuple[Callable[[], str], ...] = (
        lambda: f"what {_article(adjective + ' ' + singular)}",
        lambda: f"what {adjective} {many} those are",
        lambda: f"watch out for the {singular}",
        lambda: f"{r.choice(INTERJECTIONS)}, {g.past_clause()}",
        stop,
        lambda: f"look at that {r.choice(THING_ADJECTIVES)} {singular}",
        lambda: f"hurry, {g.place()} closes at {r.between(1, 12)} o'clock",
        lambda: f"I can't believe {g.past_clause()}",
        lambda: f"{r.choice(INTERJECTIONS)}, that is {adjective}",
    )
    kind = r.below(len(exclamations))
    singular, many = _THINGS[r.below(len(_THINGS))]
    adjective = r.choice(EXCLAIM_ADJECTIVES)
    return _cap(exclamations[kind]()) + "!"


def _imperative(g: _Grammar) -> str:
    r = g.r
    verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
    kind = r.below(3)
    if kind == 0:
        return _cap(f"please {verb.base} {g.object_phrase(verb)}{g.tail(['now', 'tomorrow', 'before dinner'])}") + "."
    if kind == 1:
        return _cap(f"don't {verb.base} {g.object_phrase(verb)}") + "."
    return f"{r.choice(NAMES)}, {verb.base} {g.object_phrase(verb)} {g.location()}."


def _numeric(g: _Grammar) -> str:
    r = g.r
    singular, many = _THINGS[r.below(len(_THINGS))]
    n = r.between(2, 99)
    kind = r.below(5)
    if kind == 0:
        return f"There were {n} {many} {g.location()}."
    if kind == 1:
        subject, _ = g.person()
        return _cap(f"{subject} waited for {n} minutes {g.location()}") + "."
    if kind == 2:
        return _cap(f"{g.place()} opens at {r.between(1, 12)} o'clock {r.choice(FUTURE_TIMES)}") + "."
    if kind == 3:
        subject, _ = g.person()
        return _cap(f"{subject} counted {n} {many}, then {r.between(2, 99)} more") + "."
    return _cap(f"the {singular} cost {n} dollars {r.choice(_PAST_TIMES)}") + "."


def _habitual(g: _Grammar) -> str:
    r = g.r
    name = r.choice(NAMES)
    verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
    how_often = r.choice(["usually", "often", "never", "always", "sometimes", "rarely"])
    when = r.choice(["on Sundays", "in the morning", "at night", "after work", "every day", "in winter"])
    return f"{name} {how_often} {verb.third} {g.object_phrase(verb)} {when}."


def _future(g: _Grammar) -> str:
    r = g.r
    subject, _ = g.person()
    verb = _OBJECT_VERBS[r.below(len(_OBJECT_VERBS))]
    aux = r.choice(["will", "might", "should", "must", "can"])
    return _cap(f"{subject} {aux} {verb.base} {g.object_phrase(verb)} {r.choice(FUTURE_TIMES)}") + "."


def _tiny(g: _Grammar) -> str:
    r = g.r
    singular, _ = _THINGS[r.below(len(_THINGS))]
    options = [
        f"Where is {r.choice(NAMES)}?",
        f"The {singular} is {r.choice(THING_ADJECTIVES)}.",
        f"{r.choice(INTERJECTIONS)}, look out!",
        f"Bring the {singular}!",
        f"I see {r.choice(NAMES)}.",
        f"Is it {r.choice(THING_ADJECTIVES)}?",
        f"{r.choice(NAMES)} {_STILL_VERBS[r.below(len(_STILL_VERBS))].past} {r.choice(ADVERBS)}.",
    ]
    return options[r.below(len(options))]


_TEMPLATES: tuple[tuple[Callable[[_Grammar], str], int], ...] = (
    (_statement, 20), (_compound, 10), (_subordinate, 10), (_semicolon, 7), (_long, 5), (_listing, 6), (_reported, 6),
    (_question, 16), (_exclamation, 9), (_imperative, 4), (_numeric, 5), (_habitual, 3), (_future, 3), (_tiny, 4),
)
_TEMPLATE_TOTAL = sum(weight for _, weight in _TEMPLATES)


def _one(g: _Grammar) -> str:
    pick = g.r.below(_TEMPLATE_TOTAL)
    for template, weight in _TEMPLATES:
        if pick < weight:
            return " ".join(template(g).split())
        pick -= weight
    raise AssertionError("unreachable")


def generate(count: int = DEFAULT_COUNT, seed: int = DEFAULT_SEED) -> list[CorpusSentence]:
    """``count`` distinct sentences of 3-30 words, identical for the same arguments everywhere."""
    g = _Grammar(Rng(seed))
    seen: set[str] = set()
    out: list[CorpusSentence] = []
    while len(out) < count:
        text = _one(g)
        key = text.lower()
        if key in seen or not MIN_WORDS <= len(text.split()) <= MAX_WORDS:
            continue
        seen.add(key)
        index = len(out)
        out.append(CorpusSentence(f"s{index:05d}", split_of(index), text))
    return out


def fingerprint(sentences: Sequence[CorpusSentence]) -> str:
    """Short hash of the ids, splits and texts: equal fingerprints mean the same corpus text."""
    digest = hashlib.sha256()
    for s in sentences:
        digest.update(f"{s.id}\t{s.split}\t{s.text}\n".encode())
    return digest.hexdigest()[:16]


def write_sentences(sentences: Sequence[CorpusSentence], path: Path) -> None:
    """Write ``id<TAB>split<TAB>text`` lines (UTF-8)."""
    Path(path).write_text("".join(f"{s.id}\t{s.split}\t{s.text}\n" for s in sentences), encoding="utf-8")


def read_sentences(path: Path) -> list[CorpusSentence]:
    """Read a file written by :func:`write_sentences`; raises ``ValueError`` on a malformed line."""
    out = []
    for number, line in enumerate(Path(path).read_text(encoding="utf-8").splitlines(), 1):
        parts = line.split("\t")
        if len(parts) != 3 or parts[1] not in SPLITS or not parts[2].strip():
            raise ValueError(f"{path}:{number}: expected 'id<TAB>split<TAB>text', got {line!r}")
        out.append(CorpusSentence(*parts))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m tts_triton.data.sentences", description=__doc__.split("\n")[0])
    parser.add_argument("--out", type=Path, help="write id<TAB>split<TAB>text lines here (default: print)")
    parser.add_argument("--count", type=int, default=DEFAULT_COUNT)
    parser.add_argument("--seed", type=int, default=DEFAULT_SEED)
    args = parser.parse_args(argv)
    sentences = generate(args.count, args.seed)
    if args.out:
        write_sentences(sentences, args.out)
        print(f"{len(sentences)} sentences, fingerprint {fingerprint(sentences)} -> {args.out}", file=sys.stderr)
    else:
        sys.stdout.writelines(f"{s.id}\t{s.split}\t{s.text}\n" for s in sentences)
    return 0


if __name__ == "__main__":
    sys.exit(main())
