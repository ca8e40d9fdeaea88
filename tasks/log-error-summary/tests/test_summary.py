import hashlib
import random
import re
import subprocess
from collections import Counter
from pathlib import Path

APP = Path("/app")
SCRIPT = APP / "summarize.sh"
LOG = APP / "logs" / "access.log"
LOG_SHA256 = "68024b303be0c5b4c5e6a4ae6369b0cabbc98ad0648b46cfb2492a7a2e764181"
LINE = re.compile(r'"[A-Z]+ (\S+) [^"]*" (\d{3}) ')


def reference(text):
    counts = Counter()
    for line in text.splitlines():
        m = LINE.search(line)
        if m and m.group(2).startswith("5"):
            counts[m.group(1).split("?", 1)[0]] += 1
    rows = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0].encode()))[:5]
    return "".join(f"{c} {p}\n" for p, c in rows) + f"TOTAL {sum(counts.values())}\n"


def line(ip, path, status, size, method="GET", day=12):
    return (f'{ip} - - [{day:02d}/Mar/2024:10:00:00 +0000] "{method} {path} HTTP/1.1" '
            f'{status} {size} "-" "curl/8.1"\n')


def fresh_log(seed, n):
    r = random.Random(seed)
    paths = ["/", "/a", "/b/c", "/api/v2/users", "/api/v2/orders", "/x-y_z", "/checkout", "/img/logo.png"]
    out = []
    for _ in range(n):
        p = r.choice(paths)
        if r.random() < 0.4:
            p += f"?q={r.randint(1, 99)}&page={r.randint(1, 5)}"
        status = r.choice([200, 200, 200, 302, 404, 500, 501, 502, 503, 599])
        out.append(line(f"192.168.{r.randint(0, 9)}.{r.randint(1, 254)}", p, status,
                        r.choice([0, 500, 503, 1234, 50200]), r.choice(["GET", "POST", "HEAD"])))
    return "".join(out)


def run_script(tmp_path, text, name="x.log"):
    assert SCRIPT.is_file(), "summarize.sh missing"
    f = tmp_path / name
    f.write_text(text)
    res = subprocess.run([str(SCRIPT), str(f)], capture_output=True, text=True, timeout=60, cwd="/tmp")
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_script_is_executable():
    assert SCRIPT.is_file()
    assert SCRIPT.stat().st_mode & 0o111


def test_summary_file_matches_shipped_log():
    data = LOG.read_bytes()
    assert hashlib.sha256(data).hexdigest() == LOG_SHA256, "the shipped log was modified"
    assert (APP / "summary.txt").read_text() == reference(data.decode())


def test_script_on_fresh_log(tmp_path):
    text = fresh_log(7, 4000)
    assert run_script(tmp_path, text) == reference(text)


def test_query_string_stripped(tmp_path):
    text = (line("1.1.1.1", "/p?a=1", 500, 10) + line("1.1.1.2", "/p?b=2", 502, 10)
            + line("1.1.1.3", "/p", 503, 10) + line("1.1.1.4", "/q?x=?", 500, 10))
    assert run_script(tmp_path, text) == "3 /p\n1 /q\nTOTAL 4\n"


def test_ties_sorted_by_path_and_top5(tmp_path):
    paths = ["/zeta", "/alpha", "/mid", "/beta", "/Alpha", "/omega", "/gamma"]
    text = "".join(line("2.2.2.2", p, 500, 1) for p in paths) + line("2.2.2.2", "/omega", 504, 1)
    expected = "2 /omega\n1 /Alpha\n1 /alpha\n1 /beta\n1 /gamma\nTOTAL 8\n"
    assert run_script(tmp_path, text) == expected


def test_size_field_is_not_a_status(tmp_path):
    # sizes of 500/503 with good statuses must not count; status 5xx with any size must
    text = (line("3.3.3.3", "/ok", 200, 500) + line("3.3.3.3", "/ok", 404, 503)
            + line("3.3.3.3", "/bad", 500, 200) + line("3.3.3.3", "/500", 200, 0))
    assert run_script(tmp_path, text) == "1 /bad\nTOTAL 1\n"


def test_no_errors_prints_total_zero(tmp_path):
    text = line("4.4.4.4", "/", 200, 1) + line("4.4.4.4", "/x", 404, 2)
    assert run_script(tmp_path, text) == "TOTAL 0\n"
