"""Checks the relative links of the repository's Markdown files: each must name a file that
exists, and an anchor (`file.md#heading`) a heading of that file, slugged as GitHub does
(lower case; characters other than letters, digits, spaces, `-` and `_` dropped; spaces as
`-`; a repeated heading gets `-1`, `-2`, ...). Links to web addresses are not followed.

usage: python3 tests/tools/doc_links.py [FILE.md ...]   (default: every tracked *.md file)
Exits 1 and lists each broken link when there is one.
"""

import functools
import os
import re
import subprocess
import sys

LINK = re.compile(r"\]\(([^)\s]+)\)")
HEADING = re.compile(r"^(#+)\s+(.*)")


def slug(text):
    text = re.sub(r"[^\w\- ]", "", text.strip().lower())
    return text.replace(" ", "-")


@functools.cache
def anchors(path):
    """The anchors of a Markdown file's headings (outside fenced code), read once per file."""
    found, counts, fenced = set(), {}, False
    with open(path, encoding="utf-8") as f:
        for line in f:
            if line.startswith("```"):
                fenced = not fenced
            m = None if fenced else HEADING.match(line)
            if m:
                s = slug(m.group(2))
                n = counts.get(s)
                counts[s] = 0 if n is None else n + 1
                found.add(s if n is None else f"{s}-{n + 1}")
    return frozenset(found)


def broken(path):
    """(link, why) for each broken relative link of `path`."""
    out = []
    with open(path, encoding="utf-8") as f:
        text = f.read()
    for m in LINK.finditer(text):
        link = m.group(1)
        if re.match(r"^[a-z]+:", link):
            continue
        target, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(path), target)) if target else path
        if not os.path.exists(target):
            out.append((link, "no such file"))
        elif anchor and target.endswith(".md") and anchor not in anchors(target):
            out.append((link, "no such heading"))
    return out


def main(files):
    if not files:
        listed = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True, check=True)
        files = listed.stdout.split()
    bad = 0
    for path in files:
        for link, why in broken(path):
            print(f"{path}: {link}: {why}")
            bad += 1
    print(f"{len(files)} Markdown files, {bad} broken links")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
