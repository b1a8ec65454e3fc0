#!/usr/bin/env bash
# Every file a README names exists (issue 27, point 4). Run by ctest
# (readme_files, label unit) and by hand: scripts/check-readme-files.sh [ROOT]
#
# A README names a file with a `backticked` path or a markdown link whose
# name ends in a known extension (.h .cc .md .py .sh .toml .txt .json
# .cmake); `a.{h,cc}` names a.h and a.cc. A path with a slash is looked up
# from the README's folder and from each folder above it up to the root; a
# bare name must exist in the README's folder or below it. Names under
# build/ (made by a build) and URLs are skipped. Prints every missing name
# with its README and line; exits 1 if there is one.
set -euo pipefail
ROOT=${1:-$(cd "$(dirname "$0")/.." && pwd)}
exec python3 - "$ROOT" <<'PY'
import os
import re
import subprocess
import sys

root = os.path.abspath(sys.argv[1])
EXTENSIONS = ("h", "cc", "md", "py", "sh", "toml", "txt", "json", "cmake")
NAME = re.compile(r"^[A-Za-z0-9_.\-/{},]+\.(?:%s|\{[a-z,]+\})$" % "|".join(EXTENSIONS))
BACKTICKED = re.compile(r"`([^`\s]+)`")
LINKED = re.compile(r"\]\(([^)\s#]+)(?:#[^)]*)?\)")


def tracked_files():
    try:
        # Tracked files and new ones not ignored (a change under way counts).
        out = subprocess.run(["git", "-C", root, "ls-files", "--cached", "--others", "--exclude-standard"],
                             capture_output=True, text=True, check=True).stdout
        return [line for line in out.splitlines() if line]
    except (OSError, subprocess.CalledProcessError):
        found = []
        for folder, dirs, files in os.walk(root):
            dirs[:] = [d for d in dirs if d != ".git" and not d.startswith("build")]
            found += [os.path.relpath(os.path.join(folder, f), root) for f in files]
        return found


def expand(name):
    if re.search(r"\.[a-z]+/\.[a-z]+$", name):  # body.h/.cc: body.h and body.cc
        stem, second = name.rsplit("/.", 1)
        return [stem, stem.rsplit(".", 1)[0] + "." + second]
    match = re.search(r"\{([^{}]*)\}", name)
    if not match:
        return [name]
    out = []
    for part in match.group(1).split(","):
        out += expand(name[: match.start()] + part + name[match.end():])
    return out


files = tracked_files()
existing = set(files)
readmes = sorted(f for f in files if os.path.basename(f) == "README.md" and not f.startswith("build"))


def exists(readme_dir, name):
    if "/" in name:
        folder = readme_dir
        while True:
            candidate = os.path.normpath(os.path.join(folder, name))
            if candidate in existing or os.path.isdir(os.path.join(root, candidate)):
                return True
            if folder in ("", "."):
                return False
            folder = os.path.dirname(folder)
    prefix = "" if readme_dir in ("", ".") else readme_dir + "/"
    return any(f.startswith(prefix) and os.path.basename(f) == name for f in files)


missing = 0
checked = 0
for readme in readmes:
    readme_dir = os.path.dirname(readme)
    with open(os.path.join(root, readme), encoding="utf-8") as text:
        for number, line in enumerate(text, 1):
            names = BACKTICKED.findall(line) + LINKED.findall(line)
            for raw in names:
                if "://" in raw or raw.startswith("build/") or not NAME.match(raw):
                    continue
                for name in expand(raw):
                    checked += 1
                    if not exists(readme_dir, name[2:] if name.startswith("./") else name):
                        missing += 1
                        print("%s:%d: names %s, which does not exist" % (readme, number, name))
print("check-readme-files: %d READMEs, %d names, %d missing" % (len(readmes), checked, missing))
sys.exit(1 if missing else 0)
PY
