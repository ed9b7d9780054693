"""The peer benchmark's parts that need no peer framework, and `sample_with_replacement`.

CI installs only requirements.txt and requirements-test.txt: nothing here imports flwr or pfl.
"""
from __future__ import annotations

import numpy as np
import pytest

from cfl_core.config import ExperimentConfig
from cfl_core.data import dataset_info, load_dataset
from cfl_core.errors import ConfigError
from cfl_core.partition import PartitionConfig, build_partition
from cfl_core.settings import settings_of


@pytest.fixture(scope="module")
def digits():
    return load_dataset("digits")


# -- sample_with_replacement ---------------------------------------------------------------------------
def test_without_replacement_the_small_pool_is_refused_with_the_existing_message():
    # 100 clients x 80 digits is 8,000 samples; the train pool has 1,346
    config = PartitionConfig("digits", "iid", clusters=1, clients_per_cluster=100, samples_per_client=80)
    with pytest.raises(ConfigError) as caught:
        config.validate(dataset_info("digits"))
    error = caught.value
    assert error.parameter == "samples_per_client" and error.value == 80
    assert "at most 13 for iid with 1 clusters x 100 clients on digits without drawing a sample twice" in str(error)
    assert "sample_with_replacement" in str(error)  # and it names the way out
    with pytest.raises(ConfigError, match="clients_per_cluster.*sample_with_replacement"):
        PartitionConfig("digits", "iid", clusters=50, clients_per_cluster=50,
                        samples_per_client=1).validate(dataset_info("digits"))


def test_with_replacement_any_size_is_served(digits):
    config = PartitionConfig("digits", "feature-skew", clusters=4, clients_per_cluster=50, samples_per_client=80,
                             test_samples_per_client=40, sample_with_replacement=True)
    config.validate(dataset_info("digits"))
    part = build_partition(digits, config)
    assert len(part.clients) == 200
    pooled = np.concatenate([c.train_idx for c in part.clients])
    assert len(pooled) == 200 * 80 > digits.info.n_train  # more than the pool: clients share samples
    for c in part.clients:
        assert len(c.train_idx) == 80 and len(np.unique(c.train_idx)) == 80  # no repeats inside a client
        assert len(c.test_idx) == 40
        assert sum(c.label_counts) == 80
        assert np.array_equal(np.bincount(digits.y_train.numpy()[c.train_idx], minlength=10), c.label_counts)
    assert part.to_json()["config"]["sample_with_replacement"] is True
    data = part.materialize(digits)
    assert tuple(data[0].x_train.shape) == (80, 1, 8, 8)


def test_with_replacement_is_deterministic_and_seeded(digits):
    config = PartitionConfig("digits", "iid", clusters=2, clients_per_cluster=30, samples_per_client=80,
                             sample_with_replacement=True, seed=3)
    a, b = build_partition(digits, config), build_partition(digits, config)
    assert all(np.array_equal(x.train_idx, y.train_idx) for x, y in zip(a.clients, b.clients))
    c = build_partition(digits, PartitionConfig(**{**config.__dict__, "seed": 4}))
    assert any(not np.array_equal(x.train_idx, y.train_idx) for x, y in zip(a.clients, c.clients))


def test_with_replacement_a_client_larger_than_a_class_gets_repeats(digits):
    # 400 samples of one class per client (label-skew-1: two labels per cluster) exceed any class's ~135 members
    config = PartitionConfig("digits", "label-skew-1", clusters=5, clients_per_cluster=2, samples_per_client=400,
                             sample_with_replacement=True)
    config.validate(dataset_info("digits"))
    part = build_partition(digits, config)
    for c in part.clients:
        assert len(c.train_idx) == 400
        labels = digits.y_train.numpy()[c.train_idx]
        assert set(np.unique(labels)) <= {2 * c.cluster, 2 * c.cluster + 1}
        for label in np.unique(labels):  # every member of the class first, then repeats
            members = np.flatnonzero(digits.y_train.numpy() == label)
            held = c.train_idx[labels == label]
            if len(held) >= len(members):
                assert set(held) == set(members)


def test_the_setting_is_declared_once_and_reaches_config_cli_and_url():
    declared = settings_of(ExperimentConfig)["sample_with_replacement"]
    assert declared == settings_of(PartitionConfig)["sample_with_replacement"]
    assert declared.kind is bool and declared.default is False and declared.flag_name == "--sample-with-replacement"
    config = ExperimentConfig.from_dict({"sample_with_replacement": "true", "clients_per_cluster": "250",
                                         "samples_per_client": "80", "models": "4"}, text=True)
    assert config.sample_with_replacement is True and config.partition_config().sample_with_replacement is True
    config.validate()
    assert config.data_key() != config.replace(sample_with_replacement=False).data_key()
    with pytest.raises(ConfigError, match="sample_with_replacement"):
        ExperimentConfig.from_dict({"sample_with_replacement": "yes"})
    with pytest.raises(ConfigError, match="samples_per_client=80"):
        config.replace(sample_with_replacement=False).validate()
