#!/usr/bin/env python3
"""Room sizes: no product function over MAX_FN lines, no Rust file over MAX_FILE.

A newcomer should be able to read any function, and any file, in one sitting.
`make test` runs this; it fails on anything over a limit that is not on the
allow-list below, and on an allow-list entry that is no longer needed (so the
list only shrinks). Usage: scripts/sizes.py [--report]
"""
import re
import subprocess
import sys
from pathlib import Path

MAX_FN = 80
MAX_FILE = 500

# Each entry says why it may stay larger. Keep it short.
ALLOW_FILES = {
}
ALLOW_FNS = {
}

ROOT = Path(__file__).resolve().parent.parent
FN_RE = re.compile(
    r"^\s*(?:pub(?:\([^)]*\))?\s+)?(?:default\s+)?(?:const\s+)?(?:async\s+)?"
    r"(?:unsafe\s+)?(?:extern\s+\"[^\"]*\"\s+)?fn\s+([A-Za-z_][A-Za-z0-9_]*)"
)
TEST_ATTR = re.compile(r"#\[(?:[\w:]+::)?test\b|#\[cfg\(test\)\]")


def rust_files():
    out = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard", "*.rs"],
        cwd=ROOT, check=True, capture_output=True, text=True,
    ).stdout.split()
    return sorted({p for p in out if not p.startswith("fuzz/") and (ROOT / p).exists()})


def code_only(text):
    """The text with comments, strings and char literals blanked (newlines kept),
    so braces can be counted."""
    out = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if text.startswith("//", i):
            j = text.find("\n", i)
            j = n if j < 0 else j
            out.append(" " * (j - i))
            i = j
        elif text.startswith("/*", i):
            depth, j = 1, i + 2
            while j < n and depth:
                if text.startswith("/*", j):
                    depth, j = depth + 1, j + 2
                elif text.startswith("*/", j):
                    depth, j = depth - 1, j + 2
                else:
                    j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif (m := re.match(r'b?r(#*)"', text[i:i + 300])) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            close = '"' + m.group(1)
            j = text.find(close, i + m.end())
            j = n if j < 0 else j + len(close)
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == '"':
            j = i + 1
            while j < n and text[j] != '"':
                j += 2 if text[j] == "\\" else 1
            j += 1
            out.append(re.sub(r"[^\n]", " ", text[i:j]))
            i = j
        elif c == "'" and (m := re.match(r"'(?:\\.[^']*|[^\\'])'", text[i:i + 12])):
            out.append(" " * m.end())
            i += m.end()
        else:
            out.append(c)
            i += 1
    return "".join(out)


def functions(path, text):
    """(name, first line, line count) of each non-test function with a body."""
    code = code_only(text)
    lines = code.split("\n")
    raw = text.split("\n")
    test_until = -1  # inside a #[cfg(test)] module or a test fn until this line
    found = []
    for idx, line in enumerate(lines):
        if idx <= test_until:
            continue
        m = FN_RE.match(line)
        if not m:
            continue
        # Attributes directly above (skipping doc comments and other attributes).
        k, attrs = idx - 1, []
        while k >= 0 and (raw[k].strip().startswith("#[") or raw[k].strip().startswith("///") or raw[k].strip().startswith("//!") or raw[k].strip().startswith(")]") or raw[k].strip() == ""):
            attrs.append(raw[k])
            k -= 1
        end = body_end(lines, idx)
        if end is None:
            continue  # a declaration without a body
        if any(TEST_ATTR.search(a) for a in attrs):
            test_until = end
            continue
        found.append((m.group(1), idx + 1, end - idx + 1))
    return found


def body_end(lines, start):
    """The line where the body opened at or after `start` closes; None for `fn f();`."""
    depth, opened = 0, False
    for j in range(start, len(lines)):
        for ch in lines[j]:
            if ch == "{":
                depth, opened = depth + 1, True
            elif ch == "}":
                depth -= 1
                if opened and depth == 0:
                    return j
            elif ch == ";" and not opened and depth == 0:
                return None
    return None


def test_module_ranges(text):
    code = code_only(text).split("\n")
    raw = text.split("\n")
    ranges = []
    for idx, line in enumerate(raw):
        if line.strip() == "#[cfg(test)]":
            j = idx + 1
            while j < len(raw) and raw[j].strip().startswith("#["):
                j += 1
            if j < len(raw) and re.match(r"\s*(pub\s+)?mod\s+\w+\s*\{", code[j]):
                end = body_end(code, j)
                ranges.append((j, end if end is not None else len(raw)))
    return ranges


def main():
    report = "--report" in sys.argv
    files, fns = [], []
    for rel in rust_files():
        text = (ROOT / rel).read_text()
        n = text.count("\n")
        files.append((n, rel))
        if "/tests/" in rel or rel.startswith("tests/") or "/benches/" in rel:
            continue
        skip = test_module_ranges(text)
        for name, line, length in functions(rel, text):
            if any(a <= line - 1 <= b for a, b in skip):
                continue
            fns.append((length, f"{rel}::{name}", line))
    files.sort(reverse=True)
    fns.sort(reverse=True)
    if report:
        print("largest files:")
        for n, rel in files[:15]:
            print(f"  {n:5}  {rel}")
        print("longest functions:")
        for length, name, line in fns[:20]:
            print(f"  {length:5}  {name} (line {line})")
        return 0
    failures = []
    big_files = {rel for n, rel in files if n > MAX_FILE}
    big_fns = {name for length, name, _ in fns if length > MAX_FN}
    for n, rel in files:
        if n > MAX_FILE and rel not in ALLOW_FILES:
            failures.append(f"{rel}: {n} lines (limit {MAX_FILE})")
    for length, name, line in fns:
        if length > MAX_FN and name not in ALLOW_FNS:
            failures.append(f"{name} at line {line}: {length} lines (limit {MAX_FN})")
    for rel in ALLOW_FILES:
        if rel not in big_files:
            failures.append(f"{rel} is within {MAX_FILE} lines now: take it off ALLOW_FILES")
    for name in ALLOW_FNS:
        if name not in big_fns:
            failures.append(f"{name} is within {MAX_FN} lines now: take it off ALLOW_FNS")
    for f in failures:
        print(f, file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
