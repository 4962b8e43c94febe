"""docslib.py: what test_docs.py reads from the documentation: fenced blocks with their
docs-check markers, backticked messages in prose, and the C sources' format strings."""
import glob
import os
import re

from conftest import ROOT

DOCS = ["README.md"] + sorted(os.path.relpath(p, ROOT) for p in glob.glob(os.path.join(ROOT, "docs", "*.md")))

# The marker kinds (docs/testing.md, "The documentation check"). A marker is an HTML
# comment `<!-- docs-check: KIND[: ARGUMENT] -->` on the lines right before a block; the
# argument may run over several lines.
KINDS = ("run", "output of", "config", "commands", "promql", "tested by")

MARKER = re.compile(r"<!--\s*docs-check:\s*(.*?)\s*-->", re.S)


class Block:
    def __init__(self, doc, line, lang, text, kind, arg):
        self.doc, self.line, self.lang, self.text, self.kind, self.arg = doc, line, lang, text, kind, arg

    @property
    def where(self):
        return f"{self.doc}:{self.line}"

    def __repr__(self):
        return f"<{self.where} {self.kind}>"


def blocks(doc):
    """Every fenced block of doc (a path relative to ROOT), with the marker before it.
    A block without a marker has kind None; line is the fence's line (1-based)."""
    text = open(os.path.join(ROOT, doc)).read()
    lines = text.split("\n")
    out, i = [], 0
    offsets = [0]
    for l in lines:
        offsets.append(offsets[-1] + len(l) + 1)
    while i < len(lines):
        m = re.match(r"^(\s*)```(\S*)\s*$", lines[i])
        if not m:
            i += 1
            continue
        end = next((j for j in range(i + 1, len(lines)) if lines[j].strip() == "```"), None)
        assert end is not None, f"{doc}:{i + 1}: code block without its closing fence"
        body = "\n".join(l[len(m.group(1)):] for l in lines[i + 1:end])
        kind, arg = _marker_before(text, offsets[i])
        out.append(Block(doc, i + 1, m.group(2), body, kind, arg))
        i = end + 1
    return out


def _marker_before(text, pos):
    """(kind, argument) of the marker comment that ends on the line before pos, or (None, None)."""
    head = text[:pos].rstrip("\n")
    if not head.endswith("-->"):
        return None, None
    start = head.rfind("<!--")
    m = MARKER.fullmatch(head[start:])
    if not m:
        return None, None
    body = m.group(1)
    for k in KINDS:
        if body == k or body.startswith(k + ":"):
            return k, body[len(k) + 1:].strip() or None
    return "unknown: " + body, None


def prose_markers(doc, kind):
    """[(line, argument)] of the markers of kind that stand in prose (not before a block)."""
    text = open(os.path.join(ROOT, doc)).read()
    out = []
    for m in MARKER.finditer(text):
        body = m.group(1)
        after = text[m.end():].lstrip(" ")
        quoted = text[m.start() - 1:m.start()] == "`"   # a marker shown in the docs
        if body.startswith(kind + ":") and not after.startswith("\n```") and not quoted:
            out.append((text.count("\n", 0, m.start()) + 1, body[len(kind) + 1:].strip()))
    return out


# ---- messages quoted inline -------------------------------------------------------------

# Backticked text that is a message of another program, quoted as such. The check skips
# exactly these (each says whose it is).
NOT_PROWL = {
    "Server reached connection limit...": "libmicrohttpd",
    "bad repetition operator: +": "glibc's regerror()",
    "agent/cli/record.c:494:6: runtime error: signed integer overflow": "UBSan",
    "agent/config/config.c:576:7: runtime error": "UBSan",
    "runtime error:": "UBSan",
    "N passed, N failed, N skipped": "tests/run.sh",
    "0 passed, 1 failed": "tests/run.sh",
    "Unmatched ( or \\(": "glibc's regerror()",
}
# Spans that show a message's shape, words standing for its parts.
TEMPLATES = {"[truncated: why]", "[truncated: x]", "FILE:LINE: recording_rules[N].KEY: what is wrong"}
# Spans that start with a command, or are code, not output.
_COMMAND = re.compile(r"^(sudo |prowl |make |kubectl |pytest |python3 |[A-Z][A-Z0-9_]*=|/usr/bin/time |skopeo |podman |"
                      r"apt |dpkg|systemctl |journalctl |eu-addr2line |pprof |diff --|<!--|\$ |\S+ -|[a-z_]+: [\[{]|tests/|if \(|for \(|return )")
_MESSAGE_START = re.compile(r"^(prowl: |regression: |\[truncated: |\[deleted|\[python: |\[jit)")


