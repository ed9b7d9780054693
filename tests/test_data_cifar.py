"""CIFAR-10 loader: small batches written by the test, and pickles that must be refused."""
import io
import os
import pickle
import struct

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


class Python2Pickler(pickle._Pickler):
    """Writes str and bytes as Python 2 wrote its str (BINSTRING), like the published batches."""

    dispatch = dict(pickle._Pickler.dispatch)

    def save_py2_str(self, obj):
        raw = obj.encode("latin1") if isinstance(obj, str) else obj
        if len(raw) < 256:
            self.write(pickle.SHORT_BINSTRING + bytes([len(raw)]) + raw)
        else:
            self.write(pickle.BINSTRING + struct.pack("<i", len(raw)) + raw)

    dispatch[str] = save_py2_str
    dispatch[bytes] = save_py2_str


def python2_pickle(obj) -> bytes:
    buf = io.BytesIO()
    Python2Pickler(buf, protocol=2).dump(obj)
    # numpy 1.x, which wrote the real files, lived at numpy.core
    return buf.getvalue().replace(b"cnumpy._core.multiarray\n", b"cnumpy.core.multiarray\n")


def write_batches(folder, n=4, bytes_keys=False, protocol=4):
    folder.mkdir(parents=True, exist_ok=True)
    written = {}
    for i, name in enumerate(TRAIN_BATCHES + [TEST_BATCH]):
        written[name] = batch(n, i, bytes_keys)
        if protocol == "py2":
            (folder / name).write_bytes(python2_pickle(written[name]))
        else:
            (folder / name).write_bytes(pickle.dumps(written[name], protocol=protocol))
    return written


class RunsACommand:
    """Unpickling this would run a shell command that creates a marker file."""

    def __init__(self, marker):
        self.marker = marker

    def __reduce__(self):
        return (os.system, (f"touch {self.marker}",))


# Protocol 3+ (Python 3 pickles) keeps bytes as bytes; the published batches are
# Python-2 protocol-2 pickles and need the same three numpy names.
@pytest.mark.parametrize("bytes_keys, protocol", [(False, "py2"), (False, 3), (True, 3), (True, 4)])
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


def test_python2_layout_uses_only_the_allowed_names(isolated):
    raw = python2_pickle(batch(2, 0))
    assert b"cnumpy.core.multiarray\n_reconstruct" in raw and b"_codecs" not in raw
    data, labels = read_batch_bytes(isolated, raw)
    assert data.shape == (2, 3, 32, 32) and len(labels) == 2


def read_batch_bytes(tmp, raw):
    path = tmp / "data_batch_1"
    path.write_bytes(raw)
    return read_batch(str(path))


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
