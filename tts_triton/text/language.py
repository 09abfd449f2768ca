"""Whether a TEXT is English: the voices were trained on English only, so text in another language is refused.

Two tests, both offline and without a model:

- **Script**: when more than half of the letters are of one non-Latin script, the text is in that script's
  language (Han: Chinese, or Japanese with kana; Hangul: Korean; Cyrillic: Russian, or Ukrainian with its own
  letters; Greek, Arabic, Hebrew, Devanagari, Thai...).
- **Function words** (Latin script): the words are counted against short lists of the commonest function words
  of English, French, German, Spanish, Italian, Portuguese and Dutch (words that are also English, "a", "in",
  "die", are left out of the others' lists). A text of at least :data:`MIN_WORDS` words whose count for another
  language reaches :data:`MIN_SHARE` of its words and twice the English count is in that language.

Shorter texts, and English text with foreign words or quotations in it, pass: their foreign words are read as
well as espeak-ng can (its own voice for another script). Raises :class:`NotEnglish`, an
:class:`~tts_triton.errors.InvalidInput` naming TEXT and the language.
"""

from __future__ import annotations

import re
import unicodedata
from collections import Counter

from tts_triton.errors import InvalidInput

#: Fewer words than this are not judged by their function words (too few to tell "Merci beaucoup" apart).
MIN_WORDS = 4
#: The share of a text's words that must be another language's function words.
MIN_SHARE = 0.2
_FUNCTION_WORDS = {
    "English": "the a an and of to is in it that for on with as was be are this by at from or have not but you he "
               "she they we i my your his her our their will would can there what which who when do does did has "
               "had been were if so all about up out just me him them into than then how its",
    "French": "le la les des du une et est pas que qui dans pour sur avec ce cette il elle nous vous ils je au aux "
              "sont mais où très l j qu c ne son sa ses mon ma tu été être avoir fait comme tout bien à ça suis en "
              "oui bonjour merci",
    "German": "der das und ist nicht ein eine einen dem den zu mit sich auf für von ich du er sie es wir ihr auch wie "
              "bei noch nach aus wird werden haben sind im dass oder aber kein schon nur sehr ja nein bitte danke",
    "Spanish": "el la los las de del que y un una es por con para se su sus al lo como más pero muy está yo mi este "
               "esta eso hay también porque cuando todo estoy soy en me te nos qué cómo dónde estás "
               "hola gracias",
    "Italian": "il lo la gli le di che e è un una per con non sono del della nel alla come anche più ma questo "
               "questa ho ha siamo io lui lei noi voi loro molto perché sei ciao grazie",
    "Portuguese": "o os de do da dos das que e é um uma em para com não por se na mais mas como eu ele ela você "
                  "muito isso está são também olá obrigado",
    "Dutch": "de het een en van ik je dat niet op te zijn met voor er maar om ook als bij nog wat naar hij zij wij "
             "ze heeft hebben geen kan dit deze door worden",
}
_WORDS = {language: frozenset(words.split()) for language, words in _FUNCTION_WORDS.items()}
_LATIN_WORD = re.compile(r"[^\W\d_]+")
_MARKUP = re.compile(r"<[^>]*>")
#: First word of a letter's Unicode name -> the language of its script.
_SCRIPTS = {"CJK": "Chinese", "HIRAGANA": "Japanese", "KATAKANA": "Japanese", "HANGUL": "Korean",
            "CYRILLIC": "Russian", "GREEK": "Greek", "ARABIC": "Arabic", "HEBREW": "Hebrew", "DEVANAGARI": "Hindi",
            "THAI": "Thai", "BENGALI": "Bengali", "TAMIL": "Tamil", "ARMENIAN": "Armenian", "GEORGIAN": "Georgian",
            "ETHIOPIC": "Amharic"}
_UKRAINIAN = frozenset("іїєґІЇЄҐ")


class NotEnglish(InvalidInput):
    """TEXT is in another language than English; ``language`` names it."""

    def __init__(self, language: str, evidence: str) -> None:
        super().__init__("TEXT", f"reads as {language}, not English ({evidence}); the voices speak English "
                                 "only: send English text (foreign words inside English text are read)")
        self.language = language


def _script(ch: str) -> str:
    return "LATIN" if ch.isascii() else unicodedata.name(ch, "").split(" ", 1)[0]


def detect(text: str) -> tuple[str, str]:
    """``(language, evidence)``: "English" unless the text is in another language by the module docstring's
    tests; a text without letters counts as English. SSML tags are ignored."""
    text = _MARKUP.sub(" ", text)
    scripts = Counter(_script(ch) for ch in text if ch.isalpha())
    total = sum(scripts.values())
    if not total:
        return "English", "no letters"
    japanese = bool(scripts["HIRAGANA"] or scripts["KATAKANA"])
    languages: Counter[str] = Counter()
    for script, count in scripts.items():
        if script in _SCRIPTS:
            language = _SCRIPTS[script]
            if script == "CJK" and japanese:
                language = "Japanese"
            elif script == "CYRILLIC" and any(ch in _UKRAINIAN for ch in text):
                language = "Ukrainian"
            languages[language] += count
    if languages and (top := languages.most_common(1)[0])[1] * 2 > total:
        return top[0], f"{top[1]} of its {total} letters are in its script"
    words = [w.lower() for w in _LATIN_WORD.findall(text)]
    if len(words) < MIN_WORDS:
        return "English", "too short to tell"
    hits = {language: sum(w in known for w in words) for language, known in _WORDS.items()}
    english = hits.pop("English")
    language, count = max(hits.items(), key=lambda h: h[1])
    if count >= MIN_SHARE * len(words) and count >= 2 * english:
        return language, f"{count} of its {len(words)} words are {language} function words, {english} English"
    return "English", f"{english} English function words"


def check_english(text: str) -> None:
    """Raise :class:`NotEnglish` when :func:`detect` finds ``text`` in another language."""
    language, evidence = detect(text)
    if language != "English":
        raise NotEnglish(language, evidence)
