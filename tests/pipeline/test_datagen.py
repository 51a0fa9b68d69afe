import datetime as dt
import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.contracts import features as F
from pipeline.contracts import raw
from pipeline.datagen import generate
from pipeline.datagen.cli import parse_faults
from pipeline.datagen.faults import UNKNOWN_ITEM_OFFSET, parse
from pipeline.paths import events_partition, items_partition

DAY = dt.date(2026, 11, 1)
SMALL = dict(users=300, items=200, events_per_day=3000, seed=3)


def events(root, day=DAY):
    return pq.read_table(events_partition(root, day))


def items(root, day=DAY):
    return pq.read_table(items_partition(root, day) / "items.parquet")


@pytest.fixture(scope="module")
def clean(tmp_path_factory):
    root = tmp_path_factory.mktemp("clean")
    report = generate(root, DAY, 2, **SMALL)
    return root, report


def test_schema_matches_the_contract(clean):
    root, report = clean
    ev, it = events(root), items(root)
    assert tuple(ev.schema.names) == F.EVENT_COLUMNS and tuple(it.schema.names) == F.ITEM_COLUMNS
    assert raw.schema_problems("events", "ev", ev.schema) == raw.schema_problems("items", "it", it.schema) == []
    assert all(ev.schema.field(c).type.equals(t) for c, t in raw.EVENT_TYPES.items() if c != F.HISTORY)
    assert ev.num_rows == 3000 and [d.events for d in report.days] == [3000, 3000]
    lengths = np.array([len(h) for h in ev.column(F.HISTORY).to_pylist()])
    assert lengths.max() <= F.MAX_HISTORY and lengths.min() == 0 and 10 < lengths.mean() < 30
    assert {len(e) for e in it.column(F.IMAGE).to_pylist()[:20]} == {F.IMAGE_DIM}
    assert set(ev.column(F.ITEM_ID).to_numpy()) <= set(it.column(F.ITEM_ID).to_numpy())
    assert set(ev.column(F.PLATFORM).to_pylist()) == set(F.PLATFORMS)
    assert all(title.strip() for title in it.column(F.TITLE).to_pylist())


def test_click_rate_is_configurable(tmp_path):
    for ctr in (0.03, 0.2):
        generate(tmp_path / str(ctr), DAY, 1, **{**SMALL, "events_per_day": 20000}, ctr=ctr)
        rate = events(tmp_path / str(ctr)).column(F.LABEL).to_numpy().mean()
        assert ctr * 0.6 < rate < ctr * 1.4, (ctr, rate)


def test_deterministic_for_a_seed(clean, tmp_path):
    root, _ = clean
    generate(tmp_path, DAY, 2, **SMALL)
    assert events(tmp_path).equals(events(root))
    assert items(tmp_path, DAY + dt.timedelta(days=1)).equals(items(root, DAY + dt.timedelta(days=1)))
    generate(tmp_path / "other", DAY, 1, **{**SMALL, "seed": 4})
    assert not events(tmp_path / "other").equals(events(root))


def test_catalog_grows_and_events_only_use_launched_items(clean):
    root, _ = clean
    day2 = DAY + dt.timedelta(days=1)
    assert items(root).num_rows < items(root, day2).num_rows
    known = set(items(root).column(F.ITEM_ID).to_numpy())
    history = np.concatenate([np.array(h, dtype=np.int64) for h in events(root).column(F.HISTORY).to_pylist()])
    assert set(history) <= known


def test_signal_is_learnable_from_the_generated_columns(clean):
    """A logistic regression on item image x history image clearly beats 0.5 AUC."""
    from sklearn.linear_model import LogisticRegression
    from sklearn.metrics import roc_auc_score

    root, report = clean
    ev, it = events(root), items(root)
    from sklearn.decomposition import PCA

    raw = np.array(it.column(F.IMAGE).to_pylist(), dtype=np.float32)
    image = dict(zip(it.column(F.ITEM_ID).to_pylist(), PCA(16, random_state=0).fit_transform(raw)))
    item_vec = np.stack([image[i] for i in ev.column(F.ITEM_ID).to_pylist()])
    hist_vec = np.stack([np.mean([image[h] for h in hist], axis=0) if hist else np.zeros(16)
                         for hist in ev.column(F.HISTORY).to_pylist()])
    x = np.hstack([item_vec * hist_vec, item_vec])
    y = ev.column(F.LABEL).to_numpy()
    half = len(y) // 2
    model = LogisticRegression(max_iter=300).fit(x[:half], y[:half])
    auc = roc_auc_score(y[half:], model.predict_proba(x[half:])[:, 1])
    assert auc > 0.6, auc
    assert auc < report.ceiling_auc and 0.75 < report.ceiling_auc < 0.99


