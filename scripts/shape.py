#!/usr/bin/env python3
"""scripts/shape.py — the source tree's shape, measured: what a newcomer meets first.

Reports, for the non-test code under src/:
  - the entries at the root of src/ (limit 12);
  - source files over 600 lines, test modules and test files not counted;
  - functions over 80 lines (outside tests);
  - the module import graph, file by file: its circles (strongly connected components of
    more than one module) and the imports that run back up (at most 2): a module importing
    from a higher layer (LAYERS: the folders of src/, lowest first), or from one of its own
    ancestors (a parent module is its children's table of contents, not their library);
  - `unsafe` blocks outside src/sys/ (where the thin wrappers over the system's calls
    live), type names (struct, enum, type, trait) defined more than once, and functions
    with a tuple parameter (a parameter whose pattern is a tuple, `(a, b): (A, B)`, which
    hides what the arguments are; one whose type alone is a tuple, `id: (u64, u64)`, is
    not counted). Each has a goal (30 blocks, one definition per name, no tuple
    parameter) and, until it is met, a limit at what the tree has now, lowered as it
    shrinks: nothing may grow;
  - messages with a remedy outside message functions: a `Hint:` or `Fix:` written
    anywhere but `sys::say` (its `hinted` and `with_fix` are the one shape of both) or an
    error type's `#[error]` attribute, and a function that both builds such a message and
    decides (`if`, `match`, a loop, `return`, `?`). Goal 0, with a limit as above.

An import is any `crate::`, `super::` or `self::` path in a `use` or in code, resolved to
the deepest module file it names; a name a module re-exports (`pub use`) is followed to
the module that defines it. `mod x;` declarations are not imports.

Usage: scripts/shape.py [--report]   (exit 1 when a limit is exceeded; --report: never)
"""
import os
import re
import sys

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src")
MAX_ROOT, MAX_FILE, MAX_FN, MAX_BACK = 12, 600, 80, 2
# unsafe blocks outside sys/, type names defined twice, functions with tuple parameters:
# (limit now, goal).
MAX_UNSAFE, GOAL_UNSAFE = 26, 30
MAX_TWICE, GOAL_TWICE = 0, 0
MAX_TUPLES, GOAL_TUPLES = 0, 0
# Hints and fixes written outside a message function (`loose_messages`): (limit now, goal).
MAX_LOOSE, GOAL_LOOSE = 0, 0
# The layers, lowest first: a module may import from its own layer and the ones below.
LAYERS = ["sys", "policy", "host", "protect", "sandbox", "netproxy", "helper", "session", "cli", "cmd"]
TEST_FILES = re.compile(r"(^|/)(tests|test_support)(\.rs|/)")


PATHED = {}  # files named by a `#[path]` attribute -> their module


def module_of(rel):
    """src-relative file path -> module path tuple."""
    if rel in PATHED:
        return PATHED[rel]
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib", "main"):
        parts = parts[:-1]
    return tuple(parts)


def strip_tests(text):
    """The text with #[cfg(test)] items (modules and functions) blanked, lines kept."""
    lines = text.split("\n")
    out, i = [], 0
    while i < len(lines):
        if re.match(r"\s*#\[cfg\((all\()?test", lines[i]):
            # skip the attribute, then the item up to its closing brace or semicolon
            depth, started, j = 0, False, i + 1
            while j < len(lines):
                code = strip_strings(lines[j])
                depth += code.count("{") - code.count("}")
                if "{" in code:
                    started = True
                if (started and depth <= 0) or (not started and code.rstrip().endswith(";")):
                    break
                j += 1
            out.extend([TEST_LINE] * (j - i + 1))
            i = j + 1
            continue
        out.append(lines[i])
        i += 1
    return "\n".join(out)


def strip_strings(text):
    """The text with its char literals, string contents and `//` comments blanked, in that
    order (a `//` inside a string, `"unix:///…"`, is no comment). A string may run over
    lines (a `\\` at a line's end continues it)."""
    text = re.sub(r"'(\\.|[^'\\])'", "''", text)
    text = re.sub(r'"(\\[\s\S]|[^"\\])*"', lambda m: '"' + "\n" * m.group(0).count("\n") + '"', text)
    return re.sub(r"//[^\n]*", "", text)


