"""The conditions the field asks about, declared once (config fields of group "conditions") and applied to every
algorithm through the engine and the experiment, never in an algorithm's own file:

- system heterogeneity (system.py): drop-outs and stragglers, drawn each round;
- differential privacy (privacy.py): clipping and Gaussian noise on what clients send, the privacy spent;
- malicious clients (attacks.py): label flips, scaled or sign-flipped updates, false loss vectors;
- unseen clients (unseen.py): held out of training, assigned by each algorithm's own rule.

The engine asks `engine.conditions` at the points where a client's data leaves it (`sent_models`,
`sent_gradients`, `sent_losses`, `sent_in_clear`) and where its local steps are drawn (`cut_schedule`); the
experiment draws each round (`begin_round`), records it (`round_extras`) and checkpoints the privacy ledger.
With every condition off (the defaults) `NO_CONDITIONS` stands in and every hook returns its input untouched.
"""
from __future__ import annotations

import numpy as np
import torch

from ..errors import ConfigError
from . import attacks, privacy, system, unseen


def validate_conditions(cfg) -> None:
    """ConfigError for a combination of condition settings that cannot run (cheap: no data)."""
    from ..dynamics import newcomer_count

    n = cfg.num_clients
    unseen_n = unseen.unseen_count(cfg)
    if cfg.unseen_share > 0:
        if unseen_n == 0:
            raise ConfigError("unseen_share", cfg.unseen_share, f"a share that holds out at least one of the {n} clients")
        if unseen_n + newcomer_count(cfg) >= n:
            raise ConfigError("unseen_share", cfg.unseen_share,
                              f"a share that leaves at least one client training at round 0 (with the newcomers, "
                              f"{unseen_n + newcomer_count(cfg)} of {n} are held back)")
    if cfg.unseen_every > cfg.rounds:
        raise ConfigError("unseen_every", cfg.unseen_every, f"at most the number of rounds ({cfg.rounds}); 0: only "
                                                            "after the last round")
    for name in ("dp_noise", "dp_loss_noise"):
        value = getattr(cfg, name)
        if 0 < value < privacy.MIN_NOISE:
            raise ConfigError(name, value, f"0 (off) or at least {privacy.MIN_NOISE}: with less noise no privacy is "
                                           "left to account for")
    bad_n = attacks.malicious_count(cfg)
    if cfg.malicious_share > 0:
        if bad_n == 0:
            raise ConfigError("malicious_share", cfg.malicious_share,
                              f"a share that makes at least one of the {n} clients malicious")
        if bad_n >= n - unseen_n:
            raise ConfigError("malicious_share", cfg.malicious_share,
                              f"a share that leaves at least one honest training client ({n - unseen_n} train)")
        if cfg.attack == "label-flip" and cfg.shift != "none":
            raise ConfigError("attack", cfg.attack, f"scale, sign-flip or false-losses with a distribution shift "
                                                    f"({cfg.shift}): it would move the attackers' flipped samples "
                                                    "to honest clients")
        if cfg.attack == "label-flip":
            from ..data import dataset_info

            if cfg.unsupervised or dataset_info(cfg.dataset).task != "classification":
                raise ConfigError("attack", cfg.attack, "scale, sign-flip or false-losses: label-flip needs class "
                                                        "labels (a supervised classification run)")


class NoConditions:
    """Every hook a no-op: the engine's default (test machines, runs without conditions)."""

    active = False

    def cut_schedule(self, schedule, clients):
        return schedule

    def sent_models(self, start, trained, clients):
        return trained

    def sent_gradients(self, grads, clients):
        return grads

    def sent_losses(self, matrix, clients, *, uploads: bool):
        return matrix

    def sent_in_clear(self, what: str) -> None:
        pass


NO_CONDITIONS = NoConditions()


def any_condition(cfg) -> bool:
    return bool(cfg.dropout_rate > 0 or cfg.straggler_rate > 0 or cfg.dp_noise > 0 or cfg.dp_loss_noise > 0
                or cfg.malicious_share > 0 or cfg.unseen_share > 0)


