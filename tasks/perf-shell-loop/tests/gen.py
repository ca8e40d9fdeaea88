import random


def generate(seed, n):
    r = random.Random(seed)
    hosts = [f"web{i:02d}" for i in range(1, 13)]
    out = []
    for i in range(n):
        out.append(f"2024-05-{r.randint(1, 31):02d} {r.choice(hosts)} {r.choice(['GET', 'GET', 'POST', 'DELETE'])} "
                   f"{r.choice([200, 200, 200, 301, 404, 500, 503])} {r.randint(1, 3000)}")
    return "\n".join(out) + "\n"


def reference(text):
    stats = {}
    for line in text.splitlines():
        day, host, method, status, ms = line.split()
        s = stats.setdefault(host, [0, 0, 0])
        s[0] += 1
        if status.startswith("5"):
            s[1] += 1
        s[2] += int(ms)
    return "".join(f"{h} {c} {e} {t // c}\n" for h, (c, e, t) in sorted(stats.items()))
