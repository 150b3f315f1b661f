"""Varied, natural sentences for recall benchmarks (never random vectors).

Random vectors are the worst case for HNSW and say nothing about text, so
the benchmarks embed sentences: the knowledge-updates statements split into
sentences, and sentences built from templates of the kinds of things a
memory service holds (preferences, decisions, facts about people, places,
projects, events), with enough vocabulary that 100,000 are distinct.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Iterator
from pathlib import Path

__all__ = ["dataset_sentences", "sentences"]

DATASET = Path(__file__).resolve().parents[3] / "shared/datasets/knowledge-updates/dev.jsonl"

_PEOPLE = [
    "Alice",
    "Bob",
    "Carmen",
    "Dmitri",
    "Elena",
    "Farid",
    "Grace",
    "Hiro",
    "Ines",
    "Jonas",
    "Keiko",
    "Liam",
    "Maya",
    "Noor",
    "Omar",
    "Priya",
    "Quentin",
    "Rosa",
    "Sven",
    "Tamar",
    "Umar",
    "Vera",
    "Wei",
    "Ximena",
    "Yusuf",
    "Zara",
    "Ana",
    "Ben",
    "Chloe",
    "Diego",
    "Eva",
    "Felix",
    "Gina",
    "Hugo",
    "Ivy",
    "Jack",
    "Kira",
    "Leo",
    "Mila",
    "Nils",
]
_THINGS = [
    "dark mode",
    "light mode",
    "green tea",
    "black coffee",
    "oat milk",
    "window seats",
    "aisle seats",
    "vim",
    "emacs",
    "VS Code",
    "tabs over spaces",
    "two-space indentation",
    "morning meetings",
    "async standups",
    "Python",
    "Rust",
    "TypeScript",
    "Go",
    "PostgreSQL",
    "SQLite",
    "Redis",
    "RabbitMQ",
    "Kafka",
    "spicy food",
    "vegetarian meals",
    "sushi",
    "Thai curry",
    "long walks",
    "cycling to work",
    "trail running",
    "jazz",
    "podcasts",
    "audiobooks",
    "paper notebooks",
    "a standing desk",
    "noise-cancelling headphones",
    "a mechanical keyboard",
    "short emails",
    "video calls",
    "written proposals",
    "weekly reports",
    "Friday deploys",
    "feature flags",
]
_PLACES = [
    "Lisbon",
    "Porto",
    "Berlin",
    "Kyoto",
    "Osaka",
    "Toronto",
    "Nairobi",
    "Lima",
    "Oslo",
    "Madrid",
    "Seoul",
    "Austin",
    "Denver",
    "Cape Town",
    "Dublin",
    "Prague",
    "Vienna",
    "Hanoi",
    "Bogota",
    "Melbourne",
    "Montreal",
    "Helsinki",
    "Istanbul",
    "Cairo",
]
_PROJECTS = [
    "Apollo",
    "Borealis",
    "Cobalt",
    "Delta",
    "Ember",
    "Fjord",
    "Granite",
    "Harbor",
    "Iris",
    "Juniper",
    "Kestrel",
    "Lumen",
    "Meridian",
    "Nimbus",
    "Orchid",
    "Pioneer",
    "Quartz",
    "Raven",
    "Sierra",
    "Tundra",
]
_DAYS = ["Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday"]
_MONTHS = [
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
]
_TEMPLATES = (
    "{p} prefers {t} over {t2}.",
    "{p} switched from {t2} to {t} last {m}.",
    "{p} moved to {pl} in {m}.",
    "{p} lives in {pl} and works remotely for {pr}.",
    "The {pr} team decided to use {t} for the next release.",
    "We decided to drop {t2} in {pr} because it slowed reviews.",
    "{p} is allergic to {t2}, so avoid it at team lunches.",
    "The {pr} retrospective is every other {d} at {h}:00.",
    "{p} asked to be reminded about the {pr} budget review on {d}.",
    "The {pr} deadline moved to the end of {m}.",
    "{p} owns the on-call rotation for {pr} this {m}.",
    "{p} likes {t} when working late on {pr}.",
    "{p}'s flight to {pl} leaves on {d} morning.",
    "{p} booked a hotel near the station in {pl} for the {pr} offsite.",
    "The {pr} service runs on {t} in the {pl} region.",
    "{p} is learning {t} and wants weekly practice problems.",
    "{p} does not want meetings before {h} on {d}s.",
    "{p} recommended a bakery in {pl} that sells great sourdough.",
    "{p} will be on leave from {d} until the end of {m}.",
    "Invoices for {pr} go to {p}, not to the shared inbox.",
    "{p} and {p2} pair on {pr} every {d} afternoon.",
    "{p} thinks {t} is overrated but tolerates it for {pr}.",
    "{p} ran a half marathon in {pl} in {m}.",
    "The {pr} demo for the board is scheduled for {d} the {n}th.",
    "{p}'s daughter starts school in {pl} this {m}.",
    "{p} wants summaries in bullet points, at most {n} lines.",
    "{p} prefers to be called {p2} by close colleagues.",
    "Release notes for {pr} must mention {t} changes explicitly.",
    "{p} keeps the {pr} credentials in the team vault, never in chat.",
    "{p} celebrated {n} years at the company in {m}.",
)


def sentences(count: int, *, seed: int = 7) -> list[str]:
    """Return ``count`` distinct sentences (deterministic for a seed)."""
    rng = random.Random(seed)
    seen: set[str] = set()
    out: list[str] = []
    while len(out) < count:
        t, t2 = rng.sample(_THINGS, 2)
        p, p2 = rng.sample(_PEOPLE, 2)
        text = rng.choice(_TEMPLATES).format(
            p=p,
            p2=p2,
            t=t,
            t2=t2,
            pl=rng.choice(_PLACES),
            pr=rng.choice(_PROJECTS),
            d=rng.choice(_DAYS),
            m=rng.choice(_MONTHS),
            h=rng.randint(7, 18),
            n=rng.randint(2, 30),
        )
        if text not in seen:
            seen.add(text)
            out.append(text)
    return out


def statement_sentences(text: str) -> list[str]:
    """Return a statement's sentences longer than 20 characters (each a memory of the
    recall benchmark's corpus)."""
    pieces = (piece.strip() for piece in re.split(r"(?<=[.!?])\s+", text))
    return [sentence for sentence in pieces if len(sentence) > 20]


def dataset_sentences(path: Path = DATASET) -> Iterator[str]:
    """Yield the knowledge-updates statements split into sentences (longer than 20
    characters), each once."""
    seen: set[str] = set()
    for line in path.read_text().splitlines():
        if not line.strip():
            continue
        pair = json.loads(line)
        for text in (pair["older"], pair["newer"]):
            for sentence in statement_sentences(text):
                if sentence not in seen:
                    seen.add(sentence)
                    yield sentence
