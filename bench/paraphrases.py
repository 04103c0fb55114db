"""Statements and the paraphrased questions that ask for them (bench/recall_semantic.py).

Each question shares no content word with the statement that answers it (checked by
`shared_words`): a person asks in their own words, not in the words said weeks ago. "{a}" is
the speaker who said it, named in the conversation as every message's speaker is, and in most
questions, as people ask about someone.
"""

from __future__ import annotations

import re

_PAIRS = """
I've been painting abstracts lately, mostly big canvases in blue.
    What kind of art does {a} make?
We adopted a rescue dog last spring; she sleeps on the sofa.
    Which pet joined {a}'s household?
My sister is getting married in June, in a vineyard outside Lyon.
    When is the wedding of {a}'s sibling?
I quit my job at the bank to study nursing.
    What career change did {a} decide on?
The doctor told me my cholesterol is too high, so no more fries.
    What health problem came up at the checkup?
We drove down the coast to Big Sur over the long weekend.
    Where did {a} go on the road trip?
I've started learning Japanese with an app every morning.
    Which language is {a} studying?
My grandmother passed away last Tuesday at ninety-one.
    Who in the family died recently?
I ran my first marathon in four hours and ten minutes.
    How long did the race take {a}?
Our basement flooded after the storm and the carpet is ruined.
    What water damage happened to the house?
I'm allergic to peanuts, so the cake had to be made without them.
    What food can {a} not eat?
We're moving to Denver in August because of my husband's new position.
    Which city is {a} relocating to?
I bought a used Subaru with ninety thousand miles on it.
    What vehicle did {a} purchase?
The kids are obsessed with dinosaurs, especially the triceratops.
    Which prehistoric creatures do the children love?
I volunteer at the animal shelter every Saturday morning.
    Where does {a} help out on weekends?
My favourite band is Radiohead; I saw them live in 2017.
    Which musical group does {a} like best?
I broke my wrist snowboarding in Colorado.
    What injury did {a} get on the slopes?
We planted tomatoes, basil and zucchini in the backyard.
    What vegetables are growing in {a}'s garden?
I'm reading a biography of Abraham Lincoln right now.
    Which book about a president is {a} into?
My son just got his driver's licence after failing twice.
    What test did {a}'s boy finally pass?
I switched to a vegan diet in January.
    What eating change did {a} make at the start of the year?
Our team won the regional volleyball tournament.
    Which sports competition did {a}'s squad take first place in?
I've been having trouble sleeping since the new neighbours arrived.
    Why is {a} not resting well at night?
My apartment rent went up by three hundred dollars.
    How much more does {a} pay for housing each month?
I play the cello in a community orchestra.
    Which instrument does {a} perform on?
We celebrated our tenth anniversary in Lisbon.
    Where did {a} mark a decade of marriage?
I'm terrified of spiders, even tiny ones.
    What creepy crawlies is {a} afraid of?
The startup I joined makes software for dentists.
    What does {a}'s company build, and for whom?
My father is recovering from knee surgery.
    Which parent had an operation?
I've taken up pottery and made a lopsided vase.
    What craft hobby did {a} begin?
We lost power for two days during the ice storm.
    How long was {a} without electricity?
I'm saving up for a trip to Iceland next winter.
    Which vacation is {a} putting money aside for?
My cat Luna knocked a glass off the table this morning.
    What did {a}'s kitty break?
I got promoted to senior engineer last week.
    What new title did {a} earn at work?
We hosted Thanksgiving for twenty relatives this year.
    How many family members came to the holiday dinner?
I've been coughing for a week, probably just a cold.
    What illness symptoms does {a} have?
My laptop died, so I'm writing on my phone.
    Which computer broke down?
I finally finished the thousand-piece jigsaw puzzle.
    What game with many parts did {a} complete?
My daughter is starting kindergarten in September.
    When does {a}'s little girl begin school?
I hiked to the summit of Mount Rainier with my brother.
    Which peak did {a} reach on foot?
We're renovating the kitchen and the new cabinets are oak.
    What room is {a} remodeling?
I donate blood every three months at the clinic.
    What does {a} give to the hospital regularly?
My flight to Chicago was cancelled because of fog.
    Why was {a}'s plane trip called off?
I learned to bake sourdough during lockdown.
    What bread skill did {a} pick up in the pandemic?
The landlord finally fixed the leaking roof.
    Who repaired the drip above {a}'s ceiling?
I'm training my parrot to whistle the national anthem.
    What is {a} teaching the bird?
"""
# (statement, question) pairs: a statement, then its question on the next line, indented.
PAIRS = [
    (statement.strip(), question.strip())
    for statement, question in zip(*[iter(_PAIRS.strip().splitlines())] * 2, strict=True)
]

# Not content: the words every question is made of.
FUNCTION_WORDS = frozenset(
    """a an the and or but of to in on at for with by from about into over under after before
    up down out off is are was were be been being am has have had do does did will would can
    could should may might must i i've i'm we we're my our me us you your he she it its they
    them their his her this that these those what which who whom whose when where why how
    so just still even only very too more most no not some any every each all both s t""".split()
)
_WORD = re.compile(r"[a-z0-9']+")


def content_words(text: str) -> set[str]:
    """Lowercased words less function words, each cut to 5 letters (a crude stem: "paint" of
    "painting" and "painted" counts as shared)."""
    return {w[:5] for w in _WORD.findall(text.lower()) if w not in FUNCTION_WORDS}


def shared_words(statement: str, question: str, speakers: tuple[str, ...]) -> set[str]:
    names = {name.lower()[:5] for name in speakers}
    return (content_words(statement) & content_words(question)) - names
