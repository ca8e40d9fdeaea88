import random

NAMES = ["José Álvarez", "Zoë Faßbender", "Łukasz Wąs", "Ana Lúcia", "Søren Kierk", "Chloé Brûlé", "Mark Twain",
         "Jürgen Groß", "Ñandú SA", "Émile Zola", "Ódinn Þór", "Ağca Çelik", "Renée Côté", "Plain Name", "Dvořák Ltd"]
CITIES = ["Málaga", "Köln", "Kraków", "São Paulo", "Århus", "Nîmes", "Boston", "Zürich", "Reykjavík", "İzmir"]


def clean_lines():
    r = random.Random(404)
    return [f"{i:04d}|{r.choice(NAMES)}|{r.choice(CITIES)}|{r.randint(1, 9999)}" for i in range(1, 301)]


def latin1_ok(s):
    try:
        s.encode("latin-1")
        return True
    except UnicodeEncodeError:
        return False


def damaged():
    """(raw bytes of the file, kinds per line)"""
    r = random.Random(405)
    out, kinds = [], []
    for line in clean_lines():
        x = r.random()
        if line.isascii():
            kind = "ok"
        elif x < 0.3:
            kind = "mojibake"
        elif x < 0.5 and latin1_ok(line):
            kind = "latin1"
        else:
            kind = "ok"
        if kind == "mojibake":
            b = line.encode("utf-8").decode("latin-1").encode("utf-8")
        elif kind == "latin1":
            b = line.encode("latin-1")
        else:
            b = line.encode("utf-8")
        out.append(b)
        kinds.append(kind)
    return b"\n".join(out) + b"\n", kinds
