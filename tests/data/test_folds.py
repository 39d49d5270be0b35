"""k-fold splits of the questions (t2exp.data.folds, dataset.folds/fold/fold_role/fold_seed): disjoint,
covering, balanced, seeded, stable under row order; the corpus is never split."""

from __future__ import annotations

import random

import pytest

from helpers.app import compose_cfg
from helpers.paths import ROOT
from t2exp import config
from t2exp.config.schema import dataset_args
from t2exp.data.folds import assign_folds, describe, select_fold
from t2exp.data.loader import load_subsets
from t2exp.errors import ConfigError

BUNDLE = ROOT / "data" / "t2ragbench"


class Q:
    def __init__(self, qid: str) -> None:
        self.id = qid


IDS = [f"q{i}" for i in range(103)]


def test_folds_are_disjoint_cover_everything_and_balanced():
    of = assign_folds(IDS, "FinQA", 5, seed=0)
    assert set(of) == set(IDS) and set(of.values()) == set(range(5))
    sizes = [sum(1 for f in of.values() if f == k) for k in range(5)]
    assert sorted(sizes) == [20, 20, 21, 21, 21]
    qs = [Q(i) for i in IDS]
    evals = [{q.id for q in select_fold(qs, "FinQA", 5, f, "eval")} for f in range(5)]
    assert set().union(*evals) == set(IDS)
    assert all(not (evals[a] & evals[b]) for a in range(5) for b in range(a + 1, 5))
    for f in range(5):
        tune = {q.id for q in select_fold(qs, "FinQA", 5, f, "tune")}
        assert tune == set(IDS) - evals[f]


def test_folds_are_seeded_and_stable_under_row_order():
    a = assign_folds(IDS, "FinQA", 5, seed=0)
    shuffled = IDS[:]
    random.Random(7).shuffle(shuffled)
    assert assign_folds(shuffled, "FinQA", 5, seed=0) == a  # row order does not move a question
    assert assign_folds(IDS, "FinQA", 5, seed=1) != a  # another seed, another split
    assert assign_folds(IDS, "TAT-DQA", 5, seed=0) != a  # each subset is split on its own
    kept = select_fold([Q(i) for i in shuffled], "FinQA", 5, 2, "eval")
    assert [q.id for q in kept] == [i for i in shuffled if a[i] == 2]  # original order kept
    assert select_fold([Q(i) for i in IDS], "FinQA", None, None) is not None
    assert describe(5, 0, "tune", 0) == "folds != 0 of 5 (fold_seed 0)" and describe(None, None, "eval", 0) == "all questions"


def test_bundled_folds_keep_the_whole_corpus():
    kw = dict(subsets=["FinQA", "TAT-DQA"], path=BUNDLE, source="local")
    full = {s.name: s for s in load_subsets(**dataset_args(**kw))}
    ev = {s.name: s for s in load_subsets(**dataset_args(**kw, folds=5, fold=1, fold_role="eval"))}
    tu = {s.name: s for s in load_subsets(**dataset_args(**kw, folds=5, fold=1, fold_role="tune"))}
    for name in full:
        assert [d.context_id for d in ev[name].corpus] == [d.context_id for d in full[name].corpus]
        assert ev[name].content_hash == tu[name].content_hash == full[name].content_hash  # one index for every fold
        e, t = {q.id for q in ev[name].questions}, {q.id for q in tu[name].questions}
        assert not e & t and e | t == {q.id for q in full[name].questions}
    assert (len(ev["FinQA"].questions), len(ev["TAT-DQA"].questions)) == (177, 229)
    # limit samples inside the fold
    (lim,) = load_subsets(**dataset_args(subsets=["FinQA"], path=BUNDLE, source="local", folds=5, fold=1, limit=10))
    assert len(lim.questions) == 10 and {q.id for q in lim.questions} <= {q.id for q in ev["FinQA"].questions}


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["dataset.folds=1", "dataset.fold=0"], "dataset.folds=1 is invalid"),
        (["dataset.folds=5"], "dataset.fold=None is invalid"),
        (["dataset.folds=5", "dataset.fold=5"], "an integer in [0, 4]"),
        (["dataset.fold=0"], "null unless dataset.folds is set"),
        (["dataset.folds=5", "dataset.fold=0", "dataset.fold_role=test"], "dataset.fold_role='test' is invalid"),
        (["objective=avg/mrr3"], "objective='avg/mrr3' is invalid"),
    ],
)
def test_bad_fold_settings_are_one_line(overrides, message):
    with pytest.raises(ConfigError, match=None) as err:
        config.check(compose_cfg(*overrides))
    assert message in str(err.value) and "\n" not in str(err.value)


def test_good_fold_settings_pass():
    typed = config.check(compose_cfg("dataset.folds=5", "dataset.fold=4", "dataset.fold_role=tune", "objective=FinQA/recall_at_3"))
    assert (typed.dataset.folds, typed.dataset.fold, typed.dataset.fold_role) == (5, 4, "tune")