class RunConditions(NoConditions):
    """The conditions of one run: who is malicious and unseen (fixed), this round's draws, the privacy ledger."""

    active = True

    def __init__(self, cfg, num_clients: int, clusters: torch.Tensor):
        self.cfg = cfg
        self.unseen = unseen.choose_unseen(cfg, clusters)
        eligible = np.setdiff1d(np.arange(num_clients), np.asarray(self.unseen, dtype=np.int64))
        self.malicious = attacks.choose_malicious(cfg, eligible)
        self._attacker = torch.zeros(num_clients, dtype=torch.bool)
        if self.malicious:
            self._attacker[torch.as_tensor(self.malicious)] = True
        self.ledger = privacy.PrivacyLedger()
        self.dp = cfg.dp_noise > 0 or cfg.dp_loss_noise > 0
        self._round = -1
        self._q = 1.0
        self._stragglers: dict = {}
        self._calls = 0
        self._releases = {"updates": 0, "losses": 0}
        self._clear: set = set()

    # -- the round ------------------------------------------------------------------------------------
    def open_round(self, round_index: int) -> None:
        """A round starts (before its newcomers are placed): its noise draws are numbered from here, so a resumed
        run draws what the uninterrupted one did."""
        self._round, self._q, self._calls = round_index, 1.0, 0
        self._releases = {"updates": 0, "losses": 0}
        self._clear = set()
        self._dropped, self._stragglers = [], {}

    def begin_round(self, round_index: int, participants: torch.Tensor, eligible: int):
        """Draw this round's drop-outs and stragglers among `participants`; returns the reporting clients."""
        reporting, self._dropped, self._stragglers = system.round_draw(self.cfg, round_index, participants)
        self._q = len(reporting) / max(1, eligible)
        return reporting

    def begin_setup(self, present: int, eligible: int) -> None:
        """The set-up (round 0's restarts, cold start): every present client takes part, nobody drops."""
        self.open_round(-1)
        self._q = present / max(1, eligible)

    def end_window(self) -> None:
        """Book this window's noised releases in the privacy ledger: a client chosen for the round (probability q)
        makes r releases with noise multiplier z, as much as one release with z / sqrt(r)."""
        for noise, count in ((self.cfg.dp_noise, self._releases["updates"]),
                             (self.cfg.dp_loss_noise, self._releases["losses"])):
            if count:
                self.ledger.add(noise / count ** 0.5, self._q, 1)

    def round_extras(self) -> dict:
        out: dict = {}
        if self.cfg.dropout_rate > 0:
            out["dropped"] = list(self._dropped)
        if self.cfg.straggler_rate > 0:
            out["stragglers"] = {str(c): s for c, s in sorted(self._stragglers.items())}
        if self.malicious:
            out["malicious"] = list(self.malicious)
            out["attack"] = self.cfg.attack
        if self.dp:
            eps = self.ledger.epsilon(self.cfg.dp_delta)
            out["dp_epsilon"] = eps
            out["dp_delta"] = self.cfg.dp_delta
            if self._clear:
                out["dp_unprotected"] = sorted(self._clear)
        return out

    # -- the engine's hooks ---------------------------------------------------------------------------
    def cut_schedule(self, schedule, clients):
        return system.cut_schedule(schedule, clients.cpu(), self._stragglers)

    def _generator(self):
        self._calls += 1
        return privacy.generator(self.cfg.seed, self._round, self._calls)

    def _attackers(self, clients: torch.Tensor) -> torch.Tensor:
        return self._attacker[clients.cpu()]

    def _sent_updates(self, updates: torch.Tensor, clients: torch.Tensor) -> torch.Tensor:
        if self.cfg.dp_noise > 0:
            updates = privacy.noised(updates, self.cfg.dp_clip, self.cfg.dp_noise, self._generator())
            self._releases["updates"] += 1
        return attacks.attack_updates(updates, self._attackers(clients), self.cfg.attack, self.cfg.attack_scale) \
            if self.malicious else updates

    def sent_models(self, start, trained, clients):
        if self.cfg.dp_noise <= 0:
            self.sent_in_clear("model updates (dp_noise is 0)")
        if self.cfg.dp_noise <= 0 and not (self.malicious and self.cfg.attack in ("scale", "sign-flip")):
            return trained
        start = start.to(trained.device)
        return start + self._sent_updates(trained - start, clients).to(trained.device)

    def sent_gradients(self, grads, clients):
        if self.cfg.dp_noise <= 0:
            self.sent_in_clear("gradients (dp_noise is 0)")
        if self.cfg.dp_noise <= 0 and not (self.malicious and self.cfg.attack in ("scale", "sign-flip")):
            return grads
        return self._sent_updates(grads, clients).to(grads.device)

    def sent_losses(self, matrix, clients, *, uploads: bool):
        if self.malicious and self.cfg.attack == "false-losses":
            matrix = attacks.false_losses(matrix, self._attackers(clients))
        if uploads and self.cfg.dp_loss_noise > 0:
            matrix = privacy.noised(matrix, self.cfg.dp_loss_clip, self.cfg.dp_loss_noise, self._generator())
            self._releases["losses"] += 1
        elif uploads:
            self.sent_in_clear("loss vectors (dp_loss_noise is 0)")
        return matrix

    def sent_in_clear(self, what: str) -> None:
        if self.dp:
            self._clear.add(what)


def build(cfg, num_clients: int, clusters: torch.Tensor):
    return RunConditions(cfg, num_clients, clusters) if any_condition(cfg) else NO_CONDITIONS
