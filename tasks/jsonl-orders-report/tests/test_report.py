import csv
import json
import subprocess
from pathlib import Path

import gen
import reference

SCRIPT = Path("/app/report.py")
SHIPPED = Path("/app/data/orders.jsonl")
SHIPPED_TEXT = gen.generate(2024, 400)


def run(tmp_path, text):
    src = tmp_path / "in.jsonl"
    src.write_text(text, encoding="utf-8")
    out = tmp_path / "out" / "nested"
    res = subprocess.run(["python3", str(SCRIPT), str(src), str(out)], capture_output=True, text=True,
                         timeout=60, cwd="/tmp")
    assert res.returncode == 0, res.stderr[-2000:]
    return out


def read_csv(path):
    with open(path, newline="", encoding="utf-8") as f:
        return list(csv.reader(f))


HEADER = ["order_id", "customer_id", "customer_name", "items", "total", "status", "date"]


def test_shipped_output_csv():
    assert SHIPPED.read_text(encoding="utf-8") == SHIPPED_TEXT, "input file was modified"
    rows, _ = reference.build(SHIPPED_TEXT)
    assert read_csv("/app/out/orders.csv") == [HEADER] + rows


def test_shipped_output_summary():
    _, summary = reference.build(SHIPPED_TEXT)
    assert json.loads(Path("/app/out/summary.json").read_text(encoding="utf-8")) == summary


def test_fresh_csv_rows(tmp_path):
    text = gen.generate(7, 600)
    rows, _ = reference.build(text)
    assert read_csv(run(tmp_path, text) / "orders.csv") == [HEADER] + rows


def test_csv_quoting_and_unicode(tmp_path):
    o = {"id": 5, "customer": {"id": 9, "name": 'O"Neil, "Zoë"'}, "status": "paid",
         "created": "2024-02-29T23:59:59Z", "items": [{"sku": "A", "qty": 1, "price": "1.00"}]}
    out = run(tmp_path, json.dumps(o, ensure_ascii=False) + "\n")
    raw = (out / "orders.csv").read_text(encoding="utf-8")
    assert raw == ('order_id,customer_id,customer_name,items,total,status,date\n'
                   '5,9,"O""Neil, ""Zoë""",1,1.00,paid,2024-02-29\n')


def test_coupon_rounds_half_up(tmp_path):
    lines = [
        {"id": 1, "customer": {"id": 1, "name": "a"}, "status": "paid", "created": "2024-01-01T00:00:00Z",
         "items": [{"sku": "x", "qty": 1, "price": "0.05"}], "coupon": "SAVE10"},          # 0.045 -> 0.05
        {"id": 2, "customer": {"id": 1, "name": "a"}, "status": "paid", "created": "2024-01-01T00:00:00Z",
         "items": [{"sku": "x", "qty": 3, "price": "0.35"}], "coupon": "SAVE10"},          # 0.945 -> 0.95
        {"id": 3, "customer": {"id": 2, "name": "b"}, "status": "pending", "created": "2024-01-02T00:00:00Z",
         "items": [{"sku": "x", "qty": 3, "price": "0.10"}, {"sku": "y", "qty": 1, "price": "0.20"}]},
        {"id": 4, "customer": {"id": 2, "name": "b"}, "status": "paid", "created": "2024-01-02T00:00:00Z",
         "items": [{"sku": "x", "qty": 1, "price": "10.00"}], "coupon": "OTHER"},
    ]
    out = run(tmp_path, "".join(json.dumps(l) + "\n" for l in lines))
    totals = [r[4] for r in read_csv(out / "orders.csv")[1:]]
    assert totals == ["0.05", "0.95", "0.50", "10.00"]


def test_fresh_counts(tmp_path):
    text = gen.generate(11, 500) + "[1, 2, 3]\n"
    _, summary = reference.build(text)
    got = json.loads((run(tmp_path, text) / "summary.json").read_text(encoding="utf-8"))
    assert (got["valid_orders"], got["invalid_lines"]) == (summary["valid_orders"], summary["invalid_lines"])
    assert summary["invalid_lines"] >= 5


def test_fresh_revenue_breakdowns(tmp_path):
    text = gen.generate(12, 700)
    _, summary = reference.build(text)
    got = json.loads((run(tmp_path, text) / "summary.json").read_text(encoding="utf-8"))
    assert got["revenue_by_status"] == summary["revenue_by_status"]
    assert got["paid_revenue_by_month"] == summary["paid_revenue_by_month"]


def test_fresh_top_customer(tmp_path):
    text = gen.generate(13, 300)
    _, summary = reference.build(text)
    got = json.loads((run(tmp_path, text) / "summary.json").read_text(encoding="utf-8"))
    assert got["top_customer"] == summary["top_customer"]
