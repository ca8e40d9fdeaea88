import pytest

from t1train.actions import parse_action


@pytest.mark.parametrize(
    "text,kind,command",
    [
        ("I'll look.\n```bash\nls -la\n```", "command", "ls -la"),
        ("```\necho hi > a\n```", "command", "echo hi > a"),
        ("```sh\n  make test  \n```\ntrailing", "command", "make test"),
        ('<tool_call>\n{"name": "bash", "arguments": {"command": "pwd"}}\n</tool_call>', "command", "pwd"),
        ('<tool_call>{"name": "bash", "arguments": "{\\"command\\": \\"id\\"}"}</tool_call>', "command", "id"),
        ('<tool_call>{"name": "submit", "arguments": {}}</tool_call>', "submit", None),
        ("All done.\nSUBMIT\n", "submit", None),
        ("```bash\nSUBMIT\n```", "command", "SUBMIT"),  # inside a block it is a command, not a submit
        ("no action here", "none", None),
        ("```bash\nunterminated", "none", None),
        ("```python\nprint(1)\n```", "none", None),
        ('<tool_call>{"name": "rm"}</tool_call>', "none", None),
        ("<tool_call>{not json}</tool_call>", "none", None),
    ],
)
def test_parse_action(text, kind, command):
    action = parse_action(text)
    assert action.kind == kind
    assert action.command == command
    if kind == "none":
        assert action.error


def test_first_action_wins():
    assert parse_action("SUBMIT\n```bash\nls\n```").kind == "submit"
    assert parse_action("```bash\nls\n```\nSUBMIT").command == "ls"
