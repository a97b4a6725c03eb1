"""HotpotQA's 12 answer types as InstructRAG tasks, 6 seen and 6 unseen (drawn once with ``random.Random(0)``), derived
by a fixed rule from the answer, else the question's cue words, else the answer's form."""

from __future__ import annotations

import random
import re

__all__ = ["ANSWER_TYPES", "SEEN_TASKS", "UNSEEN_TASKS", "answer_type", "question_type", "task_split"]

ANSWER_TYPES: tuple[str, ...] = ("person", "group/org", "location", "date", "number", "artwork", "yes/no",
                                 "adjective", "event", "other proper noun", "common noun", "other")
"""HotpotQA's answer types, the paper's 12 tasks."""

SEEN_TASKS: tuple[str, ...] = tuple(sorted(random.Random(0).sample(ANSWER_TYPES, 6)))  # training tasks
UNSEEN_TASKS: tuple[str, ...] = tuple(t for t in ANSWER_TYPES if t not in SEEN_TASKS)  # testing tasks

_MONTHS = ("january|february|march|april|may|june|july|august|september|october|november|december|"
           "jan|feb|mar|apr|jun|jul|aug|sep|sept|oct|nov|dec")
_DATE = re.compile(rf"^(?:(?:\d{{1,2}}\s+)?(?:{_MONTHS})\.?(?:\s+\d{{1,2}}(?:st|nd|rd|th)?)?,?(?:\s+\d{{3,4}})?|"
                   rf"\d{{3,4}}s?|(?:the\s+)?\d{{1,2}}(?:st|nd|rd|th)\s+century|\d{{4}}\s*[-–]\s*\d{{2,4}}|"
                   rf"\d{{1,2}}[/.-]\d{{1,2}}[/.-]\d{{2,4}})$", re.I)
_NUMBER_WORDS = ("zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen|fifteen|"
                 "sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|"
                 "hundred|thousand|million|billion|dozen")
_NUMBER = re.compile(rf"^(?:about\s+|over\s+|approximately\s+|more than\s+)?(?:[$£€]?\d[\d,.]*|{_NUMBER_WORDS})"
                     rf"(?:[\s-]+(?:{_NUMBER_WORDS}|%|percent|[a-z]+)){{0,2}}$", re.I)
_CUES: tuple[tuple[str, re.Pattern[str]], ...] = (
    ("adjective", re.compile(r"\bwhat (?:is the )?nationality\b|\bwhat kind of\b", re.I)),
    ("date", re.compile(r"^\s*when\b|\b(?:what|which|in what) year\b|\bwhat date\b|\bwhat decade\b|\bwhat century\b", re.I)),
    ("number", re.compile(r"\bhow (?:many|much|long|old|tall|far|large|big)\b|\bwhat (?:is the )?(?:population|number)\b", re.I)),
    ("person", re.compile(r"^\s*(?:who|whom|whose)\b|\b(?:which|what) (?:actor|actress|director|singer|person|man|woman|"
                          r"writer|author|player|musician|artist|politician|president|footballer|composer|producer|"
                          r"rapper|comedian|poet|king|queen|member)\b", re.I)),
    ("event", re.compile(r"\b(?:which|what) (?:war|battle|festival|tournament|championship|event|election|competition|"
                         r"race|games|olympics|award ceremony|revolution)\b", re.I)),
    ("artwork", re.compile(r"\b(?:which|what) (?:film|movie|album|song|single|book|novel|series|show|play|opera|painting|"
                           r"video game|game|sitcom|poem|musical|documentary|track|episode)\b", re.I)),
    ("group/org", re.compile(r"\b(?:which|what) (?:band|company|team|university|organization|organisation|group|club|party|"
                             r"label|record label|school|college|network|airline|agency|newspaper|magazine|brand|"
                             r"corporation|firm|studio|channel)\b", re.I)),
    ("location", re.compile(r"^\s*where\b|\b(?:which|what|in what|in which) (?:city|country|state|town|county|region|"
                            r"island|river|mountain|continent|province|village|borough|neighborhood|neighbourhood|"
                            r"district|location|place|area|lake)\b", re.I)),
)
_AUX = re.compile(r"^\s*(?:is|are|was|were|do|does|did|can|could|has|have|had|will|would|should|were)\b", re.I)
_ADJ = re.compile(r"^[A-Z][a-z]+(?:an|ian|ese|ish|ic|i|ch)(?:-[A-Z][a-z]+(?:an|ian|ese|ish|ic|i|ch))?$")


def _form_type(answer: str) -> str:
    words = answer.split()
    if len(words) <= 2 and all(_ADJ.match(w) for w in words) and not answer.lower().endswith(("ia", "ic ocean")):
        return "adjective"
    if any(w[:1].isupper() for w in words):
        return "other proper noun"
    return "common noun" if words and all(re.fullmatch(r"[a-z][a-z'-]*", w) for w in words) else "other"


def answer_type(answer: str, question: str = "") -> str:
    """The HotpotQA answer type of a gold ``answer`` to ``question`` (the rule in the module docstring)."""
    a = " ".join(str(answer or "").split()).strip(" .")
    low = a.lower()
    if low in ("yes", "no"):
        return "yes/no"
    if a and _DATE.match(a):
        return "date"
    if a and _NUMBER.match(a) and re.search(r"\d|" + _NUMBER_WORDS, low):
        return "number"
    if a.startswith(('"', "“", "'")) and a.endswith(('"', "”", "'")) and len(a) > 2:
        return "artwork"
    cued = (task for task, cue in _CUES if task not in ("date", "number") and cue.search(question or ""))
    return next(cued, _form_type(a) if a else "other")  # date and number: the answer's form decided above


def question_type(question: str) -> str:
    """The answer type a question asks for, from its wording alone (run time, when no answer is known)."""
    q = question or ""
    if _AUX.match(q):
        return "yes/no"
    return next((task for task, cue in _CUES if cue.search(q)),
                "common noun" if re.match(r"^\s*what\b", q, re.I) else "other proper noun")


def task_split(task: str) -> str:
    """``seen`` for a training task, ``unseen`` for a testing task, ``other`` for a label outside the 12."""
    return "seen" if task in SEEN_TASKS else "unseen" if task in UNSEEN_TASKS else "other"
