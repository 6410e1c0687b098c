"""The learned models kept on disk (pipeline/llm/local/model_cache.py, docs/model-layer.md "Trained once, kept on
disk"): real files in a per-test directory, small training files copied from the shipped ones so a fit takes
milliseconds."""

from __future__ import annotations

import importlib
import logging
from pathlib import Path

import numpy as np
import pytest

from pipeline.llm.local import model_cache, safety_classifier, spam_classifier, type_classifier

PROBES = [
    "Looking for a backend developer in Berlin, remote is fine.",
    "DM me for details, guaranteed profit every week!!!",
    "上海静安区共享办公工位出租，每月两千元起。",
    "中古の自転車を譲ります。連絡ください。",
]
MODULES = {"safety": safety_classifier, "spam": spam_classifier, "type": type_classifier}


def _predictions(name: str, model) -> list:
    if name == "safety":
        return [model.risk(text) for text in PROBES]
    if name == "spam":
        return [model.probability(text) for text in PROBES]
    return [model.probabilities(text) for text in PROBES]


class Kept:
    """One model's classifier() pointed at a small training file and a cache directory of the test's own, with its
    training calls counted."""

    def __init__(self, name: str, folder: Path, training: Path, monkeypatch):
        self.name, self.folder, self.training = name, folder, training
        self.module = MODULES[name]
        self.trainings = 0
        self.real_train = real_train = self.module.train

        def counted(cases):
            self.trainings += 1
            return real_train(cases)

        monkeypatch.setattr(self.module, "train", counted)
        monkeypatch.setattr(self.module, "TRAINING_PATH", training)

    def load(self):
        """The model as a new process gets it: the process's copy forgotten first."""
        self.module.classifier.cache_clear()
        return self.module.classifier()

    def files(self) -> list[Path]:
        return sorted(self.folder.glob(f"{self.name}-*.npz"))

    def fresh(self):
        return self.real_train(safety_classifier.read_cases(self.training))


@pytest.fixture(params=sorted(MODULES))
def kept(request, tmp_path, settings, monkeypatch):
    name = request.param
    module = MODULES[name]
    lines = module.TRAINING_PATH.read_text(encoding="utf-8").splitlines()
    training = tmp_path / f"{name}_train.jsonl"
    training.write_text("\n".join(lines[::12]) + "\n", encoding="utf-8")
    settings.LOCAL_MODEL_CACHE_DIR = tmp_path / "cache"
    settings.GC_FREEZE = False  # each load would freeze the test process's heap (a second or so)
    yield Kept(name, tmp_path / "cache", training, monkeypatch)
    module.classifier.cache_clear()  # the next user loads the shipped model again


def _fields_equal(first, second) -> bool:
    for field in type(first).__dataclass_fields__:
        a, b = getattr(first, field), getattr(second, field)
        if isinstance(a, np.ndarray):
            if not (isinstance(b, np.ndarray) and a.dtype == b.dtype and np.array_equal(a, b)):
                return False
        elif type(a) is not type(b) or a != b:
            return False
    return True


def test_a_kept_model_is_exactly_the_trained_one(kept):
    trained = kept.load()
    assert kept.trainings == 1 and len(kept.files()) == 1
    read_back = kept.load()
    assert kept.trainings == 1  # read, not trained
    assert read_back is not trained
    assert _fields_equal(read_back, trained)
    assert _predictions(kept.name, read_back) == _predictions(kept.name, trained)


def test_a_changed_training_file_trains_again_and_replaces_the_old_file(kept):
    kept.load()
    before = kept.files()
    lines = kept.training.read_text(encoding="utf-8").splitlines()
    kept.training.write_text("\n".join(lines[:-1]) + "\n", encoding="utf-8")
    changed = kept.load()
    assert kept.trainings == 2
    after = kept.files()
    assert len(after) == 1 and after != before
    assert _predictions(kept.name, changed) == _predictions(kept.name, kept.fresh())


def test_a_changed_lexicon_the_features_read_trains_again(kept, tmp_path, monkeypatch):
    from pipeline.llm.local import safety_rules

    lexicon = tmp_path / "safety_lexicon.json"
    lexicon.write_bytes(safety_rules.SAFETY_LEXICON_PATH.read_bytes())
    monkeypatch.setattr(safety_rules, "SAFETY_LEXICON_PATH", lexicon)
    kept.load()
    lexicon.write_bytes(lexicon.read_bytes() + b"\n")
    kept.load()
    assert kept.trainings == 2


