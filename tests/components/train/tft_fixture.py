"""A real tf.Transform output + transformed shards, made from synthetic raw rows.

Runs tf.Transform's AnalyzeAndTransformDataset (DirectRunner) with the preprocess stage's own
`make_preprocessing_fn`, so the transform graph the export embeds is the real one and the
transformed shards are exactly what Beam produced for these raw rows: the reference for the
training/serving skew check. Clicks depend on the image (a shift over its first dims) and a
title word, so a tiny model learns them in a couple of epochs.
"""
from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import tensorflow as tf

from pipeline.config import ModelConfig
from pipeline.contracts import features as F

TAG_DIM = F.IMAGE_DIM - 1
WORDS = ("red", "blue", "shoe", "lamp", "sofa", "desk", "mug", "bag", "hat", "coat", "sale", "new")


def raw_rows(n: int, seed: int, items: int = 60) -> list[dict]:
    """Raw rows in the serving contract (+ label, item_id, impressions for analysis)."""
    rng = np.random.default_rng(seed)
    rows = []
    for _ in range(n):
        label = int(rng.random() < 0.4)
        image = rng.standard_normal(F.IMAGE_DIM).astype(np.float32) * 2.0 + 3.0
        image[:32] += 1.5 if label else -1.5
        words = list(rng.choice(WORDS[:-2], size=rng.integers(1, 6)))
        if rng.random() < (0.7 if label else 0.2):
            words.insert(int(rng.integers(0, len(words) + 1)), "sale")
        image[TAG_DIM] = len(rows)       # row tag: z-scoring keeps the order, see read_in_raw_order
        history = [int(h) for h in rng.integers(1, items, size=rng.integers(0, 12))]
        rows.append({F.TITLE: " ".join(words).title() + "!", F.IMAGE: image,
                     F.HISTORY: history, F.LABEL: label,
                     F.ITEM_ID: int(rng.integers(1, items)), F.USER_ID: int(rng.integers(1, 500)),
                     F.PLATFORM: str(rng.choice([*F.PLATFORMS, "tv"])), F.HOUR: int(rng.integers(0, 24)),
                     "impressions": 1.0})
    return rows


def _example(row: dict, model_cfg: ModelConfig) -> bytes:
    """A transformed row as the tf.Example the preprocess stage writes."""
    def ints(v):
        return tf.train.Feature(int64_list=tf.train.Int64List(value=np.asarray(v).reshape(-1)))
    feature = {name: ints(row[name]) for name in (*F.model_input_names(model_cfg), F.LABEL_KEY)
               if name != F.IMAGE_Z}
    feature[F.IMAGE_Z] = tf.train.Feature(float_list=tf.train.FloatList(value=row[F.IMAGE_Z]))
    return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString()


def analyze_and_transform(train: list[dict], evals: list[dict], model_cfg: ModelConfig,
                          transform_dir: Path, out_dir: Path, num_shards: int) -> None:
    """Analyze on `train`, transform both splits into out_dir/{train,eval}, write transform_fn."""
    import apache_beam as beam
    import tensorflow_transform.beam as tft_beam
    from tensorflow_transform.tf_metadata import dataset_metadata

    from components.preprocess.transform import RAW_FEATURE_SPEC, make_preprocessing_fn

    metadata = dataset_metadata.DatasetMetadata.from_feature_spec(RAW_FEATURE_SPEC)
    with tempfile.TemporaryDirectory() as tmp:
        with beam.Pipeline(runner="DirectRunner") as p, tft_beam.Context(temp_dir=tmp):
            train_pc = p | "Train" >> beam.Create(train)
            eval_pc = p | "Eval" >> beam.Create(evals)
            (train_t, _), transform_fn = (
                (train_pc, metadata)
                | "Analyze" >> tft_beam.AnalyzeAndTransformDataset(make_preprocessing_fn(model_cfg)))
            eval_t, _ = ((eval_pc, metadata), transform_fn) | "Apply" >> tft_beam.TransformDataset()
            _ = transform_fn | "Write" >> tft_beam.WriteTransformFn(str(transform_dir))
            for name, pc, shards in (("train", train_t, num_shards),
                                     ("eval", eval_t, max(1, num_shards // 2))):
                (out_dir / name).mkdir(parents=True, exist_ok=True)
                _ = (pc | f"Encode{name}" >> beam.Map(_example, model_cfg)
                     | f"Write{name}" >> beam.io.WriteToTFRecord(
                         str(out_dir / name / "part"), file_name_suffix=".tfrecord",
                         num_shards=shards))


def read_in_raw_order(split_dir: Path, model_cfg: ModelConfig) -> dict[str, np.ndarray]:
    """Transformed rows of a split, back in raw-row order (sorted by the z-scored row tag)."""
    from components.train.worker.input import feature_spec, list_shards

    records = list(tf.data.TFRecordDataset([str(f) for f in list_shards(split_dir)]).batch(10_000))
    parsed = {k: np.concatenate([tf.io.parse_example(r, feature_spec(model_cfg))[k].numpy()
                                 for r in records]) for k in feature_spec(model_cfg)}
    order = np.argsort(parsed[F.IMAGE_Z][:, TAG_DIM])
    return {k: v[order] for k, v in parsed.items()}


def make_run_data(paths, model_cfg: ModelConfig, n_train: int, n_eval: int,
                  num_shards: int = 4, seed: int = 0) -> list[dict]:
    """Write transform_dir and staged train/eval shards for `paths`; return the raw eval rows."""
    train_raw, eval_raw = raw_rows(n_train, seed), raw_rows(n_eval, seed + 1)
    analyze_and_transform(train_raw, eval_raw, model_cfg, paths.transform_dir, paths.staged_dir,
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
