"""Deterministic text rules of the no-LLM path: sentence splitting, information scores, keywords, dedup keys.

Information score of a message (the LLM path's scale, 0-3), from its statements (sentences that are not
questions):

* 3 — an explicit request to remember ("remember that ...", "记住"), or a first-person statement about the
  user's profile, preferences, relationships or life ("I am", "I live", "I love", "my wife", "我喜欢", "我的女儿");
* 2 — another first-person statement ("I", "my", "we", "我") of at least three words (or six characters);
* 1 — hypothetical or fictional content ("imagine", "what if", "假如"), a very short first-person remark, or a
  longer statement (eight words or more, twelve characters in Chinese) that does not speak of the user;
* 0 — nothing but questions, greetings and short remarks.

English and Chinese are both recognised in every text.
"""

from __future__ import annotations

import re
from collections import Counter

_SENTENCE_RE = re.compile(r"[^.!?。！？…\n]+[.!?。！？…]*", re.UNICODE)
_WORD_RE = re.compile(r"[A-Za-z][A-Za-z'-]*|\d+")
_CJK_RE = re.compile(r"[\u4e00-\u9fff]")
_CJK_RUN_RE = re.compile(r"[\u4e00-\u9fff]+")
_I = re.IGNORECASE

FIRST_PERSON_RE = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|im|me|my|mine|myself|we|we're|we've|our|ours|us)\b|我|咱", _I)
HYPOTHETICAL_RE = re.compile(
    r"\b(?:imagine|suppose|supposing|pretend|what\s+if|if\s+i\s+were|once\s+upon|role-?play|fictional|"
    r"in\s+(?:the|my)\s+(?:story|novel|script)|my\s+character)\b|假如|假设|如果我是|想象一下|故事里|小说里|扮演",
    _I,
)
REMEMBER_RE = re.compile(
    r"\b(?:remember|don't\s+forget|do\s+not\s+forget|keep\s+in\s+mind|note\s+that|for\s+the\s+record)\b"
    r"|记住|别忘|不要忘|记一下|请记得",
    _I,
)
_RELATIONS = (
    r"wife|husband|partner|boyfriend|girlfriend|son|daughter|kids?|children|mom|mum|mother|dad|father|parents|"
    r"brother|sister|family|friends?|boss|colleagues?|job|work|birthday|favou?rite|dog|cat|pets?|home|hometown"
)
PROFILE_RE = re.compile(
    rf"\b(?:my\s+name|i\s+am|i'm|i\s+live|i\s+work|i\s+like|i\s+love|i\s+hate|i\s+prefer|i\s+enjoy|"
    rf"i\s+can't\s+stand|i\s+don't\s+(?:like|eat|drink)|allergic|i\s+was\s+born|i\s+grew\s+up|i\s+study|"
    rf"i\s+graduated|i've\s+been|i\s+have\s+been|my\s+(?:{_RELATIONS}))\b"
    r"|我叫|我是|我住|我在.{0,8}(?:工作|上学|读书)|我喜欢|我爱|我讨厌|我不喜欢|我不吃|过敏|我出生|我毕业"
    r"|我的(?:妻子|老婆|丈夫|老公|儿子|女儿|孩子|妈妈|爸爸|父母|家人|朋友|工作|生日|宠物|名字)",
    _I,
)
_QUESTION_END_RE = re.compile(r"(?:[?？]|[吗呢么嘛][。.!！]?)\s*$")

_STOPWORD_TEXT = """
    a about above after again against all also am an and any are aren't as at be because been before being below
    between both but by can can't could did didn't do does doesn't doing don't down during each few for from further
    had hadn't has hasn't have haven't having he he'd he'll he's her here here's hers herself him himself his how
    how's i i'd i'll i'm i've if in into is isn't it it's its itself just let's me more most much my myself no nor not
    now of off on once only or other ought our ours ourselves out over own really same she she'd she'll she's should
    shouldn't so some such than that that's the their theirs them themselves then there there's these they they'd
    they'll they're they've this those through to too under until up very was wasn't we we'd we'll we're we've were
    weren't what what's when when's where where's which while who who's whom why why's will with won't would
    wouldn't you you'd you'll you're you've your yours yourself yourselves yeah yes oh wow hey hi hello thanks thank
    okay ok lol haha got get gets getting go going gone went really pretty super totally definitely actually
    thing things stuff lot lots kind sort way ways like just still even ever one two also much many every
"""
STOPWORDS = frozenset(_STOPWORD_TEXT.split())
_CJK_STOP = frozenset("的了是我你他她它们在有和就也都很吗呢吧啊这那个不还要会")


def split_sentences(text: str) -> list[str]:
    """Sentences, with their end punctuation; blank pieces dropped."""
    return [s.strip() for s in _SENTENCE_RE.findall(text) if s.strip()]


def is_question(sentence: str) -> bool:
    return bool(_QUESTION_END_RE.search(sentence))


def statements(text: str) -> list[str]:
    """The sentences of `text` that are not questions."""
    return [s for s in split_sentences(text) if not is_question(s)]


def _length(text: str) -> int:
    """Words, counting each Chinese character as half a word (so six characters count as three words)."""
    return len(_WORD_RE.findall(text)) + len(_CJK_RE.findall(text)) // 2


def info_score(text: str) -> int:
    """The 0-3 information score of a message (see the module docstring)."""
    body = " ".join(statements(text))
    if not body:
        return 0
    if HYPOTHETICAL_RE.search(body):
        return 1
    if REMEMBER_RE.search(body):
        return 3
    if FIRST_PERSON_RE.search(body):
        if PROFILE_RE.search(body):
            return 3
        return 2 if _length(body) >= 3 else 1
    return 1 if _length(body) >= 8 else 0


def observation_text(text: str) -> str:
    """What a no-LLM observation keeps of a message: its statements (questions removed), else the message."""
    kept = statements(text)
    return " ".join(kept) if kept else text.strip()


def tokens(text: str) -> list[str]:
    """Content tokens: lower-case words of three letters or more that are not stop words, and Chinese
    character bigrams without stop characters."""
    out = [w for w in (m.lower().strip("'-") for m in _WORD_RE.findall(text)) if len(w) >= 3 and w not in STOPWORDS]
    for run in _CJK_RUN_RE.findall(text):
        out += [run[i : i + 2] for i in range(len(run) - 1) if not (set(run[i : i + 2]) & _CJK_STOP)]
    return out


def keywords(text: str, limit: int = 5) -> list[str]:
    """The most frequent content tokens, first occurrence breaking ties."""
    counts = Counter(tokens(text))
    order = {token: i for i, token in reversed(list(enumerate(tokens(text))))}
    return sorted(counts, key=lambda t: (-counts[t], order[t]))[:limit]


def dedup_key(text: str) -> str:
    """Text reduced for duplicate detection: lower case, letters, digits and Chinese characters only."""
    return re.sub(r"[^0-9a-z\u4e00-\u9fff]+", "", text.lower())


def token_overlap(subject: str, text: str) -> float:
    """The share of `subject`'s tokens found in `text` (a crude plural strip on both sides); 0 for no tokens."""
    wanted = {t.rstrip("s") for t in tokens(subject)} or {dedup_key(subject)} - {""}
    if not wanted:
        return 0.0
    have = {t.rstrip("s") for t in tokens(text)}
    key = dedup_key(text)
    hits = sum(1 for t in wanted if t in have or (len(t) >= 2 and _CJK_RE.search(t) and t in key))
    return hits / len(wanted)
