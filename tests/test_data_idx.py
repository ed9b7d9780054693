"""IDX reader and the MNIST / Fashion-MNIST loaders, on small files the tests write."""
import gzip
import os

import numpy as np
import pytest

from cfl_core.data import BadDataFile, load_dataset, source_status
from cfl_core.data import mnist as mnist_source
from cfl_core.data.idx import IdxFormatError, parse_idx, read_idx, write_idx
from cfl_core.errors import DataUnavailable


@pytest.fixture
def isolated(tmp_path, monkeypatch):
    """No real data on this machine is visible: empty CFL_DATA_DIR, empty cwd, no Debian folder."""
    env_dir = tmp_path / "env"
    cwd = tmp_path / "cwd"
    env_dir.mkdir()
    cwd.mkdir()
    monkeypatch.setenv("CFL_DATA_DIR", str(env_dir))
    monkeypatch.chdir(cwd)
    monkeypatch.setattr(mnist_source, "DEBIAN_FASHION_MNIST_DIR", str(tmp_path / "debian-fashion-mnist"))
    return tmp_path


def write_mnist_files(folder, gz: bool, n_train=30, n_test=10, seed=0):
    rng = np.random.default_rng(seed)
    folder.mkdir(parents=True, exist_ok=True)
    arrays = {
        "train-images-idx3-ubyte": rng.integers(0, 256, (n_train, 28, 28), dtype=np.uint8),
        "train-labels-idx1-ubyte": (np.arange(n_train) % 10).astype(np.uint8),
        "t10k-images-idx3-ubyte": rng.integers(0, 256, (n_test, 28, 28), dtype=np.uint8),
        "t10k-labels-idx1-ubyte": (np.arange(n_test) % 10).astype(np.uint8),
    }
    for stem, array in arrays.items():
        write_idx(str(folder / (stem + (".gz" if gz else ""))), array)
    return arrays


@pytest.mark.parametrize("dtype", [np.uint8, np.int8, np.int16, np.int32, np.float32, np.float64])
@pytest.mark.parametrize("suffix", ["", ".gz"])
def test_idx_round_trip(tmp_path, dtype, suffix):
    array = (np.arange(24).reshape(2, 3, 4) - 5).astype(dtype)
    if dtype == np.uint8:
        array = np.arange(24, dtype=np.uint8).reshape(2, 3, 4)
    path = str(tmp_path / ("a.idx" + suffix))
    write_idx(path, array)
    back = read_idx(path)
    assert back.dtype == array.dtype and back.shape == array.shape
    np.testing.assert_array_equal(back, array)


def test_idx_gzip_is_recognised_by_content(tmp_path):
    path = tmp_path / "labels"  # no .gz suffix, but gzip bytes
    raw = bytes([0, 0, 8, 1, 0, 0, 0, 3, 7, 8, 9])
    path.write_bytes(gzip.compress(raw))
    np.testing.assert_array_equal(read_idx(str(path)), [7, 8, 9])


@pytest.mark.parametrize(
    "raw, fault",
    [
        (bytes([1, 0, 8, 1, 0, 0, 0, 1, 5]), "magic"),
        (bytes([0, 0, 0x42, 1, 0, 0, 0, 1, 5]), "type code"),
        (bytes([0, 0, 8, 2, 0, 0, 0, 2]), "dimension list"),
        (bytes([0, 0, 8, 1, 0, 0, 0, 3, 5]), "need 3 data bytes"),
        (bytes([0, 0, 8, 1, 0, 0, 0, 1, 5, 6]), "need 1 data bytes"),
        (bytes([0, 0]), "header"),
        (bytes([0, 0, 8, 0]), "zero dimensions"),
    ],
)
def test_idx_malformed_is_refused(raw, fault):
    with pytest.raises(IdxFormatError, match=fault):
        parse_idx(raw)


