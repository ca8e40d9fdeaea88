#!/bin/bash
set -euo pipefail
cd /app
export LC_ALL=C
head -n 5 book.txt
tr -cs 'A-Za-z' '\n' < book.txt | tr 'A-Z' 'a-z' | grep -v '^$' > /tmp/words.txt
sort /tmp/words.txt | uniq -c | awk '{print $1, $2}' | sort -k1,1nr -k2,2 | head -n 15 > top_words.txt
printf 'lines %s\nwords %s\nunique %s\n' "$(wc -l < book.txt)" "$(wc -l < /tmp/words.txt)" "$(sort -u /tmp/words.txt | wc -l)" > stats.txt
cat top_words.txt stats.txt
