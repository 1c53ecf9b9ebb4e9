#!/usr/bin/env bash
# The library's include graph has no cycle (tools/include_graph.sh), and the
# check can fail: its self-test must find the cycle it plants in a small
# tree of its own before the real tree's result counts.
#
# Env: WS_SRC (the source tree).
set -euo pipefail
: "${WS_SRC:?WS_SRC must name the source tree}"
bash "$WS_SRC/tools/include_graph.sh" --self-test
bash "$WS_SRC/tools/include_graph.sh" --root "$WS_SRC"
