"""mt.data: TensorDataset, DataLoader (batching, seeded shuffle, drop_last), the generated
datasets, and the shipped digits."""
from __future__ import annotations

from importlib import resources

import numpy as np
import pytest

import microtorch as mt
from microtorch.data import DataLoader, Dataset, TensorDataset


def _dataset(n=10):
    x = mt.arange(n * 2).reshape(n, 2).float()
    return TensorDataset(x, mt.arange(n))


# -- TensorDataset / DataLoader ------------------------------------------------------------------
def test_tensor_dataset_rows_and_size_mismatch():
    ds = _dataset(5)
    assert len(ds) == 5
    x, y = ds[3]
    assert x.tolist() == [6.0, 7.0] and y.item() == 3
    with pytest.raises(ValueError, match="Size mismatch"):
        TensorDataset(mt.zeros(3, 2), mt.zeros(4))


@pytest.mark.parametrize("drop_last", [False, True])
def test_loader_batches_cover_every_example_once(drop_last):
    loader = DataLoader(_dataset(10), batch_size=4, drop_last=drop_last)
    batches = list(loader)
    assert len(loader) == len(batches) == (2 if drop_last else 3)
    assert [len(y) for _, y in batches] == ([4, 4] if drop_last else [4, 4, 2])
    labels = np.concatenate([y.numpy() for _, y in batches])
    assert labels.tolist() == list(range(8 if drop_last else 10))  # in order without shuffle
    x, y = batches[0]
    assert x.shape == (4, 2) and x.dtype == mt.float32 and y.dtype == mt.int64
    np.testing.assert_array_equal(x.numpy(), np.arange(8, dtype=np.float32).reshape(4, 2))


def test_shuffle_is_seeded_by_the_generator_and_differs_between_epochs():
    def epoch_orders(seed, epochs=2):
        loader = DataLoader(_dataset(20), batch_size=6, shuffle=True, generator=mt.Generator(seed))
        return [np.concatenate([y.numpy() for _, y in loader]).tolist() for _ in range(epochs)]

    a, b = epoch_orders(0), epoch_orders(0)
    assert a == b  # same seed, same orders
    assert sorted(a[0]) == list(range(20)) and a[0] != list(range(20))
    assert a[0] != a[1]  # a new order every epoch
    assert epoch_orders(1) != a
    mt.manual_seed(3)
    c = [y.tolist() for _, y in DataLoader(_dataset(20), batch_size=6, shuffle=True)]
    mt.manual_seed(3)
    d = [y.tolist() for _, y in DataLoader(_dataset(20), batch_size=6, shuffle=True)]
    assert c == d  # the default generator follows mt.manual_seed


def test_loader_rows_are_data_not_graph():
    x = mt.randn(6, 2, requires_grad=True)
    xb, = next(iter(DataLoader(TensorDataset(x), batch_size=3)))
    assert not xb.requires_grad and xb.grad_fn is None


def test_generic_dataset_is_collated_by_stacking():
    class Squares(Dataset):
        def __len__(self):
            return 5

        def __getitem__(self, i):
            return mt.tensor([float(i), float(i * i)]), i % 2

    batches = list(DataLoader(Squares(), batch_size=2))
    x, y = batches[1]
    assert x.tolist() == [[2.0, 4.0], [3.0, 9.0]] and y.tolist() == [0, 1]
    assert len(batches) == 3 and batches[-1][0].shape == (1, 2)


@pytest.mark.parametrize("bad", [0, -2, 1.5, True, None])
def test_batch_size_must_be_a_positive_integer(bad):
    with pytest.raises(ValueError, match="batch_size should be a positive integer value"):
        DataLoader(_dataset(), batch_size=bad)


# -- generated datasets ------------------------------------------------------------------------------
def test_make_moons_shapes_labels_geometry_and_seed():
    x, y = mt.data.make_moons(101, generator=mt.Generator(0))
    assert x.shape == (101, 2) and x.dtype == mt.float32 and y.dtype == mt.int64
    assert np.bincount(y.numpy()).tolist() == [50, 51]
    pts, lab = x.numpy(), y.numpy()
    upper, lower = pts[lab == 0], pts[lab == 1]
    np.testing.assert_allclose(np.hypot(*upper.T), 1, rtol=1e-6)  # the unit half circle
    np.testing.assert_allclose(np.hypot(lower[:, 0] - 1, lower[:, 1] - 0.5), 1, rtol=1e-6)
    assert (upper[:, 1] >= -1e-6).all() and (lower[:, 1] <= 0.5 + 1e-6).all()
    a = mt.data.make_moons(50, noise=0.1, generator=mt.Generator(4))[0].numpy()
    b = mt.data.make_moons(50, noise=0.1, generator=mt.Generator(4))[0].numpy()
    c = mt.data.make_moons(50, noise=0.1, generator=mt.Generator(5))[0].numpy()
    assert np.array_equal(a, b) and not np.array_equal(a, c)


def test_make_spirals_classes_radius_and_seed():
    x, y = mt.data.make_spirals(300, n_classes=3, noise=0.0, generator=mt.Generator(0))
    assert x.shape == (300, 2) and np.bincount(y.numpy()).tolist() == [100, 100, 100]
    assert np.hypot(*x.numpy().T).max() <= 1 + 1e-6
    a = mt.data.make_spirals(90, generator=mt.Generator(2))[0].numpy()
    assert np.array_equal(a, mt.data.make_spirals(90, generator=mt.Generator(2))[0].numpy())
    with pytest.raises(ValueError, match="n_classes"):
        mt.data.make_spirals(10, n_classes=1)


