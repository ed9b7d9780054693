"""Bad requests fail in validate(), before any work, naming parameter, value and what is allowed."""
import pytest

from cfl_core.data import dataset_info, load_dataset
from cfl_core.errors import ConfigError
from cfl_core.partition import PartitionConfig, build_partition


def refused(info_name="digits", **kw):
    config = PartitionConfig(dataset=kw.pop("dataset", info_name), **kw)
    with pytest.raises(ConfigError) as caught:
        config.validate(dataset_info(info_name))
    return caught.value


@pytest.mark.parametrize(
    "kw, parameter, value",
    [
        (dict(clusters=0), "clusters", "0"),
        (dict(clusters=-2), "clusters", "-2"),
        (dict(clients_per_cluster=0), "clients_per_cluster", "0"),
        (dict(samples_per_client=-5), "samples_per_client", "-5"),
        (dict(test_samples_per_client=0), "test_samples_per_client", "0"),
        (dict(num_classes_per_partition=0), "num_classes_per_partition", "0"),
        (dict(seed=-1), "seed", "-1"),
        (dict(alpha=0.0, within="dirichlet"), "alpha", "0.0"),
        (dict(alpha=-1.0), "alpha", "-1.0"),
        (dict(alpha=float("nan")), "alpha", "nan"),
        (dict(quantity_skew=-0.5), "quantity_skew", "-0.5"),
        (dict(clusters=2.5), "clusters", "2.5"),
        (dict(partition="label-skew-9"), "partition", "label-skew-9"),
        (dict(within="uniform"), "within", "uniform"),
        (dict(dataset="imagenet"), "dataset", "imagenet"),
        (dict(dataset="mnist"), "dataset", "mnist"),  # config says mnist, data is digits
    ],
)
def test_bad_values_name_parameter_and_value(kw, parameter, value):
    error = refused(**kw)
    assert error.parameter == parameter
    assert str(error).startswith(f"{parameter}=") and value in str(error)
    assert error.allowed


def test_unknown_partition_lists_the_names():
    error = refused(partition="nope")
    assert "label-skew-1" in error.allowed and "linear-mixture" in error.allowed


def test_too_many_label_groups():
    error = refused(partition="label-skew-1", clusters=6)
    assert error.parameter == "clusters" and "at most 5" in str(error)
    assert "clusters=7" in str(refused(partition="label-skew-2", clusters=7))
    assert "at most 10" in str(refused(partition="label-skew-3", clusters=11))
    assert "at most 10" in str(refused(partition="label-skew-4", clusters=11))


def test_rotation_needs_images():
    for name in ("synthetic-blobs", "synthetic-linear"):
        error = refused(info_name=name, partition="feature-skew")
        assert error.parameter == "partition" and "feature-skew" in str(error)
    assert "image" in refused(info_name="synthetic-blobs", partition="feature-skew").allowed


def test_linear_mixture_only_on_synthetic_linear():
    error = refused(partition="linear-mixture")
    assert error.parameter == "partition" and "synthetic-linear" in error.allowed
    error = refused(info_name="synthetic-linear", partition="label-skew-1")
    assert error.parameter == "partition" and "regression" in error.allowed
    error = refused(info_name="synthetic-linear", partition="linear-mixture", within="dirichlet")
    assert error.parameter == "within"


def test_pathological_needs_enough_labels_per_cluster():
    error = refused(partition="label-skew-1", clusters=5, clients_per_cluster=4, samples_per_client=50,
                    within="pathological", num_classes_per_partition=3)
    assert error.parameter == "num_classes_per_partition" and "1..2" in error.allowed


def test_too_many_samples_names_the_maximum():
    error = refused(partition="label-skew-4")  # 4 x 5 x 60 with a 2/3 dominant class
    assert error.parameter == "samples_per_client" and error.value == 60
    maximum = int(str(error).split("at most ")[1].split()[0])
    assert 25 < maximum < 60
    ok = PartitionConfig("digits", "label-skew-4", samples_per_client=maximum)
    ok.validate(dataset_info("digits"))
    build_partition(load_dataset("digits"), ok)
    refused(partition="label-skew-4", samples_per_client=maximum + 1)


def test_too_many_clients_for_the_pool():
    error = refused(partition="iid", clusters=50, clients_per_cluster=50, samples_per_client=1)
    assert error.parameter == "clients_per_cluster" and "1346" in str(error)
    error = refused(partition="iid", samples_per_client=1000)
    assert error.parameter == "samples_per_client" and "at most" in str(error)


def test_too_many_test_samples():
    error = refused(test_samples_per_client=10_000)
    assert error.parameter == "test_samples_per_client" and "451" in str(error)


@pytest.mark.parametrize("name", ["feature-skew", "concept-shift", "iid", "label-skew-3"])
def test_digits_defaults_work(name):
    PartitionConfig("digits", name).validate(dataset_info("digits"))


def test_digits_label_skew_1_five_clusters():
    PartitionConfig("digits", "label-skew-1", clusters=5, clients_per_cluster=4,
                    samples_per_client=50).validate(dataset_info("digits"))


def test_build_validates_too():
    with pytest.raises(ConfigError, match="clusters=0"):
        build_partition(load_dataset("digits"), PartitionConfig("digits", clusters=0))