def inline_scopes(text):
    """For each line, the inline modules (`mod x {`) it sits in, innermost last."""
    stack, depth, out = [], 0, []
    for line in text.split("\n"):
        out.append(tuple(name for name, _ in stack))
        m = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*\{", line)
        if m:
            stack.append((m.group(1), depth))
        depth += line.count("{") - line.count("}")
        while stack and depth <= stack[-1][1]:
            stack.pop()
    return out


def files():
    for d, _, names in os.walk(ROOT):
        for n in names:
            if n.endswith(".rs"):
                rel = os.path.relpath(os.path.join(d, n), ROOT).replace(os.sep, "/")
                if not TEST_FILES.search(rel):
                    yield rel


TEST_LINE = "\x00"


def code_only(text):
    """The text with comments and string contents blanked, lines kept."""
    return strip_strings(text)


def type_names(code):
    """The struct, enum, trait and type alias names a file defines — not the associated
    types of its impls (`type Value = …` in a serde visitor: the trait's name, not ours)."""
    names, stack, pending = [], [], False
    for line in code.split("\n"):
        m = re.match(r"\s*(?:pub(?:\([^)]*\))?\s+)?(struct|enum|type|trait)\s+(\w+)", line)
        if m and not (m.group(1) == "type" and "impl" in stack):
            names.append(m.group(2))
        # An impl's header may run over lines (a `where` clause): its first brace opens it.
        pending = pending or bool(re.match(r"\s*(unsafe\s+)?impl\b", line))
        for c in line:
            if c == "{":
                stack.append("impl" if pending else "block")
                pending = False
            elif c == "}" and stack:
                stack.pop()
    return names


def one_per_platform(files):
    """The files defining a name, a stand-in for other platforms (`other.rs`, the `os`
    module's non-Linux file) counted with the Linux definition in its directory: one
    compiles, and it is the same thing."""
    dirs = {os.path.dirname(f) for f in files if os.path.basename(f) != "other.rs"}
    return [f for f in files if os.path.basename(f) != "other.rs" or os.path.dirname(f) not in dirs]


def code_lines(text):
    """Lines of the file outside its test items (blank lines and comments counted)."""
    return sum(1 for l in text.split("\n") if l != TEST_LINE) - text.endswith("\n")


def functions(text):
    """Each function with a body: (first line, last line, name), lines counted from 0."""
    lines = text.split("\n")
    for i, line in enumerate(lines):
        m = re.match(r"\s*(pub(\([^)]*\))?\s+)?(const\s+)?(async\s+)?(unsafe\s+)?(extern\s+\"C\"\s+)?fn\s+(\w+)", line)
        if not m:
            continue
        depth, started, j = 0, False, i
        while j < len(lines):
            code = strip_strings(lines[j])
            if not started and ";" in code and "{" not in code:
                break  # a declaration without a body
            depth += code.count("{") - code.count("}")
            if "{" in code:
                started = True
            if started and depth <= 0:
                break
            j += 1
        if started:
            yield i, j, m.group(7)


def long_functions(rel, text):
    return [
        (j - i + 1, f"{rel}:{i + 1} {name}")
        for i, j, name in functions(text)
        if j - i + 1 > MAX_FN
    ]


HINTED = re.compile(r"\b(hinted|with_fix)\(")
CONTROL = re.compile(r"\b(if|match|for|while|loop|return)\b|\?")


def loose_messages(rel, text):
    """What says a remedy outside a message function: a `Hint:` or `Fix:` written anywhere
    but `sys::say` (`hinted`, `with_fix`: the one shape of both) or an error type's
    `#[error]` attribute, and a function that builds one (calls `hinted`/`with_fix`) and
    also decides (`if`, `match`, a loop, `return`, `?`)."""
    if rel == "sys/say.rs":
        return []
    lines = text.split("\n")
    found = []
    for n, line in enumerate(lines):
        if line.lstrip().startswith("//") or "#[error(" in line:
            continue
        if re.search(r"\b(Hint|Fix):", re.sub(r"//[^\n]*$", "", line)):
            found.append(f"{rel}:{n + 1} writes a hint")
    for i, j, name in functions(text):
        body = strip_strings("\n".join(lines[i + 1 : j + 1]))
        if HINTED.search(body) and CONTROL.search(body):
            found.append(f"{rel}:{i + 1} {name} builds a message and decides")
    return found


FN_OPEN = re.compile(r"\bfn\s+(\w+)\s*(<[^>]*>)?\s*\(")
TUPLE_PARAM = re.compile(r"(^|,)\s*(mut\s+)?\([^()]*\)\s*:")


def tuple_parameters(rel, code):
    """The functions of `code` (comments and strings blanked) with a parameter whose
    pattern is a tuple, `(a, b): (A, B)`."""
    found = []
    for m in FN_OPEN.finditer(code):
        depth, j = 1, m.end()
        while depth and j < len(code):
            depth += {"(": 1, ")": -1}.get(code[j], 0)
            j += 1
        if TUPLE_PARAM.search(code[m.end():j - 1]):
            found.append(f"{rel}:{code.count(chr(10), 0, m.start()) + 1} {m.group(1)}")
    return found


USE = re.compile(r"\buse\s+([^;]+);", re.S)
PATH = re.compile(r"\b((?:crate|super|self)(?:::\w+)+)")


def expand_use(tree):
    """`a::{b, c::{d}}` -> ['a::b', 'a::c::d'] (renames and globs reduced to their path)."""
    tree = re.sub(r"\s+", "", tree)
    out = []

    def walk(prefix, t):
        depth, start, items = 0, 0, []
        for k, ch in enumerate(t):
            if ch == "{":
                depth += 1
            elif ch == "}":
                depth -= 1
            elif ch == "," and depth == 0:
                items.append(t[start:k])
                start = k + 1
        items.append(t[start:])
        for it in items:
            if not it:
                continue
            if "{" in it:
                head, rest = it.split("{", 1)
                walk(prefix + head, rest[:-1])
            else:
                it = re.sub(r"\bas\b.*", "", it).replace("::*", "")
                out.append((prefix + it).rstrip(":"))

    walk("", tree)
    return out


def absolute(mod, path):
    parts = path.split("::")
    if parts[0] == "crate":
        return tuple(parts[1:])
    base = list(mod)
    while parts and parts[0] in ("super", "self"):
        if parts.pop(0) == "super":
            base = base[:-1]
    return tuple(base + parts)


def main():
    report_only = "--report" in sys.argv
    texts = {}
    for rel in files():
        with open(os.path.join(ROOT, rel), encoding="utf-8") as f:
            texts[rel] = strip_tests(f.read())
    # `#[path = "x.rs"] mod name;`: the file is module `name` (one module, several files)
    for rel, text in list(texts.items()) * 3:  # nested ones need their parent's first
        for m in re.finditer(r'#\[path\s*=\s*"([^"]+)"\]\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;', text):
            target = os.path.normpath(os.path.join(os.path.dirname(rel), m.group(1))).replace(os.sep, "/")
            PATHED[target] = module_of(rel) + (m.group(2),)
    modules = {module_of(rel): rel for rel in texts}
    # the crate root's own items live in lib.rs: module ()
    reexports = {}
    for rel, text in texts.items():
        mod = module_of(rel)
        for m in re.finditer(r"\bpub(\([^)]*\))?\s+use\s+([^;]+);", text, re.S):
            for p in expand_use(m.group(2)):
                target = absolute(mod, p)
                reexports[mod + (target[-1],)] = target

    def resolve(path):
        seen = 0
        while path in reexports and seen < 10:
            path, seen = reexports[path], seen + 1
        for k in range(len(path), -1, -1):
            if path[:k] in modules:
                return path[:k]
        return None

    edges = {}
    for rel, text in texts.items():
        mod = module_of(rel)
        text = "\n".join(strip_strings(l) for l in text.split("\n"))  # code only
        scope = inline_scopes(text)  # the inline `mod x { … }` each line is in
        line_of = lambda pos: text.count("\n", 0, pos)
        paths = []  # (path, inline modules it is written in)
        for m in USE.finditer(text):
            if re.search(r"\bpub(\([^)]*\))?\s+$", text[max(0, m.start() - 12):m.start()]):
                continue  # a re-export is followed, not counted
            paths += [(p, scope[line_of(m.start())]) for p in expand_use(m.group(1))]
        body = USE.sub(lambda m: re.sub(r"[^\n]", " ", m.group(0)), text)
        paths += [(m.group(1), scope[line_of(m.start())]) for m in PATH.finditer(body)]
        children = set(re.findall(r"^\s*(?:pub(?:\([^)]*\))?\s+)?mod\s+(\w+)\s*;", text, re.M))
        if children:
            child = re.compile(r"(?<![:\w])((?:%s)(?:::\w+)+)" % "|".join(children))
            paths += [(m.group(1), scope[line_of(m.start())]) for m in child.finditer(body)]
        targets = set()
        for p, inner in paths:
            if p.split("::")[0] in children and not inner:
                p = "self::" + p
            if not re.match(r"(crate|super|self)\b", p):
                continue
            t = resolve(absolute(mod + inner, p))
            if t is not None and t != mod and t != ():
                targets.add(t)
        edges[mod] = edges.get(mod, set()) | targets

    # strongly connected components (Tarjan)
    index, low, stack, on, sccs, counter = {}, {}, [], set(), [], [0]

    def strong(v):
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in edges.get(v, ()):
            if w not in index:
                strong(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                sccs.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in list(edges):
        if v not in index:
            strong(v)
    rank = {n: i for i, n in enumerate(LAYERS)}
    layer = lambda m: rank.get(m[0], len(LAYERS)) if m else len(LAYERS)
    back = sorted(
        (a, b)
        for a, tos in edges.items()
        for b in tos
        if (len(b) < len(a) and a[: len(b)] == b) or layer(b) > layer(a)
    )

    entries = sorted(e for e in os.listdir(ROOT))
    big = sorted(((code_lines(t), r) for r, t in texts.items() if code_lines(t) > MAX_FILE), reverse=True)
    longfns = sorted((f for r, t in texts.items() for f in long_functions(r, t)), reverse=True)
    name = lambda m: "::".join(m) or "crate"

    print(f"src/ root entries: {len(entries)} (limit {MAX_ROOT}): {' '.join(entries)}")
    print(f"files over {MAX_FILE} lines outside tests: {len(big)}")
    for n, r in big:
        print(f"  {n:5} {r}")
    print(f"functions over {MAX_FN} lines: {len(longfns)}")
    for n, f in longfns:
        print(f"  {n:5} {f}")
    print(f"import circles: {len(sccs)}")
    for c in sccs:
        print("  " + " ".join(name(m) for m in c))
        for a in c:
            inside = sorted(name(b) for b in edges[a] if b in c)
            print(f"      {name(a)} -> {', '.join(inside)}")
    print(f"imports back up: {len(back)} (limit {MAX_BACK})")
    for a, b in back:
        print(f"  {name(a)} -> {name(b)}")
    unsafe = sorted(
        ((len(re.findall(r"\bunsafe\s*\{", code_only(t))), r) for r, t in texts.items() if not r.startswith("sys/")),
        reverse=True,
    )
    unsafe = [(n, r) for n, r in unsafe if n]
    total = sum(n for n, _ in unsafe)
    print(f"unsafe blocks outside sys/: {total} (limit {MAX_UNSAFE}, goal {GOAL_UNSAFE})")
    for n, r in unsafe[:8]:
        print(f"  {n:5} {r}")
    defined = {}
    for r, t in texts.items():
        for n in type_names(code_only(t)):
            defined.setdefault(n, []).append(r)
    twice = sorted((n, rs) for n, rs in defined.items() if len(one_per_platform(rs)) > 1)
    print(f"type names defined more than once: {len(twice)} (limit {MAX_TWICE}, goal {GOAL_TWICE})")
    for n, rs in twice:
        print(f"  {n}: {' '.join(sorted(rs))}")
    tuples = sorted(f for r, t in texts.items() for f in tuple_parameters(r, code_only(t)))
    print(f"functions with tuple parameters: {len(tuples)} (limit {MAX_TUPLES}, goal {GOAL_TUPLES})")
    for f in tuples:
        print(f"  {f}")
    loose = sorted(f for r, t in texts.items() for f in loose_messages(r, t))
    print(f"messages with a remedy outside message functions: {len(loose)} (limit {MAX_LOOSE}, goal {GOAL_LOOSE})")
    for f in loose:
        print(f"  {f}")
    bad = len(entries) > MAX_ROOT or big or longfns or sccs or len(back) > MAX_BACK
    bad = bad or total > MAX_UNSAFE or len(twice) > MAX_TWICE or len(tuples) > MAX_TUPLES
    bad = bad or len(loose) > MAX_LOOSE
    if bad and not report_only:
        print("shape: over a limit (see above)", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
