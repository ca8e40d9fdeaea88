"""config: repair a service configuration file (JSON, INI or TOML) and apply required settings.

The format, the settings, the required changes and the injected faults (syntax errors, a
duplicate key, a number or boolean written as a string) vary by seed. Tests parse the file with
the format's standard parser and compare every setting.

The splits draw from disjoint pools (``docs/families.md``): test configs have held-out sections and
settings (``http``, ``queue``, ``metrics``, ``auth``, ``storage``), their own file names, a held-out
syntax fault instead of train's (a ``//`` comment in JSON, an unquoted string in TOML, a line without
``=`` in INI) and the instruction's own wording.
"""

from __future__ import annotations

import json
import random

from t1env.families.base import Family, Instance, split_of_seed

SECTIONS = {
    "server": {
        "host": ["127.0.0.1", "0.0.0.0", "localhost"],
        "port": range(1024, 9999),
        "workers": range(1, 32),
        "keepalive": [True, False],
        "timeout_s": range(5, 300),
    },
    "database": {
        "url": ["sqlite:///data/app.db", "postgres://db:5432/app", "mysql://db/app"],
        "pool_size": range(1, 50),
        "retries": range(0, 10),
        "ssl": [True, False],
    },
    "logging": {
        "level": ["debug", "info", "warning", "error"],
        "file": ["/var/log/app.log", "logs/app.log", "-"],
        "rotate_mb": range(1, 500),
        "json": [True, False],
    },
    "cache": {
        "backend": ["memory", "redis", "none"],
        "ttl_s": range(10, 86400),
        "max_items": range(100, 100000),
        "enabled": [True, False],
    },
    "features": {
        "beta_ui": [True, False],
        "signup": [True, False],
        "max_upload_mb": range(1, 1024),
        "theme": ["light", "dark", "auto"],
    },
}
HELD_OUT = {  # the test split's sections
    "http": {
        "bind": ["0.0.0.0", "127.0.0.1", "::1"],
        "listen_port": range(2000, 9000),
        "gzip": [True, False],
        "max_body_kb": range(64, 8192),
    },
    "queue": {
        "broker": ["amqp://mq:5672", "redis://q:6379/1", "memory"],
        "prefetch": range(1, 200),
        "durable": [True, False],
        "visibility_s": range(10, 3600),
    },
    "metrics": {
        "exporter": ["prometheus", "statsd", "off"],
        "interval_s": range(1, 120),
        "histograms": [True, False],
        "prefix": ["app", "svc", "edge"],
    },
    "auth": {
        "provider": ["oidc", "ldap", "local"],
        "session_min": range(5, 1440),
        "mfa": [True, False],
        "lockout_after": range(3, 20),
    },
    "storage": {
        "root": ["/srv/data", "/var/lib/app", "data/"],
        "quota_gb": range(1, 2000),
        "compress": [True, False],
        "replicas": range(1, 5),
    },
}
ALL_SECTIONS = {**SECTIONS, **HELD_OUT}
FORMATS = {"json": "config.json", "ini": "app.ini", "toml": "settings.toml"}
FORMATS_TEST = {"json": "service.json", "ini": "daemon.ini", "toml": "app.toml"}
# the test split's syntax fault per format, in place of train's (unclosed section header, trailing comma)
SYNTAX_TEST = {"json": "comment", "toml": "bareword", "ini": "nodelim"}