@pytest.mark.parametrize("gz", [False, True])
def test_mnist_loads_from_cfl_data_dir(isolated, gz):
    arrays = write_mnist_files(isolated / "env", gz=gz)
    ds = load_dataset("mnist")
    assert ds.info.input_shape == (1, 28, 28) and ds.info.num_classes == 10
    assert (ds.info.n_train, ds.info.n_test) == (30, 10)
    assert ds.info.train_class_counts == (3,) * 10
    assert ds.x_train.shape == (30, 1, 28, 28) and ds.x_train.dtype.is_floating_point
    assert float(ds.x_train.min()) >= 0 and float(ds.x_train.max()) <= 1
    np.testing.assert_allclose(ds.x_train[:, 0].numpy(), arrays["train-images-idx3-ubyte"] / 255.0, rtol=1e-6)
    np.testing.assert_array_equal(ds.y_test.numpy(), arrays["t10k-labels-idx1-ubyte"])


def test_torchvision_layout_in_dot_data(isolated):
    write_mnist_files(isolated / "cwd" / "data" / "FashionMNIST" / "raw", gz=True, n_train=20)
    ds = load_dataset("fashion-mnist")
    assert ds.info.n_train == 20
    status = {s.name: s for s in source_status()}
    assert status["fashion-mnist"].available
    assert status["fashion-mnist"].location.endswith(os.path.join("FashionMNIST", "raw"))
    assert not status["mnist"].available  # a FashionMNIST folder is not MNIST


def test_debian_folder_is_searched_for_fashion_mnist_only(isolated, monkeypatch):
    debian = isolated / "debian-fashion-mnist"
    write_mnist_files(debian, gz=True, n_train=10)
    assert load_dataset("fashion-mnist").info.n_train == 10
    with pytest.raises(DataUnavailable):
        load_dataset("mnist")


def test_missing_mnist_lists_every_place_searched(isolated):
    with pytest.raises(DataUnavailable) as caught:
        load_dataset("fashion-mnist")
    message = str(caught.value)
    for place in [
        str(isolated / "env"),
        str(isolated / "env" / "FashionMNIST" / "raw"),
        str(isolated / "cwd" / "data"),
        str(isolated / "cwd" / "data" / "FashionMNIST" / "raw"),
        str(isolated / "debian-fashion-mnist"),
    ]:
        assert place in caught.value.searched
        assert place in message
    assert "apt-get install dataset-fashion-mnist" in message
    assert "CFL_DATA_DIR" in message and "torchvision" in message
    status = {s.name: s for s in source_status()}["fashion-mnist"]
    assert not status.available and status.location is None and "apt-get" in status.how_to_get


def test_incomplete_folder_is_not_used(isolated):
    folder = isolated / "env"
    write_mnist_files(folder, gz=False)
    os.remove(folder / "t10k-labels-idx1-ubyte")
    with pytest.raises(DataUnavailable):
        load_dataset("mnist")


def test_malformed_file_is_refused_with_its_path(isolated):
    folder = isolated / "env"
    write_mnist_files(folder, gz=False)
    (folder / "train-labels-idx1-ubyte").write_bytes(bytes([9, 9, 8, 1, 0, 0, 0, 1, 5]))
    with pytest.raises(BadDataFile) as caught:
        load_dataset("mnist")
    assert "train-labels-idx1-ubyte" in str(caught.value) and "magic" in str(caught.value)


def test_wrong_image_size_and_count_mismatch_are_refused(isolated):
    folder = isolated / "env"
    write_mnist_files(folder, gz=False)
    write_idx(str(folder / "t10k-images-idx3-ubyte"), np.zeros((10, 27, 27), np.uint8))
    with pytest.raises(BadDataFile, match="28x28"):
        load_dataset("mnist")
    write_idx(str(folder / "t10k-images-idx3-ubyte"), np.zeros((9, 28, 28), np.uint8))
    with pytest.raises(BadDataFile, match="10 labels for 9 images"):
        load_dataset("mnist")
