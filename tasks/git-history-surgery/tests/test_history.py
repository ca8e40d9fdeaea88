import subprocess
from pathlib import Path

REPO = Path("/app/project")
MAIN_SUBJECTS = ["Initial commit", "Add config", "Add parser", "Add tests", "Add CLI", "Ignore secrets.env"]
RELEASE_SUBJECTS = ["Initial commit", "Add config", "Add parser", "Add tests", "Release notes"]
AUTHORS = {  # subject -> (name, email, raw author date)
    "Initial commit": ("Sam Dev", "sam@example.com", "1710000000 +0100"),
    "Add config": ("Ana Ops", "ana@example.com", "1710086400 +0100"),
    "Add parser": ("Sam Dev", "sam@example.com", "1710172800 +0100"),
    "Add tests": ("Ana Ops", "ana@example.com", "1710345600 +0100"),
    "Release notes": ("Ana Ops", "ana@example.com", "1710432000 +0100"),
    "Add CLI": ("Ana Ops", "ana@example.com", "1710604800 +0100"),
}
MAIN_TREE = """\
100644 blob f24b757ba337af3b9c4cc6c49ef605c2c954d510\t.gitignore
100644 blob 043734df8bd4e42fbd1828ca04b276ec850de655\tREADME.md
100644 blob 3e17305e0849a4204f475efde3fb1dbae730da24\tapp.py
100644 blob d92808b8f79d0ff7d3acf121720e17a34f5eb23e\tcli.py
100644 blob 77a3243ec3586335e06e5acbc0308d8c0a5fb59c\tconfig.py
100644 blob 3aca0f605d4f6ba11d6c00501c049e03e1864225\tparser.py
100644 blob dde4db0a790de84006011951bcd572e5b6aac6db\ttest_parser.py"""
RELEASE_TREE = """\
100644 blob d6f874a21ec21738925664844c4652ffc4407224\tNOTES.md
100644 blob 043734df8bd4e42fbd1828ca04b276ec850de655\tREADME.md
100644 blob 3e17305e0849a4204f475efde3fb1dbae730da24\tapp.py
100644 blob 77a3243ec3586335e06e5acbc0308d8c0a5fb59c\tconfig.py
100644 blob 3aca0f605d4f6ba11d6c00501c049e03e1864225\tparser.py
100644 blob dde4db0a790de84006011951bcd572e5b6aac6db\ttest_parser.py"""
SQUASHED_PARSER = "3aca0f605d4f6ba11d6c00501c049e03e1864225"
CURRENT_SECRETS = "API_KEY=sk_live_b2e8d41c9a6f0375\nREGION=eu-west\n"


def git(*args, check=True):
    res = subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, timeout=60)
    if check:
        assert res.returncode == 0, f"git {' '.join(args)}: {res.stderr.decode(errors='replace')}"
    return res.stdout.decode(errors="replace").strip()


def subjects(ref):
    return git("log", "--reverse", "--format=%s", ref).splitlines()


def test_secret_in_no_commit():
    assert git("rev-parse", "--verify", "main^{commit}")
    assert git("log", "--all", "--format=%H", "--", "secrets.env") == ""
    for sha in git("rev-list", "--all").splitlines():
        assert "secrets.env" not in git("ls-tree", "-r", "--name-only", sha).splitlines()


def test_secret_gone_from_object_store():
    res = subprocess.run(["git", "-C", str(REPO), "cat-file", "--batch-all-objects", "--batch"],
                         capture_output=True, timeout=60)
    assert res.returncode == 0
    assert b"sk_live_" not in res.stdout, "an object still contains the API key"
    assert git("rev-list", "--all", "--count") != "0"


def test_working_copy_secret_kept_and_ignored():
    assert (REPO / "secrets.env").read_text() == CURRENT_SECRETS
    assert subprocess.run(["git", "-C", str(REPO), "check-ignore", "-q", "secrets.env"]).returncode == 0
    assert git("status", "--porcelain") == ""


def test_gitignore_commit_on_main():
    assert git("log", "-1", "--format=%s", "main") == "Ignore secrets.env"
    assert "secrets.env" in git("show", "main:.gitignore").splitlines()


def test_sam_email_fixed_everywhere():
    lines = git("log", "--all", "--format=%an|%ae|%cn|%ce").splitlines()
    assert lines
    for line in lines:
        assert "sam@localhost" not in line
    sams = [l for l in lines if l.startswith("Sam Dev|")]
    assert len(sams) == 2 and all(l.split("|")[1] == "sam@example.com" for l in sams)


def test_authorship_preserved():
    seen = set()
    for line in git("log", "--all", "--format=%s|%an|%ae|%ad", "--date=raw").splitlines():
        subject, name, email, date = line.split("|")
        if subject in AUTHORS:
            assert (name, email, date) == AUTHORS[subject], subject
            seen.add(subject)
    assert seen == set(AUTHORS)


def test_wip_squashed_into_parser():
    assert subjects("main") == MAIN_SUBJECTS
    parser_commit = git("log", "--format=%H", "--grep=^Add parser$", "main")
    assert git("rev-parse", f"{parser_commit}:parser.py") == SQUASHED_PARSER


def test_tag_moved():
    assert git("cat-file", "-t", "v1.0") == "tag", "v1.0 must stay an annotated tag"
    assert git("tag", "-l", "--format=%(contents:subject)", "v1.0") == "Version 1.0"
    target = git("rev-parse", "v1.0^{commit}")
    assert git("log", "-1", "--format=%s", target) == "Add tests"
    assert "secrets.env" not in git("ls-tree", "--name-only", target).splitlines(), "tag still on the old commit"
    assert subprocess.run(["git", "-C", str(REPO), "merge-base", "--is-ancestor", target, "main"]).returncode == 0


def test_release_branch_rebuilt():
    assert subjects("release") == RELEASE_SUBJECTS
    assert git("merge-base", "main", "release") == git("rev-parse", "v1.0^{commit}")
    assert git("rev-parse", "release~1") == git("rev-parse", "v1.0^{commit}")


def test_trees_unchanged_otherwise():
    assert git("ls-tree", "-r", "main") == MAIN_TREE
    assert git("ls-tree", "-r", "release") == RELEASE_TREE


def test_only_expected_refs():
    refs = set(git("for-each-ref", "--format=%(refname)").splitlines())
    assert refs == {"refs/heads/main", "refs/heads/release", "refs/tags/v1.0"}
    assert git("symbolic-ref", "HEAD") == "refs/heads/main"
    assert git("log", "-1", "--format=%s", "main") == "Ignore secrets.env"
