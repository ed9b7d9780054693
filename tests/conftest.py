"""Shared test settings."""
import pytest
import torch


@pytest.fixture(autouse=True, scope="session")
def one_torch_thread():
    """Test tensors are small: one thread is as fast, and on a busy 2-core machine other processes
    cannot make torch's thread pool spin (two threads on two shared cores ran tests up to 20x slower)."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture(autouse=True)
def no_watchers_left_over():
    """AppTest runs pages in this process: the live views' polls of one test must not slow the next one's
    (cfl_ui.jobs.poll_pace counts every session that polled in the last half minute)."""
    yield
    from cfl_ui.jobs.poll_pace import PACE

    PACE._sessions.clear()
