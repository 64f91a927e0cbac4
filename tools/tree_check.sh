#!/usr/bin/env bash
# make format-check's other half: no tracked file is a patch's or an editor's
# leftover (*.orig, *.rej, *~, *.bak, Vim's swap files, Emacs' lock and
# auto-save files). Such a file once landed (a py_detect.c.orig beside its
# source) because nothing looked; `git ls-files` sees what a commit holds.
# Prints one line per file and exits 1 when there is any.
set -euo pipefail
cd "$(dirname "$0")/.."
stray=$(git ls-files -- '*.orig' '*.rej' '*~' '*.bak' '*.swp' '*.swo' '.#*' '*/.#*' '#*#' '*/#*#')
if [ -n "$stray" ]; then
    printf '%s: a patch or editor leftover is tracked (git rm it)\n' $stray >&2
    echo "tree: $(echo "$stray" | wc -l) stray files" >&2
    exit 1
fi
