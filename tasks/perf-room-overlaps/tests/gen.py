import random


def generate(seed, n, rooms=12, horizon=200_000):
    r = random.Random(seed)
    lines = ["id,room,start,end"]
    names = [f"room-{chr(65 + i)}{i}" for i in range(rooms)]
    for i in range(n):
        s = r.randrange(horizon)
        d = r.choice([15, 30, 30, 45, 60, 90, 120, 240, 1]) if r.random() < 0.97 else r.randint(500, 5000)
        lines.append(f"{i},{r.choice(names)},{s},{s + d}")
    return "\n".join(lines) + "\n"


def reference(text):
    import heapq
    rooms = {}
    for line in text.splitlines()[1:]:
        _, room, s, e = line.split(",")
        rooms.setdefault(room, []).append((int(s), int(e)))
    out = ["room,max_concurrent,double_booked_minutes,conflicting_pairs"]
    for room in sorted(rooms):
        bs = sorted(rooms[room])
        heap, pairs = [], 0
        for s, e in bs:
            while heap and heap[0] <= s:
                heapq.heappop(heap)
            pairs += len(heap)
            heapq.heappush(heap, e)
        events = sorted([(s, 1) for s, _ in bs] + [(e, -1) for _, e in bs])
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
    return "\n".join(out) + "\n"
