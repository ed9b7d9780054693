"""What the conditions a run ran under did (cfl_core/conditions), in words and headline numbers, read from its
records: the privacy spent, the unseen clients' scores, who dropped out or straggled in a round.

Pure functions of records (no Streamlit): cfl_ui.views.run_charts shows them.
"""
from __future__ import annotations


def _clients(ids) -> str:
    ids = [int(c) for c in ids]
    shown = ", ".join(str(c) for c in ids[:12]) + (f" and {len(ids) - 12} more" if len(ids) > 12 else "")
    return ("client " if len(ids) == 1 else "clients ") + shown


def privacy_headline(records) -> tuple[str, str, str] | None:
    """(label, value, help) of the privacy spent by the last round, None for a run without DP."""
    ex = (records[-1].extras or {}) if records else {}
    if "dp_epsilon" not in ex:
        return None
    eps, delta = ex["dp_epsilon"], ex.get("dp_delta")
    value = "∞" if eps is None or eps == float("inf") else f"{eps:.3g}"
    help_ = (f"The privacy spent so far: ({value}, {delta:g})-differential privacy per client (RDP accountant). "
             "Smaller is more private." if delta is not None else "The privacy spent so far.")
    open_ = ex.get("dp_unprotected") or []
    if open_:
        help_ += " Not covering: " + ", ".join(str(x) for x in open_) + " (sent without noise)."
    label = "Privacy ε" + (f" at δ={delta:g}" if delta is not None else "")
    return label, value, help_


def unprotected_note(records) -> str | None:
    """"not covering: ..." when some of what clients send carries no noise (the epsilon does not cover it)."""
    open_ = ((records[-1].extras or {}).get("dp_unprotected") or []) if records else []
    return ("ε not covering: " + ", ".join(str(x) for x in open_)) if open_ else None


def unseen_headline(records) -> list[tuple[str, str, str]]:
    """The unseen clients' accuracy and ARI at the latest round that assigned them ([] when none did yet)."""
    rec = next((r for r in reversed(records or []) if isinstance((r.extras or {}).get("unseen"), dict)), None)
    if rec is None:
        return []
    u = rec.extras["unseen"]
    n = len(u.get("clients") or [])
    acc, ari = u.get("accuracy"), u.get("ari")
    return [("Unseen accuracy", "—" if acc is None else f"{acc:.1%}",
             f"The {n} clients held out of training, each on the model the algorithm gave it at round {rec.round} "
             "(by its own newcomer rule)."),
            ("Unseen ARI", "—" if ari is None else f"{ari:.2f}",
             f"How well the {n} unseen clients' assignment at round {rec.round} matches their true clusters.")]


def absent_caption(record) -> str | None:
    """Who of the round's selected clients dropped out (did not report) or straggled (sent part of its work)."""
    if record is None:
        return None
    ex = record.extras or {}
    parts = []
    if ex.get("dropped"):
        parts.append(f"{_clients(ex['dropped'])} dropped out (selected, did not report)")
    strag = ex.get("stragglers") or {}
    if strag:
        shares = sorted({float(v) for v in strag.values()})
        parts.append(f"{_clients(strag)} straggled (sent after {' / '.join(f'{s:.0%}' for s in shares)} of "
                     "the local steps)")
    return f"Round {record.round}: " + "; ".join(parts) + "." if parts else None
