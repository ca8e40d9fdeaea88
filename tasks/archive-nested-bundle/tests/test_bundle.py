import hashlib
import os
import subprocess
import tarfile
from pathlib import Path

EX = Path("/app/extracted")
BUNDLE = Path("/app/bundle.tar.gz")
MANIFEST = Path("/app/bundle.sha256")

EXTRACTED = {
    "legacy/LICENSE": "c2b1bcd0e235b0df6892206f708c2cb50f4e5679213c092e90ce625e4b046292",
    "legacy/customers-2019.csv": "e4e70b3a24fb418a64c2b4b80eac21244c566cd4c9e08893d395533cc4251ef7",
    "misc/data/blob.bin": "8cc64618943d82da83248e5f07bd7156aaefaa8b8c3fffa02a074d302432389a",
    "misc/data/weights.csv": "d10a8613ef9d8b7723f7e00740cc3c5d4edbc60ebb3053f3dc2a716bddb8b988",
    "misc/tool.sh": "bf664cf84f00f6ed76164c8457fdeaf8e4dee547226e9ffcf8274e2d2246fed9",
    "reports/inner/README.md": "ceae0c504c373a4fc6865370a8d99b49fd212a47bd8aca2a316ed908c406e452",
    "reports/inner/q3.csv": "1699e753dbd5c325c6d3297cdeecc68d2732c9120b7536eba1e2dc6cfd94f42e",
    "reports/inner/q4.csv": "4196e7b6121b98f22972eb96e957b77ec530fc4a874066067bb58268e44dbed5",
    "reports/notes.txt": "1ea7aeb36247dc8996ee9eb85c64d01ddf095de144c0629d4ac187c48d712567",
    "reports/q1.csv": "6fc80f4dc71a2661f713dbde1b43a928c4ecaca99f2b2482faaf02cf5828a440",
    "reports/q2.csv": "1ad87c2fa09738a902f8ad666e8657edd696ef7af444b5ea1ea6523f19cff60b",
}
BUNDLED = {
    "csv/customers-2019.csv": "f6f944429ab3df1df4ba04e31a3fdcb88570c8244c91be7ba984eaa31a186e35",
    "csv/q1.csv": EXTRACTED["reports/q1.csv"],
    "csv/q2.csv": EXTRACTED["reports/q2.csv"],
    "csv/q3.csv": EXTRACTED["reports/inner/q3.csv"],
    "csv/q4.csv": EXTRACTED["reports/inner/q4.csv"],
    "csv/weights.csv": EXTRACTED["misc/data/weights.csv"],
}


def sha(data):
    return hashlib.sha256(data).hexdigest()


def files_under(root):
    return {p.relative_to(root).as_posix() for p in root.rglob("*") if p.is_file() or p.is_symlink()}


def bundle_members():
    out = {}
    with tarfile.open(BUNDLE, "r:gz") as t:
        for m in t.getmembers():
            if m.isdir():
                continue
            assert m.isfile(), f"{m.name} is not a regular file"
            out[m.name.removeprefix("./")] = t.extractfile(m).read()
    return out


def test_top_level_archives_extracted():
    for rel in ("reports/q1.csv", "misc/data/blob.bin", "legacy/LICENSE"):
        p = EX / rel
        assert p.is_file() and sha(p.read_bytes()) == EXTRACTED[rel], rel


def test_nested_archive_extracted_in_place():
    for rel in ("reports/inner/q3.csv", "reports/inner/q4.csv", "reports/inner/README.md"):
        p = EX / rel
        assert p.is_file() and sha(p.read_bytes()) == EXTRACTED[rel], rel


def test_extracted_tree_exact():
    assert files_under(EX) == set(EXTRACTED), "unexpected or missing files (archives left behind?)"
    for rel, digest in EXTRACTED.items():
        assert sha((EX / rel).read_bytes()) == digest, rel


def test_permissions_preserved():
    assert os.access(EX / "misc" / "tool.sh", os.X_OK)
    assert not os.access(EX / "reports" / "notes.txt", os.X_OK)


def test_bundle_has_exactly_the_csvs():
    names = set(bundle_members())
    assert names == set(BUNDLED)


def test_bundle_contents_and_utf8():
    members = bundle_members()
    for name, data in members.items():
        data.decode("utf-8")
        assert sha(data) == BUNDLED[name], name
    assert "Müller;Köln" in members["csv/customers-2019.csv"].decode("utf-8")


def test_manifest_format_and_order():
    lines = MANIFEST.read_text().splitlines()
    names = [l.split("  ", 1)[1] for l in lines]
    assert names == sorted(BUNDLED)
    for line in lines:
        digest, name = line.split("  ", 1)
        assert digest == BUNDLED[name], name


def test_manifest_verifies_unpacked_bundle(tmp_path):
    for name, data in bundle_members().items():
        assert not name.startswith("/") and ".." not in name.split("/")
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_bytes(data)
    res = subprocess.run(["sha256sum", "-c", str(MANIFEST)], cwd=tmp_path, capture_output=True, text=True)
    assert res.returncode == 0, res.stdout + res.stderr
    assert res.stdout.count(": OK") == len(BUNDLED)
