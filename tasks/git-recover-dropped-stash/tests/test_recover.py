import subprocess
from pathlib import Path

REPO = Path("/app/web")


def git(*args):
    res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, timeout=30)
    assert res.returncode == 0, res.stderr
    return res.stdout


def test_contact_route_on_main():
    assert git("log", "--format=%s", "main").splitlines()[:3] == ["Add contact route", "Add about route", "Base app"]
    assert git("show", "main:routes.py") == 'ROUTES = ["/", "/about", "/contact"]\n'


def test_i18n_branch_one_commit_on_main():
    assert git("rev-parse", "i18n~1").strip() == git("rev-parse", "main").strip()
    assert git("log", "-1", "--format=%s", "i18n").strip() == "i18n support"


def test_i18n_content():
    assert git("show", "i18n:i18n.py") == 'LANGS = ["en", "de", "fr"]\n'
    assert git("show", "i18n:views.py") == 'def render(title, lang="en"):\n    return f"<h1 lang={lang}>{title}</h1>"\n'
    assert git("show", "i18n:routes.py") == 'ROUTES = ["/", "/about", "/contact"]\n'
    changed = set(git("diff", "--name-only", "main", "i18n").split())
    assert changed == {"i18n.py", "views.py"}


def test_main_clean():
    assert git("symbolic-ref", "HEAD").strip() == "refs/heads/main"
    assert git("status", "--porcelain") == ""
    assert git("show", "main:views.py") == 'def render(title):\n    return f"<h1>{title}</h1>"\n'
