"""``t1env report``: a job folder (or two, to compare) → ``report.md``, ``report.html`` and PNG plots.

The plots (matplotlib, the ``eval`` extra): resolved rate per category with its 95% Wilson interval, the pass@k
curve, the distribution of the passing fraction over trials, and turns against passing fraction. The HTML embeds
the plots as data URIs, so it is one self-contained file; the markdown links the PNGs next to it.

Comparing two jobs (``t1env report A B``) adds a per-task table with both resolved rates and their difference, and
lists the tasks that **flipped**: resolved in most of one job's trials (rate >= 0.5) and not in the other's.
"""

from __future__ import annotations

import base64
import html
import io
from pathlib import Path

from t1env.eval.results import finished_trials, read_json, write_atomic

COLORS = ["#3b6ea8", "#d9822b"]


def _load(job: Path) -> tuple[str, dict, list[dict]]:
    if not (job / "result.json").is_file():
        raise ValueError(f"t1env report {job}: no result.json there (is it a `t1env eval` job folder?)")
    return job.name, read_json(job / "result.json"), list(finished_trials(job).values())


def _plots(jobs: list[tuple[str, dict, list[dict]]]) -> dict[str, bytes]:
    try:
        import matplotlib  # the eval extra: only when a report draws its plots

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt  # the eval extra
    except ImportError:
        raise ValueError("t1env report needs matplotlib: pip install 't1[eval]'") from None
    out: dict[str, bytes] = {}

    def save(fig, name):
        buf = io.BytesIO()
        fig.tight_layout()
        fig.savefig(buf, format="png", dpi=110)
        plt.close(fig)
        out[name] = buf.getvalue()

    # resolved rate per category, with 95% Wilson intervals
    cats = sorted({c for _, m, _ in jobs for c in m["per_category"]})
    fig, ax = plt.subplots(figsize=(max(5, 0.9 * len(cats) + 2), 3.6))
    width = 0.8 / len(jobs)
    for i, (name, m, _) in enumerate(jobs):
        xs = [j + i * width - 0.4 + width / 2 for j in range(len(cats))]
        rates = [m["per_category"].get(c, {}).get("resolved_rate", 0.0) for c in cats]
        lo = [r - m["per_category"].get(c, {}).get("resolved_ci95", [0, 0])[0] for r, c in zip(rates, cats)]
        hi = [m["per_category"].get(c, {}).get("resolved_ci95", [0, 0])[1] - r for r, c in zip(rates, cats)]
        ax.bar(xs, rates, width, yerr=[lo, hi], capsize=3, label=name, color=COLORS[i % 2])
    ax.set_xticks(range(len(cats)), cats, rotation=30, ha="right")
    ax.set_ylim(0, 1.05)
    ax.set_ylabel("resolved rate (95% Wilson)")
    ax.set_title("Resolved rate per category")
    if len(jobs) > 1:
        ax.legend()
    save(fig, "resolved_by_category.png")

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for i, (name, m, _) in enumerate(jobs):
        ks = sorted(int(k) for k in m["pass_at_k"])
        ax.plot(ks, [m["pass_at_k"][str(k)] for k in ks], "o-", label=name, color=COLORS[i % 2])
    ax.set_xlabel("k")
    ax.set_ylabel("pass@k")
    ax.set_ylim(0, 1.05)
    ax.set_title("pass@k (unbiased estimator)")
    ax.xaxis.get_major_locator().set_params(integer=True)
    if len(jobs) > 1:
        ax.legend()
    save(fig, "pass_at_k.png")

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    fracs = [[t["passed"] / t["total"] if t["total"] else 0.0 for t in trials] for _, _, trials in jobs]
    ax.hist(fracs, bins=[i / 10 for i in range(11)], label=[n for n, _, _ in jobs], color=COLORS[: len(jobs)])
    ax.set_xlabel("passing fraction of checks")
    ax.set_ylabel("trials")
    ax.set_title("Distribution of the passing fraction")
    if len(jobs) > 1:
        ax.legend()
    save(fig, "passing_fraction.png")

    fig, ax = plt.subplots(figsize=(4.8, 3.4))
    for i, (name, _, trials) in enumerate(jobs):
        ax.scatter(
            [t["turns"] for t in trials],
            [t["passed"] / t["total"] if t["total"] else 0 for t in trials],
            alpha=0.6,
            label=name,
            color=COLORS[i % 2],
        )
    ax.set_xlabel("turns")
    ax.set_ylabel("passing fraction")
    ax.set_ylim(-0.05, 1.05)
    ax.set_title("Turns vs reward")
    if len(jobs) > 1:
        ax.legend()
    save(fig, "turns_vs_reward.png")
    return out