# -- the shipped digits --------------------------------------------------------------------------------
def test_digits_file_is_small_and_loads_without_pickles():
    ref = resources.files("microtorch.data").joinpath("digits.npz")
    with ref.open("rb") as f:
        raw = f.read()
    assert len(raw) <= 1_000_000
    with ref.open("rb") as f, np.load(f, allow_pickle=False) as npz:
        assert npz["images"].shape == (1797, 8, 8) and npz["images"].dtype == np.uint8
        assert npz["labels"].dtype == np.int64 and npz["images"].max() == 16
        train, test = npz["train_index"], npz["test_index"]
        assert len(train) == 1438 and len(test) == 359
        assert sorted(np.concatenate([train, test]).tolist()) == list(range(1797))


def test_load_digits_splits_scaling_and_labels():
    x, y = mt.data.load_digits("train")
    xt, yt = mt.data.load_digits("test")
    xa, ya = mt.data.load_digits("all", flatten=False)
    assert x.shape == (1438, 64) and xt.shape == (359, 64) and xa.shape == (1797, 8, 8)
    assert x.dtype == mt.float32 and y.dtype == mt.int64
    assert x.numpy().min() == 0.0 and x.numpy().max() == 1.0
    np.testing.assert_array_equal(x.numpy() * 16, np.round(x.numpy() * 16))  # counts 0..16
    assert sorted(set(y.tolist())) == list(range(10)) and sorted(set(yt.tolist())) == list(range(10))
    assert np.bincount(ya.numpy()).min() >= 170  # ~180 of each digit
    # the split is a partition: every image is in exactly one of train and test
    rows = {r.tobytes() for r in np.concatenate([x.numpy(), xt.numpy()])}
    assert len(rows) == len({r.tobytes() for r in xa.numpy().reshape(-1, 64)})
    with pytest.raises(ValueError, match="split must be one of"):
        mt.data.load_digits("validation")


# -- content checks: which image has which label, and the spiral's geometry ---------------------
# The first image of the UCI/scikit-learn digits, as printed in scikit-learn's documentation
# (``load_digits().images[0]``, a zero), and the labels of its first 30 images (0..9 three times).
FIRST_DIGIT_ZERO = np.array([
    [0, 0, 5, 13, 9, 1, 0, 0],
    [0, 0, 13, 15, 10, 15, 5, 0],
    [0, 3, 15, 2, 0, 11, 8, 0],
    [0, 4, 12, 0, 0, 8, 8, 0],
    [0, 5, 8, 0, 0, 9, 8, 0],
    [0, 4, 11, 0, 1, 12, 7, 0],
    [0, 2, 14, 5, 10, 12, 0, 0],
    [0, 0, 6, 13, 10, 0, 0, 0]])
# Pinned once from the shipped file: its sha256, and (index -> label, ink sum) for a few images.
DIGITS_SHA256 = "c3e8300561f06c18f9bb0ca6471c70ffc996125d7625dce7f7785b440ecc0396"
DIGIT_FACTS = {0: (0, 294), 1: (1, 313), 2: (2, 344), 3: (3, 267), 4: (4, 258), 9: (9, 329)}


def test_shipped_digits_file_is_the_pinned_one():
    import hashlib

    raw = resources.files("microtorch.data").joinpath("digits.npz").read_bytes()
    assert hashlib.sha256(raw).hexdigest() == DIGITS_SHA256, "digits.npz changed: re-pin its facts"


def test_load_digits_pairs_each_image_with_its_own_label():
    xa, ya = mt.data.load_digits("all", flatten=False)
    np.testing.assert_array_equal(xa.numpy()[0] * 16, FIRST_DIGIT_ZERO)
    assert ya.tolist()[:30] == [i % 10 for i in range(30)]
    for i, (label, ink) in DIGIT_FACTS.items():
        assert ya[i].item() == label and round(float(xa.numpy()[i].sum()) * 16) == ink, i
    # the splits keep the pairing: image 0 is in train, image 2 in test (the stored split)
    x, y = mt.data.load_digits("train")
    xt, yt = mt.data.load_digits("test")
    np.testing.assert_array_equal(x.numpy()[0].reshape(8, 8) * 16, FIRST_DIGIT_ZERO)
    assert y[0].item() == 0 and yt[0].item() == 2
    assert round(float(xt.numpy()[0].sum()) * 16) == DIGIT_FACTS[2][1]


@pytest.mark.parametrize("turns", [0.75, 1.5])
def test_spiral_angle_grows_with_the_radius(turns):
    n_classes, per = 3, 40
    x, y = mt.data.make_spirals(n_classes * per, n_classes=n_classes, noise=0.0, turns=turns,
                                generator=mt.Generator(0))
    pts, lab = x.numpy().astype(np.float64), y.numpy()
    for k in range(n_classes):
        px, py = pts[lab == k].T
        r = np.hypot(px, py)
        order = np.argsort(r)
        r = r[order]
        theta = np.unwrap(np.arctan2(px, py)[order])  # x = r sin θ, y = r cos θ
        np.testing.assert_allclose(r, np.linspace(0, 1, per), atol=1e-6)
        # θ = 2π (turns · r + k / n_classes): grows linearly with r, arm k starts at 2πk/n
        want = 2 * np.pi * (turns * r + k / n_classes)
        skip = r > 1e-6  # the angle of the centre point is undefined
        off = np.angle(np.exp(1j * (theta[skip] - want[skip])))
        np.testing.assert_allclose(off, 0, atol=1e-4)
        assert np.all(np.diff(theta[skip]) > 0)
