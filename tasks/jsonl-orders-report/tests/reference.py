"""Reference implementation of the report (used by the tests only)."""
import json
from decimal import ROUND_HALF_UP, Decimal

CENT = Decimal("0.01")


def order_total(order):
    total = sum(Decimal(it["price"]) * it["qty"] for it in order["items"])
    if order.get("coupon") == "SAVE10":
        total = total * Decimal("0.9")
    return total.quantize(CENT, rounding=ROUND_HALF_UP)


def build(text):
    orders, invalid = [], 0
    for line in text.splitlines():
        try:
            o = json.loads(line)
            assert isinstance(o, dict)
        except Exception:
            invalid += 1
            continue
        orders.append(o)
    orders.sort(key=lambda o: o["id"])
    rows = [[str(o["id"]), str(o["customer"]["id"]), o["customer"]["name"],
             str(sum(it["qty"] for it in o["items"])), str(order_total(o)), o["status"], o["created"][:10]]
            for o in orders]
    by_status, by_month, by_cust = {}, {}, {}
    for o in orders:
        t = order_total(o)
        by_status[o["status"]] = by_status.get(o["status"], Decimal(0)) + t
        if o["status"] == "paid":
            m = o["created"][:7]
            by_month[m] = by_month.get(m, Decimal(0)) + t
            c = o["customer"]["id"]
            by_cust[c] = by_cust.get(c, Decimal(0)) + t
    top = min(by_cust.items(), key=lambda kv: (-kv[1], kv[0]))
    names = {o["customer"]["id"]: o["customer"]["name"] for o in orders}
    summary = {
        "valid_orders": len(orders),
        "invalid_lines": invalid,
        "revenue_by_status": {k: str(v) for k, v in sorted(by_status.items())},
        "paid_revenue_by_month": {k: str(v) for k, v in sorted(by_month.items())},
        "top_customer": {"id": top[0], "name": names[top[0]], "paid_total": str(top[1])},
    }
    return rows, summary
