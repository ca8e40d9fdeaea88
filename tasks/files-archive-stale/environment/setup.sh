#!/bin/bash
# Creates /app/work with files of known modification times.
set -euo pipefail
mkdir -p /app/work && cd /app/work
mk() { mkdir -p "$(dirname "$1")"; printf '%s\n' "$1" > "$1"; touch -d "$2" "$1"; }
mk "reports/2023/q1.txt"        "2023-04-02 10:00:00 UTC"
mk "reports/2023/q4.txt"        "2023-12-31 23:59:59 UTC"
mk "reports/2024/q1.txt"        "2024-04-01 08:00:00 UTC"
mk "reports/draft old.txt"      "2022-06-15 12:00:00 UTC"
mk "scratch/tmp1.dat"           "2023-11-30 00:00:00 UTC"
mk "scratch/keep/recent.dat"    "2024-02-29 12:00:00 UTC"
mk "scratch/keep/edge.dat"      "2024-01-01 00:00:00 UTC"
mk "notes.md"                   "2021-01-01 00:00:00 UTC"
mk "todo.md"                    "2024-05-05 05:05:05 UTC"
mk ".hidden/old-config"         "2020-02-02 02:02:02 UTC"
ln -s reports/2023/q1.txt link-to-q1
touch -h -d "2020-01-01 00:00:00 UTC" link-to-q1
