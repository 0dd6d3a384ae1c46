#!/usr/bin/env python3
"""Fails when a Markdown file links to a file or heading that does not exist.

Docs are split across README.md and docs/; a section that moves leaves links
behind, and a reader who follows one lands nowhere. This checks every
relative link ([text](path) and [text](path#anchor), and [text](#anchor)) in
the tracked Markdown files against the tree and the target's headings,
using GitHub's anchor rules (lower case, punctuation dropped, spaces to
hyphens)."""
import os, re, subprocess, sys

root = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..")
os.chdir(root)
files = subprocess.run(["git", "ls-files", "*.md"], capture_output=True, text=True, check=True).stdout.split()

def anchors(path, cache={}):
    if path not in cache:
        out, fence = set(), False
        for line in open(path, encoding="utf-8"):
            if line.startswith("```"):
                fence = not fence
            m = None if fence else re.match(r"^#+ (.*)", line)
            if m:
                a = re.sub(r"[^\w\- ]", "", m.group(1).strip().lower()).replace(" ", "-")
                out.add(a)
        cache[path] = out
    return cache[path]

bad = 0
for f in files:
    text = open(f, encoding="utf-8").read()
    text = re.sub(r"```.*?```", "", text, flags=re.S)
    for m in re.finditer(r"\]\(([^)\s]+)\)", text):
        link = m.group(1)
        if re.match(r"^[a-z]+:", link):
            continue
        path, _, anchor = link.partition("#")
        target = os.path.normpath(os.path.join(os.path.dirname(f), path)) if path else f
        if not os.path.exists(target):
            print(f"{f}: link to a missing file: {link}")
            bad = 1
            continue
        if anchor and target.endswith(".md") and anchor not in anchors(target):
            print(f"{f}: link to a missing heading: {link}")
            bad = 1
sys.exit(bad)