def inline_messages(doc):
    """[(line, text)] of the backticked spans of doc that quote a message of prowl: those
    that start like one (`prowl: `, `regression: `, `[truncated: `...), those in the
    first column of a table whose first header is "Symptom", and prose spans of at least
    four words with no code in them (no `=`, `(` after a name, `{`, `->`). Fenced blocks
    are left out (their markers say how they are checked)."""
    lines = open(os.path.join(ROOT, doc)).read().split("\n")
    fenced, symptom_table, symptom_cells = False, False, set()
    for n, line in enumerate(lines):
        if line.strip().startswith("```"):
            fenced = not fenced
        if fenced or line.strip().startswith("```"):
            lines[n] = ""   # keeps the line numbers
            continue
        cells = re.split(r"(?<!\\)\|", line)[1:-1] if line.startswith("|") else []
        if cells and re.fullmatch(r"\s*Symptom\s*", cells[0]):
            symptom_table = True
        elif cells and symptom_table:
            symptom_cells.add((n + 1, len(cells[0]) + 1))
        else:
            symptom_table = symptom_table and bool(cells)
    text, out = "\n".join(lines), []
    for m in re.finditer(r"`([^`]+)`", text):
        n = text.count("\n", 0, m.start()) + 1
        span = re.sub(r"\s+", " ", m.group(1).replace("\\|", "|"))
        if span in NOT_PROWL or span in TEMPLATES or _COMMAND.match(span):
            continue
        col = m.start() - (text.rfind("\n", 0, m.start()) + 1)
        in_symptom = any(ln == n and col < end for ln, end in symptom_cells) and " " in span
        if _MESSAGE_START.match(span) or in_symptom or _prose_message(span):
            out.append((n, span))
    return out


def _prose_message(span):
    if span.count(" ") < 3 or not re.match(r"^[A-Za-z0-9.\[]", span):
        return False
    return not re.search(r"\s[-+*/=]\s|\w\(|[{}<>]|->|→|\\\||\);?$|^[a-z_]+: \S+$|^and |^\S+ \S+ \S+$", span)


# ---- the C sources' format strings --------------------------------------------------------

WILD_IN, WILD_EDGE = object(), object()
_CONV = re.compile(r"%[-+ #0']*(\*|\d+)?(\.(\*|\d+))?(hh|h|ll|l|z|j|t|L)?[diouxXeEfgGcsp]")
_ESC = {"n": "\n", "t": "\t", "\\": "\\", '"': '"', "'": "'", "0": "\0", "r": "\r"}


def c_formats():
    """Every string literal of the C sources outside tests (adjacent literals joined, a
    PRI* macro between them read as `d`, PROWL_STR(NAME) as the number NAME is defined
    as), as a list of tokens: characters, and WILD_* where a conversion fills in a value. Glue (fewer than 4 letters of text) is left out."""
    out = []
    paths = []
    for path in sorted(glob.glob(os.path.join(ROOT, "**", "*.[ch]"), recursive=True)):
        rel = os.path.relpath(path, ROOT)
        if rel.startswith(("tests/", "build")) or "/build" in rel:
            continue
        src = open(path, errors="replace").read()
        paths.append((rel, re.sub(r"/\*.*?\*/", " ", src, flags=re.S)))
    # PROWL_STR(NAME) between literals (bpf/prowl.h) is NAME's number: "127 frames".
    numbers = {n: v for _, src in paths for n, v in re.findall(r"^#define (\w+)\s+(\d+)\b", src, re.M)}
    for rel, src in paths:
        src = re.sub(r"PROWL_STR\((\w+)\)", lambda e: '"%s"' % numbers.get(e.group(1), "%d"), src)
        for m in re.finditer(r'"(?:[^"\\\n]|\\.)*"(?:\s*(?:PRI\w+|"(?:[^"\\\n]|\\.)*"))*', src):
            parts = re.findall(r'"((?:[^"\\\n]|\\.)*)"|(PRI\w+)', m.group(0))
            s = "".join(lit if lit or not pri else "d" for lit, pri in parts)
            s = re.sub(r"\\(.)", lambda e: _ESC.get(e.group(1), e.group(1)), s)
            if sum(c.isalpha() for c in _CONV.sub("", s)) < 4 and not re.fullmatch(r"\[\w+\]", s):
                continue
            out.append((rel, _tokens(s)))
    return out


def _tokens(s):
    toks, i, s = [], 0, s.strip()
    while i < len(s):
        if s.startswith("%%", i):
            toks.append("%")
            i += 2
            continue
        m = _CONV.match(s, i) if s[i] == "%" else None
        if m:
            toks.append(WILD_IN)
            i = m.end()
            continue
        toks.append(s[i])
        i += 1
    if toks and toks[0] is WILD_IN:
        toks[0] = WILD_EDGE
    if toks and toks[-1] is WILD_IN:
        toks[-1] = WILD_EDGE
    return toks