TESTS = r'''
import configparser
import json
import tomllib
from pathlib import Path

PATH = Path("/app") / FILE


def load():
    assert PATH.is_file(), f"{PATH} is missing"
    text = PATH.read_text()
    if FORMAT == "json":
        return json.loads(text)
    if FORMAT == "toml":
        return tomllib.loads(text)
    cp = configparser.ConfigParser(strict=True, interpolation=None)
    cp.read_string(text)
    return {s: {k: v for k, v in cp[s].items()} for s in cp.sections()}


def norm(v):
    """INI has no types: compare the text form (booleans as true/false)."""
    if FORMAT != "ini":
        return v
    return str(v).lower() if isinstance(v, bool) else str(v)


def test_parses_with_the_standard_parser():
    assert isinstance(load(), dict)


def test_required_settings_applied():
    cfg = load()
    for (section, key), value in REQUIRED.items():
        assert cfg.get(section, {}).get(key) == norm(value), f"{section}.{key}"


def test_other_settings_preserved():
    cfg = load()
    for (section, key), value in KEPT.items():
        assert cfg.get(section, {}).get(key) == norm(value), f"{section}.{key} changed"


def test_no_missing_or_extra_settings():
    cfg = load()
    assert {(s, k) for s in cfg for k in cfg[s]} == set(REQUIRED) | set(KEPT)


def test_values_have_the_right_types():
    cfg = load()
    for (section, key), value in {**KEPT, **REQUIRED}.items():
        got = cfg[section][key]
        if FORMAT != "ini":
            assert type(got) is type(value), f"{section}.{key}: {type(got).__name__}, expected {type(value).__name__}"
'''


def _other(rng: random.Random, vals, current):
    """``rng.choice([v for v in vals if v != current])`` (the same draw) without listing a range's values."""
    if isinstance(vals, range) and vals.step == 1 and current in vals:
        i = rng.randrange(len(vals) - 1)
        return vals[i] if vals[i] < current else vals[i + 1]
    return rng.choice([v for v in vals if v != current])


def _render(fmt: str, cfg: dict, faults: set[str], rng: random.Random) -> str:
    def lit(v, quote_num=False):
        if isinstance(v, bool):
            text = "true" if v else "false"
            return f'"{text}"' if quote_num else text
        if isinstance(v, int):
            return f'"{v}"' if quote_num else str(v)
        return json.dumps(v)

    stringly = dup = None
    if "duplicate" in faults:  # the first key of the first section again, with another value (last one wins)
        s0 = list(cfg)[0]
        k0 = list(cfg[s0])[0]
        dup = (s0, k0, _other(rng, ALL_SECTIONS[s0][k0], cfg[s0][k0]))
    if "stringly" in faults:
        cands = [(s, k) for s in cfg for k, v in cfg[s].items() if not isinstance(v, str)]
        stringly = rng.choice(cands)
    odd = None  # the setting that "bareword" leaves unquoted or "nodelim" writes without its `=`
    if faults & {"bareword", "nodelim"}:
        cands = [
            (s, k)
            for s in cfg
            for k, v in cfg[s].items()
            if "nodelim" in faults or (isinstance(v, str) and v.replace("_", "").isalnum())
        ]
        odd = rng.choice(cands)
    lines: list[str] = []
    if fmt == "json":
        secs = []
        for s, kv in cfg.items():
            items = [f'    "{k}": {lit(v, (s, k) == stringly)}' for k, v in kv.items()]
            if dup and dup[0] == s:
                items.append(f'    "{dup[1]}": {lit(dup[2])}')
            body = ",\n".join(items) + (",\n" if "syntax" in faults and s == list(cfg)[-1] else "\n")
            secs.append(f'  "{s}": {{\n{body}  }}')
        comment = "  // generated by the setup wizard: edit with care\n" if "comment" in faults else ""
        return "{\n" + comment + ",\n".join(secs) + "\n}\n"
    for s, kv in cfg.items():
        head = f"[{s}" if "syntax" in faults and s == list(cfg)[-1] else f"[{s}]"
        lines.append(head)
        for k, v in kv.items():
            if fmt == "ini":
                text = str(v).lower() if isinstance(v, bool) else str(v)
                lines.append(f"{k} {text}" if (s, k) == odd else f"{k} = {text}")
            elif (s, k) == odd:
                lines.append(f"{k} = {v}")
            else:
                lines.append(f"{k} = {lit(v, (s, k) == stringly)}")
        if dup and dup[0] == s:
            v = dup[2]
            lines.append(f"{dup[1]} = {lit(v) if fmt == 'toml' else (str(v).lower() if isinstance(v, bool) else v)}")
        lines.append("")
    return "# service configuration\n" + "\n".join(lines)


