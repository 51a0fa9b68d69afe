"""The generator's regimes: each preset really makes the kind of data it is named after."""
import datetime as dt
import json
import subprocess
import sys

import numpy as np
import pyarrow.parquet as pq
import pytest

from pipeline.config import ConfigError, load_config
from pipeline.contracts import features as F
from pipeline.datagen import generate
from pipeline.datagen.regimes import REGIMES, regime_spec
from pipeline.datagen.world import World, WorldSpec, with_knobs
from pipeline.paths import events_partition

DAY = dt.date(2026, 11, 1)
SMALL = dict(users=300, items=200, events_per_day=3000, seed=3)


def _days(root, days):
    return [pq.read_table(events_partition(root, DAY + dt.timedelta(days=d))).to_pydict() for d in range(days)]


def test_the_default_regime_is_the_world_as_it_was():
    assert regime_spec("default", users=10, items=20) == WorldSpec(users=10, items=20)


def test_an_unknown_regime_or_knob_is_refused_naming_the_choices():
    with pytest.raises(ValueError, match="unknown regime 'cold'.*cold_start"):
        regime_spec("cold")
    with pytest.raises(ValueError, match="image_content 'pixels'"):
        with_knobs(WorldSpec(), image_content="pixels")
    with pytest.raises(ConfigError, match="generator.regime: got 'cold', expected a regime"):
        load_config(env={}, overrides={"generator.regime": "cold"})


def test_cold_start_brings_new_users_with_histories_every_day(tmp_path):
    generate(tmp_path, DAY, 3, **SMALL, regime="cold_start", with_ceiling=False)
    days = _days(tmp_path, 3)
    seen = set(days[0]["user_id"]) | set(days[1]["user_id"])
    last = days[2]
    new = np.array(last["user_id"]) > SMALL["users"]        # returning users keep ids 1..users
    assert abs(new.mean() - REGIMES["cold_start"]["new_user_share"]) < 0.05
    assert not seen & set(np.array(last["user_id"])[new].tolist())         # new that day: never seen before
    assert len(set(np.array(last["user_id"])[new].tolist())) > SMALL["users"] / 2   # many, not one
    # New users arrive with histories drawn from their own tastes, like returning ones.
    lengths = np.array([len(h) for h in last[F.HISTORY]])
    assert lengths[new].mean() > 0.5 * lengths[~new].mean() > 0


def test_high_base_rate_and_popularity_change_what_drives_clicks(tmp_path):
    report = generate(tmp_path, DAY, 3, **SMALL, regime="high_base_rate", with_ceiling=False)
    last = report.days[-1]               # the first day lacks the items launched later
    assert abs(last.clicks / last.events - REGIMES["high_base_rate"]["ctr"]) < 0.04
    assert report.regime == "high_base_rate"
    share = {}
    for name in ("default", "popularity"):
        world = World(regime_spec(name, users=300, items=200, seed=3))
        pop = world.returning
        users, items = world.sample_impressions(np.random.default_rng(0), 5000)
        taste = world.click_logit(pop, users, items) - world.item_popularity[items]
        share[name] = np.var(world.item_popularity[items]) / np.var(taste)
    assert share["popularity"] > 2 * share["default"] and share["popularity"] > 1


def test_weak_content_images_carry_only_the_category():
    def within_category_share(name):
        world = World(regime_spec(name, users=50, items=400, seed=3))
        items = np.arange(400)
        images = world.images(items)
        cats = np.array(world.categories(items))
        means = {c: images[cats == c].mean(axis=0) for c in set(cats)}
        residual = images - np.stack([means[c] for c in cats])
        return residual.var() / images.var()         # what the category does not explain

    weak, default = within_category_share("weak_content"), within_category_share("default")
    assert default > 0.5 and weak < default
    # Two items of one category differ only by noise: no item factor shows through.
    world = World(regime_spec("weak_content", users=50, items=400, seed=3))
    corr = np.corrcoef(world.images(np.arange(400)).mean(axis=1), world.item_popularity)[0, 1]
    assert abs(corr) < 0.25


def test_generate_data_cli_takes_a_regime(tmp_path):
    out = subprocess.run([sys.executable, "-m", "pipeline", "generate-data", "--start", DAY.isoformat(),
                          "--days", "1", "--out", str(tmp_path), "--events-per-day", "500", "--users", "100",
                          "--items", "80", "--regime", "ratings_like"], capture_output=True, text=True, check=True)
    report = json.loads(out.stdout)
    assert report["regime"] == "ratings_like"
    assert 0.3 < report["days"][0]["clicks"] / report["days"][0]["events"] < 0.52
    bad = subprocess.run([sys.executable, "-m", "pipeline", "generate-data", "--regime", "nope", "--out",
                          str(tmp_path)], capture_output=True, text=True)
    assert bad.returncode == 2 and "invalid choice: 'nope'" in bad.stderr
