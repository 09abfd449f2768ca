"""Held-out sentences for the ASR round trip: everyday English written for the check, not drawn from the
training sentence generator (:mod:`tts_triton.data.sentences`); a test keeps them out of its output."""

from __future__ import annotations

import argparse
from pathlib import Path

#: 72 sentences of 6-11 words: requests, plans, weather, food, travel, numbers, times and questions.
HELDOUT_SENTENCES: tuple[str, ...] = (
    "Please close the window before you leave the house.",
    "The weather is nice today, so we walked to the park.",
    "Can you tell me where the nearest bus stop is?",
    "I need to buy milk, bread and a dozen eggs.",
    "My sister called me last night to say hello.",
    "The meeting starts at nine in the morning.",
    "Turn left at the next corner and keep going.",
    "We should take an umbrella because it might rain.",
    "This coffee is too hot to drink right now.",
    "He forgot his keys on the kitchen table again.",
    "The ferry to the island leaves every twenty minutes.",
    "Could you please speak a little more slowly?",
    "She reads a book before going to sleep.",
    "Our neighbors have a big brown dog.",
    "I will send you the report by Friday afternoon.",
    "The children are playing football in the garden.",
    "Do you want tea or water with your lunch?",
    "The store closes at six on Sundays.",
    "My phone battery is almost empty.",
    "Let's meet in front of the library at noon.",
    "It took us three hours to drive home.",
    "The doctor said I should rest for a few days.",
    "Please write your name at the top of the page.",
    "There are seven days in a week.",
    "I like to listen to music while I cook dinner.",
    "The baby finally fell asleep after midnight.",
    "We are going to visit our grandparents next month.",
    "How much does this jacket cost?",
    "The light in the bathroom is not working.",
    "He runs five miles every morning before work.",
    "Thank you very much for your help yesterday.",
    "The soup needs a little more salt.",
    "I lost my wallet somewhere in the shopping mall.",
    "Remember to water the plants while I am away.",
    "The flight was delayed because of the snow.",
    "Can I pay with a credit card here?",
    "My brother works as a nurse at the hospital.",
    "The movie was long but very funny.",
    "Please turn off the television when you are done.",
    "We ordered pizza and watched a film at home.",
    "The price of apples went up this year.",
    "I usually wake up at half past six.",
    "Is there a pharmacy open near here tonight?",
    "The teacher asked us to read the first chapter.",
    "Our car needs new tires before winter.",
    "She bought a red dress for the party.",
    "You can find the towels in the top drawer.",
    "The river is very cold at this time of year.",
    "I have an appointment with the dentist on Tuesday.",
    "They painted the fence white last weekend.",
    "Where did you put the scissors?",
    "The room has two beds and a small desk.",
    "Please call me when you get to the station.",
    "I am sorry, but I cannot come to dinner tonight.",
    "The kids want ice cream after school.",
    "He fixed the broken chair with some glue.",
    "We need four more chairs for the guests.",
    "The sun sets early in December.",
    "My grandmother grows tomatoes in her backyard.",
    "It is quieter here than in the city center.",
    "Don't forget to lock the door when you go out.",
    "The package should arrive in two or three days.",
    "I would like a glass of orange juice, please.",
    "The elevator is on the left side of the hall.",
    "Our team won the game by one point.",
    "She has lived in this town for ten years.",
    "Wash your hands before you sit down to eat.",
    "The printer is out of paper again.",
    "What time does the museum open tomorrow?",
    "I walked the dog around the lake this morning.",
    "There is a good bakery across the street.",
    "We will repaint the kitchen before the holidays.",
)


def add_judged_run_options(p: argparse.ArgumentParser) -> None:
    """The options every judged run over the held-out sentences takes: ``--checkpoint``, ``--sentences`` (checked
    against the set's size when parsed) and ``--jobs``."""

    def count(text: str) -> int:
        n = int(text)
        if not 1 <= n <= len(HELDOUT_SENTENCES):
            raise argparse.ArgumentTypeError(f"{n}: the held-out set has 1 to {len(HELDOUT_SENTENCES)}")
        return n

    p.add_argument("--checkpoint", type=Path, help="default: the shipped default voice")
    p.add_argument("--sentences", type=count, default=30, help=f"held-out sentences (at most {len(HELDOUT_SENTENCES)})")
    p.add_argument("--jobs", type=int, default=2, help="worker processes that render and judge")