def test_a_changed_source_trains_again(kept, tmp_path, monkeypatch):
    copies = []
    for path in model_cache.sources_of(kept.module.__name__):
        copy = tmp_path / "src" / path.name
        copy.parent.mkdir(exist_ok=True)
        copy.write_bytes(path.read_bytes())
        copies.append(copy)
    monkeypatch.setattr(model_cache, "sources_of", lambda module: copies)
    kept.load()
    fit = next(copy for copy in copies if copy.name == "ngram_fit.py")
    fit.write_bytes(fit.read_bytes() + b"# a change\n")
    kept.load()
    assert kept.trainings == 2


@pytest.mark.parametrize("module", ["safety_classifier", "spam_classifier", "type_classifier"])
def test_the_key_covers_the_features_and_the_fit(module):
    names = {path.name for path in model_cache.sources_of(f"pipeline.llm.local.{module}")}
    assert {f"{module}.py", "safety_classifier.py", "ngram_fit.py", "normalise.py", "safety_rules.py"} <= names
    assert "extraction.py" not in names  # what the model does not import does not retrain it


@pytest.mark.parametrize("damage", ["garbage", "truncated", "foreign"])
def test_a_damaged_file_is_ignored_and_written_again(kept, damage, caplog):
    trained = kept.load()
    (path,) = kept.files()
    if damage == "garbage":
        path.write_bytes(b"not a model at all")
    elif damage == "truncated":
        path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])
    else:  # a valid file of another key under this name
        with path.open("wb") as file:
            np.savez(file, weights=np.zeros(3), __key__=np.asarray("another key"))
    with caplog.at_level(logging.WARNING, logger="pipeline.llm.local.model_cache"):
        again = kept.load()
    assert kept.trainings == 2
    assert "model cache: ignoring" in caplog.text
    assert _predictions(kept.name, again) == _predictions(kept.name, trained)
    kept.load()
    assert kept.trainings == 2  # the file was written again, whole


def test_a_directory_that_cannot_be_written_still_gives_the_model(kept, tmp_path, settings, caplog):
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    settings.LOCAL_MODEL_CACHE_DIR = blocker / "cache"  # under a file: cannot be created, even by root
    with caplog.at_level(logging.WARNING, logger="pipeline.llm.local.model_cache"):
        model = kept.load()
        kept.load()
    assert kept.trainings == 2  # trained in each process, as without a cache
    assert "model cache: could not write" in caplog.text
    assert _predictions(kept.name, model) == _predictions(kept.name, kept.fresh())


def test_processes_writing_the_same_model_at_once_leave_one_whole_file(kept, tmp_path):
    model = kept.load()
    (path,) = kept.files()
    key = str(np.load(path)["__key__"])
    for _ in range(3):  # as three processes would, each to its own temporary file, renamed into place
        model_cache._write(kept.folder, kept.name, path, key, model)
    assert kept.files() == [path] and not list(kept.folder.glob(".*.tmp"))
    kept.load()
    assert kept.trainings == 1


def test_the_shipped_models_are_read_from_the_default_cache():
    # The process's models (tests share the project's LOCAL_MODEL_CACHE_DIR: a file is only ever read for the exact
    # inputs it was trained from, so no test depends on another's).
    for module in ("safety_classifier", "spam_classifier", "type_classifier"):
        importlib.import_module(f"pipeline.llm.local.{module}").classifier()
    folder = model_cache.cache_dir()
    assert folder is not None
    assert {path.name.split("-")[0] for path in folder.glob("*.npz")} >= {"safety", "spam", "type"}


def test_the_local_analyzer_warms_up_once_and_says_how_long_it_took(settings, monkeypatch, caplog):
    from pipeline import llm
    from pipeline.llm.local import warm

    settings.LLM_PROVIDER = "local"
    monkeypatch.setattr(warm, "_warmed", {})
    ran = []
    monkeypatch.setattr(warm, "STEPS", {name: (lambda name=name: ran.append(name)) for name in warm.STEPS})
    with caplog.at_level(logging.INFO, logger="pipeline.llm.local.warm"):
        llm.warm_up()
        llm.warm_up()
    assert ran == list(warm.STEPS)  # every step, once
    assert caplog.text.count("local analyzer warmed up in") == 1


def test_there_is_nothing_to_warm_up_for_a_model_server(settings, monkeypatch):
    from pipeline import llm
    from pipeline.llm.local import warm

    settings.LLM_PROVIDER = "openai"
    monkeypatch.setattr(warm, "_warmed", {})
    monkeypatch.setattr(warm, "STEPS", {"boom": lambda: pytest.fail("warmed up the local analyzer")})
    llm.warm_up()


def test_the_warm_up_steps_load_the_learned_models():
    from pipeline.llm.local import warm

    loads = {safety_classifier.classifier, spam_classifier.classifier, type_classifier.classifier}
    assert loads <= set(warm.STEPS.values())
