#!/usr/bin/env bash
# Writes starting inputs for the fuzz targets into fuzz/seeds/<target>/ from the
# repository's test data: codec lines, shell commands, path cases, scripts. Run from
# anywhere; the directory is rebuilt each time (and ignored by git).
set -euo pipefail
cd "$(dirname "$0")"
data=../tests/data
rm -rf seeds
mkdir -p seeds/{command_decoder,jail,shell,sse,scripted,task_graph}

seed() { # target, then the bytes on stdin
    cat >"$(mktemp "seeds/$1/seed-XXXXXXXX")"
}

# Command lines: every `line` of the codec corpus, and every generated example of
# docs/protocol.md.
grep -o '"line":"[^"\\]*\(\\.[^"\\]*\)*"' "$data/codec/commands.jsonl" |
    sed 's/^"line":"//; s/"$//; s/\\"/"/g; s/\\\\/\\/g' |
    while IFS= read -r line; do printf '%s' "$line" | seed command_decoder; done
grep '^{"version":"1.0","type":' ../docs/protocol.md |
    while IFS= read -r line; do printf '%s' "$line" | seed command_decoder; done

# Paths: the path corpus, from the workspace root (selector byte 0) and from a
# subdirectory (1).
cut -f3 "$data/paths/cases.tsv" | grep -v '^#' | grep -v '{' |
    while IFS= read -r p; do
        printf '\000%s' "$p" | seed jail
        printf '\001%s' "$p" | seed jail
    done

# Shell: every corpus command as a raw line (mode 0) and after a program (mode 2);
# a few layered shapes (mode 1).
grep -v '^#' "$data/shell/commands.tsv" | cut -f6 | grep -v '^$' |
    while IFS= read -r c; do
        printf '\000%b' "${c//\\n/\\n}" | seed shell
        printf '\002\000%b' "${c//\\n/\\n}" | seed shell
    done
for layers in '\001\000\000' '\000\001\003' '\002\001\000\001\020' '\001\002\004'; do
    printf "\\001$layers" | seed shell
done

# SSE: the shapes the providers send.
printf 'data: {"a":1}\n\ndata: [DONE]\n\n' | seed sse
printf 'event: message_start\r\ndata: {"type":"x"}\r\n\r\n: ping\r\n\r\n' | seed sse
printf '\005data: a\ndata: b\n\nevent: e\rdata: c\r\r' | seed sse

# Scripts: the repository's scripts and a few turn shapes.
for f in "$data/scripts"/*.json; do seed scripted <"$f"; done
printf '{"turns":[{"text":"hi"},{"toolCalls":[{"name":"read_file","arguments":{"path":"a"}}]}]}' | seed scripted
printf '{"turns":[{"text":"x","delayMs":5,"chunkDelayMs":1,"retries":[{"message":"busy","delayMs":3}],"error":{"message":"boom","code":"MODEL_ERROR"}}],"chunkDelayMs":2}' | seed scripted
printf '{"turns":[{"whenLastToolResultContains":"error","text":"fix"},{"expectLastMessageContains":"go","text":"ok","stop":"max_tokens"}]}' | seed scripted

# Task graph: structured input; a few arbitrary byte strings.
for s in '\002\000\001\001\000\003\001\002\000' '\004\001\002\003\004\005\006\007\010\011\012'; do
    printf "$s" | seed task_graph
done
echo "seeds: $(find seeds -type f | wc -l) files"
