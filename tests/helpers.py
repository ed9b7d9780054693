"""Small in-memory federations for engine tests (no data set needed)."""
from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch

from cfl_core.engine.federation import Federation


def random_federation(clients: int, shape, classes: int, seed: int = 0, sizes=(20, 60),
                      task: str = "classification", device: str = "cpu") -> Federation:
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(clients):
        n = int(torch.randint(sizes[0], sizes[1] + 1, (1,), generator=gen))
        x = torch.rand(n, *shape, generator=gen)
        y = torch.randint(0, classes, (n,), generator=gen) if task == "classification" else torch.randn(n, generator=gen)
        out.append(SimpleNamespace(x_train=x, y_train=y, x_test=x[:8], y_test=y[:8], cluster=i % 3))
    return Federation.from_clients(out, task, classes, torch.device(device))


def shown(text: str) -> str:
    """Markdown source as a reader sees it: the backslash escapes (cfl_ui.charts.literal.md) removed."""
    import re

    return re.sub(r"\\(.)", r"\1", text)


@pytest.fixture
def runs(tmp_path, monkeypatch):
    """A fresh runs folder for the dashboard (CFL_RUNS_DIR), without UMAP's background warm-up. A test module
    takes it by importing it (`from tests.helpers import runs`)."""
    root = tmp_path / "runs"
    monkeypatch.setenv("CFL_RUNS_DIR", str(root))
    monkeypatch.setenv("CFL_UI_WARMUP", "0")
    return root


def open_sections(at, prefix: str, *sections: str):
    """Open sidebar expanders that draw their widgets only while open ("more" = More settings,
    "options.<algorithm>" = an algorithm's options) and rerun; returns the AppTest."""
    from cfl_ui.form.panel import section_key

    for section in sections:
        at.session_state[section_key(prefix, section)] = True
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    return at


def html_texts(at) -> list[str]:
    """The HTML of every st.html element drawn (the page's lead, the Playground's sample images), and of the
    style-only ones, which Streamlit puts in its hidden "event" block (the theme's and Presenter mode's CSS)."""
    found = []

    def walk(node):
        for child in getattr(node, "children", {}).values():
            if type(child).__name__ == "Html":
                found.append(child.proto.body)
            walk(child)

    walk(at._tree)  # every block: AppTest's own lookups skip the event block
    return found


def process_running(pid: int) -> bool:
    """Whether `pid` is a live process (Linux /proc; a zombie waiting for a parent that reaps it counts as ended)."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            state = f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state not in ("Z", "X")


def wait_until_ended(pids, seconds: float = 15.0) -> list[int]:
    """Poll until none of `pids` runs or `seconds` pass; returns those still running."""
    import time

    deadline = time.monotonic() + seconds
    while any(process_running(pid) for pid in pids) and time.monotonic() < deadline:
        time.sleep(0.1)
    return [pid for pid in pids if process_running(pid)]
