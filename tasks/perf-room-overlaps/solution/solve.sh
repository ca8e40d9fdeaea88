#!/bin/bash
set -euo pipefail
cd /app
head -n 3 data/bookings.csv
cp bin/overlaps.py /tmp/overlaps_slow.py
cat > bin/overlaps.py <<'PY'
#!/usr/bin/env python3
"""python3 overlaps.py BOOKINGS.csv > REPORT

BOOKINGS.csv: header 'id,room,start,end', times are integer minutes, a booking covers [start, end).
Report: header 'room,max_concurrent,double_booked_minutes,conflicting_pairs', one line per room,
sorted by room name (sweep line, O(n log n)).
"""
import csv
import heapq
import sys


def main(path):
    rooms = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rooms.setdefault(row["room"], []).append((int(row["start"]), int(row["end"])))
    out = ["room,max_concurrent,double_booked_minutes,conflicting_pairs"]
    for room in sorted(rooms):
        bs = sorted(rooms[room])
        heap, pairs = [], 0
        for s, e in bs:
            while heap and heap[0] <= s:
                heapq.heappop(heap)
            pairs += len(heap)
            heapq.heappush(heap, e)
        events = sorted([(s, 1) for s, e in bs if e > s] + [(e, -1) for s, e in bs if e > s])
        active = best = double = 0
        prev = None
        i = 0
        while i < len(events):
            t = events[i][0]
            if prev is not None and active >= 2:
                double += t - prev
            while i < len(events) and events[i][0] == t:
                active += events[i][1]
                i += 1
            best = max(best, active)
            prev = t
        out.append(f"{room},{best},{double},{pairs}")
    sys.stdout.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main(sys.argv[1])
PY
printf 'id,room,start,end\n1,a,0,10\n2,a,5,15\n3,a,10,20\n4,b,3,4\n5,a,5,15\n' > /tmp/t.csv
diff <(python3 /tmp/overlaps_slow.py /tmp/t.csv) <(python3 bin/overlaps.py /tmp/t.csv)
time python3 bin/overlaps.py data/bookings.csv > report.csv
head report.csv