class Formats:
    """Matches quoted messages against the format strings. A quoted message is split at
    each `...` (text left out); every piece must be produced by a sequence of
      - a prefix: `prowl: error: `, `prowl: warning: `, `prowl: `, or a token and `: `
        (`FILE:LINE: `, `exporters.otlp.timeout: `, a component name), which the logger or a
        caller puts before a message;
      - whole format strings, each conversion filled by any text (one with no text on
        one side, at the string's start or end, only by text without spaces).
    A piece next to a `...` may start (or end) inside a format string's text."""

    def __init__(self):
        self.formats = c_formats()
        self.by_word = {}
        for i, (_, toks) in enumerate(self.formats):
            text = "".join(t if isinstance(t, str) else " " for t in toks)
            for w in set(re.findall(r"[A-Za-z_]{3,}", text)):
                self.by_word.setdefault(w, set()).add(i)

    def explain(self, message, open_ends=False):
        """None if every piece of message is produced as above, else the piece that is not.
        open_ends: the quote may be cut at both ends (a quote in prose)."""
        message = re.sub(r"\+0x[0-9a-f]*(?=\.\.\.|…|$)", "", message)   # an address's offset
        pieces = [p for p in re.split(r"\s*(?:\.\.\.|…)\s*", message)]
        for k, p in enumerate(pieces):
            # A piece without letters, or a lone token between two cuts, is a value.
            if not re.search(r"[A-Za-z]", p) or (len(pieces) > 1 and re.fullmatch(r"\S+", p.strip())):
                continue
            left_open = k > 0 or open_ends
            right_open = k < len(pieces) - 1 or open_ends
            if not self._piece(p.strip(), left_open, right_open):
                return p.strip()
        return None

    def _piece(self, f, left_open, right_open):
        cands = set()
        for w in re.findall(r"[A-Za-z_]{3,}", f):
            cands |= self.by_word.get(w, set())
        reach = [False] * (len(f) + 1)
        reach[0] = True
        for i in range(len(f)):
            if not reach[i]:
                continue
            m = re.match(r"prowl: (error|warning): |prowl: |[^\s:\[\]]+(:[^\s:]+)*:( |$)|[:;,] ", f[i:])
            if m:
                reach[i + m.end()] = True
            if f[i] == " ":
                reach[i + 1] = True
            for c in cands:
                for j in self._ends(self.formats[c][1], f, i, left_open and i == 0, right_open):
                    reach[j] = True
        return reach[len(f)]

    @staticmethod
    def _ends(toks, f, i0, start_inside, end_inside):
        """Positions j such that f[i0:j] is produced by toks (from its start, or from
        inside its text when start_inside), ending at its end (or inside when end_inside
        and j is the end of f). A start or end inside the text must match at least 8
        characters of it (or the whole piece) before or after any filled-in value."""
        need = min(6, len(f) - i0)
        # A state: (token index, literal characters matched (up to 6), whether the value
        # being filled in holds a space, length of the last run of literal characters,
        # whether it is a value the quote starts in, which takes no spaces).
        starts = {(0, 0, False, 0, False)}
        if start_inside:
            starts |= {(t, 0, False, 0, not isinstance(tok, str)) for t, tok in enumerate(toks)
                       if tok == f[i0] or not isinstance(tok, str)}

        def close(st):
            todo, st = list(st), set(st)
            while todo:
                t, lit, sp, run, edge = todo.pop()
                nxt = (t + 1, lit, sp, run, False)
                if t < len(toks) and not isinstance(toks[t], str) and nxt not in st:
                    st.add(nxt)
                    todo.append(nxt)
            return st
        states, ends = close(starts), set()
        if any(s[0] == len(toks) for s in states):
            ends.add(i0)
        for i in range(i0, len(f)):
            c, nxt = f[i], set()
            for t, lit, sp, run, edge in states:
                if t >= len(toks):
                    continue
                tok = toks[t]
                if tok is WILD_IN and not (edge and c == " ") or (tok is WILD_EDGE and c != " "):
                    nxt.add((t, lit, sp or c == " ", -abs(run), edge))
                elif tok == c:
                    nxt.add((t + 1, min(lit + 1, 6), False, min(run + 1, 6) if run >= 0 else 1, False))
            states = close(nxt)
            if not states:
                break
            if any(s[0] == len(toks) and (s[1] >= need or not start_inside) for s in states):
                ends.add(i + 1)
            elif end_inside and i + 1 == len(f) and \
                    any(lit >= need and not sp and abs(run) >= need for _, lit, sp, run, _ in states):
                ends.add(i + 1)
        return ends
