import hashlib
import json
from pathlib import Path

EXP = json.loads((Path(__file__).parent / "expected.json").read_text(encoding="utf-8"))
OUT = Path("/app/out")
SHA = "567664f05bf2680684f7bf93bfb3309fb77e54b1f17efd324d342b31cb85676c"


def test_message_unchanged():
    assert hashlib.sha256(Path("/app/mail/message.eml").read_bytes()).hexdigest() == SHA
    assert OUT.is_dir()


def test_headers():
    assert (OUT / "headers.txt").read_bytes().decode("utf-8") == f"From: {EXP['from']}\nSubject: {EXP['subject']}\n"


def test_body():
    data = (OUT / "body.txt").read_bytes()
    assert b"\r" not in data
    assert data.decode("utf-8").rstrip("\n") == EXP["body"].rstrip("\n")


def test_text_attachment_utf8():
    assert (OUT / "preise.csv").read_bytes().decode("utf-8") == EXP["csv_utf8"]


def test_binary_attachment():
    assert hashlib.sha256((OUT / "logo.png").read_bytes()).hexdigest() == EXP["png_sha"]
