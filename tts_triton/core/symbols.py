"""The fixed phoneme inventory: every id the text encoder's embedding knows.

Ids are positions in :data:`SYMBOLS`. Id 0 is padding. Changing this list changes the embedding
size and invalidates trained checkpoints, so append only.
"""

from __future__ import annotations

PAD = "_"
BOS = "^"
EOS = "$"
WORD_BOUNDARY = " "
#: Pause and prosody tokens produced from punctuation by the front end.
PUNCTUATION = (",", ".", "?", "!", ";", ":", "…", "-")
STRESS = ("ˈ", "ˌ")
LENGTH = ("ː", "ˑ")
#: Mandarin tones in pinyin numbering (5 = neutral), placed by the front end after the syllable's vowel.
TONES = ("1", "2", "3", "4", "5")
#: IPA letters and diacritics espeak-ng emits for English and Mandarin.
IPA = tuple(
    "abcdefhijklmnopqrstuvwxyz"
    "æçðøŋœɐɑɒɔɕɖɘɚɛɜɝɞɟɠɡɣɤɥɦɨɪɫɬɭɯɰɱɲɳɵɶɸɹɺɻɽɾʀʁʂʃʈʉʊʋʌʍʎʏʐʑʒʔʕʝʲʰʷβθχᵻ"
    "\u0303\u0329\u032f\u0361"  # combining tilde, syllabic, non-syllabic, tie bar
    "ə"  # appended: schwa, espeak-ng's most frequent English vowel
)

SYMBOLS: tuple[str, ...] = (PAD, BOS, EOS, WORD_BOUNDARY, *PUNCTUATION, *STRESS, *LENGTH, *TONES, *IPA)
SYMBOL_TO_ID: dict[str, int] = {s: i for i, s in enumerate(SYMBOLS)}
PAD_ID = SYMBOL_TO_ID[PAD]
BOS_ID = SYMBOL_TO_ID[BOS]
EOS_ID = SYMBOL_TO_ID[EOS]
N_SYMBOLS = len(SYMBOLS)

assert len(SYMBOL_TO_ID) == N_SYMBOLS, "duplicate symbol in the inventory"
