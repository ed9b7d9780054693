"""The IFCA-initialisation page's results: success per algorithm and init mode, the spread over seeds, every run's
row."""
from __future__ import annotations

import streamlit as st

from . import figures as F
from .charts import chart
from .controls import algorithm_label
from .live_view import status_bar
from .palette import algorithm_color
from .snapshots import PENDING, TERMINAL
from .tables import PERCENT, pct, round_text
from .urls import app_url

SUCCESS = 0.9999  # final ARI = 1


def rows_of(snap) -> list:
    """One row per run: its seed, init mode and algorithm, and (once it ended) its final numbers."""
    rows = []
    for u in snap.units:
        s = u.summary or {}
        last = u.records[-1] if u.records else None
        done = u.status in TERMINAL
        rows.append({
            "seed": u.tags.get("seed"), "init": u.tags.get("init"), "algorithm": u.tags.get("algorithm", u.algorithm),
            "final_ari": (s.get("final_ari") if s else (last.ari if last else None)) if done else None,
            "final_accuracy": (s.get("final_accuracy") if s else (last.accuracy if last else None)) if done else None,
            "first_ari_0_9": s.get("first_round_ari_0_9") if s else None,
            "status": u.status, "ref": u.ref,
        })
    return rows


def results_csv(rows) -> str:
    return "seed,init,algorithm,final_ari,final_accuracy,first_round_ari_0_9,status,run\n" + "".join(
        f"{r['seed']},{r['init']},{r['algorithm']},{'' if r['final_ari'] is None else r['final_ari']},"
        f"{'' if r['final_accuracy'] is None else r['final_accuracy']},"
        f"{'' if r['first_ari_0_9'] is None else r['first_ari_0_9']},{r['status']},{r['ref']}\n" for r in rows)


def runs_table(rows, algos, modes, labels) -> None:
    table = []
    for r in sorted(rows, key=lambda r: (r["seed"], modes.index(r["init"]) if r["init"] in modes else 9,
                                         algos.index(r["algorithm"]) if r["algorithm"] in algos else 9)):
        table.append({"seed": r["seed"], "init": r["init"], "algorithm": labels.get(r["algorithm"], r["algorithm"]),
                      "final ARI": r["final_ari"], "final accuracy": pct(r["final_accuracy"]),
                      "ARI≥0.9 at round": round_text(r["first_ari_0_9"], r["status"]) if r["final_ari"] is not None
                      else "", "status": r["status"],
                      "open": app_url({"run": r["ref"]}) if r["status"] != PENDING else None})
    st.dataframe(table, hide_index=True, width="stretch", height=min(420, 36 * (len(table) + 1)), column_config={
        "final ARI": st.column_config.NumberColumn(format="%.3f"),
        "final accuracy": st.column_config.NumberColumn(format=PERCENT),
        "open": st.column_config.LinkColumn("open", display_text="in Playground ↗",
                                            help="This seed's run with every Playground chart"),
    })


def render(snap) -> None:
    """Everything the page shows of a seeds x init modes x algorithms job (redrawn live as runs finish)."""
    status_bar(snap, list(snap.units), count_runs=True)
    rows = rows_of(snap)
    algos = list(dict.fromkeys(r["algorithm"] for r in rows))  # in the order they were chosen
    modes = list(dict.fromkeys(r["init"] for r in rows))
    labels = {a: algorithm_label(a) for a in algos}
    colors = {a: algorithm_color(a, i) for i, a in enumerate(algos)}
    # headline: success per algorithm and mode
    cols = st.columns(len(algos) * len(modes))
    i = 0
    for a in algos:
        for m in modes:
            sel = [r for r in rows if r["algorithm"] == a and r["init"] == m and r["final_ari"] is not None]
            wins = sum(1 for r in sel if r["final_ari"] >= SUCCESS)
            cols[i].metric(f"{labels[a]} · {m}", f"{wins}/{len(sel)}" if sel else "—",
                           help="Seeds whose final ARI is 1 (clusters recovered exactly) out of those finished.")
            i += 1
    finished = [r for r in rows if r["final_ari"] is not None]
    if not finished:
        st.info("The first results appear as soon as the first runs finish…", icon=":material/hourglass_top:")
        return
    key = (snap.id, len(finished))
    c1, c2 = st.columns(2, gap="medium")
    with c1:
        chart(lambda: F.success_figure(finished, algos, modes, labels, colors), "ifc.success", cache=("ifc-succ", key),
              title="**Success rate: final ARI = 1**",
              caption="Share of seeds where the algorithm ends with exactly the true clusters, per init mode; "
                      "the labels count seeds. IFCA's bar at 'same' is the collapse.")
    with c2:
        chart(lambda: F.spread_figure(finished, algos, modes, labels, colors), "ifc.spread",
              cache=("ifc-spread", key), title="**Spread of the final ARI over seeds**",
              caption="Each dot is one seed's final ARI (box = quartiles): a tight cluster at 1 is reliable recovery, "
                      "dots at 0 are runs where one model took every client.")
    st.markdown("**Every run** · open any one in the Playground with one click")
    runs_table(rows, algos, modes, labels)
    st.download_button("Results (CSV)", results_csv(rows), "ifca-init.csv", "text/csv", key="ifc.dl_csv",
                       icon=":material/download:")
