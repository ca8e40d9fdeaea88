#!/usr/bin/env python3
"""python3 overlaps.py BOOKINGS.csv > REPORT

BOOKINGS.csv: header 'id,room,start,end', times are integer minutes, a booking covers [start, end).
Report: header 'room,max_concurrent,double_booked_minutes,conflicting_pairs', one line per room,
sorted by room name:
  max_concurrent         most bookings of the room active at the same minute
  double_booked_minutes  minutes during which at least two bookings of the room are active
  conflicting_pairs      number of pairs of bookings of the room that overlap
"""
import csv
import sys


def main(path):
    rooms = {}
    with open(path, newline="") as f:
        for row in csv.DictReader(f):
            rooms.setdefault(row["room"], []).append((int(row["start"]), int(row["end"])))
    print("room,max_concurrent,double_booked_minutes,conflicting_pairs")
    for room in sorted(rooms):
        bs = rooms[room]
        pairs = 0
        for i in range(len(bs)):
            for j in range(i + 1, len(bs)):
                if bs[i][0] < bs[j][1] and bs[j][0] < bs[i][1]:
                    pairs += 1
        lo = min(s for s, _ in bs)
        hi = max(e for _, e in bs)
        best = double = 0
        for minute in range(lo, hi):
            active = sum(1 for s, e in bs if s <= minute < e)
            best = max(best, active)
            if active >= 2:
                double += 1
        print(f"{room},{best},{double},{pairs}")


if __name__ == "__main__":
    main(sys.argv[1])
