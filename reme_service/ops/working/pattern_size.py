"""How large a client's regular expression becomes when the `regex` package compiles it, read from its text.

`regex` expands the *minimum* count of a counted repeat into copies of what it repeats, and nested repeats
multiply: `((((a{100}){100}){100}){100})`, 30 characters, asks for 10^8 copies and took a server past 23 GB before
the kernel killed it; `(?:a{1000}){1000}b` compiles for 0.3 s holding the GIL (the event loop with it) and 300 MB.
Compiling cannot be interrupted, so the size is judged before: `expanded_size` is the number of atoms the pattern
stands for once every repeat's minimum is expanded (`a{3}` 3, `(ab|c){2,9}` 4, `a*` 1, `a{0,60000}` 1), and a
pattern over `MAX_EXPANDED_ATOMS` is refused. Measured: 10,000 atoms compile in 2-18 ms.

Verbose mode (`(?x)`, `(?x:...)`) is refused (`turns_on_verbose`): there whitespace and `#` comments are not
atoms, so a count after them repeats what came before (`(?x)((a{100}) {100}) {100}`), and where the flag applies
cannot be read without parsing the pattern. Comments `(?#...)` and inline flags `(?i)` are invisible, as they are
to `regex`: a count after one repeats what came before it.

The reading is deliberately simple and errs large: escapes and character classes are one atom each, a group's
`?:` or name counts as text, an alternation counts its largest branch, and text `regex` itself would reject is
counted as it stands (compiling it fails afterwards with the usual 400).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

MAX_EXPANDED_ATOMS = 10_000
_COUNT = re.compile(r"\{(\d*)(?:,(\d*))?\}")  # {m}, {m,}, {m,n}, {,n}; anything else in braces is literal (or fuzzy)
_BRACED_ESCAPES = frozenset("pPNxuUgk")  # \p{L}, \N{name}, \x{263a}, \g{1}: the braces belong to the escape
# an inline flag group that turns verbose mode on: (?x), (?ix:...), (?V1x-s:...), (?^x)
_VERBOSE = re.compile(r"\(\?\^?[a-zA-Z0-9]*x[a-zA-Z0-9]*(?:-[a-zA-Z0-9]*)?[:)]")
# groups `regex` leaves out of the pattern, so a count after one repeats what came before: (?#...), (?i), (?V1-s)
_INVISIBLE = re.compile(r"\(\?#[^)]*\)?|\(\?\^?[a-zA-Z0-9-]*\)")


@dataclass
class _Group:
    size: int = 0  # atoms of the current branch
    largest: int = 0  # atoms of the largest branch closed by `|`
    last: int = 0  # atoms of the last item, which a following count multiplies


def turns_on_verbose(pattern: str) -> bool:
    """Whether `pattern` has an inline flag group turning verbose mode on (an escaped `\\(?x)` counts too: a
    literal that rare may be written `[(]?x\\)`)."""
    return _VERBOSE.search(pattern) is not None


def expanded_size(pattern: str) -> int:
    """The atoms `pattern` stands for with each counted repeat's minimum expanded (see the module docstring)."""
    stack = [_Group()]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        group = stack[-1]
        if ch == "\\":
            end = i + 2
            if end < n and pattern[i + 1] in _BRACED_ESCAPES and pattern[end] == "{":
                close = pattern.find("}", end)
                end = n if close < 0 else close + 1
            _add(group, 1)
            i = end
        elif ch == "[":
            i = _class_end(pattern, i)
            _add(group, 1)
        elif ch == "(" and (invisible := _INVISIBLE.match(pattern, i)) is not None:
            i = invisible.end()  # nothing, and the last item stays the one a count repeats
        elif ch == "(":
            stack.append(_Group())
            i += 1
        elif ch == ")" and len(stack) > 1:
            inner = stack.pop()
            _add(stack[-1], max(inner.largest, inner.size))
            i += 1
        elif ch == "|":
            group.largest, group.size, group.last = max(group.largest, group.size), 0, 0
            i += 1
        elif ch == "{" and (count := _COUNT.match(pattern, i)) is not None:
            least = int(count.group(1) or 0)
            # the item already counts once: add the other least - 1 copies (a least of 0 expands nothing)
            extra = group.last * (max(least, 1) - 1)
            group.size += extra
            group.last += extra
            i = count.end()
        elif ch.isspace():  # an atom, but never the item a count repeats (in verbose mode, not even an atom)
            group.size += 1
            i += 1
        else:  # a literal, or `*`, `+`, `?`, `.`, `^`, `$`: a quantifier without a count expands nothing
            if ch not in "*+?":
                _add(group, 1)
            i += 1
    while len(stack) > 1:  # an unclosed group (regex refuses it when compiling)
        inner = stack.pop()
        _add(stack[-1], max(inner.largest, inner.size))
    return max(stack[0].largest, stack[0].size)


def _add(group: _Group, atoms: int) -> None:
    group.size += atoms
    group.last = atoms


def _class_end(pattern: str, start: int) -> int:
    """The index after the character class opening at `start` (`]` right after `[` or `[^` is a member)."""
    i = start + 1
    if i < len(pattern) and pattern[i] == "^":
        i += 1
    if i < len(pattern) and pattern[i] == "]":
        i += 1
    while i < len(pattern):
        if pattern[i] == "\\":
            i += 2
            continue
        if pattern[i] == "]":
            return i + 1
        i += 1
    return len(pattern)