class ConfigRepair(Family):
    name = "config"
    category = "sysadmin"
    difficulty = "easy"
    description = (
        "Repair a JSON/INI/TOML service config (syntax faults, duplicates, mistyped values) and apply settings."
    )

    def build(self, rng: random.Random, seed: int) -> Instance:
        split = split_of_seed(seed)
        sections = SECTIONS if split == "train" else HELD_OUT
        fmt = rng.choice(sorted(FORMATS))
        file = (FORMATS if split == "train" else FORMATS_TEST)[fmt]
        cfg: dict[str, dict] = {}
        for s in rng.sample(sorted(sections), rng.randint(3, 5)):
            cfg[s] = {k: rng.choice(vals) for k, vals in sections[s].items() if rng.random() < 0.85}
            if not cfg[s]:
                k = sorted(sections[s])[0]
                cfg[s][k] = rng.choice(sections[s][k])
        syntax = "syntax" if split == "train" else SYNTAX_TEST[fmt]
        if syntax == "bareword" and not any(
            isinstance(v, str) and v.replace("_", "").isalnum() for kv in cfg.values() for v in kv.values()
        ):
            syntax = "syntax"  # no string setting to leave unquoted
        faults = {syntax} | set(rng.sample(["duplicate", "stringly"] if fmt != "ini" else ["duplicate"], 1))
        broken = _render(fmt, cfg, faults, rng)
        keys = [(s, k) for s in cfg for k in cfg[s]]
        required = {}
        for s, k in rng.sample(keys, min(len(keys) - 1, rng.randint(3, 5))):
            required[(s, k)] = _other(rng, sections[s][k], cfg[s][k])
        kept = {sk: cfg[sk[0]][sk[1]] for sk in keys if sk not in required}
        final = {s: {k: required.get((s, k), v) for k, v in kv.items()} for s, kv in cfg.items()}
        fixed = _render(fmt, final, set(), rng)

        def show(v):
            return (
                ("true" if v else "false") if isinstance(v, bool) else json.dumps(v) if isinstance(v, str) else str(v)
            )

        req_text = "\n".join(f"* `{s}.{k}` = `{show(v)}`" for (s, k), v in required.items())
        typed = "" if fmt == "ini" else " Numbers and booleans must be real numbers and booleans, not strings."
        instruction = (
            (
                f"The service in `/app` reads its settings from `/app/{file}` ({fmt.upper()}), but the file is broken: the\n"
                f"service's standard {fmt.upper()} parser rejects it or reads wrong values.\n\n"
                "Repair the file in place so that it parses cleanly and every setting keeps its meaning, with no setting\n"
                f"added, lost or defined twice.{typed} Then apply these changes (section `.` key):\n\n"
                + req_text
                + "\n\n"
                "All other settings keep their current values.\n"
            )
            if split == "train"
            else (
                f"`/app/{file}` holds the settings of the service in `/app`, in {fmt.upper()}, and it is damaged: the\n"
                f"standard {fmt.upper()} parser either refuses it or gets wrong values out of it.\n\n"
                "Fix the file where it is, so that it parses without errors and every setting means what it meant, with\n"
                f"each setting present exactly once and none added or dropped.{typed}\n"
                "Then make these changes (written as section `.` key):\n\n" + req_text + "\n\n"
                "Every other setting stays as it is.\n"
            )
        )
        solve = f"cat > {file} <<'CFG'\n{fixed}CFG\n"
        if fmt == "ini":
            solve += f"python3 -c \"import configparser; c = configparser.ConfigParser(strict=True); c.read('{file}'); print(c.sections())\"\n"
        else:
            mod = "json" if fmt == "json" else "tomllib"
            mode = "" if fmt == "json" else ", 'rb'"
            solve += f"python3 -c \"import {mod}; print(list({mod}.load(open('{file}'{mode}))))\"\n"
        tests = f"FORMAT = {fmt!r}\nFILE = {file!r}\nREQUIRED = {required!r}\nKEPT = {kept!r}\n" + TESTS
        return Instance(
            title=f"Repair a broken {fmt.upper()} service config and apply {len(required)} settings",
            instruction=instruction,
            solve=solve,
            tests={"test_config.py": tests},
            files={file: broken},
            tags=("config", fmt, *sorted(faults)),
            tools=("python3",),
            max_turns=25,
        )
