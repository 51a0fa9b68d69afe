"""A real tf.Transform output + transformed shards, made from synthetic raw rows.

Runs tf.Transform's AnalyzeAndTransformDataset (DirectRunner) with the preprocess stage's own
`make_preprocessing_fn`, so the transform graph the export embeds is the real one and the
transformed shards are exactly what Beam produced for these raw rows: the reference for the
training/serving skew check. As in preprocess, analysis runs on the catalog's items (weighted by
impressions) and the item table holds their content. Clicks depend on the shown item's image (a
shift over its first dims) and a title word, so a tiny model learns them in a couple of epochs.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from pipeline.config import ModelConfig
from pipeline.contracts import features as F

WORDS = ("red", "blue", "shoe", "lamp", "sofa", "desk", "mug", "bag", "hat", "coat", "sale", "new")
ITEMS = 60


def raw_items(seed: int, items: int = ITEMS) -> list[dict]:
    """The catalog: items 1..items-1, each with a title and image; "appeal" (hidden) drives clicks
    through the image (a shift over its first dims) and the word "sale"."""
    rng = np.random.default_rng(seed)
    out = []
    for item_id in range(1, items):
        appeal = bool(rng.random() < 0.4)
        image = rng.standard_normal(F.IMAGE_DIM).astype(np.float32) * 2.0 + 3.0
        image[:32] += 1.5 if appeal else -1.5
        words = list(rng.choice(WORDS[:-2], size=rng.integers(1, 6)))
        if rng.random() < (0.7 if appeal else 0.2):
            words.insert(int(rng.integers(0, len(words) + 1)), "sale")
        out.append({F.ITEM_ID: item_id, F.TITLE: " ".join(words).title() + "!", F.IMAGE: image, "appeal": appeal})
    return out


def raw_rows(n: int, seed: int, items: list[dict] | None = None) -> list[dict]:
    """Raw events in the serving contract: the shown item's title and image, the history, the
    context (+ label, impressions for analysis)."""
    items = items or raw_items(seed=99)
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        item = items[int(rng.integers(0, len(items) - 5))]     # the last 5 items are never shown
        history = [int(h) for h in rng.integers(1, ITEMS + 3, size=rng.integers(0, 12))]  # ids > 59: unknown
        rows.append({F.TITLE: item[F.TITLE], F.IMAGE: item[F.IMAGE], F.HISTORY: history,
                     F.LABEL: int(rng.random() < (0.85 if item["appeal"] else 0.05)),
                     F.ITEM_ID: item[F.ITEM_ID], F.USER_ID: int(rng.integers(1, 500)),
                     F.PLATFORM: str(rng.choice([*F.PLATFORMS, "tv"])), F.HOUR: int(rng.integers(0, 24)),
                     "impressions": 1.0})
    return rows


def _example(row: dict, model_cfg: ModelConfig) -> bytes:
    """A transformed row as the tf.Example the preprocess stage writes: ids and rows only."""
    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(v).reshape(-1)))
    feature = {name: ints(row[name]) for name in F.transformed_feature_spec(model_cfg)}
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def _analysis_rows(items: list[dict], train: list[dict]) -> list[dict]:
    """One row per catalog item, weighted by its training impressions (as preprocess does)."""
    shown = {}
    for row in train:
        shown[row[F.ITEM_ID]] = shown.get(row[F.ITEM_ID], 0) + 1
    return [{**train[0], F.TITLE: it[F.TITLE], F.IMAGE: it[F.IMAGE], F.ITEM_ID: it[F.ITEM_ID], F.HISTORY: [],
             "impressions": float(shown.get(it[F.ITEM_ID], 0))} for it in items]


def analyze_and_transform(items: list[dict], train: list[dict], evals: list[dict], model_cfg: ModelConfig,
                          transform_dir: Path, out_dir: Path, num_shards: int) -> None:
    """Analyze the items, transform both splits into out_dir/{train,eval}, write transform_fn,
    then the item table (out_dir/items/) through the written graph."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata

    from components.preprocess.transform import RAW_FEATURE_SPEC, make_preprocessing_fn

    metadata = dataset_metadata.DatasetMetadata.from_feature_spec(RAW_FEATURE_SPEC)
    with tempfile.TemporaryDirectory() as tmp:
        with beam.Pipeline(runner="DirectRunner") as p, tft_beam.Context(temp_dir=tmp):
            analysis = p | "Items" >> beam.Create(_analysis_rows(items, train))
            transform_fn = (analysis, metadata) | "Analyze" >> tft_beam.AnalyzeDataset(
                make_preprocessing_fn(model_cfg))
            _ = transform_fn | "Write" >> tft_beam.WriteTransformFn(str(transform_dir))
            for name, rows, shards in (("train", train, num_shards), ("eval", evals, max(1, num_shards // 2))):
                (out_dir / name).mkdir(parents=True, exist_ok=True)
                transformed, _ = (((p | f"Create{name}" >> beam.Create(rows), metadata), transform_fn)
                                  | f"Transform{name}" >> tft_beam.TransformDataset())
                _ = (transformed | f"Encode{name}" >> beam.Map(_example, model_cfg)
                     | f"Write{name}" >> beam.io.WriteToTFRecord(
                         str(out_dir / name / "part"), file_name_suffix=".tfrecord", num_shards=shards))
    write_item_table(items, transform_dir, out_dir)


def transform_in_process(transform_dir: Path, features: dict) -> dict[str, np.ndarray]:
    import tensorflow_transform as tft

    out = tft.TFTransformOutput(str(transform_dir)).transform_raw_features(features, drop_unused_features=True)
    return {k: v.numpy() for k, v in out.items()}


def write_item_table(items: list[dict], transform_dir: Path, out_dir: Path) -> None:
    import pyarrow.parquet as pq

    from components.preprocess.steps import item_table_rows
    from pipeline.contracts import item_table as IT

    ids = np.array([it[F.ITEM_ID] for it in items], np.int64)
    out = transform_in_process(transform_dir, {
        F.TITLE: tf.constant([it[F.TITLE] for it in items]),
        F.IMAGE: tf.constant(np.stack([it[F.IMAGE] for it in items])),
        F.ITEM_ID: tf.constant(ids)})
    (out_dir / IT.ITEM_TABLE).parent.mkdir(parents=True, exist_ok=True)
    pq.write_table(item_table_rows(ids, ids, out, {}), out_dir / IT.ITEM_TABLE)   # no window counts


def read_in_raw_order(split_dir: Path, transform_dir: Path, raw: list[dict], model_cfg: ModelConfig):
    """The split's transformed examples (what Beam wrote), one per raw row in raw-row order.

    A row is found by its features, transformed here through the same graph: rows with equal
    features are interchangeable (equal features, equal predictions), and a raw row whose
    features Beam did not write is a KeyError, i.e. a skew."""
    from components.train.worker.input import feature_spec, list_shards
    from components.train.worker.scoring import history_to_sparse
    from pipeline.contracts.signature import request_arrays

    spec = feature_spec(model_cfg)
    names = [n for n in spec if n != F.LABEL_KEY]
    records = list(tf.data.TFRecordDataset([str(f) for f in list_shards(split_dir)]).batch(10_000))
    parsed = {k: np.concatenate([tf.io.parse_example(r, spec)[k].numpy() for r in records]) for k in spec}
    arrays = request_arrays(raw, F.EVENT_CONTEXT + (F.HISTORY,))
    mine = transform_in_process(transform_dir, {**{k: tf.constant(v) for k, v in arrays.items() if k != F.HISTORY},
                                                F.HISTORY: history_to_sparse(arrays[F.HISTORY])})

    def key(features, i):
        return tuple(np.concatenate([np.ravel(features[n][i]) for n in names]).tolist())

    where = {}
    for i in range(len(parsed[F.LABEL_KEY])):
        where.setdefault(key(parsed, i), i)
    order = [where[key(mine, i)] for i in range(len(raw))]
    return {k: v[order] for k, v in parsed.items()}


def make_run_data(paths, model_cfg: ModelConfig, n_train: int, n_eval: int,
                  num_shards: int = 4, seed: int = 0) -> list[dict]:
    """Write transform_dir and staged train/eval shards for `paths`; return the raw eval rows."""
    items = raw_items(seed=99)
    train_raw, eval_raw = raw_rows(n_train, seed, items), raw_rows(n_eval, seed + 1, items)
    analyze_and_transform(items, train_raw, eval_raw, model_cfg, paths.transform_dir, paths.staged_dir,
                          num_shards)
    return eval_raw


def run_in_subprocess(config, paths, n_train: int, n_eval: int, num_shards: int = 4,
                      seed: int = 0) -> list[dict]:
    """make_run_data in a child process; returns the raw eval rows (regenerated from the seed).

    Why a child: in this environment a process that ran a tf.Transform Beam pipeline segfaults
    while garbage-collecting at interpreter exit (reproduced with a 10-row scale_to_z_score
    pipeline), which would turn a green pytest run into exit code 139. The child leaves
    through os._exit once its files are written and closed.
    """
    import json
    import os
    import subprocess
    import sys

    root = Path(__file__).resolve().parents[3]
    cfg_json = paths.run_dir / "fixture-config.json"
    cfg_json.parent.mkdir(parents=True, exist_ok=True)
    cfg_json.write_text(json.dumps(config.to_dict()))
    args = [sys.executable, "-m", "tests.components.train.tft_fixture", str(cfg_json), paths.ds,
            paths.run_id, str(n_train), str(n_eval), str(num_shards), str(seed)]
    env = {**os.environ, "PYTHONPATH": str(root)}
    done = subprocess.run(args, env=env, cwd=root, capture_output=True, text=True, timeout=600)
    if done.returncode != 0 or not (paths.staged_dir / "eval").is_dir():
        raise RuntimeError(f"tf.Transform fixture failed ({done.returncode}):\n{done.stderr[-3000:]}")
    return raw_rows(n_eval, seed + 1)


def _main(argv: list[str]) -> None:
    import json
    import os
    import sys

    from pipeline.config import from_dict
    from pipeline.paths import RunPaths

    cfg_json, ds, run_id, n_train, n_eval, shards, seed = argv
    config = from_dict(json.loads(Path(cfg_json).read_text()))
    paths = RunPaths.for_run(config, ds, run_id)
    make_run_data(paths, config.model, int(n_train), int(n_eval), int(shards), int(seed))
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


if __name__ == "__main__":
    import sys

    _main(sys.argv[1:])
