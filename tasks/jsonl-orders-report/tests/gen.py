"""Generator of order files (shared by setup and tests)."""
import json
import random

NAMES = ["Ada Stone", "Ben \"Benny\" Moss", "Reed, Cleo", "Dev Vale", "Eva Hart", "Zoë Lund", "Ivo Park"]


def generate(seed, n):
    r = random.Random(seed)
    lines = []
    for i in range(n):
        oid = 1000 + r.randint(0, 10 * n) * 7 + i % 7
        if r.random() < 0.04:
            lines.append(r.choice(['{"id": 12, "status": "paid"', "not json at all", "{\"id\": }"]))
            continue
        cid = r.randint(1, len(NAMES))
        items = [{"sku": f"SKU-{r.randint(1, 40):03d}", "qty": r.randint(1, 6),
                  "price": f"{r.randint(50, 20000) / 100:.2f}"} for _ in range(r.randint(1, 4))]
        order = {"id": oid, "customer": {"id": cid, "name": NAMES[cid - 1]}, "items": items,
                 "status": r.choice(["paid", "paid", "paid", "refunded", "pending"]),
                 "created": f"2024-{r.randint(1, 12):02d}-{r.randint(1, 28):02d}T{r.randint(0, 23):02d}:15:00Z",
                 "coupon": r.choice([None, None, None, "SAVE10"])}
        if r.random() < 0.3:
            del order["coupon"]
        keys = list(order)
        r.shuffle(keys)
        lines.append(json.dumps({k: order[k] for k in keys}, ensure_ascii=r.random() < 0.5))
    # ids are unique
    seen, out = set(), []
    for l in lines:
        try:
            oid = json.loads(l)["id"]
        except Exception:
            out.append(l)
            continue
        if oid not in seen:
            seen.add(oid)
            out.append(l)
    return "\n".join(out) + "\n"
