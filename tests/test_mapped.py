"""Memory-mapped loading: storages that are a file's pages, zero-copy from file to model."""
import gc
import os
import zipfile

import numpy as np
import pytest

import microtorch as mt
from microtorch.memory import mapped


def _mapped_regions(path):
    with open("/proc/self/maps") as f:
        return [line for line in f if line.rstrip().endswith(os.path.realpath(path))]


@pytest.fixture
def data_file(tmp_path):
    path = tmp_path / "data.npz"
    rng = np.random.default_rng(0)
    mt.save({"x": rng.standard_normal((512, 16)).astype(np.float32),
             "y": rng.integers(0, 4, 512), "w": np.arange(6.0).reshape(2, 3)}, path)
    return path


def test_mapped_tensors_read_the_files_pages_without_a_copy(data_file):
    plain = mt.load(data_file)
    m = mt.load(data_file, mmap=True)
    assert list(m) == ["x", "y", "w"]
    for k in m:
        assert m[k].dtype == plain[k].dtype and m[k].shape == plain[k].shape
        assert np.array_equal(m[k].numpy(), plain[k].numpy())
    storage = m["x"]._storage
    assert storage.block.owner.name == "mmap data.npz"
    # the tensor's bytes are the mapping's bytes: same addresses, inside the mapped region
    mapping = storage.block.owner.mapping
    assert np.shares_memory(m["x"].numpy(), mapping)
    assert _mapped_regions(data_file)


def test_writes_are_refused_read_only_and_private_copy_on_write(data_file):
    m = mt.load(data_file, mmap=True)
    for write in (lambda: m["w"].add_(1), lambda: m["w"].__setitem__(0, 5.0), lambda: m["w"].zero_()):
        with pytest.raises(RuntimeError, match="read-only mapping of .*mmap='c'"):
            write()
    c = mt.load(data_file, mmap="c")
    c["w"].add_(1)
    assert c["w"].tolist() == [[1, 2, 3], [4, 5, 6]]
    assert mt.load(data_file)["w"].tolist() == [[0, 1, 2], [3, 4, 5]]  # the file is unchanged


def test_the_mapping_goes_when_the_last_tensor_does(data_file):
    m = mt.load(data_file, mmap=True)
    owner = m["x"]._storage.block.owner
    view = m["x"][10:20]  # a view keeps its base, its storage, and so the mapping
    del m
    gc.collect()
    assert not owner.unmapped and view._storage.refcount == 2  # the view and its base
    del view
    gc.collect()
    assert owner.unmapped and owner.live == {}
    assert not _mapped_regions(data_file)  # the operating system unmapped the file


def test_bad_mmap_requests_say_what_to_do(tmp_path, data_file):
    for mode in ("w", "r+"):  # no write-through: it would break the zip's CRC
        with pytest.raises(ValueError, match="mmap must be False, True"):
            mt.load(data_file, mmap=mode)
    with open(data_file, "rb") as f, pytest.raises(TypeError, match="maps a file by its path"):
        mt.load(f, mmap=True)
    packed = tmp_path / "packed.npz"
    np.savez_compressed(packed, x=np.ones(100))
    with pytest.raises(ValueError, match="compressed .*save it again with mt.save"):
        mt.load(packed, mmap=True)
    with pytest.raises(KeyError, match="no array named 'z'"):
        mt.data.mapped_dataset(data_file, "z")


def test_zero_copy_pipeline_file_to_batches_to_model(data_file):
    ds = mt.data.mapped_dataset(data_file, "x", "y")
    mapping = ds.tensors[0]._storage.block.owner.mapping
    model = mt.nn.Linear(16, 4)
    seen = 0
    for xb, yb in mt.data.DataLoader(ds, batch_size=128, zero_copy=True):
        assert mt.memory.alias(xb, ds.tensors[0]).answer == "must"
        assert np.shares_memory(xb.numpy(), mapping) and np.shares_memory(yb.numpy(), mapping)
        loss = mt.nn.functional.cross_entropy(model(xb), yb)
        loss.backward()
        seen += xb.shape[0]
    assert seen == 512
    copied = next(iter(mt.data.DataLoader(ds, batch_size=128)))[0]  # the default gathers: a copy
    assert not np.shares_memory(copied.numpy(), mapping)
    with pytest.raises(ValueError, match="needs shuffle=False"):
        mt.data.DataLoader(ds, batch_size=8, shuffle=True, zero_copy=True)


def test_first_pass_faults_pages_in_and_the_second_does_not(tmp_path):
    path = tmp_path / "big.npz"
    mt.save({"x": np.ones((2048, 1024), np.float32)}, path)  # 8 MiB: 2048 pages
    mapped.evict_from_page_cache(path)
    x = mt.load(path, mmap=True)["x"]
    assert x._storage.block.owner.resident().mean() < 0.5  # evicted: most pages are not in memory
    before = mapped.page_faults()
    first = float(x.numpy().sum())
    middle = mapped.page_faults()
    second = float(x.numpy().sum())
    after = mapped.page_faults()
    assert first == second == 2048 * 1024
    faults_first = sum(middle) - sum(before)
    faults_second = sum(after) - sum(middle)
    # the first pass must fault the pages in (one fault may map many pages: the kernel maps
    # ahead), the second finds them mapped
    assert faults_first >= 1
    assert faults_second <= faults_first // 2


def test_npz_members_finds_each_arrays_bytes(data_file):
    members = mapped.npz_members(data_file)
    raw = open(data_file, "rb").read()
    with zipfile.ZipFile(data_file) as z:
        for name, (dtype, shape, offset) in members.items():
            expect = np.load(z.open(name + ".npy"))
            got = np.frombuffer(raw, dtype, int(np.prod(shape)), offset).reshape(shape)
            assert np.array_equal(got, expect)


def test_resident_pages_snapshots_replay_into_the_pages_picture(tmp_path):
    from microtorch.viz import mapped as vm

    path = tmp_path / "pages.npz"
    mt.save({"x": np.ones((1024, 1024), np.float32)}, path)  # 4 MiB: 1,024 pages
    mapped.evict_from_page_cache(path)
    x = mt.load(path, mmap=True)["x"]
    owner = x._storage.block.owner
    with mt.trace() as tr:
        owner.record_pages("after mapping")
        x[:8].numpy().sum()
        owner.record_pages("first rows read")
        x.numpy().sum()
        owner.record_pages("all read")
    f = vm.pages_facts(tr)
    assert [s.label for s in f.snapshots] == ["after mapping", "first rows read", "all read"]
    masks = [s.mask for s in f.snapshots]
    assert all(m.size == owner.resident().size for m in masks)
    assert masks[0].sum() < masks[1].sum() <= masks[2].sum() == masks[2].size  # all in memory at the end
    assert masks[1][0] and [s.resident for s in f.snapshots] == [int(m.sum()) for m in masks]
    fig = vm.render(tr)
    grid = fig.axes[0].images[0].get_array()
    assert grid.shape == (3, 256) and np.allclose(grid[2], 1.0) and grid[0].mean() < grid[1].mean()
    assert f"{masks[2].size:,} of {masks[2].size:,} pages resident (100%)" in fig.description
