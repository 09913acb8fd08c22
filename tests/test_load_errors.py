"""mt.load on files that are not a state dict: each says what the file is and what was
expected, names the path, and is raised by microtorch (never numpy's or zipfile's text)."""
import io
import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import microtorch as mt
from microtorch.serialization import LoadError


@pytest.fixture
def good_bytes(tmp_path):
    path = tmp_path / "good.npz"
    mt.save({"w": mt.arange(40, dtype=mt.float64).reshape(5, 8), "b": mt.ones(3)}, path)
    return path.read_bytes()


def _write(tmp_path, name, data):
    path = tmp_path / name
    path.write_bytes(data)
    return path


def test_random_bytes_are_not_called_a_pickle(tmp_path):
    path = _write(tmp_path, "noise.bin", np.random.default_rng(0).bytes(1000))
    with pytest.raises(LoadError, match="is not a zip archive") as err:
        mt.load(path)
    assert str(path) in str(err.value) and "pickled (object) data" not in str(err.value)
    assert "written by mt.save" in str(err.value)


def test_a_pickle_is_named_as_one_and_never_unpickled(tmp_path):
    path = _write(tmp_path, "model.pkl", pickle.dumps({"w": [1.0, 2.0]}))
    with pytest.raises(LoadError, match="a Python pickle") as err:
        mt.load(path)
    assert "never unpickles" in str(err.value) and str(path) in str(err.value)


def test_empty_file(tmp_path):
    path = _write(tmp_path, "empty.npz", b"")
    with pytest.raises(LoadError, match=r"is empty \(0 bytes\)") as err:
        mt.load(path)
    assert str(path) in str(err.value)


def test_truncated_file_at_every_length_is_a_load_error(tmp_path, good_bytes):
    for n in range(1, len(good_bytes)):
        path = _write(tmp_path, "cut.npz", good_bytes[:n])
        with pytest.raises(LoadError, match="truncated|not a zip archive") as err:
            mt.load(path)
        assert str(path) in str(err.value), n
    loaded = mt.load(_write(tmp_path, "whole.npz", good_bytes))
    np.testing.assert_array_equal(loaded["w"].numpy(), np.arange(40.0).reshape(5, 8))


def test_damaged_entry_data_is_a_load_error(tmp_path, good_bytes):
    damaged = bytearray(good_bytes)
    at = good_bytes.index(b"\x93NUMPY") + 200  # inside the first entry's data
    damaged[at] ^= 0xFF
    with pytest.raises(LoadError, match="entry 'w' .* is damaged or truncated"):
        mt.load(_write(tmp_path, "flipped.npz", bytes(damaged)))


def test_npy_file_says_it_is_a_single_array(tmp_path):
    path = tmp_path / "one.npy"
    np.save(path, np.ones(3))
    with pytest.raises(LoadError, match=r"is a single \.npy array, not a state dict") as err:
        mt.load(path)
    assert str(path) in str(err.value) and "np.load" in str(err.value)


def test_zip_that_is_not_an_npz(tmp_path):
    import zipfile
    path = tmp_path / "torchlike.pt"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("archive/data.pkl", b"\x80\x02}q\x00.")
    with pytest.raises(LoadError, match="not an .npz of arrays"):
        mt.load(path)


def test_object_array_names_the_entry_and_the_reason(tmp_path):
    path = tmp_path / "objects.npz"
    np.savez(path, ok=np.ones(2), bad=np.array([1, "x", None], dtype=object))
    with pytest.raises(TypeError, match="entry 'bad' .* holds Python objects") as err:
        mt.load(path)
    assert str(path) in str(err.value) and "allow_pickle" not in str(err.value)


@pytest.mark.parametrize("array", [np.ones(3, np.complex128), np.array(["a", "b"]),
                                   np.array(["2020-01-01"], dtype="datetime64[D]"),
                                   np.ones(2, np.uint64)])
def test_unsupported_dtype_names_the_entry(tmp_path, array):
    path = tmp_path / "odd.npz"
    np.savez(path, x=array)
    with pytest.raises(TypeError, match=r"entry 'x' of .*can't convert np.ndarray of type numpy\.") as err:
        mt.load(path)
    assert str(path) in str(err.value)


def test_file_objects_work_and_are_named(tmp_path, good_bytes):
    loaded = mt.load(io.BytesIO(good_bytes))
    assert list(loaded) == ["w", "b"] and loaded["b"].dtype == mt.float32
    with open(_write(tmp_path, "e.npz", b""), "rb") as fh:
        with pytest.raises(LoadError, match="e.npz"):
            mt.load(fh)


@settings(max_examples=200, deadline=None)
@given(st.binary(max_size=300))
def test_any_bytes_either_load_or_raise_a_microtorch_error(data):
    try:
        mt.load(io.BytesIO(data))
    except (LoadError, TypeError) as e:
        assert "mt.load" in str(e)


@settings(max_examples=300, deadline=None)
@given(st.data())
def test_a_flipped_byte_anywhere_loads_or_raises_a_microtorch_error(data):
    raw = bytearray(_GOOD)
    at = data.draw(st.integers(0, len(raw) - 1))
    raw[at] ^= data.draw(st.integers(1, 255))
    try:
        mt.load(io.BytesIO(bytes(raw)))
    except (LoadError, TypeError) as e:
        assert "mt.load" in str(e)


def _good():
    buf = io.BytesIO()
    mt.save({"w": mt.arange(12, dtype=mt.float64).reshape(3, 4), "b": mt.ones(3)}, buf)
    return buf.getvalue()


_GOOD = _good()


def test_a_header_announcing_more_data_than_the_file_holds_is_refused_before_allocating(tmp_path):
    import zipfile
    entry = io.BytesIO()
    np.lib.format.write_array_header_1_0(entry, {"descr": "<f8", "fortran_order": False,
                                                 "shape": (10**6, 10**6)})
    entry.write(b"\0" * 64)
    path = tmp_path / "huge.npz"
    with zipfile.ZipFile(path, "w") as z:
        z.writestr("x.npy", entry.getvalue())
    with pytest.raises(LoadError, match=r"entry 'x' .*announces shape \(1000000, 1000000\)"):
        mt.load(path)
