"""CIFAR-10 loader: small batches written by the test, and pickles that must be refused."""
import os
import pickle

import numpy as np
import pytest

from cfl_core.data import BadDataFile, load_dataset
from cfl_core.data.cifar import BATCH_DIR, TEST_BATCH, TRAIN_BATCHES, read_batch
from cfl_core.errors import DataUnavailable


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    env_dir, cwd = tmp_path / "env", tmp_path / "cwd"
    env_dir.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("CFL_DATA_DIR", str(env_dir))
    monkeypatch.chdir(cwd)
    return tmp_path


def batch(n, seed, bytes_keys=False):
    rng = np.random.default_rng(seed)
    d = {
        "batch_label": "testing batch",
        "labels": [int(v) for v in rng.integers(0, 10, n)],
        "data": rng.integers(0, 256, (n, 3072), dtype=np.uint8),
        "filenames": [f"img{i}.png" for i in range(n)],
    }
    return {k.encode(): v for k, v in d.items()} if bytes_keys else d


def write_batches(folder, n=4, bytes_keys=False, protocol=4):
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for i, name in enumerate(TRAIN_BATCHES + [TEST_BATCH]):
        written[name] = batch(n, i, bytes_keys)
        with open(folder / name, "wb") as f:
            pickle.dump(written[name], f, protocol=protocol)
    return written


class RunsACommand:
    """Unpickling this would run a shell command that creates a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# Protocol 3+ (Python 3 pickles) keeps bytes as bytes; the published batches are
# Python-2 protocol-2 pickles and need the same three numpy names.
@pytest.mark.parametrize("bytes_keys, protocol", [(False, 3), (True, 3), (True, 4)])
def test_loads_small_batches(isolated, bytes_keys, protocol):
    written = write_batches(isolated / "env" / BATCH_DIR, bytes_keys=bytes_keys, protocol=protocol)
    ds = load_dataset("cifar10")
    assert ds.x_train.shape == (20, 3, 32, 32) and ds.x_test.shape == (4, 3, 32, 32)
    assert (ds.info.n_train, ds.info.n_test, ds.info.input_shape) == (20, 4, (3, 32, 32))
    key = b"data" if bytes_keys else "data"
    first = written["data_batch_1"][key][0].reshape(3, 32, 32) / 255.0
    np.testing.assert_allclose(ds.x_train[0].numpy(), first, rtol=1e-6)
    labels = b"labels" if bytes_keys else "labels"
    assert ds.y_test.tolist() == written[TEST_BATCH][labels]


def test_found_in_dot_data(isolated):
    write_batches(isolated / "cwd" / "data" / BATCH_DIR)
    assert load_dataset("cifar10").info.n_train == 20


def test_missing_cifar_lists_places(isolated):
    with pytest.raises(DataUnavailable) as caught:
        load_dataset("cifar10")
    assert str(isolated / "env" / BATCH_DIR) in str(caught.value)
    assert str(isolated / "cwd" / "data" / BATCH_DIR) in str(caught.value)
    assert "cifar-10-python.tar.gz" in caught.value.how_to_get


def test_malicious_pickle_is_refused_without_running(tmp_path):
    marker = tmp_path / "pwned"
    path = tmp_path / "data_batch_1"
    path.write_bytes(pickle.dumps({"data": RunsACommand(marker), "labels": []}, protocol=2))
    with pytest.raises(BadDataFile, match="refused to load global"):
        read_batch(str(path))
    assert not marker.exists()


def test_malicious_batch_inside_the_folder_stops_loading(isolated):
    folder = isolated / "env" / BATCH_DIR
    write_batches(folder)
    marker = isolated / "pwned"
    (folder / "data_batch_3").write_bytes(pickle.dumps(RunsACommand(marker)))
    with pytest.raises(BadDataFile) as caught:
        load_dataset("cifar10")
    assert "data_batch_3" in str(caught.value)
    assert not marker.exists()


@pytest.mark.parametrize(
    "content, fault",
    [
        (pickle.dumps([1, 2, 3]), "not a dict"),
        (pickle.dumps({"labels": [1]}), "'data' must be uint8"),
        (pickle.dumps({"data": np.zeros((2, 3072), np.float32), "labels": [1, 2]}), "'data' must be uint8"),
        (pickle.dumps({"data": np.zeros((2, 100), np.uint8), "labels": [1, 2]}), "'data' must be uint8"),
        (pickle.dumps({"data": np.zeros((2, 3072), np.uint8), "labels": [1, 12]}), "0..9"),
        (pickle.dumps({"data": np.zeros((2, 3072), np.uint8), "labels": [1]}), "1 labels for 2 images"),
        (b"this is not a pickle", "not a CIFAR-10 batch"),
        (pickle.dumps({"data": np.zeros((2, 3072), np.uint8), "labels": [1, 2]}, protocol=5), "refused"),
    ],
)
def test_files_that_are_not_batches_are_refused(tmp_path, content, fault):
    path = tmp_path / "test_batch"
    path.write_bytes(content)
    with pytest.raises(BadDataFile, match=fault):
        read_batch(str(path))
