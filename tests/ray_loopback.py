"""A Ray cluster of real `ray start` processes on 127.0.0.1 only, for tests and benchmarks; and its launcher.

    python tests/ray_loopback.py ray start --head ...         # `ray` as installed, loopback kept loopback
    python tests/ray_loopback.py cfl sweep SPEC --executor ray --address 127.0.0.1:PORT

Why a launcher: Ray rewrites a loopback address given to `ray start --address` or `ray.init(address=)`
into the machine's outward IP (services.resolve_ip_for_localhost, so that a cluster's nodes on other
machines can be told it). On one machine that would send the test's traffic to an address other than
127.0.0.1, where the head, started with --node-ip-address=127.0.0.1, does not even listen. The
launcher leaves 127.0.0.1 as it is and changes nothing else: the nodes are Ray's own `ray start`
(token authentication as Ray documents it: RAY_AUTH_MODE=token and RAY_AUTH_TOKEN in each process's
environment) and the driver is CFL Lab's own CLI. A cluster on real machines needs none of this.

`LoopbackCluster` starts a head and worker nodes, each `ray start --block` in a session of its own
with its own ports (none of Ray's fixed defaults: several engineers share this machine), and stops
exactly what it started: each node's process group, then any process that still carries the cluster's
marker in its environment (never `ray stop`, which stops every Ray on the machine).
"""
from __future__ import annotations

import os
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MARK = "CFL_RAY_LOOPBACK_CLUSTER"  # in every process of a cluster's environment: how its leftovers are found


def free_ports(count: int) -> list[int]:
    """`count` distinct ports free on 127.0.0.1 right now."""
    sockets = []
    try:
        for _ in range(count):
            s = socket.socket()
            s.bind(("127.0.0.1", 0))
            sockets.append(s)
        return [s.getsockname()[1] for s in sockets]
    finally:
        for s in sockets:
            s.close()