def _summary_rows(name: str, m: dict) -> list[tuple[str, str]]:
    lo, hi = m["resolved_ci95"]
    rows = [
        ("job", name),
        ("agent", f"{m.get('agent')}" + (f" ({m['model']})" if m.get("model") else "")),
        ("trials", f"{m['n_trials']} of {m['n_expected_trials']}" + ("" if m["complete"] else " (incomplete)")),
        ("resolved rate", f"{m['resolved_rate']:.3f} (95% Wilson [{lo:.3f}, {hi:.3f}])"),
        ("mean passing fraction", f"{m['mean_passed_fraction']:.3f}"),
        ("mean passing checks", f"{m['mean_passed']:.2f}"),
    ]
    rows += [(f"pass@{k}", f"{v:.3f}") for k, v in m["pass_at_k"].items()]
    errs = ", ".join(f"{k} {v}" for k, v in m["errors_by_kind"].items()) or "none"
    rows += [
        ("errors", errs),
        ("mean wall time per trial", f"{m['mean_wall_time_s']:.2f} s"),
        ("mean turns", f"{m['mean_turns']:.1f}"),
        (
            "tokens per trial",
            (
                f"{m['tokens']['mean_prompt_per_trial']:.0f} prompt + "
                f"{m['tokens']['mean_completion_per_trial']:.0f} completion"
            ),
        ),
        ("cost", f"${m['cost_usd']:.4f}"),
    ]
    if m.get("trials_trusting_agent_code"):
        rows.append(
            ("trials whose checks ran agent code", f"{m['trials_trusting_agent_code']} (imported tasks; see below)")
        )
    return rows


def _trusting_rows(jobs) -> list[list[str]]:
    """Per job and task: the checks that ran the agent's code in their own process (imported tasks only)."""
    return [
        [name, t, ", ".join(r["checks_trusting_agent_code"])]
        for name, m, _ in jobs
        for t, r in m["per_task"].items()
        if r.get("checks_trusting_agent_code")
    ]


TRUSTING_NOTE = (
    "These imported tasks' checks import the agent's code into the check's own process: t1 records them "
    "(the agent's code there can set that check's result, and no other) instead of refusing the import "
    "as it does for t1-format tasks (docs/sandbox.md)."
)


def _task_table(jobs) -> tuple[list[str], list[list[str]], list[str]]:
    """Header, rows and the flipped tasks (two jobs) of the per-task table."""
    if len(jobs) == 1:
        _, m, _ = jobs[0]
        head = ["task", "category", "difficulty", "trials", "resolved rate", "95% CI", "mean passed", "checks"]
        rows = [
            [
                t,
                str(r["category"]),
                str(r["difficulty"]),
                str(r["n_trials"]),
                f"{r['resolved_rate']:.2f}",
                f"[{r['resolved_ci95'][0]:.2f}, {r['resolved_ci95'][1]:.2f}]",
                f"{r['mean_passed']:.2f}",
                str(r["total_checks"]),
            ]
            for t, r in m["per_task"].items()
        ]
        return head, rows, []
    (na, ma, _), (nb, mb, _) = jobs
    head = ["task", f"{na} resolved", f"{nb} resolved", "delta", f"{na} passed", f"{nb} passed", "flipped"]
    rows, flipped = [], []
    for t in sorted(set(ma["per_task"]) | set(mb["per_task"])):
        a, b = ma["per_task"].get(t), mb["per_task"].get(t)
        ra = a["resolved_rate"] if a else None
        rb = b["resolved_rate"] if b else None
        flip = ""
        if ra is not None and rb is not None and (ra >= 0.5) != (rb >= 0.5):
            flip = "now solved" if rb >= 0.5 else "now failing"
            flipped.append(f"{t} ({flip})")

        def fmt(x):
            return "-" if x is None else f"{x:.2f}"

        rows.append(
            [
                t,
                fmt(ra),
                fmt(rb),
                fmt(rb - ra) if ra is not None and rb is not None else "-",
                fmt(a["mean_passed"] if a else None),
                fmt(b["mean_passed"] if b else None),
                flip,
            ]
        )
    return head, rows, flipped


def _group_table(jobs, key: str, what: str) -> tuple[list[str], list[list[str]]]:
    """Resolved rate (95% CI) per category or difficulty, one column per job."""
    names = sorted({g for _, m, _ in jobs for g in m[key]})
    head = [what] + [f"{n} resolved (n)" for n, _, _ in jobs]
    rows = []
    for g in names:
        row = [g]
        for _, m, _ in jobs:
            r = m[key].get(g)
            row.append(
                "-"
                if r is None
                else f"{r['resolved_rate']:.2f} [{r['resolved_ci95'][0]:.2f}, {r['resolved_ci95'][1]:.2f}] "
                f"({r['n_trials']})"
            )
        rows.append(row)
    return head, rows