def test_shuffled_labels_keep_the_rate_but_lose_the_signal(clean, tmp_path):
    root, _ = clean
    generate(tmp_path, DAY, 1, **SMALL, faults={DAY: ["shuffled_labels"]})
    clean_labels, shuffled = events(root).column(F.LABEL).to_numpy(), events(tmp_path).column(F.LABEL).to_numpy()
    assert clean_labels.sum() == shuffled.sum() and not np.array_equal(clean_labels, shuffled)


@pytest.mark.parametrize(
    ("spec", "check"),
    [
        ("missing_column", lambda t: F.PLATFORM not in t.schema.names),
        ("renamed_column", lambda t: F.HISTORY not in t.schema.names and "history_items" in t.schema.names),
        ("wrong_type", lambda t: str(t.schema.field(F.LABEL).type) == "double"),
    ],
)
def test_schema_faults(tmp_path, spec, check):
    generate(tmp_path, DAY, 2, **SMALL, faults={DAY + dt.timedelta(days=1): [spec]})
    assert check(events(tmp_path, DAY + dt.timedelta(days=1)))
    assert raw.schema_problems("events", "first day", events(tmp_path).schema) == []


def test_malformed_rows_of_every_kind(tmp_path):
    generate(tmp_path, DAY, 1, **SMALL, faults={DAY: ["malformed:0.3"]})
    ev, it = events(tmp_path), items(tmp_path)
    images = it.column(F.IMAGE).to_pylist()
    assert any(len(e) != F.IMAGE_DIM for e in images)
    assert any(np.isnan(e).any() for e in images if len(e))
    assert any(np.isinf(e).any() for e in images if len(e))
    assert "" in it.column(F.TITLE).to_pylist()
    assert ev.column(F.LABEL).null_count > 0
    assert max(len(h) for h in ev.column(F.HISTORY).to_pylist()) > F.MAX_HISTORY
    assert (ev.column(F.ITEM_ID).to_numpy() >= UNKNOWN_ITEM_OFFSET).any()
    bad_events = (ev.column(F.LABEL).is_null().to_numpy(zero_copy_only=False)
                  | (ev.column(F.ITEM_ID).to_numpy() >= UNKNOWN_ITEM_OFFSET)).mean()
    assert 0.05 < bad_events < 0.4


def test_fault_specs_are_checked():
    assert parse("malformed").rate == 0.05 and parse("malformed:0.2").rate == 0.2
    for bad in ("nonsense", "malformed:2", "shuffled_labels:0.1"):
        with pytest.raises(ValueError):
            parse(bad)
    assert parse_faults(["2026-11-01=shuffled_labels"]) == {DAY: ["shuffled_labels"]}
    with pytest.raises(ValueError, match="DATE=SPEC"):
        parse_faults(["2026-11-01"])


def _peak_rss_mib(tmp_path, events_per_day):
    code = (
        "import datetime as dt, resource, sys; from pathlib import Path; from pipeline.datagen import generate;"
        f"generate(Path(sys.argv[1]), dt.date(2026, 11, 1), 1, users=500, items=300, events_per_day={events_per_day});"
        "print(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)"
    )
    out = subprocess.run([sys.executable, "-c", code, str(tmp_path / str(events_per_day))],
                         check=True, capture_output=True, text=True)
    return float(out.stdout.strip().splitlines()[-1])


def test_memory_stays_flat_as_events_grow(tmp_path):
    """Streaming: 8x the events must not cost 8x the memory (chunks of 100k are written as made)."""
    small, large = _peak_rss_mib(tmp_path, 100_000), _peak_rss_mib(tmp_path, 800_000)
    assert large - small < 150, (small, large)


def test_cli_writes_the_days_and_reports_the_ceiling(tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "pipeline", "generate-data", "--out", str(tmp_path), "--start", "2026-11-01",
         "--days", "2", "--events-per-day", "500", "--users", "100", "--items", "80",
         "--fault", "2026-11-02=malformed:0.1"],
        check=True, capture_output=True, text=True,
    )
    report = json.loads(out.stdout)
    assert [d["date"] for d in report["days"]] == ["2026-11-01", "2026-11-02"]
    assert report["days"][1]["faults"] == ["malformed:0.1"] and report["ceiling_auc"] > 0.7
    assert (tmp_path / "events" / "ds=2026-11-02").is_dir()
