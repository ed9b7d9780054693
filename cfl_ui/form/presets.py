"""Presets: named starting points that fill every control (and explain what to look at).

Each preset is a partial ExperimentConfig (the rest are the config's defaults)
plus, for the Playground, an optional second algorithm run side by side on the
identical federation with identical initial models.
"""
from __future__ import annotations

from dataclasses import dataclass, field


@dataclass(frozen=True)
class Preset:
    name: str
    blurb: str  # one sentence: what this shows and what to look at
    config: dict
    vs: str | None = None  # Playground: a second algorithm, side by side
    tags: tuple = field(default_factory=tuple)


_BASE = dict(dataset="digits", partition="feature-skew", clusters=4, clients_per_cluster=5, samples_per_client=60,
             algorithm="clove", models=4, init="different", rounds=20, local_epochs=2, lr=0.1, participation=1.0,
             seed=0, device="auto")



def _profiled(profile: str, **fields) -> dict:
    """A preset config with a cfl_core profile's settings (docs/faithfulness.md) for its algorithm."""
    from cfl_core.config import ExperimentConfig
    from cfl_core.profiles import apply_profile

    cfg, _ = apply_profile(ExperimentConfig.from_dict({**_BASE, **fields}), profile)
    return cfg.to_dict()


PRESETS: dict[str, Preset] = {p.name: p for p in (
    Preset("Rotated digits",
           "Four clusters see the digits rotated by 0/90/180/270 degrees; CLoVE finds them in a round or two.",
           dict(_BASE)),
    Preset("IFCA collapses, CLoVE recovers",
           "Both start from the SAME model copied K times: every IFCA client ties on model 0 and stays there, "
           "while CLoVE's loss vectors still separate the rotated clusters.",
           dict(_BASE, algorithm="ifca", init="same"), vs="clove"),
    Preset("Label swaps (concept shift)",
           "Same images, but each cluster swaps two pairs of labels: only a per-cluster model can be right.",
           dict(_BASE, partition="concept-shift"), vs="fedavg"),
    Preset("Label skew",
           "Each cluster owns its own digits ({0,1,2}, {3,4,5}, {6,7}, {8,9}): clustering by losses groups them.",
           dict(_BASE, partition="label-skew-1", samples_per_client=50)),
    Preset("No clusters (IID control)",
           "Every client has the same distribution; CLoVE with unknown K should not invent clusters that hurt accuracy.",
           dict(_BASE, partition="iid", options={"unknown_k": True}), vs="fedavg"),
    Preset("Mixture of linear regressions",
           "Four true parameter vectors; the loss vectors separate the clients and each model approaches its theta.",
           dict(_BASE, dataset="synthetic-linear", partition="linear-mixture")),
    Preset("CFL splits on label swaps",
           "Sattler's CFL starts with one model and splits a cluster when its clients' updates point different ways; "
           "watch the update norms and the split markers.",
           dict(_BASE, algorithm="cfl", models=None, partition="concept-shift", rounds=30), vs="clove"),
    Preset("FlexCFL migrates under label shift",
           "Two clients swap one label's samples every round; FlexCFL re-groups clients whose label mix moved, "
           "FedGroup keeps its first grouping.",
           dict(_BASE, algorithm="flexcfl", partition="label-skew-1", samples_per_client=50, within="dirichlet",
                alpha=0.3, shift="swap-part", shift_options={"probability": 1.0, "across_clusters": True}),
           vs="fedgroup"),
    Preset("Unsupervised: autoencoders on rotated digits",
           "No labels at all: each model is an autoencoder and the loss is reconstruction error; CLoVE still "
           "separates the rotations while IFCA from identical models collapses.",
           dict(_BASE, algorithm="clove", init="same", unsupervised=True, optimizer="adam", lr=0.01,
                options={"sqrt_losses": True, "stable_rounds": 5}), vs="ifca"),
    Preset("Fashion-MNIST, rotated (CNN)",
           "The CLoVE paper's setting on 28x28 clothing images with the LeNet-style CNN (a CNN: slower than digits on a CPU).",
           dict(_BASE, dataset="fashion-mnist", rounds=10)),
    Preset("Clustering by data: blind to label swaps",
           "PACFL groups clients by the angles between their data subspaces, once, before training; under concept "
           "shift every cluster has the same images, so its grouping is chance (ARI near 0) while CLoVE's loss "
           "vectors see the swapped labels.",
           dict(_BASE, algorithm="pacfl", partition="concept-shift"), vs="clove"),
    Preset("Clustering by data: rotations are visible",
           "Rotated images span rotated subspaces and move the k-means centres of each client's inputs: PACFL and "
           "k-FED find these clusters in one shot, before any training.",
           dict(_BASE, algorithm="pacfl", partition="feature-skew"), vs="kfed"),
    Preset("Personalised FL without clusters (FedPAC)",
           "FedPAC shares one feature extractor and gives each client a head combined from the others' heads; "
           "it forms no clusters (ARI does not apply), and its head weights show whom each client learns from.",
           dict(_BASE, algorithm="fedpac", partition="concept-shift"), vs="clove"),
    Preset("As in the paper: IFCA",
           "IFCA's own training: 10 full-batch gradient steps a round, momentum 0, lr 0.1, 300 rounds, plain means, "
           "scored by held-out test machines (each takes the model with its lowest test loss).",
           _profiled("paper", algorithm="ifca"), tags=("profile",)),
    Preset("As in the paper: CLoVE",
           "CLoVE's supervised experiments: Adam lr 0.01, one local epoch of batch 100, 100 rounds, random first "
           "assignment, no freezing.",
           _profiled("paper", algorithm="clove"), tags=("profile",)),
    Preset("As in the authors' code: Sattler's CFL",
           "The notebook's training: momentum kept per client across rounds, lr x 0.99 a round, first split after "
           "20 rounds, eps 0.4/1.6, complete linkage, no gamma check, plain means (eps fit its EMNIST CNN, not "
           "every model).",
           _profiled("authors-code", algorithm="cfl", models=None, partition="concept-shift"), tags=("profile",)),
    Preset("As in the authors' code: FlexCFL",
           "FlexCFL's trainer defaults: SGD without momentum, 10 epochs of batch 10, 20 clients a round, 300 "
           "rounds, reported as the best test-size-weighted accuracy.",
           _profiled("authors-code", algorithm="flexcfl", partition="label-skew-1", samples_per_client=50,
                     models=4), tags=("profile",)),
)}

DEFAULT_PRESET = "Rotated digits"
SIGNATURE_PRESET = "IFCA collapses, CLoVE recovers"


def preset_config(name: str) -> dict:
    """The full config dict of a preset (defaults filled in)."""
    from cfl_core.config import ExperimentConfig

    return ExperimentConfig.from_dict(dict(PRESETS[name].config)).to_dict()