class LoopbackCluster:
    def __init__(self, folder: Path, cpus_per_node: int = 1):
        self.folder = Path(folder)
        self.folder.mkdir(parents=True, exist_ok=True)
        self.cpus = cpus_per_node
        self.token = secrets.token_hex(32)
        self.mark = secrets.token_hex(8)
        self.env = {**os.environ, "RAY_AUTH_MODE": "token", "RAY_AUTH_TOKEN": self.token, MARK: self.mark,
                    "RAY_USAGE_STATS_ENABLED": "0", "PYTHONPATH": str(ROOT), "OMP_NUM_THREADS": "1"}
        self.env.pop("RAY_ADDRESS", None)
        self.env.pop("RAY_AUTH_TOKEN_PATH", None)
        # Ray's own files (sockets: a Unix socket's path is at most 107 bytes, so not under pytest's long tmp_path)
        self.ray_dir = Path(tempfile.mkdtemp(prefix="cflray-", dir="/tmp"))
        self.port = free_ports(1)[0]
        self.address = f"127.0.0.1:{self.port}"
        self.nodes: list[subprocess.Popen] = []

    def _start(self, head: bool) -> subprocess.Popen:
        n = len(self.nodes)
        ports = free_ports(28)
        workers = ",".join(map(str, ports[8:]))
        args = ["start", "--block", "--node-ip-address=127.0.0.1", f"--num-cpus={self.cpus}", "--num-gpus=0",
                "--disable-usage-stats", "--object-store-memory=80000000", f"--worker-port-list={workers}",
                f"--node-manager-port={ports[0]}", f"--object-manager-port={ports[1]}",
                f"--dashboard-agent-grpc-port={ports[2]}", f"--dashboard-agent-listen-port={ports[3]}",
                f"--metrics-export-port={ports[4]}", f"--runtime-env-agent-port={ports[5]}"]
        if head:
            args += ["--head", f"--port={self.port}", f"--ray-client-server-port={ports[6]}",
                     f"--dashboard-port={ports[7]}", "--include-dashboard=false", f"--temp-dir={self.ray_dir}"]
        else:
            args += [f"--address={self.address}"]
        log = open(self.folder / f"node{n}.log", "wb")
        proc = subprocess.Popen([sys.executable, __file__, "ray", *args], env=self.env, cwd=self.folder,
                                stdout=log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        log.close()
        self.nodes.append(proc)
        self._wait_started(n, proc)
        return proc

    def _wait_started(self, n: int, proc: subprocess.Popen, seconds: float = 180) -> None:
        deadline = time.monotonic() + seconds
        log = self.folder / f"node{n}.log"
        while b"Ray runtime started" not in log.read_bytes():
            if proc.poll() is not None or time.monotonic() > deadline:
                raise RuntimeError(f"Ray node {n} did not start:\n" + log.read_text(errors="replace")[-3000:])
            time.sleep(0.3)

    def start(self, workers: int = 1) -> "LoopbackCluster":
        try:
            self._start(head=True)
            for _ in range(workers):
                self._start(head=False)
        except BaseException:
            self.stop()
            raise
        return self

    def kill_node(self, index: int) -> None:
        """SIGKILL a node's whole process group (its raylet, its workers), as a machine that dies."""
        proc = self.nodes[index]
        try:
            os.killpg(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        proc.wait(timeout=30)

    def marked(self) -> list[int]:
        """Processes still carrying this cluster's marker (readable /proc entries only: our own user's)."""
        found, needle = [], f"{MARK}={self.mark}".encode()
        for entry in os.listdir("/proc"):
            if not entry.isdigit() or int(entry) == os.getpid():
                continue
            try:
                with open(f"/proc/{entry}/environ", "rb") as fh:
                    if needle in fh.read().split(b"\0"):
                        found.append(int(entry))
            except OSError:
                continue
        return found

    def stop(self) -> list[int]:
        """Stop every process of this cluster (and only those); returns the pids that had to be killed after the
        nodes' own shutdown."""
        for proc in reversed(self.nodes):
            if proc.poll() is None:
                try:
                    os.killpg(proc.pid, signal.SIGTERM)  # `ray start --block` stops its children on SIGTERM
                except ProcessLookupError:
                    pass
        deadline = time.monotonic() + 20
        for proc in self.nodes:
            try:
                proc.wait(timeout=max(0.1, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.wait(timeout=30)
        left = []
        for _ in range(50):  # workers may outlive their raylet a moment: by pid, never by name
            left = self.marked()
            if not left:
                break
            for pid in left:
                try:
                    os.kill(pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
            time.sleep(0.2)
        shutil.rmtree(self.ray_dir, ignore_errors=True)
        return left

    def cfl(self, *args: str, address: str | None = None, **kw) -> subprocess.Popen:
        """`python -m cfl_core ARGS` as a driver of this cluster: its token in the environment (as a user gives it)
        and, with address 'auto', RAY_ADDRESS (how Ray's `auto` finds a cluster started with its own temp dir)."""
        env = {**self.env, **({"RAY_ADDRESS": self.address} if address == "auto" else {})}
        return subprocess.Popen([sys.executable, __file__, "cfl", *args], env=env, cwd=ROOT, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, text=True, start_new_session=True, **kw)


def remote_addresses(pids: list[int]) -> set[str]:
    """The remote IPv4/IPv6 addresses of the TCP connections these processes hold (from /proc/net)."""
    inodes = set()
    for pid in pids:
        try:
            for fd in os.listdir(f"/proc/{pid}/fd"):
                try:
                    link = os.readlink(f"/proc/{pid}/fd/{fd}")
                except OSError:
                    continue
                if link.startswith("socket:["):
                    inodes.add(link[8:-1])
        except OSError:
            continue
    out = set()
    for table, width in (("/proc/net/tcp", 8), ("/proc/net/tcp6", 32)):
        try:
            lines = Path(table).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if fields[9] not in inodes:
                continue
            remote = fields[2].split(":")[0]
            if width == 8:
                out.add(socket.inet_ntop(socket.AF_INET, bytes.fromhex(remote)[::-1]))
            else:
                raw = bytes.fromhex(remote)
                raw = b"".join(raw[i:i + 4][::-1] for i in range(0, 16, 4))
                out.add(socket.inet_ntop(socket.AF_INET6, raw))
    return out


def _launch() -> int:
    import ray._private.services as services

    services.resolve_ip_for_localhost = lambda host: host  # keep 127.0.0.1 (see the module's docstring)
    which, args = sys.argv[1], sys.argv[2:]
    if which == "ray":
        from ray.scripts.scripts import main

        sys.argv = ["ray", *args]
        return main()
    from cfl_core.cli import main

    return main(args)


if __name__ == "__main__":
    sys.exit(_launch())