def _md_table(head: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(c.replace("|", "\\|") for c in r) + " |" for r in rows]
    return "\n".join(lines)


def _html_table(head: list[str], rows: list[list[str]]) -> str:
    h = "".join(f"<th>{html.escape(c)}</th>" for c in head)
    body = "".join("<tr>" + "".join(f"<td>{html.escape(c)}</td>" for c in r) + "</tr>" for r in rows)
    return f"<table><thead><tr>{h}</tr></thead><tbody>{body}</tbody></table>"


CSS = """body{font-family:system-ui,sans-serif;margin:2em auto;max-width:1100px;color:#222}
table{border-collapse:collapse;margin:1em 0}td,th{border:1px solid #ccc;padding:3px 8px;text-align:left}
th{background:#f0f3f7}h1{font-size:1.6em}.row{display:flex;gap:2em;flex-wrap:wrap}
.plots{display:grid;grid-template-columns:1fr 1fr;gap:12px}.plots img{width:100%;border:1px solid #ddd}"""


def write_report(job_dirs: list[Path], out: Path | None = None) -> list[Path]:
    """Write ``report.md``, ``report.html`` and the PNG plots into ``out`` (default: the first job folder)."""
    if not 1 <= len(job_dirs) <= 2:
        raise ValueError(f"t1env report: give one job folder, or two to compare; got {len(job_dirs)}")
    jobs = [_load(Path(d)) for d in job_dirs]
    if len(jobs) == 2 and jobs[0][0] == jobs[1][0]:
        jobs[1] = (jobs[1][0] + " (B)", jobs[1][1], jobs[1][2])
    out = Path(out or job_dirs[0])
    plots = _plots(jobs)
    title = "t1 evaluation: " + " vs ".join(n for n, _, _ in jobs)
    head, rows, flipped = _task_table(jobs)
    summaries = [_summary_rows(n, m) for n, m, _ in jobs]

    md = [f"# {title}", ""]
    for s in summaries:
        md += [_md_table(["metric", "value"], [list(r) for r in s]), ""]
    if len(jobs) == 2:
        md += ["## Flipped tasks", "", ", ".join(flipped) or "none", ""]
    for key, what in (("per_category", "category"), ("per_difficulty", "difficulty")):
        md += [f"## By {what}", "", _md_table(*_group_table(jobs, key, what)), ""]
    md += ["## Per task", "", _md_table(head, rows), ""]
    trusting = _trusting_rows(jobs)
    if trusting:
        md += [
            "## Checks that ran agent code in process",
            "",
            TRUSTING_NOTE,
            "",
            _md_table(["job", "task", "checks"], trusting),
            "",
        ]
    md += ["## Plots", ""]
    md += [f"![{p}]({p})" for p in plots] + [""]
    md += [
        (
            "Resolved rates carry 95% Wilson score intervals; pass@k is the unbiased estimator of Chen et al. "
            "(2021); see docs/evaluation.md for every definition."
        ),
        "",
    ]

    imgs = "".join(
        f'<img alt="{p}" src="data:image/png;base64,{base64.b64encode(b).decode()}">' for p, b in plots.items()
    )
    parts = [
        (
            f"<!doctype html><html><head><meta charset='utf-8'><title>{html.escape(title)}</title>"
            f"<style>{CSS}</style></head><body><h1>{html.escape(title)}</h1>"
        )
    ]
    parts.append(
        "<div class='row'>"
        + "".join(_html_table(["metric", "value"], [list(r) for r in s]) for s in summaries)
        + "</div>"
    )
    if len(jobs) == 2:
        parts.append(f"<h2>Flipped tasks</h2><p>{html.escape(', '.join(flipped) or 'none')}</p>")
    parts.append(f"<h2>Plots</h2><div class='plots'>{imgs}</div>")
    groups = "".join(
        f"<div><h2>By {what}</h2>{_html_table(*_group_table(jobs, key, what))}</div>"
        for key, what in (("per_category", "category"), ("per_difficulty", "difficulty"))
    )
    parts.append(f"<div class='row'>{groups}</div>")
    parts.append(f"<h2>Per task</h2>{_html_table(head, rows)}")
    if trusting:
        parts.append(
            f"<h2>Checks that ran agent code in process</h2><p>{html.escape(TRUSTING_NOTE)}</p>"
            + _html_table(["job", "task", "checks"], trusting)
        )
    parts.append(
        "<p>Resolved rates carry 95% Wilson score intervals; pass@k is the unbiased estimator of "
        "Chen et al. (2021).</p></body></html>"
    )

    written = []
    for name, data in plots.items():
        write_atomic(out / name, data)
        written.append(out / name)
    write_atomic(out / "report.md", "\n".join(md))
    write_atomic(out / "report.html", "".join(parts))
    return [out / "report.md", out / "report.html", *written]
